//! The wanted-gradient mask a `#[differentiable]` VJP may take.

/// Which gradients the traversal wants, as a VJP that declares `needs: &NeedsGrad` sees them
/// (PyTorch's `needs_input_grad`): indexed like the gradients the VJP returns, one entry per
/// tensor parameter in order.
///
/// A gradient is unwanted when the traversal would discard it: its input is not
/// differentiable, or nothing the caller asked for depends on it (functional `grad` asking
/// only for the weights of a `matmul` does not want the data batch's). A VJP may skip
/// computing an unwanted gradient and return `None`; one it returns anyway is dropped.
/// [`Operation::backward`](crate::Operation::backward) wants every gradient.
///
/// ```
/// # use autograd_core::NeedsGrad;
/// // `linear(x, w, bias: Option<&Tensor>, xs: &[Tensor])` with the bias absent and two `xs`:
/// // saved inputs x, w, xs[0], xs[1]; the engine wants w and xs[1] only.
/// let needs = NeedsGrad::new(Some(&[false, true, false, true]), &[0..1, 1..2, 2..2, 2..4]);
/// assert!(!needs.input(0) && needs.input(1));
/// assert!(!needs.input(2)); // an absent optional input is never wanted
/// assert_eq!(needs.slice(3), &[false, true]);
/// assert!(needs.input(3)); // some element of the slice is wanted
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeedsGrad {
    /// One entry per saved input.
    saved: Vec<bool>,
    /// Per tensor parameter, its saved positions.
    spans: Vec<std::ops::Range<usize>>,
}

impl NeedsGrad {
    /// The mask of a node whose tensor parameter `k` occupies saved positions `spans[k]`;
    /// `needed` is the engine's mask per saved input (`None`: every gradient wanted).
    pub fn new(needed: Option<&[bool]>, spans: &[std::ops::Range<usize>]) -> NeedsGrad {
        let n = spans.iter().map(|s| s.end).max().unwrap_or(0);
        let saved = (0..n)
            .map(|i| needed.and_then(|m| m.get(i).copied()).unwrap_or(true))
            .collect();
        NeedsGrad {
            saved,
            spans: spans.to_vec(),
        }
    }

    /// Whether the gradient of tensor parameter `k` is wanted: for a slice, whether any
    /// element's is; `false` for an absent optional input or a `k` out of range.
    pub fn input(&self, k: usize) -> bool {
        self.slice(k).iter().any(|&b| b)
    }

    /// Per element of tensor parameter `k`, whether its gradient is wanted (one entry for a
    /// single tensor, none for an absent optional input).
    pub fn slice(&self, k: usize) -> &[bool] {
        self.spans
            .get(k)
            .and_then(|s| self.saved.get(s.clone()))
            .unwrap_or(&[])
    }

    /// Whether any gradient is wanted.
    pub fn any(&self) -> bool {
        self.saved.iter().any(|&b| b)
    }

    /// The engine's mask, one entry per saved input in order.
    pub fn saved(&self) -> &[bool] {
        &self.saved
    }
}

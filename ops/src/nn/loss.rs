//! The negative log-likelihood loss over log-probabilities (with PyTorch's class weight,
//! `ignore_index` and reduction) and the mean-reduced `mse_loss` of earlier callers.

use autograd_core::{differentiable, kernel, Captured, Result, Tensor};

use super::cross_entropy::{class_weights, divisor};
use super::reduction::{reduce_losses, spread, Reduction};
use super::regression::mse_loss_with;
use super::target::class_targets;

/// The logical position of class `c` of row `k` in a `[outer, n, inner]` tensor.
fn position(k: usize, c: usize, n: usize, inner: usize) -> usize {
    let (o, i) = (k / inner, k % inner);
    (o * n + c) * inner + i
}

/// The options of [`nll_loss_with`], PyTorch's keyword arguments but the weight. `Default`
/// ignores no target and takes the mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NllLossOptions {
    /// Rows whose target equals this value contribute neither loss nor gradient, and are not
    /// counted by the mean. `None` (unlike PyTorch's default of -100): every target must be a
    /// class.
    pub ignore_index: Option<i32>,
    /// How the per-row losses are folded.
    pub reduction: Reduction,
}

impl Captured for NllLossOptions {}

/// The mean negative log-likelihood of Int32 class `targets` (`[N]` or `[N, d1, ...]`) under
/// `log_probs` (`[N, C]` or `[N, C, d1, ...]`, Float32, classes on axis 1): `-log_probs[k,
/// target_k]` averaged over the rows whose target is not `ignore_index`, as PyTorch's
/// `nll_loss` with `reduction="mean"` (NaN when every row is ignored, with a zero gradient).
/// [`nll_loss_with`] adds the class weight and the reduction.
/// Errors as [`cross_entropy`](super::cross_entropy::cross_entropy).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::nll_loss;
/// let lp = Tensor::from_vec(vec![-0.5f32, -1.0, -2.0, -0.1], shape![2, 2]).unwrap();
/// let t = Tensor::from_vec(vec![1i32, 0], shape![2]).unwrap();
/// assert_eq!(nll_loss(&lp, &t, None).unwrap().values::<f32>().unwrap(), [1.5]);
/// ```
pub fn nll_loss(log_probs: &Tensor, targets: &Tensor, ignore_index: Option<i32>) -> Result<Tensor> {
    let options = NllLossOptions {
        ignore_index,
        reduction: Reduction::Mean,
    };
    nll_loss_with(log_probs, targets, None, options)
}

/// [`nll_loss`] with PyTorch's class `weight` (Float32 `[C]`, no gradient, as in PyTorch) and
/// reduction: row `k` costs `-w_(t_k) log_probs[k, t_k]` (0 when ignored); the mean divides
/// by the total weight of the rows not ignored (NaN when it is 0), and `Reduction::None` gives
/// the per-row losses shaped like `targets`. A weight of another dtype is `Error::Type`, of
/// another length `Error::Value`; otherwise errors as [`nll_loss`].
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{nll_loss_with, NllLossOptions, Reduction};
/// let lp = Tensor::from_vec(vec![-0.5f32, -1.0, -2.0, -0.1], shape![2, 2]).unwrap();
/// let t = Tensor::from_vec(vec![1i32, 0], shape![2]).unwrap();
/// let w = Tensor::from_vec(vec![3.0f32, 1.0], shape![2]).unwrap();
/// let l = nll_loss_with(&lp, &t, Some(&w), NllLossOptions::default()).unwrap();
/// assert_eq!(l.values::<f32>().unwrap(), [(1.0 + 6.0) / 4.0]);
/// ```
#[differentiable]
pub fn nll_loss_with(
    log_probs: &Tensor,
    targets: &Tensor,
    weight: Option<&Tensor>,
    options: NllLossOptions,
) -> Result<Tensor> {
    // loss_k = -w_t lp[k, t_k]: d loss / d lp[k, t_k] = -w_t times row k's cotangent
    fn vjp(
        g: &Tensor,
        log_probs: &Tensor,
        targets: &Tensor,
        weight: Option<&Tensor>,
        options: NllLossOptions,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (rows, t) = class_targets("nll_loss", log_probs, targets, options.ignore_index)?;
        let w = class_weights("nll_loss", weight, rows.n)?;
        let scales = spread(
            g,
            rows.count(),
            options.reduction,
            divisor(&t, w.as_deref()),
        )?;
        let mut dx = kernel::alloc::filled(log_probs.size(), 0.0f32)?;
        for (k, c) in t.classes.iter().enumerate() {
            if let Some(c) = *c {
                let wc = w.as_ref().map_or(1.0, |w| w[c]);
                dx[position(k, c, rows.n, rows.inner)] = -scales[k] * wc;
            }
        }
        Ok((Some(log_probs.f32_like(dx)?), None, None))
    }
    let (rows, t) = class_targets("nll_loss", log_probs, targets, options.ignore_index)?;
    let w = class_weights("nll_loss", weight, rows.n)?;
    let losses = kernel::read::<f32, _>(log_probs, |e| {
        let mut losses = Vec::with_capacity(t.classes.len());
        for (k, c) in t.classes.iter().enumerate() {
            let mut loss = 0.0f64;
            if let Some(c) = *c {
                let wc = w.as_ref().map_or(1.0, |w| f64::from(w[c]));
                e.for_each_in(position(k, c, rows.n, rows.inner), 1, |v| {
                    loss = -wc * f64::from(v);
                });
            }
            losses.push(loss);
        }
        losses
    })?;
    let div = divisor(&t, w.as_deref());
    reduce_losses(log_probs, &targets.dims(), &losses, options.reduction, div)
}

/// The mean squared error `mean((a - b)^2)` of two Float32 tensors of equal extents (their
/// shape trees may differ; `Error::Value` for different extents, `Error::Type` for another
/// dtype), as a one-element tensor; NaN for empty tensors. [`mse_loss_with`] takes a
/// reduction.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::mse_loss;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![0.0f32, 4.0], shape![2]).unwrap();
/// assert_eq!(mse_loss(&a, &b).unwrap().values::<f32>().unwrap(), [2.5]);
/// ```
pub fn mse_loss(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    mse_loss_with(a, b, Reduction::Mean)
}

//! What a caller asks of [`scaled_dot_product_attention`](super::scaled_dot_product_attention)
//! besides q, k and v: causality, the scale, a mask and dropout on the probabilities.

use autograd_core::{ensure, Result, Rng, Tensor};

/// A mask on the attention scores, in one of PyTorch's two conventions.
///
/// A Bool mask removes scores (a removed score gets probability 0; a query whose every key is
/// removed gets a zero context row and zero gradients, as PyTorch's SDPA gives since 2.5); a
/// Float32 mask is added to the scaled scores (`-inf` removes) and receives a gradient.
#[derive(Debug, Clone)]
pub enum AttentionMask {
    /// PyTorch's `attn_mask` of `scaled_dot_product_attention`: broadcast to
    /// `[B, H, T_q, T_k]` (rank at most 4, each extent 1 or the full one); Bool `true` means
    /// the query **attends** to the key.
    Attend(Tensor),
    /// PyTorch's `key_padding_mask` of `nn.MultiheadAttention`: `[B, T_k]`, the same for every
    /// head and query; Bool `true` means the key is **padding** and is ignored.
    KeyPadding(Tensor),
}

/// Dropout on the attention probabilities: each probability is zeroed with probability `p` and
/// the kept ones scaled by `1 / (1 - p)`, from a seed drawn from the caller's generator when the
/// options are built. The mask is a function of that seed and the position, so backward
/// regenerates it instead of keeping it, and both attention forms drop the same entries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionDropout {
    pub(super) p: f32,
    pub(super) seed: u64,
}

impl AttentionDropout {
    /// Drops with probability `p` (in `[0, 1]`, else `Error::Value`, and `rng` is not advanced),
    /// drawing one `u64` from `rng`.
    pub fn new(p: f32, rng: &mut Rng) -> Result<AttentionDropout> {
        ensure!(
            (0.0..=1.0).contains(&p),
            Value,
            "attention dropout: the drop probability p must be in [0, 1], got {p}"
        );
        Ok(AttentionDropout {
            p,
            seed: rng.next_u64(),
        })
    }

    /// The drop probability.
    pub fn p(&self) -> f32 {
        self.p
    }
}

/// Options of [`scaled_dot_product_attention`](super::scaled_dot_product_attention) and
/// [`attention_with_probabilities`](super::attention_with_probabilities), PyTorch's keyword
/// arguments: no causal mask, scale `1 / sqrt(D)`, no mask and no dropout by default.
///
/// ```
/// use autograd_core::{shape, Rng, Tensor};
/// use autograd_ops::{AttentionMask, AttentionOptions};
/// let pad = Tensor::from_vec(vec![false, false, true], shape![1, 3])?;
/// let options = AttentionOptions::new()
///     .causal(true)
///     .mask(AttentionMask::KeyPadding(pad))
///     .dropout(0.1, &mut Rng::new(0))?;
/// assert!(options.causal);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AttentionOptions {
    /// Query `i` sees only keys `0..=i` (PyTorch's `is_causal`, the top-left triangle when
    /// `T_q != T_k`), on top of any mask.
    pub causal: bool,
    /// The factor of `q kᵀ`; `None` is `1 / sqrt(D)`.
    pub scale: Option<f32>,
    /// A mask on the scores.
    pub mask: Option<AttentionMask>,
    /// Dropout on the probabilities (apply it only while training).
    pub dropout: Option<AttentionDropout>,
}

impl AttentionOptions {
    /// The defaults: non-causal, unmasked, scale `1 / sqrt(D)`, no dropout.
    pub fn new() -> AttentionOptions {
        AttentionOptions::default()
    }

    /// Sets [`AttentionOptions::causal`].
    #[must_use]
    pub fn causal(mut self, causal: bool) -> AttentionOptions {
        self.causal = causal;
        self
    }

    /// Sets [`AttentionOptions::scale`].
    #[must_use]
    pub fn scale(mut self, scale: f32) -> AttentionOptions {
        self.scale = Some(scale);
        self
    }

    /// Sets [`AttentionOptions::mask`].
    #[must_use]
    pub fn mask(mut self, mask: AttentionMask) -> AttentionOptions {
        self.mask = Some(mask);
        self
    }

    /// Drops probabilities with probability `p`, the mask seeded from `rng` (see
    /// [`AttentionDropout::new`]); `p == 0` sets no dropout and leaves `rng` alone.
    pub fn dropout(mut self, p: f32, rng: &mut Rng) -> Result<AttentionOptions> {
        self.dropout = if p == 0.0 {
            None
        } else {
            Some(AttentionDropout::new(p, rng)?)
        };
        Ok(self)
    }
}

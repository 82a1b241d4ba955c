//! `Reduction`, PyTorch's `reduction=` keyword of every loss, and the two halves every loss
//! shares: folding per-element losses into the result, and spreading the result's cotangent
//! back over the elements.

use autograd_core::kernel::alloc;
use autograd_core::{Captured, Result, Tensor};

use super::cross_entropy::scalar_like;

/// How a loss folds its per-element (or per-row) losses, PyTorch's `reduction=`: their mean
/// (the default, as PyTorch's), their sum, or none (the losses themselves, shaped like the
/// input, or like the targets for the classification losses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reduction {
    /// The mean over the elements (a weighted loss divides by its total weight instead).
    #[default]
    Mean,
    /// The sum over the elements.
    Sum,
    /// No reduction: one loss per element (or row).
    None,
}

impl Captured for Reduction {}

/// The result of a loss from its per-element losses `per` (logical order of `like`, whose
/// shape a `Reduction::None` result takes, with `dims` its extents): their sum, their sum over
/// `divisor` for the mean (NaN for 0 / 0, as PyTorch), or themselves.
pub(crate) fn reduce_losses(
    like: &Tensor,
    dims: &[usize],
    per: &[f64],
    reduction: Reduction,
    divisor: f64,
) -> Result<Tensor> {
    let total = || per.iter().sum::<f64>();
    match reduction {
        Reduction::Mean => scalar_like(like, total() / divisor),
        Reduction::Sum => scalar_like(like, total()),
        Reduction::None => shaped_like(like, dims, per.iter().map(|&v| v as f32).collect()),
    }
}

/// A Float32 tensor of extents `dims` holding `values` (logical order), in `like`'s carrier
/// class and, when `like` has those extents, in a layout `like` could have.
pub(crate) fn shaped_like(like: &Tensor, dims: &[usize], values: Vec<f32>) -> Result<Tensor> {
    if like.dims() == dims {
        return like.f32_like(values);
    }
    like.f32_with_layout(
        values,
        std::sync::Arc::new(autograd_core::Layout::row_major(dims)?),
    )
}

/// The cotangent each of `n` per-element losses receives from the cotangent `g` of a loss
/// reduced by `reduction`: `g / divisor` for the mean, `g` for the sum, `g`'s own elements
/// when nothing was reduced.
pub(crate) fn spread(g: &Tensor, n: usize, reduction: Reduction, divisor: f64) -> Result<Vec<f32>> {
    let g = g.values::<f32>()?;
    Ok(match reduction {
        Reduction::None => g,
        Reduction::Sum => alloc::filled(n, g.first().copied().unwrap_or(0.0))?,
        Reduction::Mean => {
            let s = f64::from(g.first().copied().unwrap_or(0.0)) / divisor;
            alloc::filled(n, s as f32)?
        }
    })
}

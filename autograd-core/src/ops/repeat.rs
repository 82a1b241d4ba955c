//! Repetition: `repeat` and `tile`, as PyTorch's. Both are a broadcast view of the input with
//! a unit axis before each of its axes, reshaped to merge each pair: differentiable through
//! those two ops, whose gradients sum the copies.

use super::broadcast::expand;
use super::view::reshape;
use crate::error::{ensure, Result};
use crate::Tensor;

/// `a` repeated `sizes[i]` times along each axis `i`, as PyTorch's `Tensor.repeat`: `sizes`
/// has at least `a`'s rank, and `a` is first viewed with leading unit axes up to that rank;
/// the result's extents are `sizes[i] * extent[i]`. Fewer sizes than axes is `Error::Value`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_core::ops::repeat;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])?;
/// let r = repeat(&a, &[2, 2])?;
/// assert_eq!(r.dims(), [2, 4]);
/// assert_eq!(r.values::<f32>()?, [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn repeat(a: &Tensor, sizes: &[usize]) -> Result<Tensor> {
    let dims = a.dims();
    ensure!(
        sizes.len() >= dims.len(),
        Value,
        "repeat: {} sizes for a tensor of {} axes (shape {dims:?}); give at least one a axis",
        sizes.len(),
        dims.len()
    );
    let mut padded = vec![1; sizes.len() - dims.len()];
    padded.extend_from_slice(&dims);
    // [1, d0, 1, d1, ...] broadcast to [s0, d0, s1, d1, ...], then each pair merged
    let unit: Vec<usize> = padded.iter().flat_map(|&d| [1, d]).collect();
    let spread: Vec<usize> = sizes
        .iter()
        .zip(&padded)
        .flat_map(|(&s, &d)| [s, d])
        .collect();
    let merged = sizes
        .iter()
        .zip(&padded)
        .map(|(&s, &d)| {
            s.checked_mul(d).ok_or_else(|| {
                crate::Error::Value(format!("repeat: {s} copies of an extent of {d} overflow"))
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let viewed = reshape(a, &unit)?;
    reshape(&expand(&viewed, &spread)?, &merged)
}

/// `a` tiled `reps[i]` times along each axis `i`, as PyTorch's `torch.tile`: like [`repeat`],
/// but fewer `reps` than axes are padded with leading ones.
pub fn tile(a: &Tensor, reps: &[usize]) -> Result<Tensor> {
    let rank = a.dims().len();
    if reps.len() >= rank {
        return repeat(a, reps);
    }
    let mut padded = vec![1; rank - reps.len()];
    padded.extend_from_slice(reps);
    repeat(a, &padded)
}

impl Tensor {
    /// [`repeat`] of this tensor.
    pub fn repeat(&self, sizes: &[usize]) -> Result<Tensor> {
        repeat(self, sizes)
    }

    /// [`tile`] of this tensor.
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        tile(self, reps)
    }
}

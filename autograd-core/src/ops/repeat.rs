//! Repetition and rearrangement, as PyTorch's: `repeat` and `tile` (a broadcast view of the
//! input with a unit axis before each of its axes, reshaped to merge each pair), `flip` (a
//! reversed gather per axis) and `roll` (two slices swapped per axis). All are built from
//! differentiable ops, whose gradients sum the copies or put each element back.

use super::broadcast::expand;
use super::index_axes::{concat, index_select};
use super::view::reshape;
use super::view_axes::narrow;
use crate::error::{ensure, Result};
use crate::layout::axis::{resolve_axes, Axis, IntList};
use crate::{shape, Tensor};

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

/// `a` with the order of its elements reversed along each of `axes` (negative from the back;
/// each at most once), as PyTorch's `torch.flip`. A copy, as PyTorch's is.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_core::ops::flip;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// assert_eq!(flip(&a, &[-1])?.values::<f32>()?, [2.0, 1.0, 4.0, 3.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn flip(a: &Tensor, axes: impl IntList) -> Result<Tensor> {
    let dims = a.dims();
    let mut out = a.clone();
    for axis in resolve_axes("flip", axes, dims.len())? {
        let n = dims[axis];
        let reversed: Vec<i64> = (0..n as i64).rev().collect();
        out = index_select(&out, axis, &Tensor::from_vec(reversed, shape![n])?)?;
    }
    Ok(out)
}

/// `a` with its elements shifted by `shifts[i]` positions along `axes[i]` (negative shifts go
/// back; elements past the end come round to the start), as PyTorch's `torch.roll` with
/// `dims`. `shifts` and `axes` must have one length (`Error::Value`).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_core::ops::roll;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0], shape![5])?;
/// assert_eq!(roll(&a, &[2], &[0])?.values::<f32>()?, [4.0, 5.0, 1.0, 2.0, 3.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn roll(a: &Tensor, shifts: &[i64], axes: impl IntList) -> Result<Tensor> {
    let dims = a.dims();
    let axes = resolve_axes("roll", axes, dims.len())?;
    ensure!(
        shifts.len() == axes.len(),
        Value,
        "roll: {} shifts for {} axes",
        shifts.len(),
        axes.len()
    );
    let mut out = a.clone();
    for (&axis, &shift) in axes.iter().zip(shifts) {
        let n = dims[axis];
        if n == 0 {
            continue;
        }
        // the first element moves to position `shift mod n`: the last `k` come first
        let k = usize::try_from(shift.rem_euclid(n as i64)).unwrap_or(0);
        if k == 0 {
            continue;
        }
        let tail = narrow(&out, Axis::from(axis), n - k, k)?;
        let head = narrow(&out, Axis::from(axis), 0, n - k)?;
        out = concat(&[tail, head], axis)?;
    }
    Ok(out)
}

impl Tensor {
    /// [`flip`] of this tensor.
    pub fn flip(&self, axes: impl IntList) -> Result<Tensor> {
        flip(self, axes)
    }

    /// [`roll`] of this tensor.
    pub fn roll(&self, shifts: &[i64], axes: impl IntList) -> Result<Tensor> {
        roll(self, shifts, axes)
    }

    /// [`repeat`] of this tensor.
    pub fn repeat(&self, sizes: &[usize]) -> Result<Tensor> {
        repeat(self, sizes)
    }

    /// [`tile`] of this tensor.
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        tile(self, reps)
    }
}

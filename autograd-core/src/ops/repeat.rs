//! Repetition and rearrangement, as PyTorch's: `repeat` and `tile` (a broadcast view of the
//! input with a unit axis before each of its axes, reshaped to merge each pair), `flip` (a
//! reversed gather per axis) and `roll` (two slices swapped per axis). All are built from
//! differentiable ops, whose gradients sum the copies or put each element back.

use super::broadcast::expand;
use super::index_axes::{concat, index_select};
use super::view::reshape;
use super::view_axes::narrow;
use crate::error::{ensure, Result};
use crate::layout::axis::{resolve_axes, Axis, IntList, OptionalAxis};
use crate::storage::allocation::{filled, resize, with_capacity};
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
        // as long as the axis, which may be a broadcast one of any extent
        let mut reversed = with_capacity(n)?;
        reversed.extend((0..n as i64).rev());
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

/// How many times [`repeat_interleave`] repeats each element: one count for all, or a
/// one-axis Int32 or Int64 tensor of a count per element (PyTorch's `repeats`).
#[derive(Debug, Clone, Copy)]
pub enum Repeats<'a> {
    /// Every element this many times (negative is `Error::Value`).
    Each(i64),
    /// Element `k` `counts[k]` times; a single count applies to every element.
    Counts(&'a Tensor),
}

macro_rules! repeats_from {
    ($($t:ty)*) => {$(
        impl From<$t> for Repeats<'_> {
            fn from(n: $t) -> Self {
                // a count beyond i64 is refused as negative would be
                Repeats::Each(i64::try_from(n).unwrap_or(-1))
            }
        }
    )*};
}
repeats_from!(i32 i64 usize);

impl<'a> From<&'a Tensor> for Repeats<'a> {
    fn from(t: &'a Tensor) -> Self {
        Repeats::Counts(t)
    }
}

/// `a` with each element repeated along `axis`, as PyTorch's `torch.repeat_interleave`:
/// element `k` of the axis appears `repeats` times (or `counts[k]` times) in a row, so
/// `[1, 2]` with 2 gives `[1, 1, 2, 2]` (where [`repeat`] gives `[1, 2, 1, 2]`). With `None` the
/// input is flattened first. Built from `index_select`, so the gradient sums the copies.
///
/// `Error::Value` for a negative count, a count tensor of more than one axis or of a length
/// other than the axis's extent (or 1); `Error::Type` for counts that are not integers.
///
/// ```
/// use autograd_core::ops::repeat_interleave;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// assert_eq!(repeat_interleave(&a, 2, None)?.values::<f32>()?, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
/// let counts = Tensor::from_vec(vec![0i64, 2], shape![2])?;
/// let r = repeat_interleave(&a, &counts, 0)?;
/// assert_eq!(r.dims(), [2, 2]);
/// assert_eq!(r.values::<f32>()?, [3.0, 4.0, 3.0, 4.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn repeat_interleave<'a>(
    a: &Tensor,
    repeats: impl Into<Repeats<'a>>,
    axis: impl Into<OptionalAxis>,
) -> Result<Tensor> {
    let (x, axis) = match axis.into() {
        OptionalAxis::Flat => (reshape(a, &[a.size()])?, 0),
        OptionalAxis::Along(axis) => (
            a.clone(),
            axis.resolve_for("repeat_interleave", a.dims().len())?,
        ),
    };
    let n = x.dims()[axis];
    let counts: Vec<i64> = match repeats.into() {
        Repeats::Each(c) => filled(n, c)?,
        Repeats::Counts(t) => {
            ensure!(
                t.dims().len() <= 1,
                Value,
                "repeat_interleave: repeats must have at most one axis, got shape {:?}",
                t.dims()
            );
            let c = super::index::index_values("repeat_interleave", t)?;
            match c.len() {
                1 => filled(n, c[0])?,
                m if m == n => c,
                m => crate::bail!(
                    Value,
                    "repeat_interleave: {m} repeats for axis {axis} of extent {n} (shape {:?})",
                    x.dims()
                ),
            }
        }
    };
    let mut picks = Vec::new();
    for (k, &c) in counts.iter().enumerate() {
        let Ok(c) = usize::try_from(c) else {
            crate::bail!(
                Value,
                "repeat_interleave: repeats must not be negative, got {c} for element {k}"
            );
        };
        let to = picks.len().saturating_add(c);
        resize(&mut picks, to, k as i64)?;
    }
    let len = picks.len();
    index_select(&x, axis, &Tensor::from_vec(picks, shape![len])?)
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

    /// [`repeat_interleave`] of this tensor.
    #[track_caller]
    pub fn repeat_interleave<'a>(
        &self,
        repeats: impl Into<Repeats<'a>>,
        axis: impl Into<OptionalAxis>,
    ) -> Result<Tensor> {
        repeat_interleave(self, repeats, axis)
    }
}

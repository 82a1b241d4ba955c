//! `split` and `chunk`: consecutive pieces of a tensor along one axis, as views (`narrow`s),
//! with PyTorch's rules for where the pieces end.

use super::view as node;
use crate::error::{bail, ensure};
use crate::layout::axis::{Axis, IntList};
use crate::storage::allocation::{filled, with_capacity};
use crate::{Result, Tensor};

/// `a` cut along `dim` into consecutive pieces of the given extents (every piece a `narrow`
/// view, so gradients flow to the parts of `a` each piece covers).
#[track_caller]
fn pieces(a: &Tensor, dim: usize, extents: &[usize]) -> Result<Vec<Tensor>> {
    // a count of pieces the caller chose: too many is an error, not an abort
    let mut all = with_capacity(extents.len())?;
    let mut start = 0;
    for &len in extents {
        all.push(node::narrow(a, dim, start, len)?);
        start += len;
    }
    Ok(all)
}

/// `a` cut into consecutive pieces along `dim` (negative from the back), as PyTorch's
/// `split`: one integer `s` gives pieces of `s` elements, the last one smaller when `s` does
/// not divide the extent (`split(&x, 3, 0)` on 10 rows gives 3, 3, 3, 1); a list gives pieces
/// of those extents, which must sum to the extent (`split(&x, &[2, 8], 0)`). Every piece is
/// a view.
///
/// `Error::Value` when `dim` is out of range, a size is negative, a piece size is 0 for a
/// non-empty axis, or the listed sizes do not sum to the extent.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let x = Tensor::from_vec((0..10).map(|i| i as f32).collect(), shape![10])?;
/// let sizes: Vec<usize> = ops::split(&x, 3, 0)?.iter().map(Tensor::size).collect();
/// assert_eq!(sizes, [3, 3, 3, 1]);
/// assert_eq!(ops::split(&x, &[2, 8], -1)?[1].values::<f32>()?[0], 2.0);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn split(a: &Tensor, sizes: impl IntList, dim: impl Into<Axis>) -> Result<Vec<Tensor>> {
    let dims = a.dims();
    let d = dim.into().resolve_for("split", dims.len())?;
    let n = dims[d];
    let ints = sizes.to_ints();
    if sizes.is_single() {
        let s = ints.first().copied().unwrap_or_default();
        let Ok(s) = usize::try_from(s) else {
            bail!(Value, "split: split_size must be non-negative, got {s}")
        };
        ensure!(
            s > 0 || n == 0,
            Value,
            "split: split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
        );
        let count = if s == 0 { 1 } else { n.div_ceil(s).max(1) };
        let extents: Vec<usize> = (0..count).map(|i| s.min(n - (i * s).min(n))).collect();
        return pieces(a, d, &extents);
    }
    let total: i128 = ints.iter().sum();
    let extents: Vec<usize> = ints
        .iter()
        .filter_map(|&s| usize::try_from(s).ok())
        .collect();
    ensure!(
        extents.len() == ints.len() && total == n as i128,
        Value,
        "split: split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {d}), but got split_sizes={ints:?}"
    );
    pieces(a, d, &extents)
}

/// `a` cut into at most `chunks` views along `dim` (negative from the back), as PyTorch's
/// `chunk`: pieces of `ceil(extent / chunks)` elements, the last one smaller, so there may be
/// fewer than `chunks` (`chunk(&x, 4, 0)` on 10 rows gives 3, 3, 3, 1, on 6 rows 2, 2, 2). An
/// empty axis gives `chunks` empty pieces.
///
/// `Error::Value` when `chunks` is 0, `dim` is out of range, or an empty axis is asked for
/// more pieces than can be allocated.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let x = Tensor::from_vec(vec![0.0f32; 12], shape![2, 6])?;
/// let sizes: Vec<Vec<usize>> = ops::chunk(&x, 4, -1)?.iter().map(Tensor::dims).collect();
/// assert_eq!(sizes, [[2, 2], [2, 2], [2, 2]]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn chunk(a: &Tensor, chunks: usize, dim: impl Into<Axis>) -> Result<Vec<Tensor>> {
    ensure!(
        chunks > 0,
        Value,
        "chunk: chunk expects `chunks` to be greater than 0, got: 0"
    );
    let dims = a.dims();
    let d = dim.into().resolve_for("chunk", dims.len())?;
    let n = dims[d];
    if n == 0 {
        return pieces(a, d, &filled(chunks, 0)?);
    }
    split(a, n.div_ceil(chunks), d)
}

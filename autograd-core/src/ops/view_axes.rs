//! The public view functions, with axes and sizes as PyTorch writes them: every axis is an
//! [`Axis`] (`-1` is the last), every list of axes or sizes an [`IntList`], and a `-1` size is
//! inferred (`reshape`, `view`, `unflatten`) or kept (`broadcast_to`, `expand`). Each resolves
//! its arguments against the input's rank and calls the node of the same name in `view`, so
//! views stay views and gradients flow as there. `unflatten` and `movedim` are built from
//! `reshape` and `permute`.

use super::broadcast;
use super::view as node;
use crate::error::ensure;
use crate::layout::axis::{resolve_axes, Axis, IntList};
use crate::layout::inferred_shape::{expand_sizes, infer_sizes};
use crate::{Result, Tensor};

/// The rank of `a` (its number of top-level modes).
fn rank(a: &Tensor) -> usize {
    a.layout().rank()
}

/// Top-level modes `dim0` and `dim1` of `a` swapped (negative axes count from the back): a
/// view sharing `a`'s storage.
///
/// `Error::Value` when an axis is out of range.
#[track_caller]
pub fn transpose(a: &Tensor, dim0: impl Into<Axis>, dim1: impl Into<Axis>) -> Result<Tensor> {
    let r = rank(a);
    let d0 = dim0.into().resolve_for("transpose", r)?;
    let d1 = dim1.into().resolve_for("transpose", r)?;
    node::transpose(a, d0, d1)
}

/// The top-level modes of `a` reordered, mode `i` of the result being mode `order[i]` of `a`
/// (negative axes count from the back): a view sharing `a`'s storage.
///
/// `Error::Value` when `order` does not name every axis exactly once.
#[track_caller]
pub fn permute(a: &Tensor, order: impl IntList) -> Result<Tensor> {
    let order = resolve_axes("permute", order, rank(a))?;
    node::permute(a, &order)
}

/// `a`'s elements (logical order) with flat extents `dims`, one of which may be `-1` (inferred
/// from the element count): a view when `a`'s storage order is its logical order, otherwise a
/// compact copy (as in PyTorch).
///
/// `Error::Value` when the sizes hold another number of elements, two are `-1`, a `-1` cannot
/// be inferred or a size is below `-1`.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let x = Tensor::from_vec((0..6).map(|i| i as f32).collect(), shape![2, 3])?;
/// assert_eq!(ops::reshape(&x, &[-1, 2])?.dims(), [3, 2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn reshape(a: &Tensor, dims: impl IntList) -> Result<Tensor> {
    let dims = infer_sizes("reshape", dims, a.size())?;
    node::reshape(a, &dims)
}

/// [`reshape`] that never copies (PyTorch's `view`; one size may be `-1`): `Error::Value` when
/// `a`'s storage cannot hold the result as a view.
#[track_caller]
pub fn view(a: &Tensor, dims: impl IntList) -> Result<Tensor> {
    let dims = infer_sizes("view", dims, a.size())?;
    node::view(a, &dims)
}

/// Top-level modes `start..=end` of `a` merged into one flat mode, the others kept (as flat
/// modes), negative axes counting from the back (`flatten(&x, 1, -1)` keeps the batch axis):
/// [`reshape`] to those extents, so a view when one exists.
///
/// `Error::Value` when an axis is out of range or `start` comes after `end`; a tensor of rank 0
/// has no axis to name, so flattening it is an error too (PyTorch gives one element of rank 1;
/// `reshape(&x, &[1])` does that here).
#[track_caller]
pub fn flatten(a: &Tensor, start: impl Into<Axis>, end: impl Into<Axis>) -> Result<Tensor> {
    let r = rank(a);
    let s = start.into().resolve_for("flatten", r)?;
    let e = end.into().resolve_for("flatten", r)?;
    ensure!(
        s <= e,
        Value,
        "flatten: start dimension {s} cannot come after end dimension {e}"
    );
    node::flatten(a, s, e)
}

/// `a` with a mode of extent 1 inserted at top-level position `dim` (`-rank - 1..=rank`; `-1`
/// appends it): a view.
///
/// `Error::Value` when `dim` is out of range.
#[track_caller]
pub fn unsqueeze(a: &Tensor, dim: impl Into<Axis>) -> Result<Tensor> {
    let d = dim.into().resolve_for("unsqueeze", rank(a) + 1)?;
    node::unsqueeze(a, d)
}

/// `a` with its top-level mode `dim` (negative from the back), of extent 1, removed: a view.
///
/// `Error::Value` when `dim` is out of range or its extent is not 1.
#[track_caller]
pub fn squeeze(a: &Tensor, dim: impl Into<Axis>) -> Result<Tensor> {
    let d = dim.into().resolve_for("squeeze", rank(a))?;
    node::squeeze(a, d)
}

/// `a` with every top-level mode of extent 1 removed (PyTorch's `squeeze()` without an
/// argument): a view; a tensor without such a mode comes back as a view of the same shape.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![1, 2, 1])?;
/// assert_eq!(ops::squeeze_all(&x)?.dims(), [2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn squeeze_all(a: &Tensor) -> Result<Tensor> {
    node::squeeze_all(a)
}

/// Elements `start..start + len` of the leaf top-level mode `dim` (negative from the back) of
/// `a`: a view.
///
/// `Error::Value` when `dim` is out of range or the range exceeds the mode's extent;
/// `Error::NotImplemented` when mode `dim` is nested.
#[track_caller]
pub fn narrow(a: &Tensor, dim: impl Into<Axis>, start: usize, len: usize) -> Result<Tensor> {
    let d = dim.into().resolve_for("narrow", rank(a))?;
    node::narrow(a, d, start, len)
}

/// The sub-tensor of `a` at `index` along top-level mode `dim` (negative from the back), that
/// mode removed: a view.
///
/// `Error::Value` when `dim` or `index` is out of range.
#[track_caller]
pub fn select(a: &Tensor, dim: impl Into<Axis>, index: usize) -> Result<Tensor> {
    let d = dim.into().resolve_for("select", rank(a))?;
    node::select(a, d, index)
}

/// Top-level mode `dim` (negative from the back) of `a` split into modes of extents `sizes`,
/// one of which may be `-1` (PyTorch's `unflatten`): [`reshape`], so a view when one exists.
///
/// `Error::Value` when `dim` is out of range, `sizes` is empty or does not hold the mode's
/// extent.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let x = Tensor::from_vec((0..12).map(|i| i as f32).collect(), shape![2, 6])?;
/// assert_eq!(ops::unflatten(&x, -1, &[3, -1])?.dims(), [2, 3, 2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn unflatten(a: &Tensor, dim: impl Into<Axis>, sizes: impl IntList) -> Result<Tensor> {
    let dims = a.dims();
    let d = dim.into().resolve_for("unflatten", dims.len())?;
    ensure!(
        !sizes.to_ints().is_empty(),
        Value,
        "unflatten: sizes must be non-empty"
    );
    let split = infer_sizes("unflatten", sizes, dims[d])?;
    let mut out = dims[..d].to_vec();
    out.extend_from_slice(&split);
    out.extend_from_slice(&dims[d + 1..]);
    node::reshape(a, &out)
}

/// `a` with its axes `source` moved to positions `destination` (one axis each, or lists of
/// the same length; negative from the back), the other axes keeping their relative order
/// (PyTorch's `movedim`): [`permute`], a view.
///
/// `Error::Value` when an axis is out of range or repeated, or the lists' lengths differ.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let x = Tensor::from_vec(vec![0.0f32; 24], shape![2, 3, 4])?;
/// assert_eq!(ops::movedim(&x, 0, -1)?.dims(), [3, 4, 2]);
/// assert_eq!(ops::movedim(&x, &[0, 1], &[-1, 0])?.dims(), [3, 4, 2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn movedim(a: &Tensor, source: impl IntList, destination: impl IntList) -> Result<Tensor> {
    let r = rank(a);
    let src = resolve_axes("movedim", source, r)?;
    let dst = resolve_axes("movedim", destination, r)?;
    ensure!(
        src.len() == dst.len(),
        Value,
        "movedim: invalid source or destination dims: source ({} dims) should contain the same number of dims as destination ({} dims)",
        src.len(),
        dst.len()
    );
    let mut order: Vec<Option<usize>> = vec![None; r];
    for (&s, &d) in src.iter().zip(&dst) {
        order[d] = Some(s);
    }
    let mut rest = (0..r).filter(|i| !src.contains(i));
    let order: Vec<usize> = order
        .into_iter()
        .map(|o| o.or_else(|| rest.next()).unwrap_or_default())
        .collect();
    node::permute(a, &order)
}

/// A stride-0 view of `a` with top-level extents `dims`, numpy style: modes align at the end,
/// new leading modes and modes of one element (nested or not) repeat, and `-1` keeps an
/// existing mode's extent (PyTorch's `expand`).
///
/// `Error::Value` when a mode cannot broadcast, `dims` is shorter than the rank, or a `-1`
/// falls on a new leading mode.
#[track_caller]
pub fn broadcast_to(a: &Tensor, dims: impl IntList) -> Result<Tensor> {
    let dims = expand_sizes("broadcast_to", dims, &a.dims())?;
    broadcast::broadcast_to(a, &dims)
}

//! Views that are ops: each forward shares the input's storage (no copy; `reshape` and
//! `flatten` copy only when no layout expresses the result) and records a node like any other
//! op, so a view inside a model passes gradients back to its source.
//!
//! Every VJP receives the cotangent `g` of its result per logical position (an injective
//! layout, as if the result did not alias storage) and returns one cotangent per logical
//! position of the input, in any layout of the input's shape:
//! - a relabelling of the positions (transpose, permute) hands `g` back through the inverse
//!   relabelling;
//! - a change of shape that keeps logical order (reshape, view, flatten, unsqueeze, squeeze)
//!   hands back `g` under the input's shape;
//! - a cut (narrow, select) hands back `g` at the cut positions and zeros elsewhere;
//! - `broadcast_to` sums over repetitions (see [`broadcast_to`](crate::ops::broadcast_to)).
//!
//! These nodes take resolved axes (`0..rank`) and extents; the public functions of the same
//! names (`view_axes`) resolve PyTorch's negative axes and `-1` sizes first and call them, so a
//! node keeps its op's name. The methods of the same names on [`Tensor`] call those.

use crate::{differentiable, Result, Shape, Tensor};

/// Zeros of `a`'s shape (in the layout of `a`'s gradient and `a`'s carrier class) with `g`
/// written into the cut `cut` makes of them: the cotangent of a cut view of `a`.
fn scatter_into_zeros(
    a: &Tensor,
    g: &Tensor,
    cut: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let zeros = a.f32_zeros_like()?;
    cut(&zeros)?.copy_from(g)?;
    Ok(zeros)
}

/// Top-level modes `dim0` and `dim1` of `a` swapped: a view sharing `a`'s storage.
///
/// `Error::Value` when a mode is out of range.
#[differentiable(crate = crate)]
pub(crate) fn transpose(a: &Tensor, dim0: usize, dim1: usize) -> Result<Tensor> {
    // y[.., i, .., j, ..] = a[.., j, .., i, ..]: a swap is its own inverse, so
    // da = g with the same two modes swapped back.
    fn vjp(g: &Tensor, dim0: usize, dim1: usize) -> Result<Option<Tensor>> {
        Ok(Some(g.raw_transpose(dim0, dim1)?))
    }
    a.raw_transpose(dim0, dim1)
}

/// The top-level modes of `a` reordered, mode `i` of the result being mode `order[i]` of `a`:
/// a view sharing `a`'s storage.
///
/// `Error::Value` when `order` is not a permutation of `0..rank`.
#[differentiable(crate = crate)]
pub(crate) fn permute(a: &Tensor, order: &[usize]) -> Result<Tensor> {
    // y[c] = a[c'] with c'[order[i]] = c[i]: position c' of a receives g at c, so
    // da = g permuted by the inverse permutation (inverse[order[i]] = i).
    fn vjp(g: &Tensor, order: &[usize]) -> Result<Option<Tensor>> {
        let mut inverse = vec![0; order.len()];
        for (i, &o) in order.iter().enumerate() {
            inverse[o] = i;
        }
        Ok(Some(g.raw_permute(&inverse)?))
    }
    a.raw_permute(order)
}

/// `a`'s elements (logical order) with flat extents `dims`: a view when `a`'s storage order is
/// its logical order, otherwise a compact copy (as in PyTorch).
///
/// `Error::Value` when the sizes differ.
#[differentiable(crate = crate)]
pub(crate) fn reshape(a: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // y at logical index k is a at logical index k: da = g (logical order) under a's shape.
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.raw_reshape_to("reshape", a.shape())?))
    }
    a.raw_reshape(dims)
}

/// `a`'s elements (logical order) under `shape`, a shape tree of the same size: how binary
/// ops bring operands whose extents agree but whose trees differ (`3` and `(3)`, `(4,3)` and
/// `((2,2),3)`) to one shape. A view when a layout expresses it, else a compact copy.
#[differentiable(crate = crate)]
pub(crate) fn reshape_to_shape(a: &Tensor, shape: &Shape) -> Result<Tensor> {
    // as reshape: da = g (logical order) under a's shape
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.raw_reshape_to("reshape", a.shape())?))
    }
    a.raw_reshape_to("reshape", shape)
}

/// [`reshape`] that never copies: `Error::Value` when `a`'s storage order is not its logical
/// order (PyTorch's `view`).
#[differentiable(crate = crate)]
pub(crate) fn view(a: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // as reshape: da = g (logical order) under a's shape
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.raw_reshape_to("view", a.shape())?))
    }
    a.raw_view(dims)
}

/// Top-level modes `start..=end` of `a` merged into one flat mode, the others kept (as flat
/// modes): [`reshape`] to those extents, so a view when one exists.
///
/// `Error::Value` unless `start <= end < rank`.
#[differentiable(crate = crate)]
pub(crate) fn flatten(a: &Tensor, start: usize, end: usize) -> Result<Tensor> {
    // a reshape: da = g (logical order) under a's shape
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.raw_reshape_to("flatten", a.shape())?))
    }
    a.raw_flatten(start, end)
}

/// `a` with a mode of extent 1 inserted at top-level position `dim` (`0..=rank`): a view.
///
/// `Error::Value` when `dim > rank`.
#[differentiable(crate = crate, batched)]
pub(crate) fn unsqueeze(a: &Tensor, dim: usize) -> Result<Tensor> {
    // logical order is unchanged: da = g under a's shape (after the batch mode, if any)
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let k = crate::batch::extent(g, a.layout().rank() + 1);
        let shape = crate::batch::shape_for(a.shape(), k)?;
        Ok(Some(g.raw_reshape_to("unsqueeze", &shape)?))
    }
    a.raw_unsqueeze(dim)
}

/// `a` with its top-level mode `dim`, of extent 1, removed: a view.
///
/// `Error::Value` when `dim` is out of range or its extent is not 1.
#[differentiable(crate = crate, batched)]
pub(crate) fn squeeze(a: &Tensor, dim: usize) -> Result<Tensor> {
    // logical order is unchanged: da = g under a's shape (after the batch mode, if any)
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let k = crate::batch::extent(g, a.layout().rank().saturating_sub(1));
        let shape = crate::batch::shape_for(a.shape(), k)?;
        Ok(Some(g.raw_reshape_to("squeeze", &shape)?))
    }
    a.raw_squeeze(dim)
}

/// Elements `start..start + len` of the leaf top-level mode `dim` of `a`: a view.
///
/// `Error::Value` when `dim` is out of range or the range exceeds the mode's extent;
/// `Error::NotImplemented` when mode `dim` is nested.
#[differentiable(crate = crate)]
pub(crate) fn narrow(a: &Tensor, dim: usize, start: usize, len: usize) -> Result<Tensor> {
    // y[.., i, ..] = a[.., start + i, ..]: those positions of a receive g, every other
    // position of a is unused by y and receives 0.
    fn vjp(g: &Tensor, a: &Tensor, dim: usize, start: usize, len: usize) -> Result<Option<Tensor>> {
        Ok(Some(scatter_into_zeros(a, g, |z| {
            z.raw_narrow(dim, start, len)
        })?))
    }
    a.raw_narrow(dim, start, len)
}

/// The sub-tensor of `a` at `index` along top-level mode `dim`, that mode removed: a view.
///
/// `Error::Value` when `dim` or `index` is out of range.
#[differentiable(crate = crate)]
pub(crate) fn select(a: &Tensor, dim: usize, index: usize) -> Result<Tensor> {
    // y[c] = a[c with index inserted at dim]: the positions with coordinate `index` along
    // `dim` receive g, every other position of a receives 0.
    fn vjp(g: &Tensor, a: &Tensor, dim: usize, index: usize) -> Result<Option<Tensor>> {
        Ok(Some(scatter_into_zeros(a, g, |z| {
            z.raw_select(dim, index)
        })?))
    }
    a.raw_select(dim, index)
}

/// `a` with every top-level mode of extent 1 removed (PyTorch's `squeeze()` without an axis):
/// a view; `a` itself (as a new handle) when it has no such mode.
#[differentiable(crate = crate, batched)]
pub(crate) fn squeeze_all(a: &Tensor) -> Result<Tensor> {
    // logical order is unchanged: da = g under a's shape (after the batch mode, if any)
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let dims = a.dims();
        let kept = dims.iter().filter(|&&d| d != 1).count();
        let k = crate::batch::extent(g, kept);
        let shape = crate::batch::shape_for(a.shape(), k)?;
        Ok(Some(g.raw_reshape_to("squeeze_all", &shape)?))
    }
    let dims = a.dims();
    let identity: Vec<usize> = (0..dims.len()).collect();
    let mut y = a.raw_permute(&identity)?;
    for (i, &d) in dims.iter().enumerate().rev() {
        if d == 1 {
            y = y.raw_squeeze(i)?;
        }
    }
    Ok(y)
}

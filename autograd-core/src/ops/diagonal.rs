//! Diagonals, as PyTorch's: `diagonal` (a strided view of the elements `(i, i + offset)` of
//! two axes, sharing the input's storage), `diag_embed` (its inverse: a new tensor, zero but
//! for that diagonal) and `diag` (one of the two, by rank). Each is the other's gradient:
//! the cotangent of a diagonal is written onto the diagonal of zeros, and the cotangent of an
//! embedded diagonal is read back off it.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::kernel::element::dispatch;
use crate::layout::axis::Axis;
use crate::{differentiable, Layout, Shape, Stride, Tensor};

/// The diagonal of axes `axis1` and `axis2` of `t` with `offset` (`> 0` above the main
/// diagonal, `< 0` below) as a view of `t`'s storage: those two axes removed and one of the
/// diagonal's length appended, of stride their strides' sum. Both axes must be leaf modes
/// (`Error::NotImplemented` otherwise), and distinct (`Error::Value`).
fn raw_diagonal(t: &Tensor, offset: i64, axis1: usize, axis2: usize) -> Result<Tensor> {
    let l = t.layout();
    ensure!(
        axis1 != axis2,
        Value,
        "diagonal: axis1 and axis2 are both axis {axis1} (shape {:?})",
        t.dims()
    );
    for axis in [axis1, axis2] {
        ensure!(
            l.mode_is_leaf(axis),
            NotImplemented,
            "diagonal: axis {axis} of layout {l} is nested; take the diagonal of a contiguous() copy"
        );
    }
    let (a, b) = (l.mode_leaves(axis1)[0], l.mode_leaves(axis2)[0]);
    // extents fit i64: they count elements of an allocated tensor
    let (rows, cols) = (a.extent as i64, b.extent as i64);
    // saturating: an offset of i64::MIN is past every row all the same
    let (r0, c0) = if offset >= 0 {
        (0, offset)
    } else {
        (offset.saturating_neg(), 0)
    };
    let len = (rows - r0).min(cols - c0).max(0);
    let mut modes: Vec<Layout> = l
        .modes()
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| i != axis1 && i != axis2)
        .map(|(_, m)| m)
        .collect();
    let stride = a.stride.checked_add(b.stride);
    let Some(stride) = stride else {
        bail!(
            Value,
            "diagonal: strides {} + {} overflow",
            a.stride,
            b.stride
        )
    };
    let len = usize::try_from(len).unwrap_or(0);
    modes.push(Layout::new(Shape::from(len), Stride::from(stride))?);
    let layout = Layout::from_modes(&modes)?;
    let shift = if len == 0 {
        0
    } else {
        // the first element is in range, so its offset is a storage offset
        usize::try_from(r0).unwrap_or(0) * a.stride + usize::try_from(c0).unwrap_or(0) * b.stride
    };
    t.with_layout_detached(layout, t.offset() + shift)
}

/// The diagonal of `a`'s axes `axis1` and `axis2` (negative from the back) with `offset`, as
/// PyTorch's `torch.diagonal`: elements `(i, i + offset)` (`offset > 0` above the main
/// diagonal, `< 0` below), those two axes removed and the diagonal appended as the last axis.
/// A view sharing `a`'s storage (no copy; strided by the two axes' strides' sum); the
/// gradient writes the cotangent onto the diagonal of zeros. An offset past the matrix gives
/// an empty diagonal.
///
/// `Error::Value` for an axis out of range or the same axis twice; `Error::NotImplemented` for a
/// nested axis.
///
/// ```
/// use autograd_core::ops::diagonal;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec((0..6).map(|i| i as f32).collect(), shape![2, 3])?;
/// assert_eq!(diagonal(&a, 0, 0, 1)?.values::<f32>()?, [0.0, 4.0]);
/// assert_eq!(diagonal(&a, 1, -2, -1)?.values::<f32>()?, [1.0, 5.0]);
/// assert_eq!(diagonal(&a, -1, 0, 1)?.values::<f32>()?, [3.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn diagonal(
    a: &Tensor,
    offset: i64,
    axis1: impl Into<Axis>,
    axis2: impl Into<Axis>,
) -> Result<Tensor> {
    let rank = a.dims().len();
    let d1 = axis1.into().resolve_for("diagonal", rank)?;
    let d2 = axis2.into().resolve_for("diagonal", rank)?;
    node::diagonal(a, offset, d1, d2)
}

/// A tensor whose diagonal of axes `axis1` and `axis2` with `offset` is `a`'s last axis, zero
/// elsewhere, as PyTorch's `torch.diag_embed`: the result has one axis more than `a`, the axes
/// are counted in the result (negative from the back; PyTorch's defaults are `0, -2, -1`), and
/// both have extent `a`'s last extent plus `|offset|`. `diagonal(diag_embed(a, k, i, j), k, i,
/// j)` is `a`. The gradient reads the cotangent's diagonal.
///
/// `Error::Value` for a 0-dim input, an axis out of range or the same axis twice.
///
/// ```
/// use autograd_core::ops::diag_embed;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])?;
/// let y = diag_embed(&a, 1, -2, -1)?;
/// assert_eq!(y.dims(), [3, 3]);
/// assert_eq!(y.values::<f32>()?, [0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn diag_embed(
    a: &Tensor,
    offset: i64,
    axis1: impl Into<Axis>,
    axis2: impl Into<Axis>,
) -> Result<Tensor> {
    let rank = a.dims().len();
    ensure!(
        rank >= 1,
        Value,
        "diag_embed: the input needs at least one axis, got a 0-dim tensor"
    );
    let d1 = axis1.into().resolve_for("diag_embed", rank + 1)?;
    let d2 = axis2.into().resolve_for("diag_embed", rank + 1)?;
    ensure!(
        d1 != d2,
        Value,
        "diag_embed: axis1 and axis2 are both axis {d1} of the result"
    );
    node::diag_embed(a, offset, d1, d2)
}

/// PyTorch's `torch.diag`: a one-axis `a` becomes the square matrix with `a` on its diagonal
/// `offset` ([`diag_embed`] on axes 0 and 1), a two-axis `a` gives its diagonal `offset` (a
/// [`diagonal`] view). `Error::Value` for another rank.
///
/// ```
/// use autograd_core::ops::diag;
/// use autograd_core::{shape, Tensor};
/// let v = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])?;
/// let m = diag(&v, 0)?;
/// assert_eq!(m.values::<f32>()?, [1.0, 0.0, 0.0, 2.0]);
/// assert_eq!(diag(&m, 0)?.values::<f32>()?, [1.0, 2.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn diag(a: &Tensor, offset: i64) -> Result<Tensor> {
    match a.dims().len() {
        1 => diag_embed(a, offset, 0, 1),
        2 => diagonal(a, offset, 0, 1),
        r => bail!(
            Value,
            "diag: takes a tensor of one or two axes, got shape {:?} of {r}",
            a.dims()
        ),
    }
}

/// The extents of [`diag_embed`]'s result for an input of extents `dims`.
fn embedded_dims(dims: &[usize], offset: i64, d1: usize, d2: usize) -> Result<Vec<usize>> {
    let Some((&last, rest)) = dims.split_last() else {
        bail!(Value, "diag_embed: the input needs at least one axis")
    };
    let n = last.checked_add(usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX));
    let Some(n) = n else {
        bail!(
            Value,
            "diag_embed: extent {last} plus offset {offset} overflows"
        )
    };
    let mut out = Vec::with_capacity(dims.len() + 1);
    let mut rest = rest.iter();
    for i in 0..=dims.len() {
        if i == d1 || i == d2 {
            out.push(n);
        } else if let Some(&d) = rest.next() {
            out.push(d);
        }
    }
    Ok(out)
}

mod node {
    use super::{
        differentiable, dispatch, embedded_dims, raw_diagonal, Arc, Layout, Result, Tensor,
    };

    #[differentiable(crate = crate)]
    pub(super) fn diagonal(a: &Tensor, offset: i64, axis1: usize, axis2: usize) -> Result<Tensor> {
        // y[.., i] = a[.., r0 + i, .., c0 + i, ..]: those positions of a receive g, others 0
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            offset: i64,
            axis1: usize,
            axis2: usize,
        ) -> Result<Option<Tensor>> {
            let zeros = a.f32_zeros_like()?;
            raw_diagonal(&zeros, offset, axis1, axis2)?.copy_from(g)?;
            Ok(Some(zeros))
        }
        raw_diagonal(a, offset, axis1, axis2)
    }

    #[differentiable(crate = crate)]
    pub(super) fn diag_embed(
        a: &Tensor,
        offset: i64,
        axis1: usize,
        axis2: usize,
    ) -> Result<Tensor> {
        // y's diagonal is a and the rest is constant: da = the diagonal of g
        fn vjp(g: &Tensor, offset: i64, axis1: usize, axis2: usize) -> Result<Option<Tensor>> {
            let g = if g.layout().is_flat() {
                g.clone()
            } else {
                g.contiguous()?
            };
            Ok(Some(raw_diagonal(&g, offset, axis1, axis2)?))
        }
        let dims = embedded_dims(&a.dims(), offset, axis1, axis2)?;
        let out = dispatch!(
            a.dtype(), "diag_embed", T => crate::kernel::fresh::<T>(a, Arc::new(Layout::row_major(&dims)?), |_| Ok(())),
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
        )?;
        raw_diagonal(&out, offset, axis1, axis2)?.copy_from(a)?;
        Ok(out)
    }
}

/// Method forms of the diagonal ops.
impl Tensor {
    /// [`diagonal`] of this tensor: a view.
    #[track_caller]
    pub fn diagonal(
        &self,
        offset: i64,
        axis1: impl Into<Axis>,
        axis2: impl Into<Axis>,
    ) -> Result<Tensor> {
        diagonal(self, offset, axis1, axis2)
    }

    /// [`diag_embed`] of this tensor.
    #[track_caller]
    pub fn diag_embed(
        &self,
        offset: i64,
        axis1: impl Into<Axis>,
        axis2: impl Into<Axis>,
    ) -> Result<Tensor> {
        diag_embed(self, offset, axis1, axis2)
    }

    /// [`diag`] of this tensor.
    pub fn diag(&self, offset: i64) -> Result<Tensor> {
        diag(self, offset)
    }
}

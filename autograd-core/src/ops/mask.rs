//! Masking and triangles: `masked_fill` (a value where a Bool mask is true) and `tril`/`triu`
//! (the lower or upper triangle of the last two axes), each differentiable in its input,
//! whose cotangent passes where the input was kept and is zero where it was replaced.

use super::broadcast::broadcast_shapes;
use super::compare::mask_like;
use crate::error::{ensure, Result};
use crate::kernel::element::dispatch;
use crate::kernel::{read, zip};
use crate::storage::scalar::{Element, Scalar};
use crate::{differentiable, DType, Tensor};

/// `a` with `value` (cast to `a`'s dtype) wherever `mask` is true, as PyTorch's
/// `masked_fill`: `mask` is Bool and broadcasts to `a`'s shape (`Error::Value` when it does
/// not; `Error::Type` when it is not Bool or `value` does not fit `a`'s dtype). The
/// cotangent reaches `a` where the mask is false.
///
/// ```
/// use autograd_core::ops::masked_fill;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// let m = Tensor::from_vec(vec![false, true], shape![2])?; // broadcast over rows
/// let y = masked_fill(&a, &m, f32::NEG_INFINITY)?;
/// assert_eq!(y.values::<f32>()?, [1.0, f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn masked_fill(a: &Tensor, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
    ensure!(
        *mask.dtype() == DType::Bool,
        Type,
        "masked_fill: the mask must be Bool, not {}",
        mask.dtype()
    );
    let dims = a.dims();
    let joint = broadcast_shapes(&mask.dims(), &dims).map_err(|e| e.context("masked_fill"))?;
    ensure!(
        joint == dims,
        Value,
        "masked_fill: a mask of shape {:?} does not broadcast to the input's {:?}",
        mask.dims(),
        dims
    );
    let value = value.into().cast(a.dtype())?;
    let m = mask_like("masked_fill", mask, a)?;
    node::masked_fill(a, &m, value)
}

/// The lower triangle of the last two axes of `a` (at least two): element `(i, j)` is kept
/// where `j - i <= diagonal` and zero elsewhere, as PyTorch's `tril` (`diagonal` 0 is the
/// main diagonal, positive above it, negative below). `Error::Value` for fewer than two axes.
///
/// ```
/// use autograd_core::ops::tril;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32; 6], shape![2, 3])?;
/// assert_eq!(tril(&a, 0)?.values::<f32>()?, [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn tril(a: &Tensor, diagonal: i64) -> Result<Tensor> {
    node::triangle(a, Triangle::Lower, diagonal)
}

/// The upper triangle of the last two axes of `a`: element `(i, j)` is kept where
/// `j - i >= diagonal` and zero elsewhere, as PyTorch's `triu`. Errors as [`tril`].
pub fn triu(a: &Tensor, diagonal: i64) -> Result<Tensor> {
    node::triangle(a, Triangle::Upper, diagonal)
}

/// Which triangle [`tril`] and [`triu`] keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Triangle {
    /// `j - i <= diagonal`.
    Lower,
    /// `j - i >= diagonal`.
    Upper,
}

impl crate::graph::captured::Captured for Triangle {}

impl Triangle {
    fn keeps(self, row: usize, col: usize, diagonal: i64) -> bool {
        // extents fit i64: they count elements of an allocated tensor
        let offset = col as i64 - row as i64;
        match self {
            Triangle::Lower => offset <= diagonal,
            Triangle::Upper => offset >= diagonal,
        }
    }
}

/// `a`'s elements in logical order with `f(position, element)` applied, in a fresh compact
/// tensor of `a`'s shape.
fn map_indexed<T: Element>(a: &Tensor, f: impl Fn(usize, T) -> T) -> Result<Tensor> {
    let mut values = read::<T, _>(a, |e| -> Result<Vec<T>> {
        let mut v = crate::storage::allocation::filled(e.len(), T::default())?;
        e.copy_range(0, &mut v);
        Ok(v)
    })??;
    for (i, v) in values.iter_mut().enumerate() {
        *v = f(i, *v);
    }
    Tensor::from_vec(values, a.shape().clone())
}

mod node {
    use super::{
        differentiable, dispatch, ensure, map_indexed, zip, Element, Result, Scalar, Tensor,
        Triangle,
    };

    #[differentiable(crate = crate)]
    pub(super) fn masked_fill(a: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
        // d/da: the cotangent where the mask is false, zero where the value was written
        fn vjp(g: &Tensor, mask: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
            Ok((
                Some(zip(g, mask, |g: f32, m: bool| if m { 0.0 } else { g })?),
                None,
            ))
        }
        dispatch!(
            a.dtype(), "masked_fill", T => fill::<T>(a, mask, value),
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
        )
    }

    fn fill<T: Element>(a: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
        let Some(v) = T::from_scalar(value) else {
            crate::bail!(Type, "masked_fill: {value:?} is not a {}", T::DTYPE);
        };
        zip(a, mask, move |x: T, m: bool| if m { v } else { x })
    }

    #[differentiable(crate = crate)]
    pub(super) fn triangle(a: &Tensor, which: Triangle, diagonal: i64) -> Result<Tensor> {
        // linear and diagonal in the elements: the cotangent's same triangle
        fn vjp(g: &Tensor, which: Triangle, diagonal: i64) -> Result<Option<Tensor>> {
            Ok(Some(keep::<f32>(g, which, diagonal)?))
        }
        dispatch!(
            a.dtype(), "tril/triu", T => keep::<T>(a, which, diagonal),
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
        )
    }

    /// `a` with the elements outside `which` triangle of its last two axes set to zero.
    pub(super) fn keep<T: Element>(a: &Tensor, which: Triangle, diagonal: i64) -> Result<Tensor> {
        let dims = a.dims();
        ensure!(
            dims.len() >= 2,
            Value,
            "tril/triu: the input needs at least two axes, got shape {dims:?}"
        );
        let cols = dims[dims.len() - 1];
        let rows = dims[dims.len() - 2];
        map_indexed::<T>(a, |i, x| {
            let (row, col) = ((i / cols.max(1)) % rows.max(1), i % cols.max(1));
            if which.keeps(row, col, diagonal) {
                x
            } else {
                T::default()
            }
        })
    }
}

impl Tensor {
    /// [`masked_fill`] of this tensor.
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        masked_fill(self, mask, value)
    }

    /// [`tril`] of this tensor.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        tril(self, diagonal)
    }

    /// [`triu`] of this tensor.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        triu(self, diagonal)
    }
}

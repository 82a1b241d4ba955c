//! Sorting along an axis: `sort` (values and Int64 indices) and `argsort` (the indices), as
//! PyTorch's `torch.sort(stable=True)`: equal elements keep their order, and NaN sorts last
//! ascending, first descending. Each row is sorted once, as `(value, index)` pairs with a
//! stable sort; the values' gradient scatters the cotangent back through the indices.

use super::order::{along_axis, ordered, scatter_back, Ordered};
use crate::error::Result;
use crate::kernel::{per_row, read_rows, row, Rows};
use crate::layout::axis::Axis;
use crate::{differentiable, Tensor};

/// `a` sorted along `axis` (negative from the back), ascending or `descending`, with the
/// index each value came from: `(values, indices)`, both of `a`'s shape, the indices Int64.
/// The sort is **stable** (equal values keep their order, also descending); NaN sorts after
/// every number ascending and before every number descending, as PyTorch's. Float32
/// (differentiable), Float64, Int32 or Int64 (`Error::Type` otherwise); an axis out of range
/// is `Error::Value`.
///
/// ```
/// use autograd_core::{ops::sort, shape, Tensor};
/// let a = Tensor::from_vec(vec![3.0f32, f32::NAN, 1.0, 3.0], shape![4])?;
/// let (values, indices) = sort(&a, -1, false)?;
/// assert_eq!(indices.values::<i64>()?, [2, 0, 3, 1]);
/// assert_eq!(values.values::<f32>()?[..3], [1.0, 3.0, 3.0]);
/// let (_, down) = sort(&a, 0, true)?;
/// assert_eq!(down.values::<i64>()?, [1, 0, 3, 2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn sort(a: &Tensor, axis: impl Into<Axis>, descending: bool) -> Result<(Tensor, Tensor)> {
    let axis = axis.into().resolve_for("sort", a.layout().rank())?;
    node::sort(a, axis, descending)
}

/// The indices that sort `a` along `axis` (negative from the back), as [`sort`]'s second
/// result (stable; Int64; not differentiable).
///
/// ```
/// use autograd_core::{ops::argsort, shape, Tensor};
/// let a = Tensor::from_vec(vec![2i32, 1, 2, 0], shape![2, 2])?;
/// assert_eq!(argsort(&a, 1, false)?.values::<i64>()?, [1, 0, 1, 0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn argsort(a: &Tensor, axis: impl Into<Axis>, descending: bool) -> Result<Tensor> {
    let axis = axis.into().resolve_for("argsort", a.layout().rank())?;
    Ok(sort_of_dtype(a, axis, descending)?.1)
}

/// One row sorted stably: the values and their indices.
fn sort_row<T: Ordered>(x: &[T], descending: bool) -> (Vec<T>, Vec<i64>) {
    // extents fit i64: they count elements of an allocated tensor
    let mut pairs: Vec<(T, i64)> = x.iter().copied().zip(0i64..).collect();
    if descending {
        pairs.sort_by(|p, q| q.0.order(p.0));
    } else {
        pairs.sort_by(|p, q| p.0.order(q.0));
    }
    pairs.into_iter().unzip()
}

/// Every row along `axis` sorted, for one element type.
fn sort_of<T: Ordered>(a: &Tensor, axis: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    let dims = a.dims();
    let rows = Rows::along("sort", &dims, axis)?;
    let n = rows.n;
    let parts = read_rows::<T, _>(a, rows, |e| {
        per_row(rows, |k, buf: &mut Vec<T>| {
            sort_row(row(&e, k, n, buf), descending)
        })
    })?;
    let (values, indices): (Vec<Vec<T>>, Vec<Vec<i64>>) = parts.into_iter().unzip();
    Ok((
        along_axis(a, &dims, rows, n, &values)?,
        along_axis(a, &dims, rows, n, &indices)?,
    ))
}

/// [`sort_of`] dispatched on `a`'s dtype.
fn sort_of_dtype(a: &Tensor, axis: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    ordered!("sort", a, T => sort_of::<T>(a, axis, descending))
}

mod node {
    use super::{differentiable, scatter_back, sort_of_dtype, Result, Tensor};

    /// [`sort`](super::sort) along a resolved axis.
    #[differentiable(crate = crate)]
    pub(super) fn sort(a: &Tensor, axis: usize, descending: bool) -> Result<(Tensor, Tensor)> {
        // y(.., j, ..) = x(.., i_j, ..), a permutation  =>  dx(.., i_j, ..) = g(.., j, ..)
        fn vjp(
            (g, _): (Option<&Tensor>, Option<&Tensor>),
            a: &Tensor,
            axis: usize,
            output: (&Tensor, &Tensor),
        ) -> Result<Option<Tensor>> {
            let Some(g) = g else { return Ok(None) };
            Ok(Some(scatter_back(a, axis, g, output.1)?))
        }
        sort_of_dtype(a, axis, descending)
    }
}

/// Method forms of the sorts.
impl Tensor {
    /// [`sort`]: `(values, indices)` sorted along `axis`.
    #[track_caller]
    pub fn sort(&self, axis: impl Into<Axis>, descending: bool) -> Result<(Tensor, Tensor)> {
        sort(self, axis, descending)
    }

    /// [`argsort`]: the indices that sort along `axis`.
    #[track_caller]
    pub fn argsort(&self, axis: impl Into<Axis>, descending: bool) -> Result<Tensor> {
        argsort(self, axis, descending)
    }
}

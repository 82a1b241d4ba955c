//! The public reductions over axes, with axes as PyTorch writes them: a list of axes (or one
//! axis) where negative axes count from the back (`sum_axes(&x, &[-1], true)`), each resolved
//! against the input's rank before the node of the same name in `reduce` runs. An axis out of
//! range or named twice is `Error::Value`; an empty list reduces nothing.

use super::reduce;
use crate::layout::axis::{resolve_axes, Axis, IntList};
use crate::{Result, Tensor};

/// The rank of `a` (its number of top-level modes).
fn rank(a: &Tensor) -> usize {
    a.layout().rank()
}

/// The sum over the top-level `axes` (negative from the back), keeping them as extent-1 modes
/// when `keepdim`.
///
/// ```
/// use autograd_core::{ops::sum_axes, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
/// assert_eq!(sum_axes(&a, &[1], false).unwrap().values::<f32>().unwrap(), [6.0, 15.0]);
/// assert_eq!(sum_axes(&a, &[-1], false).unwrap().values::<f32>().unwrap(), [6.0, 15.0]);
/// assert_eq!(sum_axes(&a, &[0], true).unwrap().dims(), [1, 3]);
/// ```
#[track_caller]
pub fn sum_axes(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("sum_axes", axes, rank(a))?;
    reduce::sum_axes(a, &axes, keepdim)
}

/// The mean over the top-level `axes` (negative from the back; NaN for an empty group).
#[track_caller]
pub fn mean_axes(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("mean_axes", axes, rank(a))?;
    reduce::mean_axes(a, &axes, keepdim)
}

/// The largest element of every group over the top-level `axes` (negative from the back; NaN
/// if the group holds one).
///
/// Gradient: each group's cotangent is **split evenly among the elements that equal the
/// maximum** (like PyTorch's `amax`), so ties share it and the gradient is symmetric in them;
/// a NaN maximum's cotangent goes to the group's NaN elements (as PyTorch's `max()`).
/// Reducing an empty axis is `Error::Value`.
#[track_caller]
pub fn max_axes(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("max_axes", axes, rank(a))?;
    reduce::max_axes(a, &axes, keepdim)
}

/// The smallest element of every group over the top-level `axes` (negative from the back);
/// gradient split evenly among ties, as [`max_axes`].
#[track_caller]
pub fn min_axes(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("min_axes", axes, rank(a))?;
    reduce::min_axes(a, &axes, keepdim)
}

/// The variance over the top-level `axes` (negative from the back): `sum (x - mean)^2 / (r -
/// correction)` over each group of `r` elements. `correction = 1` is the unbiased estimate
/// (PyTorch's default), `0` the population variance. When `r <= correction` the divisor is 0
/// (NaN or infinity, as in PyTorch).
#[track_caller]
pub fn var_axes(
    a: &Tensor,
    axes: impl IntList,
    keepdim: bool,
    correction: usize,
) -> Result<Tensor> {
    let axes = resolve_axes("var_axes", axes, rank(a))?;
    reduce::var_axes(a, &axes, keepdim, correction)
}

/// The index of the largest element along `axis` (negative from the back), as an Int32 tensor
/// (the axis dropped, or kept with extent 1 when `keepdim`). **Ties give the first index**; a
/// NaN counts as the largest (its first occurrence wins). Records no node: the result is not
/// differentiable.
///
/// ```
/// use autograd_core::{ops::argmax, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 5.0, 5.0, 7.0, 0.0, 7.0], shape![2, 3]).unwrap();
/// assert_eq!(argmax(&a, 1, false).unwrap().values::<i32>().unwrap(), [1, 0]);
/// assert_eq!(argmax(&a, -1, false).unwrap().values::<i32>().unwrap(), [1, 0]);
/// ```
#[track_caller]
pub fn argmax(a: &Tensor, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
    let axis = axis.into().resolve_for("argmax", rank(a))?;
    reduce::argmax(a, axis, keepdim)
}

/// The index of the smallest element along `axis` (negative from the back), as Int32; ties
/// give the first index, as [`argmax`].
#[track_caller]
pub fn argmin(a: &Tensor, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
    let axis = axis.into().resolve_for("argmin", rank(a))?;
    reduce::argmin(a, axis, keepdim)
}

/// Method forms of the reductions over axes.
impl Tensor {
    /// [`sum_axes`]: `x.sum_axes(&[-1], true)?`.
    #[track_caller]
    pub fn sum_axes(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        sum_axes(self, axes, keepdim)
    }
    /// [`mean_axes`].
    #[track_caller]
    pub fn mean_axes(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        mean_axes(self, axes, keepdim)
    }
    /// [`max_axes`] (gradient split among ties).
    #[track_caller]
    pub fn max_axes(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        max_axes(self, axes, keepdim)
    }
    /// [`min_axes`] (gradient split among ties).
    #[track_caller]
    pub fn min_axes(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        min_axes(self, axes, keepdim)
    }
    /// [`var_axes`] (`correction = 1` for the unbiased estimate).
    #[track_caller]
    pub fn var_axes(&self, axes: impl IntList, keepdim: bool, correction: usize) -> Result<Tensor> {
        var_axes(self, axes, keepdim, correction)
    }
    /// [`argmax`]: Int32 indices of the first maximum along `axis`.
    #[track_caller]
    pub fn argmax(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        argmax(self, axis, keepdim)
    }
    /// [`argmin`]: Int32 indices of the first minimum along `axis`.
    #[track_caller]
    pub fn argmin(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        argmin(self, axis, keepdim)
    }
}

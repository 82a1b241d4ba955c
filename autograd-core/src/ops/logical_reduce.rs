//! Truth reductions, as PyTorch's: `all`/`any` of every element or over axes (Bool results)
//! and `count_nonzero` over axes (Int64). They take every simple dtype, an element counting as
//! true when it is nonzero (NaN is nonzero, `-0.0` is zero), and record no node: their results
//! are not differentiable.

use super::group_rows::emit;
use crate::error::Result;
use crate::kernel::element::dispatch;
use crate::kernel::{self, read};
use crate::layout::axis::{resolve_axes, IntList};
use crate::storage::scalar::Element;
use crate::Tensor;

/// Whether every element of `a` is nonzero, as a Bool tensor of shape `[1]` (true for an
/// empty tensor), as PyTorch's `torch.all`.
///
/// ```
/// use autograd_core::{ops::{all, any}, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, f32::NAN, 0.0], shape![3])?;
/// assert_eq!(all(&a)?.values::<bool>()?, [false]);
/// assert_eq!(any(&a)?.values::<bool>()?, [true]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn all(a: &Tensor) -> Result<Tensor> {
    whole("all", a, Truth::All)
}

/// Whether some element of `a` is nonzero, as a Bool tensor of shape `[1]` (false for an empty
/// tensor), as PyTorch's `torch.any`.
pub fn any(a: &Tensor) -> Result<Tensor> {
    whole("any", a, Truth::Any)
}

/// Whether every element of each group over `axes` (negative from the back) is nonzero, as
/// a Bool tensor with the axes dropped (kept with extent 1 when `keepdim`); an empty list
/// reduces nothing.
///
/// ```
/// use autograd_core::{ops::{all_axes, any_axes}, shape, Tensor};
/// let a = Tensor::from_vec(vec![1i32, 0, 2, 3], shape![2, 2])?;
/// assert_eq!(all_axes(&a, -1, false)?.values::<bool>()?, [false, true]);
/// assert_eq!(any_axes(&a, 0, true)?.values::<bool>()?, [true, true]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn all_axes(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("all_axes", axes, a.layout().rank())?;
    over_axes("all_axes", a, &axes, keepdim, Truth::All)
}

/// Whether some element of each group over `axes` is nonzero; as [`all_axes`].
#[track_caller]
pub fn any_axes(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("any_axes", axes, a.layout().rank())?;
    over_axes("any_axes", a, &axes, keepdim, Truth::Any)
}

/// The number of nonzero elements in each group over `axes` (negative from the back; list
/// every axis to count the whole tensor), as an Int64 tensor with the axes dropped, as
/// PyTorch's `torch.count_nonzero(a, dim)`.
///
/// ```
/// use autograd_core::{ops::count_nonzero, shape, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32, 1.5, f32::NAN, 0.0], shape![2, 2])?;
/// assert_eq!(count_nonzero(&a, -1)?.values::<i64>()?, [1, 1]);
/// assert_eq!(count_nonzero(&a, &[0, 1])?.values::<i64>()?, [2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn count_nonzero(a: &Tensor, axes: impl IntList) -> Result<Tensor> {
    let axes = resolve_axes("count_nonzero", axes, a.layout().rank())?;
    dispatch!(
        a.dtype(), "count_nonzero", T => kernel::reduce(
            a, &axes, false, || 0i64, |n, x: T| n + i64::from(nonzero(x)), |n, _| n,
        ),
        [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
        "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
    )
}

/// Which truth reduction runs.
#[derive(Clone, Copy)]
enum Truth {
    /// Every element nonzero.
    All,
    /// Some element nonzero.
    Any,
}

impl Truth {
    /// The result of an empty group.
    fn empty(self) -> bool {
        matches!(self, Truth::All)
    }

    /// The running result after one more element.
    fn step(self, acc: bool, x: bool) -> bool {
        match self {
            Truth::All => acc && x,
            Truth::Any => acc || x,
        }
    }
}

/// Whether `x` is nonzero (NaN is).
fn nonzero<T: Element>(x: T) -> bool {
    x != T::default()
}

/// [`all`] or [`any`] of every element.
fn whole(op: &str, a: &Tensor, truth: Truth) -> Result<Tensor> {
    let value = dispatch!(
        a.dtype(), op, T => read::<T, _>(a, |e| {
            let mut acc = truth.empty();
            e.for_each(|x| acc = truth.step(acc, nonzero(x)));
            acc
        })?,
        [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
        "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
    );
    emit(a, &[1], &[value])
}

/// [`all_axes`] or [`any_axes`] over resolved axes.
fn over_axes(op: &str, a: &Tensor, axes: &[usize], keepdim: bool, truth: Truth) -> Result<Tensor> {
    dispatch!(
        a.dtype(), op, T => kernel::reduce(
            a, axes, keepdim, move || truth.empty(),
            move |acc, x: T| truth.step(acc, nonzero(x)), |acc, _| acc,
        ),
        [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
        "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
    )
}

/// Method forms of the truth reductions.
impl Tensor {
    /// [`all`] of this tensor.
    pub fn all(&self) -> Result<Tensor> {
        all(self)
    }

    /// [`any`] of this tensor.
    pub fn any(&self) -> Result<Tensor> {
        any(self)
    }

    /// [`all_axes`] of this tensor.
    #[track_caller]
    pub fn all_axes(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        all_axes(self, axes, keepdim)
    }

    /// [`any_axes`] of this tensor.
    #[track_caller]
    pub fn any_axes(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        any_axes(self, axes, keepdim)
    }

    /// [`count_nonzero`] of this tensor over `axes`.
    #[track_caller]
    pub fn count_nonzero(&self, axes: impl IntList) -> Result<Tensor> {
        count_nonzero(self, axes)
    }
}

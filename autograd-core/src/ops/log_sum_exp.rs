//! `logsumexp` over axes, numerically stable: each group's maximum `m` is subtracted before
//! exponentiating, `y = m + ln sum e^(x - m)`, so large inputs do not overflow and a group of
//! very negative inputs does not underflow to `ln 0`.

// The per-row arithmetic is `#[inline(always)]` so that `simd!` compiles it into each copy.
#![allow(clippy::inline_always)]

use super::group_rows::{emit, Groups};
use crate::error::Result;
use crate::kernel::element::{real, Real};
use crate::kernel::{exp_f32, log_sum_exp_shifted, row_max};
use crate::layout::axis::{resolve_axes, IntList};
use crate::{differentiable, kernel, simd, Tensor};

/// `ln sum e^x` of the elements of `a` over each group of `axes` (negative from the back;
/// each at most once), as PyTorch's `torch.logsumexp(a, dim, keepdim)`, computed as
/// `m + ln sum e^(x - m)` with the group's maximum `m`. A group of `-inf` only (or an empty
/// group) gives `-inf`, a group holding `+inf` gives `+inf`, one holding NaN gives NaN. An
/// empty `axes` list reduces nothing. Float32 (differentiable) or Float64.
///
/// Gradient: `g e^(x - y)`, the softmax of the group; like PyTorch's, it is NaN where
/// `x - y` is NaN (every element of an all-`-inf` group, the `+inf` elements of a `+inf`
/// group).
///
/// ```
/// use autograd_core::{ops::logsumexp, shape, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32, 0.0, 1000.0, 1000.0], shape![2, 2])?;
/// let y = logsumexp(&a, -1, false)?.values::<f32>()?;
/// assert!((y[0] - std::f32::consts::LN_2).abs() < 1e-6);
/// assert!((y[1] - (1000.0 + std::f32::consts::LN_2)).abs() < 1e-3);
/// assert_eq!(logsumexp(&a, &[0, 1], true)?.dims(), [1, 1]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn logsumexp(a: &Tensor, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
    let axes = resolve_axes("logsumexp", axes, a.layout().rank())?;
    node::logsumexp(a, &axes, keepdim)
}

/// `m + ln sum e^(x - m)` of one row in double precision, `m` its maximum (NaN when it holds
/// one; an infinite or empty maximum is the result itself).
fn row_logsumexp<T: Real>(x: &[T]) -> f64 {
    simd!(len = x.len(); row_logsumexp_body(x))
}

#[inline(always)]
fn row_logsumexp_body<T: Real>(x: &[T]) -> f64 {
    let m = max_or_nan(x);
    let mf: f64 = m.into();
    if !mf.is_finite() {
        return mf;
    }
    mf + log_sum_exp_shifted(x, m)
}

/// The largest element of `x` (NaN when any is NaN, -inf when `x` is empty), in lanes: a
/// running maximum that ignores NaN and a NaN flag per lane, which vectorise, where
/// [`row_max`]'s NaN-propagating fold runs one element at a time.
#[inline(always)]
fn max_or_nan<T: Real>(x: &[T]) -> T {
    const LANES: usize = 16;
    let mut m = [T::NEG_INFINITY; LANES];
    let mut nan = [false; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            let v = c[l];
            m[l] = if v > m[l] { v } else { m[l] };
            nan[l] |= v.is_nan_value();
        }
    }
    let tail = row_max(chunks.remainder());
    if nan.iter().any(|&n| n) {
        return tail + T::from_f64(f64::NAN);
    }
    m.iter().fold(tail, |a, &v| a.max_of(v))
}

/// `g e^(x - y)` for one row (the gradient of one group).
fn row_gradient(x: &[f32], g: f32, y: f32, out: &mut [f32]) {
    simd!(len = x.len(); row_gradient_body(x, g, y, out));
}

#[inline(always)]
fn row_gradient_body(x: &[f32], g: f32, y: f32, out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = g * exp_f32(v - y);
    }
}

/// The forward kernel for one element type: one value per group, in the result's order.
fn forward<T: Real>(a: &Tensor, axes: &[usize], keepdim: bool) -> Result<Tensor> {
    let groups = Groups::of(a, axes)?;
    let values = groups.per_group(|_, x: &[T]| T::from_f64(row_logsumexp(x)))?;
    emit(a, &kernel::reduced_dims(&a.dims(), axes, keepdim)?, &values)
}

mod node {
    use super::{differentiable, forward, real, row_gradient, Groups, Result, Tensor};

    /// [`logsumexp`](super::logsumexp) over resolved axes.
    #[differentiable(crate = crate)]
    pub(super) fn logsumexp(a: &Tensor, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        // y = ln sum_p e^(x_p)  =>  dy/dx_p = e^(x_p - y), the group's softmax
        fn vjp(g: &Tensor, a: &Tensor, axes: &[usize], output: &Tensor) -> Result<Option<Tensor>> {
            let (g, y) = (g.values::<f32>()?, output.values::<f32>()?);
            let groups = Groups::of(a, axes)?;
            let dx = groups.map_groups(|k, x: &[f32], out: &mut [f32]| {
                row_gradient(x, g[k], y[k], out);
            })?;
            Ok(Some(dx))
        }
        real!("logsumexp", a, T => forward::<T>(a, axes, keepdim))
    }
}

impl Tensor {
    /// [`logsumexp`] of this tensor over `axes`.
    #[track_caller]
    pub fn logsumexp(&self, axes: impl IntList, keepdim: bool) -> Result<Tensor> {
        logsumexp(self, axes, keepdim)
    }
}

//! Vector norms and the standard deviation over axes: `norm` (PyTorch's
//! `torch.linalg.vector_norm`, with [`NormOrd`] for p = 1, 2, any p > 0, ±inf and Frobenius)
//! and `std_axes` (`torch.std` with `correction`). Each group is read as one row (the reduced
//! axes moved last, no copy) and folded in double precision; the gradients are PyTorch's,
//! including where a norm or deviation is zero (a zero gradient, not NaN).

use super::group_rows::{emit, Groups};
use crate::error::{ensure, Result};
use crate::kernel::element::{real, Real};
use crate::layout::axis::{resolve_axes, IntList};
use crate::{differentiable, kernel, Tensor};

/// The order of a vector norm, as PyTorch's `ord`: `P(p)` is `(sum |x|^p)^(1/p)` for any
/// `p > 0` (`P(1.0)` the sum of magnitudes, `P(2.0)` the Euclidean norm), `Inf` the largest
/// magnitude, `NegInf` the smallest, `Frobenius` the Euclidean norm of the elements over the
/// axes (the same numbers as `P(2.0)`). `NormOrd::from(2.0)` (and `f64::INFINITY`) builds one
/// from a number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NormOrd {
    /// `(sum |x|^p)^(1/p)`, `p > 0`.
    P(f64),
    /// `max |x|`.
    Inf,
    /// `min |x|`.
    NegInf,
    /// `sqrt(sum x^2)` over the axes.
    Frobenius,
}

impl crate::graph::captured::Captured for NormOrd {}

impl From<f64> for NormOrd {
    fn from(p: f64) -> NormOrd {
        if p == f64::INFINITY {
            NormOrd::Inf
        } else if p == f64::NEG_INFINITY {
            NormOrd::NegInf
        } else {
            NormOrd::P(p)
        }
    }
}

/// The vector norm of `a` over each group of `axes` (negative from the back; list every axis
/// for the norm of the whole tensor; an empty list reduces nothing, giving `|a|` for p > 0),
/// as PyTorch's `torch.linalg.vector_norm(a, ord, dim, keepdim)`. Float32 (differentiable) or
/// Float64; `P(p)` with `p` not positive and finite is `Error::Value`.
///
/// Gradient (PyTorch's): p = 2 and Frobenius `g x / y` (0 where `y = 0`); p = 1 `g sign(x)`;
/// ±inf `g sign(x)` split evenly among the elements whose magnitude attains `y`; other p
/// `g sign(x) |x|^(p-1) / y^(p-1)` (0 where `x = 0` or `y = 0`).
///
/// ```
/// use autograd_core::{ops::{norm, NormOrd}, shape, Tensor};
/// let a = Tensor::from_vec(vec![3.0f32, -4.0, 0.0, 1.0], shape![2, 2])?;
/// assert_eq!(norm(&a, 2.0, -1, false)?.values::<f32>()?, [5.0, 1.0]);
/// assert_eq!(norm(&a, 1.0, &[0, 1], false)?.values::<f32>()?, [8.0]);
/// assert_eq!(norm(&a, NormOrd::Inf, 0, true)?.values::<f32>()?, [3.0, 4.0]);
/// assert_eq!(norm(&a, NormOrd::NegInf, -1, false)?.values::<f32>()?, [3.0, 0.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn norm(
    a: &Tensor,
    ord: impl Into<NormOrd>,
    axes: impl IntList,
    keepdim: bool,
) -> Result<Tensor> {
    let ord = ord.into();
    if let NormOrd::P(p) = ord {
        ensure!(
            p > 0.0 && p.is_finite(),
            Value,
            "norm: the order p must be positive and finite (or ±inf), got {p}"
        );
    }
    let axes = resolve_axes("norm", axes, a.layout().rank())?;
    node::norm(a, ord, &axes, keepdim)
}

/// The standard deviation over the top-level `axes` (negative from the back): the square root
/// of [`var_axes`](crate::ops::var_axes) with the same `keepdim` and `correction` (the
/// divisor is `r - correction` for groups of `r`; `r <= correction` gives NaN or infinity, as
/// PyTorch's). Float32 (differentiable) or Float64.
///
/// Gradient: `g (x - mean) / ((r - correction) y)`, and 0 where `y = 0` (PyTorch's rule for a
/// group of equal values).
///
/// ```
/// use autograd_core::{ops::std_axes, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 2.0, 2.0, 2.0], shape![2, 3])?;
/// assert_eq!(std_axes(&a, -1, false, 1)?.values::<f32>()?, [1.0, 0.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn std_axes(
    a: &Tensor,
    axes: impl IntList,
    keepdim: bool,
    correction: usize,
) -> Result<Tensor> {
    let axes = resolve_axes("std_axes", axes, a.layout().rank())?;
    node::std_axes(a, &axes, keepdim, correction)
}

/// The norm of one row in double precision.
fn row_norm<T: Real>(x: &[T], ord: NormOrd) -> f64 {
    let mag = |v: T| -> f64 { v.into().abs() };
    match ord {
        NormOrd::P(p) if (p - 1.0).abs() < f64::EPSILON => x.iter().map(|&v| mag(v)).sum(),
        NormOrd::P(p) if (p - 2.0).abs() < f64::EPSILON => sum_squares(x).sqrt(),
        NormOrd::Frobenius => sum_squares(x).sqrt(),
        NormOrd::P(p) => x.iter().map(|&v| mag(v).powf(p)).sum::<f64>().powf(1.0 / p),
        NormOrd::Inf => x.iter().fold(0.0f64, |m, &v| nan_max(m, mag(v))),
        NormOrd::NegInf => x.iter().fold(f64::INFINITY, |m, &v| {
            if m.is_nan() || mag(v) >= m {
                m
            } else {
                mag(v)
            }
        }),
    }
}

/// The larger of `m` and `v`, NaN if either is.
fn nan_max(m: f64, v: f64) -> f64 {
    if m.is_nan() || v.is_nan() {
        f64::NAN
    } else {
        m.max(v)
    }
}

/// `sum x^2` in double precision.
fn sum_squares<T: Real>(x: &[T]) -> f64 {
    x.iter()
        .map(|&v| {
            let v: f64 = v.into();
            v * v
        })
        .sum()
}

/// The sign of `x` (0 at 0).
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// The gradient of one row's norm `y` with cotangent `g`, written into `out`.
#[allow(clippy::cast_possible_truncation, clippy::float_cmp)]
fn row_norm_gradient(x: &[f32], ord: NormOrd, g: f32, y: f32, out: &mut [f32]) {
    let (g, y) = (f64::from(g), f64::from(y));
    let each = |f: &dyn Fn(f64) -> f64, out: &mut [f32]| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = f(f64::from(v)) as f32;
        }
    };
    match ord {
        NormOrd::P(p) if (p - 1.0).abs() < f64::EPSILON => each(&|v| g * sign(v), out),
        NormOrd::P(p) if (p - 2.0).abs() < f64::EPSILON => {
            each(&|v| if y == 0.0 { 0.0 } else { g * v / y }, out);
        }
        NormOrd::Frobenius => each(&|v| if y == 0.0 { 0.0 } else { g * v / y }, out),
        NormOrd::P(p) => each(
            &|v| {
                if y == 0.0 || v == 0.0 {
                    0.0
                } else {
                    g * sign(v) * (v.abs() / y).powf(p - 1.0)
                }
            },
            out,
        ),
        NormOrd::Inf | NormOrd::NegInf => {
            let ties = x.iter().filter(|&&v| f64::from(v).abs() == y).count();
            let share = g / ties.max(1) as f64;
            each(&|v| if v.abs() == y { share * sign(v) } else { 0.0 }, out);
        }
    }
}

/// The mean and the standard deviation of one row (divisor `r - correction`).
fn row_std<T: Real>(x: &[T], correction: usize) -> (f64, f64) {
    let r = x.len();
    let mean = x.iter().map(|&v| v.into()).sum::<f64>() / r as f64;
    let squares: f64 = x
        .iter()
        .map(|&v| {
            let d = v.into() - mean;
            d * d
        })
        .sum();
    (mean, (squares / r.saturating_sub(correction) as f64).sqrt())
}

/// The forward kernel for one element type: `f(row)` of every group, in the result's order.
fn per_group<T: Real>(
    a: &Tensor,
    axes: &[usize],
    keepdim: bool,
    f: impl Fn(&[T]) -> f64 + Sync,
) -> Result<Tensor> {
    let groups = Groups::of(a, axes)?;
    let values = groups.per_group(|_, x: &[T]| T::from_f64(f(x)))?;
    emit(a, &kernel::reduced_dims(&a.dims(), axes, keepdim)?, &values)
}

mod node {
    use super::{
        differentiable, per_group, real, row_norm, row_norm_gradient, row_std, Groups, NormOrd,
        Result, Tensor,
    };

    /// [`norm`](super::norm) over resolved axes.
    #[differentiable(crate = crate)]
    pub(super) fn norm(a: &Tensor, ord: NormOrd, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        // the hand derivations per order are in `row_norm_gradient` and `norm`'s doc
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            ord: NormOrd,
            axes: &[usize],
            output: &Tensor,
        ) -> Result<Option<Tensor>> {
            let (g, y) = (g.values::<f32>()?, output.values::<f32>()?);
            let groups = Groups::of(a, axes)?;
            Ok(Some(groups.map_groups(
                |k, x: &[f32], out: &mut [f32]| {
                    row_norm_gradient(x, ord, g[k], y[k], out);
                },
            )?))
        }
        real!("norm", a, T => per_group::<T>(a, axes, keepdim, |x| row_norm(x, ord)))
    }

    /// [`std_axes`](super::std_axes) over resolved axes.
    #[differentiable(crate = crate)]
    pub(super) fn std_axes(
        a: &Tensor,
        axes: &[usize],
        keepdim: bool,
        correction: usize,
    ) -> Result<Tensor> {
        // y = sqrt(v), dv/dx = 2 (x - m) / d (see var_axes)  =>  dx = g (x - m) / (d y),
        // and 0 where y = 0 (PyTorch masks the division there)
        #[allow(clippy::cast_possible_truncation, clippy::float_cmp)]
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            axes: &[usize],
            correction: usize,
            output: &Tensor,
        ) -> Result<Option<Tensor>> {
            let (g, y) = (g.values::<f32>()?, output.values::<f32>()?);
            let groups = Groups::of(a, axes)?;
            Ok(Some(groups.map_groups(
                |k, x: &[f32], out: &mut [f32]| {
                    let (mean, _) = row_std(x, correction);
                    let d = x.len().saturating_sub(correction) as f64;
                    let (gk, yk) = (f64::from(g[k]), f64::from(y[k]));
                    for (o, &v) in out.iter_mut().zip(x) {
                        *o = if yk == 0.0 {
                            0.0
                        } else {
                            (gk * (f64::from(v) - mean) / (d * yk)) as f32
                        };
                    }
                },
            )?))
        }
        real!("std_axes", a, T => per_group::<T>(a, axes, keepdim, |x| row_std(x, correction).1))
    }
}

/// Method forms of the norms.
impl Tensor {
    /// [`norm`] of this tensor over `axes`.
    #[track_caller]
    pub fn norm(
        &self,
        ord: impl Into<NormOrd>,
        axes: impl IntList,
        keepdim: bool,
    ) -> Result<Tensor> {
        norm(self, ord, axes, keepdim)
    }

    /// [`std_axes`] of this tensor (`correction = 1` for the unbiased estimate).
    #[track_caller]
    pub fn std_axes(&self, axes: impl IntList, keepdim: bool, correction: usize) -> Result<Tensor> {
        std_axes(self, axes, keepdim, correction)
    }
}

//! Special functions and rounding: `log1p`, `expm1`, `reciprocal`, `erf`, `erfinv`, `sign`,
//! `floor`, `ceil`, `round`, `nan_to_num`, and the Bool tests `isnan`, `isinf`, `isfinite`.
//!
//! Forward kernels take Float32 and Float64 (`sign` also Int32, the rounding ops copy Int32
//! and Int64; the tests every numeric dtype) and compute in double precision, rounding once. Only Float32 results record a node.
//! The rounding ops and `sign` have a zero gradient everywhere, as PyTorch's; the Bool tests
//! record nothing.

use crate::error::Result;
use crate::graph::grad_mode::no_grad;
use crate::kernel::element::{dispatch, real, Num, Real};
use crate::kernel::{map, map_owned};
use crate::{differentiable, Tensor};

/// `2 / sqrt(pi)`, the derivative of `erf` at 0.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// `f(x)` for a Float32 or Float64 element, computed in double precision.
#[inline]
fn in_f64<T: Real>(x: T, f: impl Fn(f64) -> f64) -> T {
    T::from_f64(f(x.into()))
}

/// A Float32 or Float64 element in double precision.
#[inline]
fn to_f64<T: Real>(x: T) -> f64 {
    x.into()
}

/// The zero cotangent of the rounding ops (one for each cotangent when batched).
fn zero_grad(g: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(map_owned(g, |_: f32| 0.0)?))
}

/// `ln(1 + a)` elementwise, accurate for small `|a|` (floating tensors; -inf at -1, NaN below).
#[differentiable(crate = crate, batched)]
pub fn log1p(a: &Tensor) -> Result<Tensor> {
    // d ln(1 + a) = g / (1 + a)
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| g / (1.0 + x),
        )?))
    }
    real!("log1p", a, T => map(a, |x: T| in_f64(x, libm::log1p)))
}

/// `e^a - 1` elementwise, accurate for small `|a|` (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn expm1(a: &Tensor) -> Result<Tensor> {
    // d (e^a - 1) = e^a g = (y + 1) g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| g * (y + 1.0),
        )?))
    }
    real!("expm1", a, T => map(a, |x: T| in_f64(x, libm::expm1)))
}

/// `1 / a` elementwise (floating tensors; IEEE, so `1 / ±0` is ±inf).
#[differentiable(crate = crate, batched)]
pub fn reciprocal(a: &Tensor) -> Result<Tensor> {
    // y = 1 / a: dy = -g / a^2 = -y^2 g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| -g * (y * y),
        )?))
    }
    real!("reciprocal", a, T => { let one = T::from_f32(1.0); map(a, move |x: T| one.over(x)) })
}

/// The error function elementwise (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn erf(a: &Tensor) -> Result<Tensor> {
    // d erf(a) = 2 / sqrt(pi) e^(-a^2) g
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                let x = f64::from(x);
                (f64::from(g) * TWO_OVER_SQRT_PI * (-x * x).exp()) as f32
            },
        )?))
    }
    real!("erf", a, T => map(a, |x: T| x.erf_()))
}

/// The inverse error function elementwise (floating tensors): ±inf at ±1, NaN outside
/// `[-1, 1]`.
#[differentiable(crate = crate, batched)]
pub fn erfinv(a: &Tensor) -> Result<Tensor> {
    // y = erfinv(a): erf'(y) dy = da, so dy = sqrt(pi) / 2 e^(y^2) g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| {
                let y = f64::from(y);
                (f64::from(g) / TWO_OVER_SQRT_PI * (y * y).exp()) as f32
            },
        )?))
    }
    real!("erfinv", a, T => map(a, |x: T| in_f64(x, erfinv_f64)))
}

/// `erfinv(x)` in double precision: Giles' single-precision approximation ("Approximating the
/// erfinv function", 2010) refined by two Newton steps on `erf(y) = x`.
pub(crate) fn erfinv_f64(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x.abs() == 1.0 {
        return x * f64::INFINITY;
    }
    if x == 0.0 {
        return x;
    }
    let w = -((1.0 - x) * (1.0 + x)).ln();
    let mut y = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * x
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * x
    };
    for _ in 0..2 {
        let slope = TWO_OVER_SQRT_PI * (-y * y).exp();
        if slope == 0.0 {
            break;
        }
        y -= (libm::erf(y) - x) / slope;
    }
    y
}

/// The sign of `a` elementwise: -1, 0 or 1 (Float32, Float64, Int32; `sign(±0)` and
/// `sign(NaN)` are 0, as PyTorch's). The gradient is zero.
#[differentiable(crate = crate, batched)]
pub fn sign(a: &Tensor) -> Result<Tensor> {
    // sign is piecewise constant: d sign = 0
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        zero_grad(g)
    }
    if *a.dtype() == crate::DType::Int32 {
        return map(a, |x: i32| x.signum());
    }
    real!("sign", a, T => {
        let (zero, one) = (T::ZERO, T::from_f32(1.0));
        map(a, move |x: T| if x > zero { one } else if x < zero { one.negated() } else { zero })
    })
}

/// A copy of an Int32 or Int64 tensor, what the rounding ops give for one (as PyTorch's);
/// `None` for other dtypes.
fn integer_copy(a: &Tensor) -> Result<Option<Tensor>> {
    Ok(match a.dtype() {
        crate::DType::Int32 => Some(map(a, |x: i32| x)?),
        crate::DType::Int64 => Some(map(a, |x: i64| x)?),
        _ => None,
    })
}

/// `a` rounded down to an integer elementwise (floating tensors; an integer tensor is
/// copied). The gradient is zero.
#[differentiable(crate = crate, batched)]
pub fn floor(a: &Tensor) -> Result<Tensor> {
    // floor is piecewise constant: d floor = 0
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        zero_grad(g)
    }
    if let Some(copy) = integer_copy(a)? {
        return Ok(copy);
    }
    real!("floor", a, T => map(a, |x: T| in_f64(x, f64::floor)))
}

/// `a` rounded up to an integer elementwise (floating tensors; an integer tensor is copied).
/// The gradient is zero.
#[differentiable(crate = crate, batched)]
pub fn ceil(a: &Tensor) -> Result<Tensor> {
    // ceil is piecewise constant: d ceil = 0
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        zero_grad(g)
    }
    if let Some(copy) = integer_copy(a)? {
        return Ok(copy);
    }
    real!("ceil", a, T => map(a, |x: T| in_f64(x, f64::ceil)))
}

/// `a` rounded to the nearest integer elementwise, halves to even as PyTorch's `round`
/// (floating tensors; an integer tensor is copied). The gradient is zero.
#[differentiable(crate = crate, batched)]
pub fn round(a: &Tensor) -> Result<Tensor> {
    // round is piecewise constant: d round = 0
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        zero_grad(g)
    }
    if let Some(copy) = integer_copy(a)? {
        return Ok(copy);
    }
    real!("round", a, T => map(a, |x: T| in_f64(x, f64::round_ties_even)))
}

/// `a` with NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (floating tensors).
/// As in PyTorch, a missing `posinf`/`neginf` is the dtype's largest/lowest finite value. The
/// gradient passes where `a` is finite and is 0 at the replaced positions.
#[track_caller]
pub fn nan_to_num(
    a: &Tensor,
    nan: f64,
    posinf: Option<f64>,
    neginf: Option<f64>,
) -> Result<Tensor> {
    let (max, lowest) = match a.dtype() {
        crate::DType::Float32 => (f64::from(f32::MAX), f64::from(f32::MIN)),
        _ => (f64::MAX, f64::MIN),
    };
    nan_to_num_node::nan_to_num(a, nan, posinf.unwrap_or(max), neginf.unwrap_or(lowest))
}

mod nan_to_num_node {
    use super::{differentiable, map, real, Real, Result, Tensor};

    #[differentiable(crate = crate, batched)]
    pub(super) fn nan_to_num(a: &Tensor, nan: f64, posinf: f64, neginf: f64) -> Result<Tensor> {
        // y = a where a is finite, a constant elsewhere: d y = [a finite] g
        fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
            Ok(Some(crate::batch::zip_with_owned(
                g,
                a,
                |g: f32, x: f32| if x.is_finite() { g } else { 0.0 },
            )?))
        }
        real!("nan_to_num", a, T => {
            let (n, p, m) = (T::from_f64(nan), T::from_f64(posinf), T::from_f64(neginf));
            map(a, move |x: T| {
                let v = super::to_f64(x);
                if v.is_nan() { n } else if v == f64::INFINITY { p } else if v == f64::NEG_INFINITY { m } else { x }
            })
        })
    }
}

/// Bool tensor of `test` applied to each element, with `int` the answer for every Int32/Int64
/// element; no node is recorded.
fn classify(op: &str, a: &Tensor, test: fn(f64) -> bool, int: bool) -> Result<Tensor> {
    let _off = no_grad();
    match a.dtype() {
        crate::DType::Int32 => map(a, move |_: i32| int),
        crate::DType::Int64 => map(a, move |_: i64| int),
        _ => dispatch!(
            a.dtype(), op, T => map(a, move |x: T| test(to_f64(x))),
            [Float32: f32, Float64: f64],
            "{}: takes Float32, Float64, Int32 or Int64 tensors, not {}"
        ),
    }
}

/// Whether each element is NaN, as a Bool tensor (numeric tensors; integers are never NaN).
pub fn isnan(a: &Tensor) -> Result<Tensor> {
    classify("isnan", a, f64::is_nan, false)
}

/// Whether each element is +inf or -inf, as a Bool tensor (numeric tensors).
pub fn isinf(a: &Tensor) -> Result<Tensor> {
    classify("isinf", a, f64::is_infinite, false)
}

/// Whether each element is finite (neither infinite nor NaN), as a Bool tensor (numeric
/// tensors; integers always are).
pub fn isfinite(a: &Tensor) -> Result<Tensor> {
    classify("isfinite", a, f64::is_finite, true)
}

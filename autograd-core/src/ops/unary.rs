//! Unary elementwise ops: `neg`, `abs`, `exp`, `log`, `sqrt`, `rsqrt`, `powf`, `tanh`,
//! `sigmoid`, `relu`, `gelu` (erf form), `gelu_tanh`, `silu`, `sin`, `cos`, `clamp`.
//!
//! Forward kernels are generic over Float32 and Float64 (`neg`, `abs` and `relu` also take
//! Int32, wrapping); domain errors follow IEEE (`log` of a negative is NaN, `sqrt(-1)` NaN,
//! `rsqrt(0)` infinity), never a panic or an `Error`. Only Float32 results record a node. Each
//! VJP's derivation is in a comment beside it; every VJP also serves batched cotangents
//! (`crate::batch::zip_with` reads the saved tensor beside them).

use std::cmp::Ordering;

use crate::error::{ensure, Result};
use crate::kernel::element::{numeric, real, Num, Real};
use crate::kernel::{map, map_owned};
use crate::{differentiable, Tensor};

/// `sqrt(2 / pi)`, the scale inside the tanh approximation of GELU.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the tanh approximation of GELU.
const GELU_CUBIC: f64 = 0.044_715;
/// `1 / sqrt(2 pi)`, the standard normal density at 0.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// `-a` elementwise (Float32, Float64, Int32).
#[differentiable(crate = crate, batched)]
pub fn neg(a: &Tensor) -> Result<Tensor> {
    // d(-a) = -g da
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        Ok(Some(map_owned(g, |g: f32| -g)?))
    }
    numeric!("neg", a, T => map(a, |x: T| x.negated()))
}

/// `|a|` elementwise (Float32, Float64, Int32). The gradient at 0 is 0 (the subgradient
/// PyTorch picks).
#[differentiable(crate = crate, batched)]
pub fn abs(a: &Tensor) -> Result<Tensor> {
    // d|a| = sign(a) g, sign(0) = 0
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                if x > 0.0 {
                    g
                } else if x < 0.0 {
                    -g
                } else {
                    0.0
                }
            },
        )?))
    }
    numeric!("abs", a, T => map(a, |x: T| x.magnitude()))
}

/// `e^a` elementwise (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn exp(a: &Tensor) -> Result<Tensor> {
    // d e^a = e^a g = y g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| g * y,
        )?))
    }
    real!("exp", a, T => map(a, |x: T| x.exp_()))
}

/// The natural logarithm elementwise (floating tensors; NaN for negatives, -inf at 0).
#[differentiable(crate = crate, batched)]
pub fn log(a: &Tensor) -> Result<Tensor> {
    // d ln a = g / a
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| g / x,
        )?))
    }
    real!("log", a, T => map(a, |x: T| x.ln_()))
}

/// The square root elementwise (floating tensors; NaN for negatives).
#[differentiable(crate = crate, batched)]
pub fn sqrt(a: &Tensor) -> Result<Tensor> {
    // d sqrt(a) = g / (2 sqrt(a)) = g / (2 y)
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| g / (2.0 * y),
        )?))
    }
    real!("sqrt", a, T => map(a, |x: T| x.sqrt_()))
}

/// `1 / sqrt(a)` elementwise (floating tensors; infinity at 0, NaN for negatives).
#[differentiable(crate = crate, batched)]
pub fn rsqrt(a: &Tensor) -> Result<Tensor> {
    // y = a^(-1/2): dy = -1/2 a^(-3/2) g = -y^3 / 2 g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| -0.5 * g * y * y * y,
        )?))
    }
    real!("rsqrt", a, T => { let one = T::from_f32(1.0); map(a, move |x: T| one.over(x.sqrt_())) })
}

/// `a^p` elementwise for a constant exponent `p` (floating tensors; IEEE `powf`, so a negative
/// base with a fractional exponent is NaN). The exponents 0.5, -0.5, -1, 2, 3 and -2 are
/// computed as `sqrt`, `1 / sqrt`, `1 / a`, `a a`, `a a a` and `1 / (a a)`, as PyTorch does, so
/// values and gradients agree with PyTorch's at -0 and -inf too (`pow(-inf, 0.5)` is inf,
/// `sqrt(-inf)` NaN). The gradient for `p = 0` is 0.
#[differentiable(crate = crate, batched)]
pub fn powf(a: &Tensor, p: f32) -> Result<Tensor> {
    // d a^p = p a^(p - 1) g
    fn vjp(g: Tensor, a: &Tensor, p: f32) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                if p == 0.0 {
                    0.0
                } else {
                    g * p * power(x, p - 1.0)
                }
            },
        )?))
    }
    real!("powf", a, T => map(a, move |x: T| power(x, p)))
}

/// `x^p` by the formula PyTorch uses for `p` (see [`powf`]).
fn power<T: Real>(x: T, p: f32) -> T {
    let one = T::from_f32(1.0);
    if p == 0.5 {
        x.sqrt_()
    } else if p == -0.5 {
        one.over(x.sqrt_())
    } else if p == -1.0 {
        one.over(x)
    } else if p == 2.0 {
        x.times(x)
    } else if p == 3.0 {
        x.times(x).times(x)
    } else if p == -2.0 {
        one.over(x.times(x))
    } else {
        x.powf_(T::from_f32(p))
    }
}

/// `tanh(a)` elementwise (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn tanh(a: &Tensor) -> Result<Tensor> {
    // d tanh = (1 - y^2) g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| g * (1.0 - y * y),
        )?))
    }
    real!("tanh", a, T => map(a, |x: T| x.tanh_()))
}

/// The logistic function `1 / (1 + e^-a)` elementwise (floating tensors), computed without
/// overflow for large `|a|`.
#[differentiable(crate = crate, batched)]
pub fn sigmoid(a: &Tensor) -> Result<Tensor> {
    // d sigmoid = y (1 - y) g
    fn vjp(g: Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            output,
            |g: f32, y: f32| g * y * (1.0 - y),
        )?))
    }
    real!("sigmoid", a, T => map(a, logistic::<T>))
}

/// `1 / (1 + e^-x)` in the form that cannot overflow: `e^x / (1 + e^x)` for negative `x`.
fn logistic<T: Real>(x: T) -> T {
    let one = T::from_f32(1.0);
    if x >= T::default() {
        one.over(one.plus(x.negated().exp_()))
    } else {
        let e = x.exp_();
        e.over(one.plus(e))
    }
}

/// `max(a, 0)` elementwise (Float32, Float64, Int32; NaN stays NaN). The gradient is 0 where
/// `a <= 0` (so 0 at 0) and passes everywhere else, NaN included, as PyTorch's.
#[differentiable(crate = crate, batched)]
pub fn relu(a: &Tensor) -> Result<Tensor> {
    // d relu = [not a <= 0] g: NaN passes the cotangent, as PyTorch's threshold_backward
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                if x <= 0.0 {
                    0.0
                } else {
                    g
                }
            },
        )?))
    }
    numeric!("relu", a, T => map(a, |x: T| x.max_of(T::default())))
}

/// GELU in its exact form `a Phi(a) = a (1 + erf(a / sqrt 2)) / 2` (floating tensors).
/// `gelu(inf)` is inf, its limit; PyTorch 2.15's CPU kernel gives NaN there.
#[differentiable(crate = crate, batched)]
pub fn gelu(a: &Tensor) -> Result<Tensor> {
    // d (x Phi(x)) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                let x = f64::from(x);
                let cdf =
                    0.5 * (1.0 + crate::kernel::math::erf(x * std::f64::consts::FRAC_1_SQRT_2));
                let pdf = INV_SQRT_2PI * (-0.5 * x * x).exp();
                (f64::from(g) * (cdf + x * pdf)) as f32
            },
        )?))
    }
    real!("gelu", a, T => {
        let (half, one, r) = (T::from_f32(0.5), T::from_f32(1.0), T::from_f64(std::f64::consts::FRAC_1_SQRT_2));
        map(a, move |x: T| half.times(x).times(one.plus(x.times(r).erf_())))
    })
}

/// GELU in its tanh approximation `a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) / 2` (floating
/// tensors), as GPT-2 and PyTorch's `approximate="tanh"`.
#[differentiable(crate = crate, batched)]
pub fn gelu_tanh(a: &Tensor) -> Result<Tensor> {
    // u = c (x + k x^3), t = tanh u: d (x (1 + t) / 2) = (1 + t) / 2 + x (1 - t^2) c (1 + 3k x^2) / 2
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let (c, k) = (SQRT_2_OVER_PI as f32, GELU_CUBIC as f32);
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            move |g: f32, x: f32| {
                let t = crate::kernel::math::tanh_f32(c * (x + k * x * x * x));
                let du = c * (1.0 + 3.0 * k * x * x);
                g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
            },
        )?))
    }
    real!("gelu_tanh", a, T => {
        let (half, one, c, k) = (T::from_f32(0.5), T::from_f32(1.0), T::from_f64(SQRT_2_OVER_PI), T::from_f64(GELU_CUBIC));
        map(a, move |x: T| {
            let u = c.times(x.plus(k.times(x).times(x).times(x)));
            half.times(x).times(one.plus(u.tanh_()))
        })
    })
}

/// SiLU (swish) `a sigmoid(a)` elementwise (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn silu(a: &Tensor) -> Result<Tensor> {
    // s = sigmoid x: d (x s) = s + x s (1 - s) = s (1 + x (1 - s))
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                let s = logistic(x);
                g * s * (1.0 + x * (1.0 - s))
            },
        )?))
    }
    real!("silu", a, T => map(a, |x: T| x.times(logistic(x))))
}

/// `sin(a)` elementwise (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn sin(a: &Tensor) -> Result<Tensor> {
    // d sin = cos(a) g
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| g * x.cos(),
        )?))
    }
    real!("sin", a, T => map(a, |x: T| x.sin_()))
}

/// `cos(a)` elementwise (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn cos(a: &Tensor) -> Result<Tensor> {
    // d cos = -sin(a) g
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| -g * x.sin(),
        )?))
    }
    real!("cos", a, T => map(a, |x: T| x.cos_()))
}

/// `a` limited to `[min, max]` elementwise (floating tensors; NaN stays NaN). The gradient
/// passes strictly inside, where `min < a < max`, and is 0 at the bounds, outside them and at
/// NaN, as PyTorch 2.15 gives it (so `clamp(x, 0, 0)` passes none).
/// `min > max` or a NaN bound is `Error::Value`.
#[track_caller]
pub fn clamp(a: &Tensor, min: f32, max: f32) -> Result<Tensor> {
    ensure!(
        matches!(
            min.partial_cmp(&max),
            Some(Ordering::Less | Ordering::Equal)
        ),
        Value,
        "clamp: needs min <= max, got min {min} and max {max}"
    );
    clamp_node::clamp(a, min, max)
}

mod clamp_node {
    use super::{differentiable, map, real, Real, Result, Tensor};

    #[differentiable(crate = crate, batched)]
    pub(super) fn clamp(a: &Tensor, min: f32, max: f32) -> Result<Tensor> {
        // d clamp = [min < a < max] g
        fn vjp(g: Tensor, a: &Tensor, min: f32, max: f32) -> Result<Option<Tensor>> {
            Ok(Some(crate::batch::zip_with_owned(
                g,
                a,
                move |g: f32, x: f32| {
                    if min < x && x < max {
                        g
                    } else {
                        0.0
                    }
                },
            )?))
        }
        real!("clamp", a, T => {
            let (lo, hi) = (T::from_f32(min), T::from_f32(max));
            map(a, move |x: T| if x < lo { lo } else if x > hi { hi } else { x })
        })
    }
}

//! Activation functions with PyTorch's parameters: `softplus(beta, threshold)`,
//! `leaky_relu(negative_slope)`, `elu(alpha)`, `selu`, `hardtanh(min, max)`, `hardswish`,
//! `mish`.
//!
//! Forward kernels take Float32 and Float64 and compute in double precision, rounding once;
//! only Float32 results record a node. Gradients at the kinks are PyTorch 2.15's (each VJP
//! says which side a kink takes). A bad parameter is `Error::Value`, checked before any node.

use std::cmp::Ordering;

use crate::error::{ensure, Result};
use crate::kernel::element::{real, Num, Real};
use crate::kernel::map;
use crate::{differentiable, Tensor};

/// SELU's scale `lambda` (Klambauer et al. 2017, PyTorch's constant).
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
/// SELU's `alpha`.
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;

/// `f(x)` for a Float32 or Float64 element, computed in double precision.
#[inline]
fn in_f64<T: Real>(x: T, f: impl Fn(f64) -> f64) -> T {
    T::from_f64(f(x.into()))
}

/// `ln(1 + e^(beta a)) / beta` elementwise, and `a` itself where `beta a > threshold` (PyTorch's
/// `softplus`; floating tensors). `beta` must be finite and non-zero and `threshold` not NaN,
/// else `Error::Value`.
#[track_caller]
pub fn softplus(a: &Tensor, beta: f32, threshold: f32) -> Result<Tensor> {
    ensure!(
        beta.is_finite() && beta != 0.0 && !threshold.is_nan(),
        Value,
        "softplus: needs a finite non-zero beta and a threshold that is not NaN, got beta \
         {beta} and threshold {threshold}"
    );
    node::softplus(a, beta, threshold)
}

/// `a` where `a > 0`, `negative_slope * a` elsewhere (floating tensors). A NaN slope is
/// `Error::Value`.
#[track_caller]
pub fn leaky_relu(a: &Tensor, negative_slope: f32) -> Result<Tensor> {
    ensure!(
        !negative_slope.is_nan(),
        Value,
        "leaky_relu: negative_slope is NaN"
    );
    node::leaky_relu(a, negative_slope)
}

/// `a` where `a > 0`, `alpha (e^a - 1)` elsewhere (floating tensors). A NaN or infinite alpha
/// is `Error::Value`.
#[track_caller]
pub fn elu(a: &Tensor, alpha: f32) -> Result<Tensor> {
    ensure!(
        alpha.is_finite(),
        Value,
        "elu: needs a finite alpha, got {alpha}"
    );
    node::elu(a, alpha)
}

/// `a` limited to `[min_val, max_val]` (floating tensors). Unlike [`clamp`](super::clamp) the
/// gradient passes at NaN (PyTorch's `hardtanh_backward` zeroes only `a <= min` and
/// `a >= max`). `min_val > max_val` or a NaN bound is `Error::Value`.
#[track_caller]
pub fn hardtanh(a: &Tensor, min_val: f32, max_val: f32) -> Result<Tensor> {
    ensure!(
        matches!(
            min_val.partial_cmp(&max_val),
            Some(Ordering::Less | Ordering::Equal)
        ),
        Value,
        "hardtanh: needs min_val <= max_val, got {min_val} and {max_val}"
    );
    node::hardtanh(a, min_val, max_val)
}

/// The recorded nodes behind the ops that check their parameters first.
mod node {
    use super::{differentiable, in_f64, map, real, Num, Real, Result, Tensor};

    #[differentiable(crate = crate, batched)]
    pub(super) fn softplus(a: &Tensor, beta: f32, threshold: f32) -> Result<Tensor> {
        // d ln(1 + e^(b a)) / b = sigmoid(b a) g; the identity's g above the threshold
        fn vjp(g: Tensor, a: &Tensor, beta: f32, threshold: f32) -> Result<Option<Tensor>> {
            Ok(Some(crate::batch::zip_with_owned(
                g,
                a,
                move |g: f32, x: f32| {
                    let z = f64::from(x) * f64::from(beta);
                    if z > f64::from(threshold) {
                        g
                    } else {
                        (f64::from(g) / (1.0 + (-z).exp())) as f32
                    }
                },
            )?))
        }
        real!("softplus", a, T => {
            let (b, t) = (f64::from(beta), f64::from(threshold));
            map(a, move |x: T| in_f64(x, |x| {
                let z = x * b;
                if z > t { x } else { libm::log1p(z.exp()) / b }
            }))
        })
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn leaky_relu(a: &Tensor, negative_slope: f32) -> Result<Tensor> {
        // d leaky_relu = g where a > 0, slope g elsewhere (so slope g at 0)
        fn vjp(g: Tensor, a: &Tensor, negative_slope: f32) -> Result<Option<Tensor>> {
            Ok(Some(crate::batch::zip_with_owned(
                g,
                a,
                move |g: f32, x: f32| if x > 0.0 { g } else { g * negative_slope },
            )?))
        }
        real!("leaky_relu", a, T => {
            let (zero, s) = (T::ZERO, T::from_f32(negative_slope));
            map(a, move |x: T| if x > zero { x } else { x.times(s) })
        })
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn elu(a: &Tensor, alpha: f32) -> Result<Tensor> {
        // d elu = alpha e^a g where a <= 0 (so alpha g at 0), g elsewhere (NaN included)
        fn vjp(g: Tensor, a: &Tensor, alpha: f32) -> Result<Option<Tensor>> {
            Ok(Some(crate::batch::zip_with_owned(
                g,
                a,
                move |g: f32, x: f32| {
                    if x <= 0.0 {
                        (f64::from(g) * f64::from(alpha) * f64::from(x).exp()) as f32
                    } else {
                        g
                    }
                },
            )?))
        }
        real!("elu", a, T => {
            let al = f64::from(alpha);
            map(a, move |x: T| in_f64(x, |x| if x > 0.0 { x } else { al * libm::expm1(x) }))
        })
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn hardtanh(a: &Tensor, min_val: f32, max_val: f32) -> Result<Tensor> {
        // d hardtanh = g unless a <= min or a >= max (so NaN passes g, as PyTorch's)
        fn vjp(g: Tensor, a: &Tensor, min_val: f32, max_val: f32) -> Result<Option<Tensor>> {
            Ok(Some(crate::batch::zip_with_owned(
                g,
                a,
                move |g: f32, x: f32| {
                    if x <= min_val || x >= max_val {
                        0.0
                    } else {
                        g
                    }
                },
            )?))
        }
        real!("hardtanh", a, T => {
            let (lo, hi) = (T::from_f32(min_val), T::from_f32(max_val));
            map(a, move |x: T| if x < lo { lo } else if x > hi { hi } else { x })
        })
    }
}

/// SELU `scale (a if a > 0 else alpha (e^a - 1))` with PyTorch's constants (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn selu(a: &Tensor) -> Result<Tensor> {
    // d selu = scale alpha e^a g where a <= 0, scale g elsewhere (NaN included)
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                let d = if x <= 0.0 {
                    SELU_SCALE * SELU_ALPHA * f64::from(x).exp()
                } else {
                    SELU_SCALE
                };
                (f64::from(g) * d) as f32
            },
        )?))
    }
    real!("selu", a, T => map(a, |x: T| in_f64(x, |x| {
        SELU_SCALE * if x > 0.0 { x } else { SELU_ALPHA * libm::expm1(x) }
    })))
}

/// Hard swish `a relu6(a + 3) / 6` (floating tensors), as MobileNetV3 and PyTorch.
#[differentiable(crate = crate, batched)]
pub fn hardswish(a: &Tensor) -> Result<Tensor> {
    // d hardswish = 0 for a <= -3, (2a + 3) / 6 g for -3 < a < 3, g from 3 (PyTorch's sides)
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                if x <= -3.0 {
                    0.0
                } else if x < 3.0 {
                    g * (x / 3.0 + 0.5)
                } else {
                    g
                }
            },
        )?))
    }
    real!("hardswish", a, T => map(a, |x: T| in_f64(x, |x| x * (x + 3.0).clamp(0.0, 6.0) / 6.0)))
}

/// Mish `a tanh(softplus(a))` (floating tensors).
#[differentiable(crate = crate, batched)]
pub fn mish(a: &Tensor) -> Result<Tensor> {
    // t = tanh(softplus a): d (a t) = t + a (1 - t^2) sigmoid(a)
    fn vjp(g: Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(crate::batch::zip_with_owned(
            g,
            a,
            |g: f32, x: f32| {
                let x = f64::from(x);
                let t = softplus_f64(x).tanh();
                let s = 1.0 / (1.0 + (-x).exp());
                (f64::from(g) * (t + x * (1.0 - t * t) * s)) as f32
            },
        )?))
    }
    real!("mish", a, T => map(a, |x: T| in_f64(x, |x| x * softplus_f64(x).tanh())))
}

/// `ln(1 + e^x)` without overflow for large `x`.
fn softplus_f64(x: f64) -> f64 {
    x.max(0.0) + libm::log1p((-x.abs()).exp())
}

//! Pointwise ops of several tensors with numpy broadcasting: `atan2`, `pow` with a tensor
//! exponent, `lerp` with a constant or a tensor weight, `addcmul` and `addcdiv`.
//!
//! As in [`elementwise`](super::elementwise), each public op checks dtypes (one floating dtype
//! for all operands, else `Error::Type`), broadcasts through the differentiable
//! [`broadcast_to`](super::broadcast_to) and runs a same-shape node from `node`, so a broadcast
//! operand's gradient is summed by `broadcast_to`'s VJP. Only Float32 results record a node.

use super::broadcast::{broadcast_pair, broadcast_shapes, expand, operands};
use super::elementwise::same_dtype;
use crate::error::Result;
use crate::Tensor;

/// The angle of the point `(b, a)` elementwise, `atan(a / b)` in the right quadrant
/// (PyTorch's `atan2(input, other)`); floating operands of one dtype, numpy broadcasting.
#[track_caller]
pub fn atan2(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("atan2", a, b)?;
    let (a, b) = operands("atan2", a, b)?;
    node::atan2(&a, &b)
}

/// `a^b` elementwise with a tensor exponent; operands of one dtype, numpy broadcasting.
/// Gradients follow PyTorch: `d/da` is 0 where `b == 0`, `d/db` is 0 where `a == 0` and
/// `b >= 0` (instead of `0 * -inf`); a negative base with a fractional exponent is NaN.
/// Int32 and Int64 operands give an integer power as PyTorch's: wrapping on overflow, and for
/// a negative exponent 1 for base 1, ±1 for base -1, 0 otherwise.
///
/// ```
/// use autograd_core::ops::pow;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![2i32, -3, 7, -1], shape![4])?;
/// let b = Tensor::from_vec(vec![3i32, 2, -1, -3], shape![4])?;
/// assert_eq!(pow(&a, &b)?.values::<i32>()?, [8, 9, 0, -1]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn pow(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("pow", a, b)?;
    let (a, b) = operands("pow", a, b)?;
    match a.dtype() {
        crate::DType::Int32 => crate::kernel::zip(&a, &b, |x: i32, e: i32| {
            integer_power(i64::from(x), i64::from(e), 32) as i32
        }),
        crate::DType::Int64 => crate::kernel::zip(&a, &b, |x: i64, e: i64| integer_power(x, e, 64)),
        _ => node::pow(&a, &b),
    }
}

/// `x^e` for integers of `bits` bits (32 or 64, `x` sign-extended to i64): wrapping on
/// overflow by squaring in that width, and PyTorch's values for a negative exponent.
fn integer_power(x: i64, e: i64, bits: u32) -> i64 {
    if e < 0 {
        return match x {
            1 => 1,
            -1 if e % 2 != 0 => -1,
            -1 => 1,
            _ => 0,
        };
    }
    // wrap to the operand width after every product
    let wrap = |v: i64| if bits == 32 { i64::from(v as i32) } else { v };
    let (mut acc, mut base, mut e) = (1i64, x, e as u64);
    while e > 0 {
        if e & 1 == 1 {
            acc = wrap(acc.wrapping_mul(base));
        }
        base = wrap(base.wrapping_mul(base));
        e >>= 1;
    }
    acc
}

/// `a + weight (end - a)` elementwise for a constant `weight`, in PyTorch's form that is exact
/// at both ends; floating operands of one dtype, numpy broadcasting.
#[track_caller]
pub fn lerp(a: &Tensor, end: &Tensor, weight: f32) -> Result<Tensor> {
    same_dtype("lerp", a, end)?;
    let (a, end) = operands("lerp", a, end)?;
    node::lerp(&a, &end, weight)
}

/// `a + weight (end - a)` elementwise with a tensor `weight` (PyTorch's `lerp(input, end,
/// weight)` with a tensor), exact at both ends like [`lerp`]; floating operands of one dtype,
/// all three broadcast to one shape (numpy). Every operand gets a gradient:
/// `(1 - weight) g`, `weight g` and `(end - a) g`.
///
/// ```
/// use autograd_core::ops::lerp_tensor;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32, 10.0], shape![2])?;
/// let end = Tensor::from_vec(vec![1.0f32, 20.0], shape![2])?;
/// let w = Tensor::from_vec(vec![0.25f32, 1.0], shape![2])?;
/// assert_eq!(lerp_tensor(&a, &end, &w)?.values::<f32>()?, [0.25, 20.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn lerp_tensor(a: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
    let (a, end, weight) = three("lerp", a, end, weight)?;
    node::lerp_tensor(&a, &end, &weight)
}

/// `input + value t1 t2` elementwise; floating operands of one dtype, all three broadcast to
/// one shape (numpy).
#[track_caller]
pub fn addcmul(input: &Tensor, t1: &Tensor, t2: &Tensor, value: f32) -> Result<Tensor> {
    let (input, t1, t2) = three("addcmul", input, t1, t2)?;
    node::addcmul(&input, &t1, &t2, value)
}

/// `input + value t1 / t2` elementwise; floating operands of one dtype, all three broadcast to
/// one shape (numpy). Division by zero follows IEEE.
#[track_caller]
pub fn addcdiv(input: &Tensor, t1: &Tensor, t2: &Tensor, value: f32) -> Result<Tensor> {
    let (input, t1, t2) = three("addcdiv", input, t1, t2)?;
    node::addcdiv(&input, &t1, &t2, value)
}

/// Three operands of one dtype broadcast (differentiably) to one shape and one shape tree.
#[track_caller]
fn three(op: &str, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    same_dtype(op, a, b)?;
    same_dtype(op, a, c)?;
    let dims = broadcast_shapes(&a.dims(), &b.dims())
        .and_then(|d| broadcast_shapes(&d, &c.dims()))
        .map_err(|e| e.context(op))?;
    let (b, c) = broadcast_pair(&expand(b, &dims)?, &expand(c, &dims)?)?;
    let a = expand(a, &dims)?;
    let a = if a.shape() == b.shape() {
        a
    } else {
        super::view::reshape_to_shape(&a, b.shape())?
    };
    Ok((a, b, c))
}

/// The recorded same-shape nodes behind the public ops (named like them).
mod node {
    use crate::error::Result;
    use crate::kernel::element::{real, Num, Real};
    use crate::kernel::zip;
    use crate::{differentiable, Tensor};

    /// `f(x, y)` for Float32 or Float64 elements, computed in double precision.
    #[inline]
    fn in_f64<T: Real>(x: T, y: T, f: impl Fn(f64, f64) -> f64) -> T {
        T::from_f64(f(x.into(), y.into()))
    }

    /// `g f(a, b)` for one cotangent or K batched ones: the factor is computed once from the
    /// two saved operands and read beside `g`.
    fn scaled(
        g: &Tensor,
        a: &Tensor,
        b: &Tensor,
        f: impl Fn(f32, f32) -> f32 + Sync,
    ) -> Result<Tensor> {
        let factor = zip(a, b, f)?;
        crate::batch::zip_with(g, &factor, |g: f32, d: f32| g * d)
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn atan2(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d atan2(a, b) = b / (a^2 + b^2) g da - a / (a^2 + b^2) g db
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            b: &Tensor,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let r = |x: f32, y: f32| {
                let (x, y) = (f64::from(x), f64::from(y));
                1.0 / (x * x + y * y)
            };
            let ga = if needs.input(0) {
                Some(scaled(g, a, b, move |x, y| {
                    (f64::from(y) * r(x, y)) as f32
                })?)
            } else {
                None
            };
            let gb = if needs.input(1) {
                Some(scaled(g, a, b, move |x, y| {
                    (-f64::from(x) * r(x, y)) as f32
                })?)
            } else {
                None
            };
            Ok((ga, gb))
        }
        real!("atan2", a, T => zip(a, b, |x: T, y: T| in_f64(x, y, libm::atan2)))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn pow(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d a^b = b a^(b - 1) g da (0 where b = 0) + a^b ln(a) g db (0 where a = 0, b >= 0)
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            b: &Tensor,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let ga = if needs.input(0) {
                Some(scaled(g, a, b, |x: f32, e: f32| {
                    if e == 0.0 {
                        0.0
                    } else {
                        e * x.powf(e - 1.0)
                    }
                })?)
            } else {
                None
            };
            let gb = if needs.input(1) {
                Some(scaled(g, a, b, |x: f32, e: f32| {
                    if x == 0.0 && e >= 0.0 {
                        0.0
                    } else {
                        x.powf(e) * x.ln()
                    }
                })?)
            } else {
                None
            };
            Ok((ga, gb))
        }
        real!("pow", a, T => zip(a, b, |x: T, e: T| x.powf_(e)))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn lerp(a: &Tensor, end: &Tensor, weight: f32) -> Result<Tensor> {
        // d (a + w (e - a)) = (1 - w) g da + w g de
        fn vjp(
            g: Tensor,
            weight: f32,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let ge = if needs.input(1) {
                Some(crate::kernel::map(&g, move |g: f32| g * weight)?)
            } else {
                None
            };
            let ga = if needs.input(0) {
                Some(crate::kernel::map_owned(g, move |g: f32| {
                    g * (1.0 - weight)
                })?)
            } else {
                None
            };
            Ok((ga, ge))
        }
        real!("lerp", a, T => {
            let (w, one) = (T::from_f32(weight), T::from_f32(1.0));
            let low = weight.abs() < 0.5;
            zip(a, end, move |x: T, e: T| {
                if low { x.plus(w.times(e.minus(x))) } else { e.minus(e.minus(x).times(one.minus(w))) }
            })
        })
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn lerp_tensor(a: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        // d (a + w (e - a)) = (1 - w) g da + w g de + (e - a) g dw
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            end: &Tensor,
            weight: &Tensor,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
            let ga = if needs.input(0) {
                Some(crate::batch::zip_with(g, weight, |g: f32, w: f32| {
                    g * (1.0 - w)
                })?)
            } else {
                None
            };
            let ge = if needs.input(1) {
                Some(crate::batch::zip_with(g, weight, |g: f32, w: f32| g * w)?)
            } else {
                None
            };
            let gw = if needs.input(2) {
                Some(scaled(g, end, a, |e, x| e - x)?)
            } else {
                None
            };
            Ok((ga, ge, gw))
        }
        real!("lerp", a, T => {
            // from the nearer end, as PyTorch: exact at w = 0 and w = 1
            let one = T::from_f32(1.0);
            let (xs, es, ws) = (a.values::<T>()?, end.values::<T>()?, weight.values::<T>()?);
            let mut out = crate::storage::allocation::with_capacity(xs.len())?;
            out.extend(xs.iter().zip(&es).zip(&ws).map(|((&x, &e), &w)| {
                let d = e.minus(x);
                if Into::<f64>::into(w).abs() < 0.5 { x.plus(w.times(d)) } else { e.minus(d.times(one.minus(w))) }
            }));
            Tensor::from_vec(out, a.shape().clone())
        })
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn addcmul(input: &Tensor, t1: &Tensor, t2: &Tensor, value: f32) -> Result<Tensor> {
        // d (i + v t1 t2) = g di + v t2 g dt1 + v t1 g dt2
        fn vjp(
            g: Tensor,
            t1: &Tensor,
            t2: &Tensor,
            value: f32,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
            let g1 = if needs.input(1) {
                Some(crate::batch::zip_with(&g, t2, move |g: f32, y: f32| {
                    g * value * y
                })?)
            } else {
                None
            };
            let g2 = if needs.input(2) {
                Some(crate::batch::zip_with(&g, t1, move |g: f32, x: f32| {
                    g * value * x
                })?)
            } else {
                None
            };
            Ok((needs.input(0).then_some(g), g1, g2))
        }
        real!("addcmul", input, T => {
            let v = T::from_f32(value);
            let prod = zip(t1, t2, move |x: T, y: T| v.times(x).times(y))?;
            zip(input, &prod, |i: T, p: T| i.plus(p))
        })
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn addcdiv(input: &Tensor, t1: &Tensor, t2: &Tensor, value: f32) -> Result<Tensor> {
        // d (i + v t1 / t2) = g di + v / t2 g dt1 - v t1 / t2^2 g dt2
        fn vjp(
            g: Tensor,
            t1: &Tensor,
            t2: &Tensor,
            value: f32,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
            let g1 = if needs.input(1) {
                Some(crate::batch::zip_with(&g, t2, move |g: f32, y: f32| {
                    g * value / y
                })?)
            } else {
                None
            };
            let g2 = if needs.input(2) {
                Some(scaled(&g, t1, t2, move |x: f32, y: f32| {
                    -value * x / (y * y)
                })?)
            } else {
                None
            };
            Ok((needs.input(0).then_some(g), g1, g2))
        }
        real!("addcdiv", input, T => {
            let v = T::from_f32(value);
            let quot = zip(t1, t2, move |x: T, y: T| v.times(x).over(y))?;
            zip(input, &quot, |i: T, q: T| i.plus(q))
        })
    }
}

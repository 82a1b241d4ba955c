//! Binary elementwise arithmetic: `add`, `sub`, `mul`, `div`, `maximum`, `minimum` with numpy
//! broadcasting, and the forms with an `f32` constant on either side.
//!
//! Each public op checks dtypes, brings its operands to one shape with the differentiable
//! [`broadcast_to`](super::broadcast_to) and then runs a same-shape node from the private
//! `node` module, so the node keeps the op's name and a broadcast operand's gradient is summed
//! by `broadcast_to`'s VJP. Kernels are generic over Float32, Float64 and Int32 (integers wrap;
//! `div` and the constant forms take floats only); only Float32 results record a node.

use super::broadcast::operands;
use crate::error::{ensure, Result};
use crate::kernel::element::{numeric, real, Num, Real};
use crate::kernel::{map, map_owned, zip, zip_owned};
use crate::Tensor;

/// Both operands must have one dtype: no implicit promotion, so `Error::Type` names both.
pub(crate) fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    ensure!(
        a.dtype() == b.dtype(),
        Type,
        "{op}: operands have dtypes {} and {} (cast one with to_dtype)",
        a.dtype(),
        b.dtype()
    );
    Ok(())
}

/// `a + b` elementwise, numpy broadcasting; operands of one dtype (Float32, Float64, Int32).
#[track_caller]
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("add", a, b)?;
    let (a, b) = operands("add", a, b)?;
    node::add(&a, &b)
}

/// `a - b` elementwise, numpy broadcasting; operands of one dtype (Float32, Float64, Int32).
#[track_caller]
pub fn sub(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("sub", a, b)?;
    let (a, b) = operands("sub", a, b)?;
    node::sub(&a, &b)
}

/// `a * b` elementwise, numpy broadcasting; operands of one dtype (Float32, Float64, Int32).
#[track_caller]
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("mul", a, b)?;
    let (a, b) = operands("mul", a, b)?;
    node::mul(&a, &b)
}

/// `a / b` elementwise, numpy broadcasting; floating operands of one dtype (IEEE: `x / 0` is
/// an infinity or NaN, never an error).
#[track_caller]
pub fn div(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("div", a, b)?;
    let (a, b) = operands("div", a, b)?;
    node::div(&a, &b)
}

/// The larger of `a` and `b` per position (NaN if either is NaN), numpy broadcasting. On a tie
/// the gradient is split evenly between the two, and at a NaN both get all of it, as PyTorch
/// does.
#[track_caller]
pub fn maximum(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("maximum", a, b)?;
    let (a, b) = operands("maximum", a, b)?;
    node::maximum(&a, &b)
}

/// The smaller of `a` and `b` per position (NaN if either is NaN), numpy broadcasting. On a tie
/// the gradient is split evenly between the two, and at a NaN both get all of it, as PyTorch
/// does.
#[track_caller]
pub fn minimum(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    same_dtype("minimum", a, b)?;
    let (a, b) = operands("minimum", a, b)?;
    node::minimum(&a, &b)
}

/// The recorded same-shape nodes behind the public binary ops (named like them).
mod node {
    use super::{map, map_owned, numeric, real, zip, Num, Real, Result, Tensor};
    use crate::differentiable;

    #[differentiable(crate = crate, batched)]
    pub(super) fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d(a + b) = g da + g db
        fn vjp(g: Tensor) -> (Option<Tensor>, Option<Tensor>) {
            (Some(g.clone()), Some(g))
        }
        numeric!("add", a, T => zip(a, b, |x: T, y: T| x.plus(y)))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn sub(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d(a - b) = g da - g db
        fn vjp(g: Tensor, needs: &NeedsGrad) -> Result<(Option<Tensor>, Option<Tensor>)> {
            Ok(match (needs.input(0), needs.input(1)) {
                (true, true) => {
                    let gb = map(&g, |g: f32| -g)?;
                    (Some(g), Some(gb))
                }
                (false, true) => (None, Some(map_owned(g, |g: f32| -g)?)),
                (_, false) => (Some(g), None),
            })
        }
        numeric!("sub", a, T => zip(a, b, |x: T, y: T| x.minus(y)))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d(a b) = g b da + g a db
        fn vjp(
            g: Tensor,
            a: &Tensor,
            b: &Tensor,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let gb = if needs.input(1) {
                Some(crate::batch::zip_with(&g, a, |g: f32, x: f32| g * x)?)
            } else {
                None
            };
            let ga = if needs.input(0) {
                Some(crate::batch::zip_with_owned(g, b, |g: f32, y: f32| g * y)?)
            } else {
                None
            };
            Ok((ga, gb))
        }
        numeric!("mul", a, T => zip(a, b, |x: T, y: T| x.times(y)))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn div(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d(a / b) = g / b da - g a / b^2 db = g / b da - (g / b) y db, with y = a / b
        fn vjp(
            g: Tensor,
            b: &Tensor,
            output: &Tensor,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let ga = crate::batch::zip_with_owned(g, b, |g: f32, y: f32| g / y)?;
            let gb = if needs.input(1) {
                Some(crate::batch::zip_with(&ga, output, |q: f32, y: f32| {
                    -q * y
                })?)
            } else {
                None
            };
            Ok((needs.input(0).then_some(ga), gb))
        }
        real!("div", a, T => zip(a, b, |x: T, y: T| x.over(y)))
    }

    /// The cotangents of a max/min's operands: each gets all of `g` unless it lost (`loses`
    /// of it against the other), half on a tie. Neither loses a comparison with NaN, so at a
    /// NaN both get all of `g`, as PyTorch's rule gives.
    fn winner_shares(
        g: Tensor,
        a: &Tensor,
        b: &Tensor,
        loses: fn(f32, f32) -> bool,
    ) -> Result<(Tensor, Tensor)> {
        let share = move |x: f32, y: f32| {
            if x == y {
                0.5f32
            } else if loses(x, y) {
                0.0
            } else {
                1.0
            }
        };
        let ga =
            crate::batch::zip_with(&g, &crate::kernel::zip(a, b, share)?, |g: f32, s: f32| {
                g * s
            })?;
        let b_share = crate::kernel::zip(a, b, move |x: f32, y: f32| share(y, x))?;
        let gb = crate::batch::zip_with_owned(g, &b_share, |g: f32, s: f32| g * s)?;
        Ok((ga, gb))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn maximum(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d max(a, b) = g [not a < b] da + g [not b < a] db, g/2 to each on a tie
        fn vjp(g: Tensor, a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let (ga, gb) = winner_shares(g, a, b, |x, y| x < y)?;
            Ok((Some(ga), Some(gb)))
        }
        numeric!("maximum", a, T => zip(a, b, |x: T, y: T| x.max_of(y)))
    }

    #[differentiable(crate = crate, batched)]
    pub(super) fn minimum(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d min(a, b) = g [not a > b] da + g [not b > a] db, g/2 to each on a tie
        fn vjp(g: Tensor, a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let (ga, gb) = winner_shares(g, a, b, |x, y| x > y)?;
            Ok((Some(ga), Some(gb)))
        }
        numeric!("minimum", a, T => zip(a, b, |x: T, y: T| x.min_of(y)))
    }
}

/// `a * c` for a constant `c` (floating tensors).
// the VJP maps the cotangent position by position, so it serves batched cotangents as is
#[crate::differentiable(crate = crate, batched)]
pub fn mul_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(c a) = c g da
    fn vjp(g: Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(map_owned(g, move |x: f32| x * c)?))
    }
    real!("mul_scalar", a, T => { let c = T::from_f32(c); map(a, move |x: T| x * c) })
}

/// `a + c` for a constant `c` (floating tensors).
// the VJP maps the cotangent position by position, so it serves batched cotangents as is
#[crate::differentiable(crate = crate, batched)]
pub fn add_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(a + c) = g da
    fn vjp(g: Tensor) -> Option<Tensor> {
        Some(g)
    }
    real!("add_scalar", a, T => { let c = T::from_f32(c); map(a, move |x: T| x + c) })
}

/// `a - c` for a constant `c` (floating tensors).
// the VJP maps the cotangent position by position, so it serves batched cotangents as is
#[crate::differentiable(crate = crate, batched)]
pub fn sub_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(a - c) = g da
    fn vjp(g: Tensor) -> Option<Tensor> {
        Some(g)
    }
    real!("sub_scalar", a, T => { let c = T::from_f32(c); map(a, move |x: T| x - c) })
}

/// `c - a` for a constant `c` (floating tensors): the operator `c - &a`.
#[crate::differentiable(crate = crate)]
pub fn rsub_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(c - a) = -g da
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        Ok(Some(map_owned(g, |g: f32| -g)?))
    }
    real!("rsub_scalar", a, T => { let c = T::from_f32(c); map(a, move |x: T| c - x) })
}

/// `a / c` for a constant `c` (floating tensors; IEEE for `c = 0`).
#[crate::differentiable(crate = crate)]
pub fn div_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(a / c) = g / c da
    fn vjp(g: Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(map_owned(g, move |g: f32| g / c)?))
    }
    real!("div_scalar", a, T => { let c = T::from_f32(c); map(a, move |x: T| x / c) })
}

/// `c / a` for a constant `c` (floating tensors): the operator `c / &a`.
#[crate::differentiable(crate = crate)]
pub fn rdiv_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // y = c / a: dy = -c / a^2 g = -(y / a) g
    fn vjp(g: Tensor, a: &Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        let q = zip(output, a, |y: f32, x: f32| y / x)?;
        Ok(Some(zip_owned(g, &q, |g: f32, q: f32| -g * q)?))
    }
    real!("rdiv_scalar", a, T => { let c = T::from_f32(c); map(a, move |x: T| c / x) })
}

//! Elementwise arithmetic: `a + b`, `a * b`, `a * c`, `a + c`.

use crate::kernel::{map, zip};
use crate::{differentiable, Result, Tensor};

/// `a + b` elementwise; shapes must be equal (broadcast explicitly with `broadcast_to`).
#[differentiable(crate = crate)]
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // d(a + b) = g da + g db
    fn vjp(g: &Tensor) -> (Option<Tensor>, Option<Tensor>) {
        (Some(g.clone()), Some(g.clone()))
    }
    zip(a, b, |x: f32, y: f32| x + y)
}

/// `a * b` elementwise; shapes must be equal.
#[differentiable(crate = crate)]
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // d(a * b) = g * b da + g * a db
    fn vjp(g: &Tensor, a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let ga = zip(g, b, |g: f32, y: f32| g * y)?;
        let gb = zip(g, a, |g: f32, x: f32| g * x)?;
        Ok((Some(ga), Some(gb)))
    }
    zip(a, b, |x: f32, y: f32| x * y)
}

/// `a * c` for a constant `c`.
#[differentiable(crate = crate)]
pub fn mul_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(c a) = c g da
    fn vjp(g: &Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(map(g, |x: f32| x * c)?))
    }
    map(a, |x: f32| x * c)
}

/// `a + c` for a constant `c`.
#[differentiable(crate = crate)]
pub fn add_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    map(a, |x: f32| x + c)
}

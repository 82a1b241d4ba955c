//! Elementwise arithmetic: `a + b`, `a * b`, `a * c`, `a + c`.

use autograd_core::{differentiable, Result, Tensor};

use crate::kernel::{map, zip};

/// `a + b` elementwise; shapes must be equal (broadcast explicitly with `broadcast_to`).
#[differentiable]
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // d(a + b) = g da + g db
    fn vjp(g: &Tensor) -> (Option<Tensor>, Option<Tensor>) {
        (Some(g.clone()), Some(g.clone()))
    }
    zip("add", a, b, |x, y| x + y)
}

/// `a * b` elementwise; shapes must be equal.
#[differentiable]
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // d(a * b) = g * b da + g * a db
    fn vjp(g: &Tensor, a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let ga = zip("mul backward", g, b, |g, y| g * y)?;
        let gb = zip("mul backward", g, a, |g, x| g * x)?;
        Ok((Some(ga), Some(gb)))
    }
    zip("mul", a, b, |x, y| x * y)
}

/// `a * c` for a constant `c`.
#[differentiable]
pub fn mul_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    // d(c a) = c g da
    fn vjp(g: &Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(map("mul_scalar backward", g, |x| x * c)?))
    }
    map("mul_scalar", a, |x| x * c)
}

/// `a + c` for a constant `c`.
#[differentiable]
pub fn add_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    map("add_scalar", a, |x| x + c)
}

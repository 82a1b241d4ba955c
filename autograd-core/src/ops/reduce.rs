//! Reductions.

use crate::{differentiable, kernel, Result, Tensor};

/// The sum of every element, as a one-element tensor of layout `(1):(1)`.
#[differentiable(crate = crate)]
pub fn sum(a: &Tensor) -> Result<Tensor> {
    // d(sum a) = g[0] at every element
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(a.f32_full_like(g.values::<f32>()?[0])?))
    }
    let axes: Vec<usize> = (0..a.layout().rank()).collect();
    let total = kernel::reduce(
        a,
        &axes,
        false,
        || 0.0f64,
        |s, x: f32| s + f64::from(x),
        |s, _| s as f32,
    )?;
    // a scalar: one top-level leaf mode of extent 1
    total.with_layout_detached(crate::Layout::row_major(&[1])?, 0)
}

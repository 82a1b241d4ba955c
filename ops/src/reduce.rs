//! Reductions.

use autograd_core::{differentiable, shape, Result, Tensor};

use crate::kernel::map;

/// The sum of every element, as a one-element tensor of layout `(1):(1)`.
#[differentiable]
pub fn sum(a: &Tensor) -> Result<Tensor> {
    // d(sum a) = g[0] at every element
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(a.f32_full_like(g.values::<f32>()?[0])?))
    }
    let total: f32 = map("sum", a, |x| x)?.values::<f32>()?.iter().sum();
    Tensor::from_vec(vec![total], shape![1])
}

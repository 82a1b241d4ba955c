use autograd_core::{differentiable, Result, Tensor};

/// Not a path to autograd_core.
mod other {}

#[differentiable(crate = other)]
fn neg(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| -v).collect())
}

fn main() {}

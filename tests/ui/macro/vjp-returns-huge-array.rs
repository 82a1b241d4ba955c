use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<[Option<Tensor>; 1000000000000000]> {
        Err(autograd_core::Error::Value(format!("{g:?} has no such gradient")))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: f32, x: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.f32_full_like(g)?))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())
}

fn main() {}

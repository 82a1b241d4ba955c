use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn scale(x: &Tensor, c: impl Into<f32>) -> Result<Tensor> {
    fn vjp(g: &Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(g.f32_like(g.values::<f32>()?.iter().map(|v| c * v).collect())?))
    }
    let c = c.into();
    x.f32_like(x.values::<f32>()?.iter().map(|v| c * v).collect())
}

fn main() {}

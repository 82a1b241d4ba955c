use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn scale(x: &Tensor, c: f32) -> Result<Tensor> {
    fn vjp(g: &Tensor, c: &mut f32) -> Result<Option<Tensor>> {
        *c += 1.0;
        Ok(Some(g.clone()))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| c * v).collect())
}

fn main() {}

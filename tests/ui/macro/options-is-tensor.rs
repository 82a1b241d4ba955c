use autograd_core::{differentiable, Result, Tensor};

/// `options` is never saved, so a tensor under that name would get no gradient.
#[differentiable]
fn scale(x: &Tensor, c: f32, options: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(g.f32_like(g.values::<f32>()?.iter().map(|v| c * v).collect())?))
    }
    let _ = options;
    x.f32_like(x.values::<f32>()?.iter().map(|v| c * v).collect())
}

fn main() {}

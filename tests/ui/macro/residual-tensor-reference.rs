use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let r: &Tensor = x;
    fn vjp(g: &Tensor, r: &Tensor) -> Result<Option<Tensor>> {
        let _ = r;
        Ok(Some(g.clone()))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())
}

fn main() {}

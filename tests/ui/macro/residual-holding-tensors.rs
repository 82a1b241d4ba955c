use autograd_core::{differentiable, Result, Tensor};

/// Residuals that hold tensors inside another type would not be version-checked.
#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let parts: Vec<Tensor> = vec![x.clone()];
    #[residual]
    let maybe: Option<Tensor> = Some(x.clone());
    fn vjp(g: &Tensor, parts: &[Tensor], maybe: Option<Tensor>) -> Result<Option<Tensor>> {
        let _ = (parts, maybe);
        Ok(Some(g.clone()))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())
}

fn main() {}

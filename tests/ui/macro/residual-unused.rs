use autograd_core::{differentiable, Result, Tensor};

/// Neither residual is taken by the vjp: the tensor one would be kept and version-checked for
/// nothing.
#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let twice = x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())?;
    #[residual]
    let n: usize = x.size();
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.f32_like(g.values::<f32>()?.iter().map(|v| 2.0 * v).collect())?))
    }
    let _ = n;
    Ok(twice)
}

fn main() {}

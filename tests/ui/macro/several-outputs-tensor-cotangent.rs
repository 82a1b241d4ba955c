use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn halves(x: &Tensor) -> Result<(Tensor, Tensor)> {
    fn vjp(g: &Tensor, x: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.f32_like(g.values::<f32>()?)?))
    }
    let v = x.values::<f32>()?;
    let h = v.len() / 2;
    Ok((
        Tensor::from_vec(v[..h].to_vec(), autograd_core::shape![h])?,
        Tensor::from_vec(v[h..].to_vec(), autograd_core::shape![v.len() - h])?,
    ))
}

fn main() {}

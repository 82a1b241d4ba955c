use autograd_core::{differentiable, Result, Tensor};

/// The vjp forgot its cotangent: `a` would receive it and `b` would be read as `a`.
#[differentiable]
fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn vjp(a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(b.clone()), Some(a.clone())))
    }
    let _ = b;
    a.f32_like(a.values::<f32>()?)
}

/// The same with the forward output and a residual.
#[differentiable]
fn exp(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let e = x.f32_like(x.values::<f32>()?)?;
    fn vjp(output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(output.clone()))
    }
    Ok(e)
}

#[differentiable]
fn relu(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let mask = x.f32_like(x.values::<f32>()?)?;
    fn vjp(mask: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(mask.clone()))
    }
    Ok(mask.clone())
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    if x.size() > 0 {
        #[residual]
        let y = x.clone();
        return Ok(y);
    }
    Ok(x.clone())
}

fn main() {}

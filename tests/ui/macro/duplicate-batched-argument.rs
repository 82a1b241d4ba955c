use autograd_core::{differentiable, Result, Tensor};

#[differentiable(batched, batched)]
fn double(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    Ok(x.clone())
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn first((a, b): (Tensor, Tensor)) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    let _ = b;
    Ok(a)
}

fn main() {}

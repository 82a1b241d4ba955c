use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn first(xs: Vec<Tensor>) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    Ok(xs[0].clone())
}

fn main() {}

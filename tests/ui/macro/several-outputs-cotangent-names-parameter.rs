use autograd_core::{differentiable, Result, Tensor};

// The tuple pattern binds `x`, the forward parameter: the vjp forgot its cotangent.
#[differentiable]
fn halves(x: &Tensor) -> Result<(Tensor, Tensor)> {
    fn vjp((x, g): (Option<&Tensor>, Option<&Tensor>)) -> Result<Option<Tensor>> {
        let _ = g;
        Ok(x.cloned())
    }
    Ok((x.detach(), x.detach()))
}

fn main() {}

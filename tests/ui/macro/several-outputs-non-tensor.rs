use autograd_core::{differentiable, Result, Tensor};

// The index is a plain `usize`, not an Int32 tensor.
#[differentiable]
fn max_with_index(x: &Tensor) -> Result<(Tensor, usize)> {
    fn vjp(g: (Option<&Tensor>, Option<&Tensor>), x: &Tensor) -> Result<Option<Tensor>> {
        let _ = g;
        Ok(Some(x.f32_like(vec![0.0; x.size()])?))
    }
    Ok((x.detach(), 0))
}

fn main() {}

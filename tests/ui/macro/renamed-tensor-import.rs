use autograd_core::{differentiable, Result, Tensor};
use autograd_core::Tensor as T;

type Alias = Tensor;

/// `y` is a tensor the macro cannot recognise: it would be captured, not saved.
#[differentiable]
fn mul(x: &Tensor, y: &T, z: Alias) -> Result<Tensor> {
    fn vjp(g: &Tensor, y: &T) -> Result<Option<Tensor>> {
        let _ = y;
        Ok(Some(g.clone()))
    }
    let _ = (y, z);
    x.f32_like(x.values::<f32>()?)
}

fn main() {}

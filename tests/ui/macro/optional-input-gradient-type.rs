use autograd_core::{differentiable, Result, Tensor};

/// The gradient of an optional input is an `Option<Tensor>` like any other (`None` when absent).
#[differentiable]
fn add_bias(x: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> (Option<Tensor>, Option<Option<Tensor>>) {
        (Some(g.clone()), Some(Some(g.clone())))
    }
    let mut v = x.values::<f32>()?;
    if let Some(b) = bias {
        v.iter_mut().zip(b.values::<f32>()?).for_each(|(v, b)| *v += b);
    }
    x.f32_like(v)
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

/// `bias` may be absent, so the vjp cannot take it as a plain `&Tensor`.
#[differentiable]
fn add_bias(x: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    fn vjp(g: &Tensor, bias: &Tensor) -> (Option<Tensor>, Option<Tensor>) {
        let _ = bias;
        (Some(g.clone()), Some(g.clone()))
    }
    let mut v = x.values::<f32>()?;
    if let Some(b) = bias {
        v.iter_mut().zip(b.values::<f32>()?).for_each(|(v, b)| *v += b);
    }
    x.f32_like(v)
}

fn main() {}

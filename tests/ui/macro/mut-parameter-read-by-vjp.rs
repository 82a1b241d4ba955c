use autograd_core::{differentiable, Result, Tensor};

/// `hi` is reassigned by the forward body, but the vjp would see the caller's value.
#[differentiable]
fn clamp_max(x: &Tensor, mut hi: f32) -> Result<Tensor> {
    hi = hi.max(0.0);
    fn vjp(g: &Tensor, x: &Tensor, hi: f32) -> Result<Option<Tensor>> {
        let (g, x) = (g.values::<f32>()?, x.values::<f32>()?);
        let d = g.iter().zip(&x).map(|(g, x)| if *x < hi { *g } else { 0.0 }).collect();
        Ok(Some(Tensor::from_vec(d, vec![x.len()])?))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| v.min(hi)).collect())
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

/// Options that hold a tensor the forward reads but the VJP does not: `w` would reach the
/// forward unrecorded and silently get no gradient.
pub struct Opts {
    pub w: Tensor,
    pub eps: f32,
}

#[differentiable]
fn scale(x: &Tensor, options: &Opts) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    let (x, w) = (x.values::<f32>()?, options.w.values::<f32>()?);
    let y = x.iter().zip(&w).map(|(x, w)| x * w + options.eps).collect();
    Tensor::from_vec(y, vec![x.len()])
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

/// Options that hold a tensor: `w` would get no gradient and would not be version-checked.
#[derive(Clone)]
pub struct Opts {
    pub w: Tensor,
    pub eps: f32,
}

#[differentiable]
fn scale(x: &Tensor, opts: &Opts) -> Result<Tensor> {
    fn vjp(g: &Tensor, opts: &Opts) -> Result<Option<Tensor>> {
        let w = opts.w.values::<f32>()?;
        let d = g.values::<f32>()?.iter().zip(&w).map(|(g, w)| g * w).collect();
        Ok(Some(g.f32_like(d)?))
    }
    let (x, w) = (x.values::<f32>()?, opts.w.values::<f32>()?);
    let y = x.iter().zip(&w).map(|(x, w)| x * w + opts.eps).collect();
    Tensor::from_vec(y, vec![x.len()])
}

fn main() {}

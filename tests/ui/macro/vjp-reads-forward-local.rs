use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn relu(x: &Tensor) -> Result<Tensor> {
    let v = x.values::<f32>()?;
    let mask: Vec<bool> = v.iter().map(|&x| x > 0.0).collect();
    fn vjp(g: &Tensor, x: &Tensor) -> Result<Option<Tensor>> {
        let d = g.values::<f32>()?.iter().zip(&mask).map(|(g, &m)| if m { *g } else { 0.0 }).collect();
        Ok(Some(x.f32_like(d)?))
    }
    x.f32_like(v.iter().map(|x| x.max(0.0)).collect())
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn neg(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> std::result::Result<Option<Tensor>, String> {
        let v = g.values::<f32>().map_err(|e| e.to_string())?;
        Ok(Some(g.f32_like(v.iter().map(|v| -v).collect()).map_err(|e| e.to_string())?))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| -v).collect())
}

fn main() {}

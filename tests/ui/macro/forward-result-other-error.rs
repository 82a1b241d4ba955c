use autograd_core::{differentiable, Tensor};

#[differentiable]
fn double(x: &Tensor) -> Result<Tensor, String> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    let v = x.values::<f32>().map_err(|e| e.to_string())?;
    x.f32_like(v.iter().map(|v| 2.0 * v).collect()).map_err(|e| e.to_string())
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

/// The vjp reads `b` without taking it.
#[differentiable]
fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor, a: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let d = |t: &Tensor| -> Result<Tensor> {
            let v = g.values::<f32>()?.iter().zip(t.values::<f32>()?).map(|(g, t)| g * t).collect();
            g.f32_like(v)
        };
        Ok((Some(d(b)?), Some(d(a)?)))
    }
    let v = a.values::<f32>()?.iter().zip(b.values::<f32>()?).map(|(a, b)| a * b).collect();
    a.f32_like(v)
}

fn main() {}

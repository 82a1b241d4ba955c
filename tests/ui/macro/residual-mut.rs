use autograd_core::{differentiable, Result, Tensor};

/// The mask is filled after its `let`: the vjp would see the value at the `let` (all zeros).
#[differentiable]
fn relu(x: &Tensor) -> Result<Tensor> {
    let v = x.values::<f32>()?;
    #[residual]
    let mut mask: Vec<f32> = vec![0.0; v.len()];
    for (m, x) in mask.iter_mut().zip(&v) {
        *m = if *x > 0.0 { 1.0 } else { 0.0 };
    }
    fn vjp(g: &Tensor, mask: &[f32]) -> Result<Option<Tensor>> {
        let d = g.values::<f32>()?.iter().zip(mask).map(|(g, m)| g * m).collect();
        Ok(Some(g.f32_like(d)?))
    }
    x.f32_like(v.iter().map(|x| x.max(0.0)).collect())
}

fn main() {}

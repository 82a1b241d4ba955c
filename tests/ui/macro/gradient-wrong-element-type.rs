use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn sum(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<f32>> {
        Ok(Some(g.values::<f32>()?[0]))
    }
    let s: f32 = x.values::<f32>()?.iter().sum();
    Tensor::from_vec(vec![s], vec![1usize])
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn mean(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let n = x.size();
    fn vjp(g: &Tensor, n: usize) -> Result<Option<Tensor>> {
        let v = g.values::<f32>()?[0] / n as f32;
        Ok(Some(Tensor::from_vec(vec![v; n], vec![n])?))
    }
    let v = x.values::<f32>()?;
    Tensor::from_vec(vec![v.iter().sum::<f32>() / n as f32], vec![1usize])
}

fn main() {}

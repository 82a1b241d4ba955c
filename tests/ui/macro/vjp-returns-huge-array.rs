use autograd_core::{differentiable, Result, Tensor};

#[differentiable]
fn double(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<[Option<Tensor>; 1000000000000000]> {
        let _ = g;
        unimplemented!()
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())
}

fn main() {}

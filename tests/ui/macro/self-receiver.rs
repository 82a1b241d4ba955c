use autograd_core::{differentiable, Result, Tensor};

struct Layer {
    weight: Tensor,
}

impl Layer {
    #[differentiable]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
            Ok(Some(g.clone()))
        }
        let _ = &self.weight;
        Ok(x.clone())
    }
}

fn main() {}

use autograd_core::{differentiable, Result, Tensor};

/// The node stores `k`, so `K` gets a `Captured` bound: a caller cannot pass a tensor as `K`.
#[differentiable]
fn shift<K: Clone + Send + Sync + 'static>(x: &Tensor, k: K) -> Result<Tensor> {
    fn vjp(g: &Tensor, k: K) -> Option<Tensor> {
        let _ = k;
        Some(g.clone())
    }
    let _ = &k;
    x.f32_like(x.values::<f32>()?)
}

fn main() {
    let x = Tensor::from_vec(vec![1.0f32], vec![1usize]).unwrap();
    let _ = shift(&x, x.clone());
}

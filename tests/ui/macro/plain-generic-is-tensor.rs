use autograd_core::{differentiable, Result, Tensor};

/// `k` and `label` are read by the forward only, so the node stores neither; they still get a
/// `Captured` bound: a caller cannot pass a tensor through them.
#[differentiable]
fn shift<K: std::fmt::Debug>(x: &Tensor, k: K, label: impl std::fmt::Debug) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    let _ = format!("{k:?} {label:?}");
    x.f32_like(x.values::<f32>()?)
}

fn main() {
    let x = Tensor::from_vec(vec![1.0f32], vec![1usize]).unwrap();
    let _ = shift(&x, x.clone(), 1.0f32);
    let _ = shift(&x, 1usize, x.clone());
}

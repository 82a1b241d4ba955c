//! Clipping gradients by their global L2 norm: PyTorch's `clip_grad_norm_`.

use autograd_core::{ensure, kernel, no_grad, DType, Result, Tensor};

/// Scales the parameters' `.grad` in place so that their global L2 norm (over every element
/// of every present `.grad`) is at most `max_norm`, and returns the norm before clipping.
/// As PyTorch, the factor is `max_norm / (norm + 1e-6)`, applied only when it is below 1.
/// Parameters without `.grad` are skipped. See [`clip_grad_norm_of`].
pub fn clip_grad_norm(params: &[Tensor], max_norm: f32) -> Result<f32> {
    let grads = params
        .iter()
        .map(Tensor::grad)
        .collect::<Result<Vec<_>>>()?;
    clip_grad_norm_of(&grads, max_norm)
}

/// [`clip_grad_norm`] for gradients held apart from `.grad` (what the functional
/// `autograd_core::grad` returns): scales each present gradient in place and returns the
/// norm before clipping. `max_norm` must be `>= 0` and not NaN (`Error::Value`); every
/// gradient must be Float32 (`Error::Type`) with an injective layout (`Error::Value`), checked
/// before any is scaled. A non-finite norm is returned and scales nothing (PyTorch would
/// turn the gradients into NaN).
pub fn clip_grad_norm_of(grads: &[Option<Tensor>], max_norm: f32) -> Result<f32> {
    ensure!(
        max_norm >= 0.0,
        Value,
        "clip_grad_norm needs max_norm >= 0, got {max_norm}"
    );
    let present: Vec<&Tensor> = grads.iter().flatten().collect();
    for (i, g) in present.iter().enumerate() {
        ensure!(
            g.dtype() == &DType::Float32,
            Type,
            "clip_grad_norm: gradient {i} must be Float32, got {}",
            g.dtype()
        );
        ensure!(
            g.layout().is_injective(),
            Value,
            "clip_grad_norm: gradient {i} has layout {}, which maps several coordinates to one storage slot, so it cannot be scaled in place",
            g.layout()
        );
    }
    let _no_grad = no_grad();
    let mut total = 0.0f64;
    for g in &present {
        total += kernel::read::<f32, _>(g, |e| {
            let mut sum = 0.0f64;
            e.for_each(|x| sum += f64::from(x) * f64::from(x));
            sum
        })?;
    }
    let norm = total.sqrt() as f32;
    let coef = max_norm / (norm + 1e-6);
    if norm.is_finite() && coef < 1.0 {
        for g in &present {
            g.scale_(f64::from(coef))?;
        }
    }
    Ok(norm)
}

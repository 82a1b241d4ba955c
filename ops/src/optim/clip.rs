//! Clipping gradients by their global L2 norm: PyTorch's `clip_grad_norm_`.

use autograd_core::{ensure, kernel, no_grad, DType, Result, Tensor};

use super::update::undo_writes;

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
/// turn the gradients into NaN); finite gradients whose norm is past `f32::MAX` are clipped
/// and the norm returned as infinity. A carrier class that refuses the write fails the call
/// with every gradient as it was.
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
    let norm = total.sqrt();
    // PyTorch's factor, in f32 while the norm fits; a finite norm past f32::MAX still clips
    let coef = match norm as f32 {
        n if n.is_finite() => f64::from(max_norm / (n + 1e-6)),
        _ => f64::from(max_norm) / norm,
    };
    if norm.is_finite() && coef < 1.0 {
        // Other carrier classes first: only their writes can fail after the checks above,
        // and when one does, the gradients scaled before it get their values back (kept
        // before the first write). Scaling is elementwise, so the order changes nothing.
        let (other, cpu): (Vec<&Tensor>, Vec<&Tensor>) =
            present.iter().copied().partition(|g| !kernel::is_cpu(g));
        let mut olds = other
            .iter()
            .map(|g| g.values::<f32>())
            .collect::<Result<Vec<_>>>()?;
        for (n, g) in other.iter().enumerate() {
            if let Err(e) = g.scale_(coef) {
                if n == 0 {
                    return Err(e);
                }
                let written = other.iter().copied().zip(olds.drain(..n)).collect();
                return Err(undo_writes(
                    e,
                    "clip_grad_norm",
                    written,
                    "the gradients scaled before it were restored",
                ));
            }
        }
        for g in cpu {
            g.scale_(coef)?;
        }
    }
    // the norm as f32: infinite when it is past f32::MAX, as PyTorch's f32 norm is
    Ok(norm as f32)
}

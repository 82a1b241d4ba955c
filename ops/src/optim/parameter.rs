//! The checks every optimizer makes: parameters it can update in place, gradients that fit
//! them, hyperparameters in range.

use autograd_core::{ensure, DType, Result, Tensor};

/// At least one parameter; each must be a Float32 leaf of one subtensor whose layout gives
/// every element its own storage slot, and appear once.
pub(crate) fn check_parameters(params: &[Tensor]) -> Result<()> {
    ensure!(
        !params.is_empty(),
        Value,
        "an optimizer got an empty parameter list"
    );
    for (i, p) in params.iter().enumerate() {
        ensure!(
            p.dtype() == &DType::Float32,
            Type,
            "parameter {i} must be Float32 to be optimized, got {}",
            p.dtype()
        );
        if let Some(node) = p.autograd_ctx() {
            autograd_core::bail!(
                Value,
                "parameter {i} is not a leaf (it is the result of {}); optimize the leaves it is computed from",
                node.name()
            );
        }
        ensure!(
            p.subtensor_count() == 1,
            NotImplemented,
            "parameter {i} (shape {}) has {} subtensors; an optimizer updates one-subtensor tensors",
            p.shape(),
            p.subtensor_count()
        );
        ensure!(
            p.layout().is_injective(),
            Value,
            "parameter {i} has layout {}, which maps several coordinates to one storage slot, so an in-place update is ambiguous",
            p.layout()
        );
        if let Some(j) = params[..i].iter().position(|q| q.same_tensor(p)) {
            autograd_core::bail!(Value, "parameter {i} is the same tensor as parameter {j}");
        }
    }
    Ok(())
}

/// One gradient per parameter, each absent or a Float32 tensor of its parameter's top-level
/// extents (any shape tree).
pub(crate) fn check_gradients(params: &[Tensor], grads: &[Option<Tensor>]) -> Result<()> {
    ensure!(
        grads.len() == params.len(),
        Value,
        "a step takes one gradient (or None) per parameter: got {} for {} parameters",
        grads.len(),
        params.len()
    );
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let Some(g) = g else { continue };
        ensure!(
            g.dtype() == &DType::Float32,
            Type,
            "the gradient of parameter {i} must be Float32, got {}",
            g.dtype()
        );
        // extents, not shape trees: the update reads the gradient in logical order
        ensure!(
            g.dims() == p.dims(),
            Value,
            "the gradient of parameter {i} has shape {} but the parameter has shape {}",
            g.shape(),
            p.shape()
        );
    }
    Ok(())
}

/// A hyperparameter that must be finite and at least 0.
pub(crate) fn check_non_negative(name: &str, value: f32) -> Result<()> {
    ensure!(
        value.is_finite() && value >= 0.0,
        Value,
        "invalid {name} {value}: it must be finite and >= 0"
    );
    Ok(())
}

/// `eps` finite and positive (`Error::Value` otherwise), as PyTorch checks it.
pub(crate) fn check_eps(eps: f32) -> Result<()> {
    ensure!(
        eps.is_finite() && eps > 0.0,
        Value,
        "invalid epsilon {eps}: it must be finite and > 0"
    );
    Ok(())
}

/// What a gradient is multiplied by: `-1` to climb the objective (`maximize`), else `1`
/// (exact: the product is the gradient or its negation, bit for bit).
pub(crate) fn sign_of(maximize: bool) -> f32 {
    if maximize {
        -1.0
    } else {
        1.0
    }
}

/// The f64 a PyTorch user types for the f32 hyperparameter `x`: its shortest decimal form read
/// as f64 (`0.99f32` is `0.99`, not `0.9900000095...`), so that scalars PyTorch derives in
/// Python floats (`1 - beta`, `lr / (1 - beta^t)`) round to the same f32.
pub(crate) fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

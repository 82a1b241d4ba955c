//! `LayerNorm`: the layer that owns `layer_norm`'s affine parameters, for training loops that
//! need no module framework.

use autograd_core::{ensure, DType, Result, Shape, Tensor};

use super::layer_norm::layer_norm;
use crate::Module;

/// A layer normalisation over trailing axes of shape `normalized_shape`, owning its affine
/// `weight` (ones) and `bias` (zeros), as PyTorch's `nn.LayerNorm` initialises them. The
/// parameters are Float32 leaves, so they are differentiable and collect `.grad` through
/// `backward`; an optimizer updates them in place through the handles [`LayerNorm::parameters`]
/// returns. A [`Module`] with tensors `weight` and `bias`, as in PyTorch.
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct LayerNorm {
    #[module(skip)]
    normalized_shape: Vec<usize>,
    #[module(skip)]
    eps: f32,
    weight: Tensor,
    bias: Tensor,
}

impl LayerNorm {
    /// A layer normalising over the trailing extents `normalized_shape` (non-empty) with
    /// `eps` added to the variance (PyTorch's default is `1e-5`); weight ones, bias zeros.
    pub fn new(normalized_shape: &[usize], eps: f32) -> Result<LayerNorm> {
        ensure!(
            !normalized_shape.is_empty(),
            Value,
            "LayerNorm: normalized_shape must have at least one extent"
        );
        ensure!(
            eps >= 0.0 && eps.is_finite(),
            Value,
            "LayerNorm: eps must be finite and non-negative, got {eps}"
        );
        let shape = Shape::from(normalized_shape);
        Ok(LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight: Tensor::ones(shape.clone(), &DType::Float32)?,
            bias: Tensor::zeros(shape, &DType::Float32)?,
        })
    }

    /// [`layer_norm`] of `x` with this layer's shape, parameters and `eps`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer_norm(
            x,
            &self.normalized_shape,
            Some(&self.weight),
            Some(&self.bias),
            self.eps,
        )
    }

    /// Handles to the parameters, `[weight, bias]`: clones are the same tensors (they share
    /// `.grad` and storage), so updating them updates the layer.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }

    /// The affine weight (shape `normalized_shape`).
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The affine bias (shape `normalized_shape`).
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }

    /// The trailing extents this layer normalises over.
    pub fn normalized_shape(&self) -> &[usize] {
        &self.normalized_shape
    }

    /// The value added to the variance.
    pub fn eps(&self) -> f32 {
        self.eps
    }
}

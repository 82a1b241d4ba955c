//! `RmsNorm`: the layer that owns `rms_norm`'s weight, PyTorch's `nn.RMSNorm`.

use autograd_core::{ensure, DType, Result, Shape, Tensor};

use super::rms_norm::rms_norm;
use crate::Module;

/// A root-mean-square normalisation over trailing axes of shape `normalized_shape` with a
/// learnable `weight` (ones, as PyTorch's `nn.RMSNorm` initialises it), LLaMA's normalisation
/// layer. The weight is a Float32 leaf that collects `.grad`; an optimizer updates it in place
/// through the handle [`RmsNorm::parameters`] returns. A [`Module`] with one tensor, `weight`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{Module, RmsNorm};
/// let norm = RmsNorm::new(&[4], None).unwrap();
/// let x = Tensor::from_vec(vec![1.0f32, -1.0, 1.0, -1.0], shape![1, 4]).unwrap();
/// let y = norm.forward(&x).unwrap().values::<f32>().unwrap();
/// assert!((y[0] - 1.0).abs() < 1e-6);
/// assert_eq!(norm.named_parameters()[0].0, "weight");
/// ```
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct RmsNorm {
    #[module(skip)]
    normalized_shape: Vec<usize>,
    #[module(skip)]
    eps: Option<f32>,
    weight: Tensor,
}

impl RmsNorm {
    /// A layer normalising over the trailing extents `normalized_shape` (non-empty) with
    /// `eps` added to the mean square (`None`: `f32::EPSILON`, PyTorch's default); weight ones.
    pub fn new(normalized_shape: &[usize], eps: Option<f32>) -> Result<RmsNorm> {
        ensure!(
            !normalized_shape.is_empty(),
            Value,
            "RmsNorm: normalized_shape must have at least one extent"
        );
        if let Some(eps) = eps {
            ensure!(
                eps >= 0.0 && eps.is_finite(),
                Value,
                "RmsNorm: eps must be finite and non-negative, got {eps}"
            );
        }
        Ok(RmsNorm {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight: Tensor::ones(Shape::from(normalized_shape), &DType::Float32)?,
        })
    }

    /// [`rms_norm`] of `x` with this layer's shape, weight and `eps`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        rms_norm(x, &self.normalized_shape, Some(&self.weight), self.eps)
    }

    /// A handle to the weight: a clone is the same tensor (it shares `.grad` and storage).
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone()]
    }

    /// The weight (shape `normalized_shape`).
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The trailing extents this layer normalises over.
    pub fn normalized_shape(&self) -> &[usize] {
        &self.normalized_shape
    }

    /// The value added to the mean square (`None`: `f32::EPSILON`).
    pub fn eps(&self) -> Option<f32> {
        self.eps
    }
}

//! `Linear`: `y = x · Wᵀ + b`, PyTorch's `nn.Linear`.

use autograd_core::{ensure, ops::linear, shape, DType, Result, Rng, Tensor};

use crate::{init, Module};

/// A fully connected layer: `weight` of shape `[out, in]` and an optional `bias` of shape
/// `[out]`, applied to the last axis of its input. A [`Module`]: its tensors are named `weight` and
/// `bias`, as in PyTorch.
///
/// ```
/// use autograd_core::{shape, Rng, Tensor};
/// use autograd_ops::Linear;
/// let layer = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
/// let y = layer.forward(&Tensor::ones(shape![4, 3], &autograd_core::DType::Float32).unwrap()).unwrap();
/// assert_eq!(y.dims(), [4, 2]);
/// assert_eq!(layer.parameters().len(), 2);
/// ```
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    /// A layer from `in_features` to `out_features` initialised as PyTorch's: the weight
    /// Kaiming uniform with `a = sqrt(5)` (`U(-1/sqrt(in), 1/sqrt(in))`), then the bias, when
    /// asked for, `U(-1/sqrt(in), 1/sqrt(in))` (zero width when `in` is 0).
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Linear> {
        let weight = init::kaiming_uniform(shape![out_features, in_features], 5f32.sqrt(), rng)?;
        let bias = if bias {
            let bound = if in_features > 0 {
                (1.0 / (in_features as f64).sqrt()) as f32
            } else {
                0.0
            };
            Some(init::uniform(shape![out_features], -bound, bound, rng)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }

    /// A layer over given parameters: a Float32 `weight` of shape `[out, in]` and an optional
    /// Float32 `bias` of shape `[out]` (`Error::Type` for another dtype, `Error::Value` for
    /// another shape). The layer holds the handles: it trains the caller's tensors.
    pub fn from_parameters(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        ensure!(
            weight.dtype() == &DType::Float32,
            Type,
            "a Linear weight must be Float32, got {}",
            weight.dtype()
        );
        let dims = weight.dims();
        ensure!(
            dims.len() == 2,
            Value,
            "a Linear weight has shape [out, in], got {}",
            weight.shape()
        );
        if let Some(b) = &bias {
            ensure!(
                b.dtype() == &DType::Float32,
                Type,
                "a Linear bias must be Float32, got {}",
                b.dtype()
            );
            ensure!(
                b.dims() == [dims[0]],
                Value,
                "a Linear bias for a weight of shape {} has shape [{}], got {}",
                weight.shape(),
                dims[0],
                b.shape()
            );
        }
        Ok(Linear { weight, bias })
    }

    /// `x · Wᵀ + b` for `x` of shape `[..., in]`, giving `[..., out]` (recorded for autograd).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        linear(x, &self.weight, self.bias.as_ref())
    }

    /// The weight, `[out, in]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, `[out]`, if the layer has one.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The input width `in`.
    pub fn in_features(&self) -> usize {
        self.weight.dims()[1]
    }

    /// The output width `out`.
    pub fn out_features(&self) -> usize {
        self.weight.dims()[0]
    }

    /// The weight, then the bias if any: handles that share storage, `.grad` and versions with
    /// the layer's own.
    pub fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }
}

//! `Dropout`: the [`dropout`](crate::dropout) op as a layer whose mode follows `train`/`eval`,
//! PyTorch's `nn.Dropout`.

use autograd_core::{ensure, Result, Rng, Tensor};

use crate::{dropout, Module};

/// Zeroes each element with probability `p` (scaling the kept ones by `1 / (1 - p)`) in
/// training mode, and is the identity in evaluation mode. It starts in training mode, as
/// PyTorch's layers do; [`Module::train`] and [`Module::eval`] on any module holding it set the
/// mode. It has no tensors.
///
/// ```
/// use autograd_core::{shape, DType, Rng, Tensor};
/// use autograd_ops::{Dropout, Module};
/// let mut layer = Dropout::new(0.5).unwrap();
/// let x = Tensor::ones(shape![8], &DType::Float32).unwrap();
/// layer.eval();
/// assert!(layer.forward(&x, &mut Rng::new(0)).unwrap().same_tensor(&x));
/// ```
#[derive(Debug, Clone, Module)]
#[module(crate = crate)]
pub struct Dropout {
    #[module(skip)]
    p: f32,
    #[module(training)]
    training: bool,
}

impl Dropout {
    /// A layer dropping with probability `p` in `[0, 1]` (`Error::Value` otherwise), in
    /// training mode.
    pub fn new(p: f32) -> Result<Dropout> {
        ensure!(
            (0.0..=1.0).contains(&p),
            Value,
            "Dropout: the drop probability p must be in [0, 1], got {p}"
        );
        Ok(Dropout { p, training: true })
    }

    /// [`dropout`] of `x` with this layer's `p` and mode; the mask is drawn from `rng` only in
    /// training mode.
    pub fn forward(&self, x: &Tensor, rng: &mut Rng) -> Result<Tensor> {
        dropout(x, self.p, self.training, rng)
    }

    /// The drop probability.
    pub fn p(&self) -> f32 {
        self.p
    }

    /// Whether the layer is in training mode.
    pub fn is_training(&self) -> bool {
        self.training
    }
}

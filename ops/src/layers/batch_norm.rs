//! `BatchNorm2d`: [`batch_norm`](crate::batch_norm) as a layer owning its affine parameters and
//! running statistics, whose mode follows `train`/`eval`, PyTorch's `nn.BatchNorm2d`.

use autograd_core::{ensure, kernel, no_grad, DType, Result, Shape, Tensor};

use crate::{batch_norm, Module};

/// Batch normalisation of `[N, C, H, W]` inputs over `C` channels. Initialised as PyTorch's
/// `nn.BatchNorm2d`: `weight` ones and `bias` zeros (parameters, when affine), `running_mean`
/// zeros, `running_var` ones and `num_batches_tracked` (Int64, a scalar) zero (buffers, when
/// tracking running statistics), so a state dict names them as PyTorch does. In training mode
/// (the start) it normalises by the batch's statistics and updates the running ones; in
/// evaluation mode by the running ones (or the batch's when it tracks none).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{BatchNorm2d, Module};
/// let mut bn = BatchNorm2d::new(1)?;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![1, 1, 2, 2])?;
/// bn.forward(&x)?;
/// assert_eq!(bn.running_mean().unwrap().values::<f32>()?, [0.25]);
/// bn.eval();
/// assert_eq!(bn.forward(&x)?.values::<f32>()?.len(), 4);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct BatchNorm2d {
    #[module(skip)]
    channels: usize,
    #[module(skip)]
    eps: f32,
    #[module(skip)]
    momentum: f32,
    weight: Option<Tensor>,
    bias: Option<Tensor>,
    #[module(buffer)]
    running_mean: Option<Tensor>,
    #[module(buffer)]
    running_var: Option<Tensor>,
    #[module(buffer)]
    num_batches_tracked: Option<Tensor>,
    #[module(training)]
    training: bool,
}

impl BatchNorm2d {
    /// A layer over `channels` channels with PyTorch's defaults: `eps` `1e-5`, momentum `0.1`,
    /// affine parameters and running statistics.
    pub fn new(channels: usize) -> Result<BatchNorm2d> {
        Self::with_options(channels, 1e-5, 0.1, true, true)
    }

    /// A layer over `channels` (positive) channels adding `eps` (finite, non-negative) to the
    /// variance, updating running statistics with `momentum` (in `[0, 1]`) when
    /// `track_running_stats`, with affine parameters when `affine`; `Error::Value` otherwise.
    pub fn with_options(
        channels: usize,
        eps: f32,
        momentum: f32,
        affine: bool,
        track_running_stats: bool,
    ) -> Result<BatchNorm2d> {
        ensure!(
            channels > 0,
            Value,
            "BatchNorm2d: channels must be positive"
        );
        ensure!(
            eps >= 0.0 && eps.is_finite(),
            Value,
            "BatchNorm2d: eps must be finite and non-negative, got {eps}"
        );
        ensure!(
            (0.0..=1.0).contains(&momentum),
            Value,
            "BatchNorm2d: momentum must be in [0, 1], got {momentum}"
        );
        let c = Shape::from(&[channels][..]);
        let f32s = |ones: bool| {
            if ones {
                Tensor::ones(c.clone(), &DType::Float32)
            } else {
                Tensor::zeros(c.clone(), &DType::Float32)
            }
        };
        let (weight, bias) = if affine {
            (Some(f32s(true)?), Some(f32s(false)?))
        } else {
            (None, None)
        };
        let (running_mean, running_var, num_batches_tracked) = if track_running_stats {
            let count = Tensor::zeros(Shape::from(&[] as &[usize]), &DType::Int64)?;
            (Some(f32s(false)?), Some(f32s(true)?), Some(count))
        } else {
            (None, None, None)
        };
        Ok(BatchNorm2d {
            channels,
            eps,
            momentum,
            weight,
            bias,
            running_mean,
            running_var,
            num_batches_tracked,
            training: true,
        })
    }

    /// [`batch_norm`] of `x` (`[N, C, H, W]`, `Error::Value` for another rank) with this
    /// layer's parameters: batch statistics (updating the running ones and
    /// `num_batches_tracked`) in training mode or without running statistics, the running ones
    /// in evaluation mode.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        ensure!(
            x.dims().len() == 4,
            Value,
            "BatchNorm2d: the input must be [N, C, H, W], got shape {:?}",
            x.dims()
        );
        let batch_stats = self.training || self.running_mean.is_none();
        let y = batch_norm(
            x,
            self.running_mean.as_ref(),
            self.running_var.as_ref(),
            self.weight.as_ref(),
            self.bias.as_ref(),
            batch_stats,
            self.momentum,
            self.eps,
        )?;
        if let (true, Some(count)) = (self.training, &self.num_batches_tracked) {
            let _no_grad = no_grad();
            kernel::update::<i64, _>(count, |n| {
                for n in n.iter_mut() {
                    *n += 1;
                }
                Ok(())
            })?;
        }
        Ok(y)
    }

    /// The number of channels.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The value added to the variance.
    pub fn eps(&self) -> f32 {
        self.eps
    }

    /// The weight of the running statistics' update.
    pub fn momentum(&self) -> f32 {
        self.momentum
    }

    /// The affine weight (shape `[C]`), when affine.
    pub fn weight(&self) -> Option<&Tensor> {
        self.weight.as_ref()
    }

    /// The affine bias (shape `[C]`), when affine.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The running mean (shape `[C]`), when tracked.
    pub fn running_mean(&self) -> Option<&Tensor> {
        self.running_mean.as_ref()
    }

    /// The running (unbiased) variance (shape `[C]`), when tracked.
    pub fn running_var(&self) -> Option<&Tensor> {
        self.running_var.as_ref()
    }

    /// How many training batches updated the running statistics (Int64 scalar), when tracked.
    pub fn num_batches_tracked(&self) -> Option<&Tensor> {
        self.num_batches_tracked.as_ref()
    }

    /// Whether the layer is in training mode.
    pub fn is_training(&self) -> bool {
        self.training
    }
}

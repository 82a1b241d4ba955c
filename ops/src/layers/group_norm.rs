//! `GroupNorm`: [`group_norm`](crate::group_norm) as a layer owning its affine parameters,
//! PyTorch's `nn.GroupNorm`.

use autograd_core::{ensure, DType, Result, Shape, Tensor};

use crate::{group_norm, Module};

/// Group normalisation of `[N, C, ...]` inputs, `C` channels in `groups` groups, with a
/// per-channel affine `weight` (ones) and `bias` (zeros) as PyTorch's `nn.GroupNorm`
/// initialises them (`eps` `1e-5`). It behaves the same in training and evaluation mode.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::GroupNorm;
/// let gn = GroupNorm::new(2, 4)?;
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 10.0, 30.0], shape![1, 4])?;
/// let y = gn.forward(&x)?.values::<f32>()?;
/// assert!((y[0] + 1.0).abs() < 1e-4 && (y[3] - 1.0).abs() < 1e-4);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct GroupNorm {
    #[module(skip)]
    groups: usize,
    #[module(skip)]
    eps: f32,
    weight: Tensor,
    bias: Tensor,
}

impl GroupNorm {
    /// A layer of `groups` groups over `channels` channels (`groups` positive and dividing
    /// `channels`, `Error::Value` otherwise).
    pub fn new(groups: usize, channels: usize) -> Result<GroupNorm> {
        ensure!(
            groups > 0 && channels.is_multiple_of(groups),
            Value,
            "GroupNorm: the number of groups {groups} must be positive and divide the channels {channels}"
        );
        let c = Shape::from(&[channels][..]);
        Ok(GroupNorm {
            groups,
            eps: 1e-5,
            weight: Tensor::ones(c.clone(), &DType::Float32)?,
            bias: Tensor::zeros(c, &DType::Float32)?,
        })
    }

    /// [`group_norm`] of `x` with this layer's groups, parameters and `eps`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        group_norm(
            x,
            self.groups,
            Some(&self.weight),
            Some(&self.bias),
            self.eps,
        )
    }

    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The affine weight (shape `[C]`).
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The affine bias (shape `[C]`).
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }
}

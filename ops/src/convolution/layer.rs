//! `Conv2d`: PyTorch's `nn.Conv2d` as a [`Module`](crate::Module).

use autograd_core::{ensure, shape, Result, Rng, Tensor};

use super::conv::conv2d;
use super::geometry::ensure_positive;
use super::options::Conv2dOptions;
use crate::{init, Module};

/// A 2-D convolution layer: `weight` `[out, in / groups, kH, kW]`, an optional `bias`
/// `[out]` and its [`Conv2dOptions`], applied by [`conv2d`] to `[N, in, H, W]` inputs. A
/// [`Module`]: its tensors are named `weight` and `bias`, as in PyTorch.
///
/// ```
/// use autograd_core::{shape, DType, Rng, Tensor};
/// use autograd_ops::{Conv2d, Conv2dOptions, Module, Padding};
/// let options = Conv2dOptions::new().padding(Padding::Same);
/// let layer = Conv2d::new(3, 8, [3, 3], options, true, &mut Rng::new(0))?;
/// let y = layer.forward(&Tensor::ones(shape![2, 3, 5, 5], &DType::Float32)?)?;
/// assert_eq!(y.dims(), [2, 8, 5, 5]);
/// assert_eq!(layer.num_parameters(), 8 * 3 * 9 + 8);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct Conv2d {
    weight: Tensor,
    bias: Option<Tensor>,
    #[module(skip)]
    options: Conv2dOptions,
}

impl Conv2d {
    /// A layer from `in_channels` to `out_channels` with windows `kernel`, initialised as
    /// PyTorch's: the weight Kaiming uniform with `a = sqrt(5)` and the bias, when asked for,
    /// both `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` with `fan_in = in / groups · kH · kW`.
    ///
    /// Errors (`Error::Value`): a zero kernel extent, stride, dilation or group count, or
    /// channels not divisible by `groups`.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; 2],
        options: Conv2dOptions,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Conv2d> {
        let groups = options.groups;
        ensure_positive("Conv2d", options.stride, options.dilation, groups)?;
        ensure!(
            in_channels.is_multiple_of(groups) && out_channels.is_multiple_of(groups),
            Value,
            "Conv2d: in_channels {in_channels} and out_channels {out_channels} must both be divisible by groups {groups}"
        );
        ensure!(
            kernel[0] > 0 && kernel[1] > 0,
            Value,
            "Conv2d: the kernel {kernel:?} must not be empty"
        );
        let dims = shape![out_channels, in_channels / groups, kernel[0], kernel[1]];
        let weight = init::kaiming_uniform(dims, 5f32.sqrt(), rng)?;
        let bias = if bias {
            let fan_in = in_channels / groups * kernel[0] * kernel[1];
            let bound = if fan_in > 0 {
                (1.0 / (fan_in as f64).sqrt()) as f32
            } else {
                0.0
            };
            Some(init::uniform(shape![out_channels], -bound, bound, rng)?)
        } else {
            None
        };
        Ok(Conv2d {
            weight,
            bias,
            options,
        })
    }

    /// `conv2d(x, weight, bias, options)` for `x` of shape `[N, in, H, W]` (recorded for
    /// autograd).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        conv2d(x, &self.weight, self.bias.as_ref(), &self.options)
    }

    /// The weight, `[out, in / groups, kH, kW]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, `[out]`, if the layer has one.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The stride, padding, dilation and groups the layer convolves with.
    pub fn options(&self) -> &Conv2dOptions {
        &self.options
    }
}

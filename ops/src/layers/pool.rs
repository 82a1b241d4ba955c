//! `MaxPool2d` and `AvgPool2d`: the pooling ops as layers holding their kernel and options,
//! PyTorch's `nn.MaxPool2d` and `nn.AvgPool2d`. They have no tensors.

use autograd_core::{Result, Tensor};

use crate::{avg_pool2d, max_pool2d, Module, Pool2dOptions};

/// [`max_pool2d`] with a fixed kernel and options.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::MaxPool2d;
/// let x = Tensor::from_vec(vec![1.0f32, 4.0, 3.0, 2.0], shape![1, 1, 2, 2])?;
/// assert_eq!(MaxPool2d::new([2, 2]).forward(&x)?.values::<f32>()?, [4.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Clone, Module)]
#[module(crate = crate)]
pub struct MaxPool2d {
    #[module(skip)]
    kernel: [usize; 2],
    #[module(skip)]
    options: Pool2dOptions,
}

impl MaxPool2d {
    /// Pooling over `kernel` windows with the default options (stride the kernel).
    pub fn new(kernel: [usize; 2]) -> MaxPool2d {
        Self::with_options(kernel, Pool2dOptions::new())
    }

    /// Pooling over `kernel` windows with `options` (checked when called).
    pub fn with_options(kernel: [usize; 2], options: Pool2dOptions) -> MaxPool2d {
        MaxPool2d { kernel, options }
    }

    /// [`max_pool2d`] of `x`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        max_pool2d(x, self.kernel, &self.options)
    }
}

/// [`avg_pool2d`] with a fixed kernel and options.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::AvgPool2d;
/// let x = Tensor::from_vec(vec![1.0f32, 4.0, 3.0, 2.0], shape![1, 1, 2, 2])?;
/// assert_eq!(AvgPool2d::new([2, 2]).forward(&x)?.values::<f32>()?, [2.5]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Clone, Module)]
#[module(crate = crate)]
pub struct AvgPool2d {
    #[module(skip)]
    kernel: [usize; 2],
    #[module(skip)]
    options: Pool2dOptions,
}

impl AvgPool2d {
    /// Pooling over `kernel` windows with the default options (stride the kernel).
    pub fn new(kernel: [usize; 2]) -> AvgPool2d {
        Self::with_options(kernel, Pool2dOptions::new())
    }

    /// Pooling over `kernel` windows with `options` (checked when called).
    pub fn with_options(kernel: [usize; 2], options: Pool2dOptions) -> AvgPool2d {
        AvgPool2d { kernel, options }
    }

    /// [`avg_pool2d`] of `x`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        avg_pool2d(x, self.kernel, &self.options)
    }
}

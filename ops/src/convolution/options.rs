//! The options of the convolutions: padding modes and the builders of `conv2d`'s and
//! `conv_transpose2d`'s settings, with PyTorch's defaults.

/// How a convolution pads its input on each spatial side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// `[rows, columns]` zeros on both sides of each axis, as PyTorch's integer `padding`.
    Explicit([usize; 2]),
    /// PyTorch's `padding='same'`: the output has the input's extents (stride 1 only); an odd
    /// total padding puts the extra zero after the input, as PyTorch does.
    Same,
    /// No padding (`padding='valid'`).
    Valid,
}

/// Stride, padding, dilation and groups of [`conv2d`](super::conv2d), [`unfold`](super::unfold)
/// and [`fold`](super::fold), each `[rows, columns]` where it has two; build from
/// [`Conv2dOptions::new`] (stride 1, no padding, dilation 1, one group, PyTorch's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Conv2dOptions {
    /// Step between windows.
    pub stride: [usize; 2],
    /// Zeros around the input.
    pub padding: Padding,
    /// Step between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups: input and output channels split in `groups` independent convolutions.
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: [1, 1],
            padding: Padding::Explicit([0, 0]),
            dilation: [1, 1],
            groups: 1,
        }
    }
}

impl autograd_core::Captured for Conv2dOptions {}

impl Conv2dOptions {
    /// PyTorch's defaults: stride 1, no padding, dilation 1, one group.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// With step `stride` between windows.
    #[must_use]
    pub fn stride(self, stride: [usize; 2]) -> Self {
        Conv2dOptions { stride, ..self }
    }

    /// With `padding` around the input.
    #[must_use]
    pub fn padding(self, padding: Padding) -> Self {
        Conv2dOptions { padding, ..self }
    }

    /// With step `dilation` between kernel taps.
    #[must_use]
    pub fn dilation(self, dilation: [usize; 2]) -> Self {
        Conv2dOptions { dilation, ..self }
    }

    /// With `groups` channel groups.
    #[must_use]
    pub fn groups(self, groups: usize) -> Self {
        Conv2dOptions { groups, ..self }
    }
}

/// Stride, padding, output padding, dilation and groups of
/// [`conv_transpose2d`](super::conv_transpose2d), as PyTorch's; build from
/// [`ConvTranspose2dOptions::new`] (stride 1, no padding, dilation 1, one group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConvTranspose2dOptions {
    /// Step between the windows of the convolution this transposes.
    pub stride: [usize; 2],
    /// Padding of the convolution this transposes (cut from the output).
    pub padding: [usize; 2],
    /// Extra rows and columns at the end of the output, to pick one of the sizes a strided
    /// convolution maps to the same output (less than the stride or the dilation).
    pub output_padding: [usize; 2],
    /// Step between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups.
    pub groups: usize,
}

impl Default for ConvTranspose2dOptions {
    fn default() -> Self {
        ConvTranspose2dOptions {
            stride: [1, 1],
            padding: [0, 0],
            output_padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

impl ConvTranspose2dOptions {
    /// PyTorch's defaults: stride 1, no padding or output padding, dilation 1, one group.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// With stride `stride`.
    #[must_use]
    pub fn stride(self, stride: [usize; 2]) -> Self {
        ConvTranspose2dOptions { stride, ..self }
    }

    /// With padding `padding`.
    #[must_use]
    pub fn padding(self, padding: [usize; 2]) -> Self {
        ConvTranspose2dOptions { padding, ..self }
    }

    /// With output padding `output_padding`.
    #[must_use]
    pub fn output_padding(self, output_padding: [usize; 2]) -> Self {
        ConvTranspose2dOptions {
            output_padding,
            ..self
        }
    }

    /// With dilation `dilation`.
    #[must_use]
    pub fn dilation(self, dilation: [usize; 2]) -> Self {
        ConvTranspose2dOptions { dilation, ..self }
    }

    /// With `groups` channel groups.
    #[must_use]
    pub fn groups(self, groups: usize) -> Self {
        ConvTranspose2dOptions { groups, ..self }
    }
}

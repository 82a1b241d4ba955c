//! `Pool2dOptions` and the window geometry of a 2-D pooling: the output extents and the checks
//! PyTorch makes, computed once per call and shared by the forward and backward kernels.

use autograd_core::{ensure, Captured, Result};

/// The options of [`max_pool2d`](crate::max_pool2d) and [`avg_pool2d`](crate::avg_pool2d), as
/// PyTorch's keyword arguments: `stride` (`None`: the kernel), `padding` (implicit, at most half
/// the kernel), `dilation` (max pooling only), `ceil_mode` (round the output extent up) and
/// `count_include_pad` (average pooling divides by the window including its padding; default
/// true). Built with [`Pool2dOptions::new`] and its setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pool2dOptions {
    /// The step between windows, `[h, w]`; `None` steps by the kernel.
    pub stride: Option<[usize; 2]>,
    /// Implicit padding on both sides, `[h, w]`.
    pub padding: [usize; 2],
    /// The spacing between a window's elements, `[h, w]` (max pooling only).
    pub dilation: [usize; 2],
    /// Whether the output extent rounds up (a last partial window) instead of down.
    pub ceil_mode: bool,
    /// Whether average pooling counts padded positions in its divisor.
    pub count_include_pad: bool,
}

impl Default for Pool2dOptions {
    /// PyTorch's defaults: stride the kernel, no padding, dilation 1, floor mode, padding
    /// counted.
    fn default() -> Self {
        Pool2dOptions {
            stride: None,
            padding: [0, 0],
            dilation: [1, 1],
            ceil_mode: false,
            count_include_pad: true,
        }
    }
}

impl Captured for Pool2dOptions {}

impl Pool2dOptions {
    /// The defaults ([`Pool2dOptions::default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// With the step between windows `stride`.
    #[must_use]
    pub fn stride(mut self, stride: [usize; 2]) -> Self {
        self.stride = Some(stride);
        self
    }

    /// With implicit padding `padding` on both sides.
    #[must_use]
    pub fn padding(mut self, padding: [usize; 2]) -> Self {
        self.padding = padding;
        self
    }

    /// With the spacing `dilation` between a window's elements.
    #[must_use]
    pub fn dilation(mut self, dilation: [usize; 2]) -> Self {
        self.dilation = dilation;
        self
    }

    /// With the output extent rounded up (`true`) or down.
    #[must_use]
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// With padded positions counted in average pooling's divisor (`true`) or not.
    #[must_use]
    pub fn count_include_pad(mut self, count_include_pad: bool) -> Self {
        self.count_include_pad = count_include_pad;
        self
    }
}

/// The windows along one axis: window `o` starts at `o * stride - padding` (in input
/// coordinates, possibly negative) and takes `kernel` elements `dilation` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) input: usize,
    pub(crate) kernel: usize,
    pub(crate) stride: usize,
    pub(crate) padding: usize,
    pub(crate) dilation: usize,
    pub(crate) output: usize,
}

impl Span {
    /// Whether every window lies wholly inside the input (no padding, none past the end).
    pub(crate) fn inside(&self) -> bool {
        self.padding == 0
            && self.output > 0
            && (self.output - 1) * self.stride + (self.kernel - 1) * self.dilation < self.input
    }

    /// The first input coordinate of window `o` (negative inside the padding).
    #[inline]
    pub(crate) fn start(&self, o: usize) -> isize {
        // extents fit isize: they count elements of an allocated tensor
        (o * self.stride) as isize - self.padding as isize
    }
}

/// The geometry of a pooling over the last two axes: the two spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window2d {
    pub(crate) h: Span,
    pub(crate) w: Span,
}

/// PyTorch's `pooling_output_shape`: `floor` (or `ceil`) of `(input + 2 padding - dilation
/// (kernel - 1) - 1) / stride + 1`, and in ceil mode one less when the last window would start
/// past the input and its left padding. Negative when the kernel does not fit.
fn output_extent(input: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> i128 {
    let (input, k, s, p, d) = (input as i128, k as i128, s as i128, p as i128, d as i128);
    let span = input + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut out = span.div_euclid(s) + 1;
    if ceil && (out - 1) * s >= input + p {
        out -= 1;
    }
    out
}

impl Window2d {
    /// The windows of `op` over an input with last extents `[h, w]`, checked as PyTorch checks
    /// them: positive kernel, stride and dilation, padding at most half the kernel, and an
    /// output of at least one element per axis (`Error::Value` with the sizes otherwise).
    pub(crate) fn new(
        op: &str,
        [h, w]: [usize; 2],
        kernel: [usize; 2],
        options: &Pool2dOptions,
    ) -> Result<Window2d> {
        let stride = options.stride.unwrap_or(kernel);
        let (padding, dilation) = (options.padding, options.dilation);
        ensure!(
            kernel.iter().all(|&k| k > 0),
            Value,
            "{op}: the kernel must be positive, got {kernel:?}"
        );
        ensure!(
            stride.iter().all(|&s| s > 0),
            Value,
            "{op}: the stride must be positive, got {stride:?}"
        );
        ensure!(
            dilation.iter().all(|&d| d > 0),
            Value,
            "{op}: the dilation must be positive, got {dilation:?}"
        );
        ensure!(
            padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2,
            Value,
            "{op}: the padding must be at most half the kernel, got padding {padding:?} for kernel {kernel:?}"
        );
        let ceil = options.ceil_mode;
        let oh = output_extent(h, kernel[0], stride[0], padding[0], dilation[0], ceil);
        let ow = output_extent(w, kernel[1], stride[1], padding[1], dilation[1], ceil);
        ensure!(
            oh >= 1 && ow >= 1,
            Value,
            "{op}: the kernel {kernel:?} (dilation {dilation:?}) is larger than the padded input: input [{h}, {w}], padding {padding:?}, output would be [{oh}, {ow}]"
        );
        // both are at most the input extent plus padding: they fit usize
        let (oh, ow) = (oh as usize, ow as usize);
        let span = |i: usize, input: usize, output: usize| Span {
            input,
            kernel: kernel[i],
            stride: stride[i],
            padding: padding[i],
            dilation: dilation[i],
            output,
        };
        Ok(Window2d {
            h: span(0, h, oh),
            w: span(1, w, ow),
        })
    }

    /// Elements of one input plane.
    pub(crate) fn input_plane(&self) -> usize {
        self.h.input * self.w.input
    }

    /// Elements of one output plane.
    pub(crate) fn output_plane(&self) -> usize {
        self.h.output * self.w.output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_extents_follow_pytorch_in_floor_and_ceil_mode() {
        // torch.nn.functional.max_pool2d(torch.zeros(1, 1, 5, 5), 2, 2): 2; ceil_mode: 3
        assert_eq!(output_extent(5, 2, 2, 0, 1, false), 2);
        assert_eq!(output_extent(5, 2, 2, 0, 1, true), 3);
        // ceil mode never starts a window in the right padding: 4, k 2, s 2, p 1 -> 3
        assert_eq!(output_extent(4, 2, 2, 1, 1, true), 3);
        // dilation 2, kernel 3 covers 5: input 4 + 2 padding -> 2
        assert_eq!(output_extent(4, 3, 1, 1, 2, false), 2);
        assert_eq!(output_extent(2, 5, 1, 0, 1, false), -2);
    }
}

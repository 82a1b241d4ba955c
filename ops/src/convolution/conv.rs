//! The public convolutions: `conv2d`, `conv1d` and `conv_transpose2d`, which check their
//! arguments (nothing is computed or recorded on error) and run the recorded ops of `node`.

use autograd_core::{bail, ensure, Result, Tensor};

use super::geometry::{
    ensure_f32, ensure_positive, ensure_rank, output_extents, resolve_padding, Geom,
};
use super::node;
use super::options::{Conv2dOptions, ConvTranspose2dOptions, Padding};

/// Checks an optional bias: Float32, shape `[channels]`.
fn check_bias(op: &str, bias: Option<&Tensor>, channels: usize) -> Result<()> {
    if let Some(b) = bias {
        ensure_f32(op, "the bias", b)?;
        ensure!(
            b.dims() == [channels],
            Value,
            "{op}: the bias must have shape [{channels}], got {}",
            b.shape()
        );
    }
    Ok(())
}

/// The geometry of `conv2d(x, w, _, options)`, every argument checked.
fn conv2d_geometry(x: &Tensor, w: &Tensor, options: &Conv2dOptions) -> Result<Geom> {
    const OP: &str = "conv2d";
    ensure_f32(OP, "the input", x)?;
    ensure_f32(OP, "the weight", w)?;
    ensure_rank(OP, "the input [N, C, H, W]", x, 4)?;
    ensure_rank(OP, "the weight [C_out, C_in / groups, kH, kW]", w, 4)?;
    let Conv2dOptions {
        stride,
        padding,
        dilation,
        groups,
    } = *options;
    ensure_positive(OP, stride, dilation, groups)?;
    let (xd, wd) = (x.dims(), w.dims());
    ensure!(
        xd[1].is_multiple_of(groups) && wd[0].is_multiple_of(groups),
        Value,
        "conv2d: input channels {} and output channels {} must both be divisible by groups {groups}",
        xd[1],
        wd[0]
    );
    let expects = wd[1].checked_mul(groups);
    ensure!(
        expects == Some(xd[1]),
        Value,
        "conv2d: the weight {} expects {} input channels per group x {groups} groups, the input {} has {}",
        w.shape(),
        wd[1],
        x.shape(),
        xd[1]
    );
    let kernel = [wd[2], wd[3]];
    let (pad, total) = resolve_padding(OP, padding, kernel, stride, dilation)?;
    let [oh, ow] = output_extents(OP, [xd[2], xd[3]], total, kernel, (stride, dilation))?;
    Geom {
        n: xd[0],
        c: xd[1],
        h: xd[2],
        w: xd[3],
        cout: wd[0],
        kh: kernel[0],
        kw: kernel[1],
        stride,
        pad,
        dil: dilation,
        groups,
        oh,
        ow,
    }
    .checked(OP)
}

/// The 2-D convolution (cross-correlation, as PyTorch's `conv2d`) of `x` (`[N, C_in, H, W]`)
/// with `w` (`[C_out, C_in / groups, kH, kW]`) plus an optional `bias` (`[C_out]`), giving
/// `[N, C_out, H_out, W_out]` with `H_out = (H + padding - dilation (kH - 1) - 1) / stride + 1`.
///
/// Runs as one GEMM per image and group over the image's windows (im2col), images spread over
/// the kernel threads; backward computes `dX = fold(Wᵀ · dY)`, `dW = Σ dY · cols(X)ᵀ` and the
/// bias's gradient as sums of `dY`, each only when wanted. `x` may be a strided view (an NHWC
/// tensor permuted to NCHW, a channel slice): it is read where it lies.
///
/// Errors: a dtype other than Float32 (`Error::Type`); wrong ranks, channels not divisible by
/// `groups` or not matching the weight, a bias of another shape, a zero stride, dilation or
/// group count, [`Padding::Same`] with a stride above 1, a kernel larger than the padded
/// input, or sizes whose products or padded extents do not fit an `isize` (`Error::Value`,
/// with the sizes in the message).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{conv2d, Conv2dOptions, Padding};
/// let x = Tensor::from_vec((0..9).map(|v| v as f32).collect::<Vec<_>>(), shape![1, 1, 3, 3])?;
/// let w = Tensor::from_vec(vec![1.0f32; 4], shape![1, 1, 2, 2])?;
/// // each output is the sum of a 2x2 window
/// let y = conv2d(&x, &w, None, &Conv2dOptions::new())?;
/// assert_eq!(y.values::<f32>()?, [8.0, 12.0, 20.0, 24.0]);
/// let same = conv2d(&x, &w, None, &Conv2dOptions::new().padding(Padding::Same))?;
/// assert_eq!(same.dims(), [1, 1, 3, 3]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn conv2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    options: &Conv2dOptions,
) -> Result<Tensor> {
    let geom = conv2d_geometry(x, w, options)?;
    check_bias("conv2d", bias, geom.cout)?;
    node::conv2d(x, w, bias, geom)
}

/// The 1-D convolution of `x` (`[N, C_in, L]`) with `w` (`[C_out, C_in / groups, k]`) plus an
/// optional `bias` (`[C_out]`), as PyTorch's `conv1d`: a one-row [`conv2d`], with the same
/// errors (and `Error::Value` for inputs that are not rank 3).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::conv1d;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![1, 1, 4])?;
/// let w = Tensor::from_vec(vec![1.0f32, -1.0], shape![1, 1, 2])?;
/// assert_eq!(conv1d(&x, &w, None, 1, 0, 1, 1)?.values::<f32>()?, [-1.0, -1.0, -1.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn conv1d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Result<Tensor> {
    const OP: &str = "conv1d";
    ensure_f32(OP, "the input", x)?;
    ensure_f32(OP, "the weight", w)?;
    ensure_rank(OP, "the input [N, C, L]", x, 3)?;
    ensure_rank(OP, "the weight [C_out, C_in / groups, k]", w, 3)?;
    let (xd, wd) = (x.dims(), w.dims());
    let x4 = x.reshape(&[xd[0], xd[1], 1, xd[2]])?;
    let w4 = w.reshape(&[wd[0], wd[1], 1, wd[2]])?;
    let options = Conv2dOptions::new()
        .stride([1, stride])
        .padding(Padding::Explicit([0, padding]))
        .dilation([1, dilation])
        .groups(groups);
    let geom = conv2d_geometry(&x4, &w4, &options).map_err(|e| e.context(OP))?;
    check_bias(OP, bias, geom.cout)?;
    let y = node::conv2d(&x4, &w4, bias, geom)?;
    y.reshape(&[geom.n, geom.cout, geom.ow])
}

/// The 2-D transposed convolution of `x` (`[N, C_in, H, W]`) with `w`
/// (`[C_in, C_out / groups, kH, kW]`) plus an optional `bias` (`[C_out]`), as PyTorch's
/// `conv_transpose2d`: the gradient of a [`conv2d`] with respect to its input, giving
/// `[N, C_out, H_out, W_out]` with `H_out = (H - 1) stride - 2 padding + dilation (kH - 1) +
/// output_padding + 1`.
///
/// Errors: a dtype other than Float32 (`Error::Type`); wrong ranks, channels not divisible by
/// `groups` or not matching the weight, a bias of another shape, a zero stride, dilation or
/// group count, an output padding not below the stride or the dilation, an empty output, or
/// sizes whose products or padded extents do not fit an `isize` (`Error::Value`).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{conv_transpose2d, ConvTranspose2dOptions};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![1, 1, 1, 2])?;
/// let w = Tensor::from_vec(vec![1.0f32, 10.0], shape![1, 1, 1, 2])?;
/// let options = ConvTranspose2dOptions::new().stride([1, 2]);
/// let y = conv_transpose2d(&x, &w, None, &options)?;
/// assert_eq!(y.values::<f32>()?, [1.0, 10.0, 2.0, 20.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn conv_transpose2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    options: &ConvTranspose2dOptions,
) -> Result<Tensor> {
    const OP: &str = "conv_transpose2d";
    ensure_f32(OP, "the input", x)?;
    ensure_f32(OP, "the weight", w)?;
    ensure_rank(OP, "the input [N, C_in, H, W]", x, 4)?;
    ensure_rank(OP, "the weight [C_in, C_out / groups, kH, kW]", w, 4)?;
    let ConvTranspose2dOptions {
        stride,
        padding,
        output_padding,
        dilation,
        groups,
    } = *options;
    ensure_positive(OP, stride, dilation, groups)?;
    let (xd, wd) = (x.dims(), w.dims());
    ensure!(
        xd[1].is_multiple_of(groups),
        Value,
        "conv_transpose2d: input channels {} must be divisible by groups {groups}",
        xd[1]
    );
    ensure!(
        wd[0] == xd[1],
        Value,
        "conv_transpose2d: the weight {} expects {} input channels, the input {} has {}",
        w.shape(),
        wd[0],
        x.shape(),
        xd[1]
    );
    let mut out = [0usize; 2];
    for a in 0..2 {
        let (input, k) = (xd[2 + a], wd[2 + a]);
        ensure!(
            output_padding[a] < stride[a] || output_padding[a] < dilation[a],
            Value,
            "conv_transpose2d: output_padding {output_padding:?} must be smaller than the stride {stride:?} or the dilation {dilation:?}"
        );
        ensure!(
            k > 0,
            Value,
            "conv_transpose2d: the weight {} has an empty kernel",
            w.shape()
        );
        let full = input
            .saturating_sub(1)
            .checked_mul(stride[a])
            .and_then(|s| s.checked_add(dilation[a].checked_mul(k - 1)?))
            .and_then(|s| s.checked_add(output_padding[a])?.checked_add(1))
            .zip(padding[a].checked_mul(2));
        let Some((full, cut)) = full else {
            bail!(
                Value,
                "conv_transpose2d: the output is too large to index: input extent {input}, kernel {k}, stride {}, padding {}, dilation {}, output padding {}",
                stride[a],
                padding[a],
                dilation[a],
                output_padding[a]
            );
        };
        ensure!(
            input > 0 && full > cut,
            Value,
            "conv_transpose2d: the output would be empty: input extent {input}, kernel {k}, stride {}, padding {}, dilation {}, output padding {}",
            stride[a],
            padding[a],
            dilation[a],
            output_padding[a]
        );
        out[a] = full - cut;
    }
    let Some(c) = wd[1].checked_mul(groups) else {
        bail!(
            Value,
            "conv_transpose2d: the weight {} with {groups} groups gives too many output channels",
            w.shape()
        );
    };
    let geom = Geom {
        n: xd[0],
        c,
        h: out[0],
        w: out[1],
        cout: xd[1],
        kh: wd[2],
        kw: wd[3],
        stride,
        pad: padding,
        dil: dilation,
        groups,
        oh: xd[2],
        ow: xd[3],
    }
    .checked(OP)?;
    check_bias(OP, bias, geom.c)?;
    node::conv_transpose2d(x, w, bias, geom)
}

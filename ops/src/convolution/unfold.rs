//! `unfold` and `fold`: im2col and its adjoint as public ops, as PyTorch's
//! `torch.nn.functional.unfold` and `fold`.

use autograd_core::{bail, ensure, Result, Tensor};

use super::geometry::{
    ensure_f32, ensure_positive, ensure_rank, output_extents, resolve_padding, Geom,
};
use super::node;
use super::options::Conv2dOptions;

/// The geometry of windows `kernel` over images `[n, c, h, w]` under `options` (one group).
fn windows(
    op: &str,
    dims: [usize; 4],
    kernel: [usize; 2],
    options: &Conv2dOptions,
) -> Result<Geom> {
    let Conv2dOptions {
        stride,
        padding,
        dilation,
        groups,
    } = *options;
    ensure_positive(op, stride, dilation, groups)?;
    ensure!(groups == 1, Value, "{op}: groups must be 1, got {groups}");
    let [n, c, h, w] = dims;
    let (pad, total) = resolve_padding(op, padding, kernel, stride, dilation)?;
    let [oh, ow] = output_extents(op, [h, w], total, kernel, (stride, dilation))?;
    let rows = c
        .checked_mul(kernel[0])
        .and_then(|r| r.checked_mul(kernel[1]));
    let Some(rows) = rows else {
        bail!(
            Value,
            "{op}: {c} channels of kernel {kernel:?} are too many rows to index"
        );
    };
    Geom {
        n,
        c,
        h,
        w,
        cout: rows,
        kh: kernel[0],
        kw: kernel[1],
        stride,
        pad,
        dil: dilation,
        groups: 1,
        oh,
        ow,
    }
    .checked(op)
}

/// The sliding windows of `x` (`[N, C, H, W]`, Float32) as columns: `[N, C kH kW, L]` with
/// `L` windows, row `(c kH + i) kW + j` holding tap `(i, j)` of channel `c`, as PyTorch's
/// `unfold` (im2col). `options` gives stride, padding and dilation; `groups` must be 1.
///
/// Errors: a dtype other than Float32 (`Error::Type`); a rank other than 4, a zero stride or
/// dilation, `groups` other than 1, a kernel larger than the padded input, or columns or a
/// padded input too large to index (`Error::Value`).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{unfold, Conv2dOptions};
/// let x = Tensor::from_vec((0..6).map(|v| v as f32).collect::<Vec<_>>(), shape![1, 1, 2, 3])?;
/// let cols = unfold(&x, [2, 2], &Conv2dOptions::new())?;
/// assert_eq!(cols.dims(), [1, 4, 2]);
/// assert_eq!(cols.values::<f32>()?, [0.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn unfold(x: &Tensor, kernel: [usize; 2], options: &Conv2dOptions) -> Result<Tensor> {
    ensure_f32("unfold", "the input", x)?;
    ensure_rank("unfold", "the input [N, C, H, W]", x, 4)?;
    let d = x.dims();
    let geom = windows("unfold", [d[0], d[1], d[2], d[3]], kernel, options)?;
    node::unfold(x, geom)
}

/// The adjoint of [`unfold`]: columns `cols` (`[N, C kH kW, L]`, Float32) summed back into
/// images `[N, C, output[0], output[1]]`, overlapping windows adding up, as PyTorch's `fold`
/// (col2im).
///
/// Errors: a dtype other than Float32 (`Error::Type`); a rank other than 3, a kernel of more
/// taps than fit a `usize`, a column count not divisible by `kH kW`, an `L` other than the
/// number of windows of `output`, or the errors of [`unfold`] (`Error::Value`).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{fold, Conv2dOptions};
/// let cols = Tensor::from_vec(vec![1.0f32; 8], shape![1, 4, 2])?;
/// let x = fold(&cols, [2, 3], [2, 2], &Conv2dOptions::new())?;
/// // the middle column is in both windows
/// assert_eq!(x.values::<f32>()?, [1.0, 2.0, 1.0, 1.0, 2.0, 1.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn fold(
    cols: &Tensor,
    output: [usize; 2],
    kernel: [usize; 2],
    options: &Conv2dOptions,
) -> Result<Tensor> {
    ensure_f32("fold", "the columns", cols)?;
    ensure_rank("fold", "the columns [N, C kH kW, L]", cols, 3)?;
    let d = cols.dims();
    let Some(k) = kernel[0].checked_mul(kernel[1]) else {
        bail!(
            Value,
            "fold: the kernel {kernel:?} has too many taps to index"
        );
    };
    ensure!(
        k > 0 && d[1].is_multiple_of(k),
        Value,
        "fold: the columns {} have {} rows, not a multiple of the kernel's {kernel:?} {k} taps",
        cols.shape(),
        d[1]
    );
    let geom = windows(
        "fold",
        [d[0], d[1] / k, output[0], output[1]],
        kernel,
        options,
    )?;
    ensure!(
        geom.l() == d[2],
        Value,
        "fold: the columns {} have {} windows, an output {output:?} has {} ({} x {})",
        cols.shape(),
        d[2],
        geom.l(),
        geom.oh,
        geom.ow
    );
    node::fold(cols, geom)
}

//! `softmax` and `log_softmax` along any top-level axis, numerically stable (each row's
//! maximum is subtracted before exponentiating).
//!
//! Rows are read from any layout (an axis other than the last, a transposed or sliced input)
//! and the result is compact row-major. The forward kernels take Float32 and Float64; only a
//! Float32 result records a node.

// The per-row arithmetic is `#[inline(always)]` so that `simd!` compiles it into each copy.
#![allow(clippy::inline_always)]

use autograd_core::kernel::{
    lane_sum, log_sum_exp_shifted, map_rows_along, read_row_pair, row, row_max, sum_f64,
    write_rows, Real, Rows,
};
use autograd_core::{bail, simd, Axis, DType, Result, Tensor};

/// `e^(x - max) / sum e^(x - max)` along `axis` for every row, written into `out`.
fn softmax_row<T: Real>(x: &[T], out: &mut [T]) {
    simd!(softmax_body(x, out));
}

#[inline(always)]
fn softmax_body<T: Real>(x: &[T], out: &mut [T]) {
    let m = row_max(x);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v - m).exp_();
    }
    let inv = T::from_f64(1.0 / sum_f64(out));
    for o in out.iter_mut() {
        *o = *o * inv;
    }
}

/// `x - max - ln sum e^(x - max)` for every element of a row, written into `out`.
fn log_softmax_row<T: Real>(x: &[T], out: &mut [T]) {
    simd!(log_softmax_body(x, out));
}

#[inline(always)]
fn log_softmax_body<T: Real>(x: &[T], out: &mut [T]) {
    let m = row_max(x);
    let lse = T::from_f64(log_sum_exp_shifted(x, m));
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v - m) - lse;
    }
}

/// `dx = y (g - sum g y)` for one row of softmax.
#[inline(always)]
fn softmax_gradient_row(g: &[f32], y: &[f32], out: &mut [f32]) {
    let dot = lane_sum(g, y, |a, b| a * b) as f32;
    for ((o, &gi), &yi) in out.iter_mut().zip(g).zip(y) {
        *o = yi * (gi - dot);
    }
}

/// `dx = g - e^y sum g` for one row of log_softmax.
#[inline(always)]
fn log_softmax_gradient_row(g: &[f32], y: &[f32], out: &mut [f32]) {
    let total = lane_sum(g, g, |v, _| v) as f32;
    for ((o, &gi), &yi) in out.iter_mut().zip(g).zip(y) {
        *o = gi - autograd_core::kernel::exp_f32(yi) * total;
    }
}

/// `kernel(row, out_row)` for every row of `x` along `axis`, for one element type.
fn rows_of<T: Real>(x: &Tensor, rows: Rows, kernel: fn(&[T], &mut [T])) -> Result<Tensor> {
    map_rows_along::<T, T>(x, rows, |_, row, out| kernel(row, out))
}

/// [`rows_of`] dispatched on `x`'s dtype (Float32 or Float64).
fn float_rows(
    op: &str,
    x: &Tensor,
    axis: usize,
    f32_kernel: fn(&[f32], &mut [f32]),
    f64_kernel: fn(&[f64], &mut [f64]),
) -> Result<Tensor> {
    let rows = Rows::along(op, &x.dims(), axis)?;
    match x.dtype() {
        DType::Float32 => rows_of(x, rows, f32_kernel),
        DType::Float64 => rows_of(x, rows, f64_kernel),
        other => bail!(Type, "{op} takes a Float32 or Float64 tensor, got {other}"),
    }
}

/// `f(k, g_row, y_row, out_row)` for every row of the Float32 cotangent `g` and result `y`
/// along `axis`: the shape of both VJPs.
fn vjp_rows(
    g: &Tensor,
    y: &Tensor,
    axis: usize,
    f: impl Fn(&[f32], &[f32], &mut [f32]) + Sync,
) -> Result<Tensor> {
    let rows = Rows::along("softmax", &y.dims(), axis)?;
    read_row_pair::<f32, f32, _>(g, y, rows, |eg, ey| {
        write_rows::<f32, (Vec<f32>, Vec<f32>)>(y, rows, |k, (bg, by), out| {
            f(row(&eg, k, rows.n, bg), row(&ey, k, rows.n, by), out);
        })
    })
}

/// The softmax of `x` along the top-level `axis` (negative from the back, as PyTorch's `dim`): `e^x / sum e^x` over every row, computed as
/// `e^(x - max)` so that large logits do not overflow. Float32 (differentiable) or Float64;
/// an axis out of range is `Error::Value`, another dtype `Error::Type`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::softmax;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![1, 3]).unwrap();
/// let y = softmax(&x, 1).unwrap().values::<f32>().unwrap();
/// assert_eq!(softmax(&x, -1).unwrap().values::<f32>().unwrap(), y);
/// assert!((y[0] - 0.090_030_57).abs() < 1e-6 && (y[2] - 0.665_240_96).abs() < 1e-6);
/// ```
#[track_caller]
pub fn softmax(x: &Tensor, axis: impl Into<Axis>) -> Result<Tensor> {
    let axis = axis
        .into()
        .resolve(x.layout().rank())
        .map_err(|e| e.context("softmax"))?;
    node::softmax(x, axis)
}

/// The logarithm of the softmax of `x` along the top-level `axis` (negative from the back), as
/// `x - max - ln sum e^(x - max)` (finite where `ln(softmax)` would underflow to -inf).
/// Float32 (differentiable) or Float64; errors as [`softmax`].
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::log_softmax;
/// let x = Tensor::from_vec(vec![0.0f32, 0.0], shape![2]).unwrap();
/// let y = log_softmax(&x, 0).unwrap().values::<f32>().unwrap();
/// assert!((y[0] + std::f32::consts::LN_2).abs() < 1e-6);
/// ```
#[track_caller]
pub fn log_softmax(x: &Tensor, axis: impl Into<Axis>) -> Result<Tensor> {
    let axis = axis
        .into()
        .resolve(x.layout().rank())
        .map_err(|e| e.context("log_softmax"))?;
    node::log_softmax(x, axis)
}

/// The nodes, on a resolved axis (`0..rank`); named as the public functions, so a recorded node
/// is `softmax` or `log_softmax`.
mod node {
    use super::{
        float_rows, log_softmax_gradient_row, log_softmax_row, softmax_gradient_row, softmax_row,
        vjp_rows,
    };
    use autograd_core::{differentiable, simd, Result, Tensor};

    #[differentiable]
    pub(super) fn softmax(x: &Tensor, axis: usize) -> Result<Tensor> {
        // y = e^x / s:  dy_i/dx_j = y_i ([i = j] - y_j), so dx_j = y_j (g_j - sum_i g_i y_i)
        fn vjp(g: &Tensor, axis: usize, output: &Tensor) -> Result<Option<Tensor>> {
            Ok(Some(vjp_rows(g, output, axis, |g, y, out| {
                simd!(softmax_gradient_row(g, y, out));
            })?))
        }
        float_rows("softmax", x, axis, softmax_row, softmax_row)
    }

    #[differentiable]
    pub(super) fn log_softmax(x: &Tensor, axis: usize) -> Result<Tensor> {
        // y = x - lse(x):  dy_i/dx_j = [i = j] - softmax_j = [i = j] - e^(y_j),
        // so dx_j = g_j - e^(y_j) sum_i g_i
        fn vjp(g: &Tensor, axis: usize, output: &Tensor) -> Result<Option<Tensor>> {
            Ok(Some(vjp_rows(g, output, axis, |g, y, out| {
                simd!(log_softmax_gradient_row(g, y, out));
            })?))
        }
        float_rows("log_softmax", x, axis, log_softmax_row, log_softmax_row)
    }
}

//! `rms_norm`: LLaMA's root-mean-square normalisation over the trailing axes with an optional
//! weight, as PyTorch's `rms_norm`. The forward pass keeps each row's reciprocal RMS as a
//! residual, so the fused VJP reads it instead of recomputing it.

// The per-row arithmetic is `#[inline(always)]` so that `simd!` compiles it into each copy.
#![allow(clippy::inline_always)]

use std::sync::Arc;

use autograd_core::kernel::{
    alloc, column_sums, lane_sum, map_rows_along, per_row, read_row_pair, read_rows, row,
    write_rows, Rows,
};
use autograd_core::{differentiable, ensure, simd, Layout, Result, Tensor};

use super::elementwise_loss::ensure_f32;

/// Checks every argument of [`rms_norm`] against the others, before anything is computed.
fn check(x: &Tensor, normalized_shape: &[usize], weight: Option<&Tensor>, eps: f32) -> Result<()> {
    ensure_f32("rms_norm", "the input", x)?;
    let dims = x.dims();
    ensure!(
        !normalized_shape.is_empty()
            && normalized_shape.len() <= dims.len()
            && dims[dims.len() - normalized_shape.len()..] == *normalized_shape,
        Value,
        "rms_norm: normalized_shape {normalized_shape:?} must be the trailing extents of the input's shape {}",
        x.shape()
    );
    if let Some(w) = weight {
        ensure_f32("rms_norm", "the weight", w)?;
        ensure!(
            w.dims() == normalized_shape,
            Value,
            "rms_norm: the weight of shape {} must have normalized_shape {normalized_shape:?}",
            w.shape()
        );
    }
    ensure!(
        eps >= 0.0 && eps.is_finite(),
        Value,
        "rms_norm: eps must be finite and non-negative, got {eps}"
    );
    Ok(())
}

/// The weight's values, or ones for each of the `rows.n` elements of a row; nothing when
/// there is no row (an empty batch may have rows of 2^40).
fn weight_or_ones(w: Option<&Tensor>, rows: Rows) -> Result<Vec<f32>> {
    match w {
        _ if rows.count() == 0 => Ok(Vec::new()),
        Some(w) => w.values::<f32>(),
        None => alloc::filled(rows.n, 1.0),
    }
}

/// Normalises `x` over its trailing axes `normalized_shape` (the last extents of `x`'s
/// shape) by their root mean square, as PyTorch's `rms_norm` and LLaMA's RMSNorm: every row
/// `r` becomes `r / sqrt(mean(r^2) + eps) * weight`. `eps` `None` is `f32::EPSILON`, as
/// PyTorch takes the dtype's epsilon; `weight` (shape `normalized_shape`) is optional.
///
/// Float32 only (`Error::Type`); a `normalized_shape` that is empty or not the trailing
/// extents, a weight of another shape, or a negative or non-finite `eps` are `Error::Value`.
/// The VJP is fused (one pass per row over the saved reciprocal RMS) and computes only the
/// gradients the traversal wants.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::rms_norm;
/// let x = Tensor::from_vec(vec![3.0f32, 4.0], shape![1, 2]).unwrap();
/// let y = rms_norm(&x, &[2], None, Some(0.0)).unwrap().values::<f32>().unwrap();
/// // the root mean square is sqrt(12.5)
/// assert!((y[0] - 3.0 / 12.5f32.sqrt()).abs() < 1e-6);
/// ```
#[differentiable]
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f32>,
) -> Result<Tensor> {
    // Per row of n elements, with r = 1 / sqrt(mean(x^2) + eps), xh = x r and gh = g w:
    //   dx = r (gh - xh mean(gh xh))   (r depends on every x of the row)
    //   dw = sum over rows of g xh
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        rstd: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let rows = Rows::trailing(&x.dims(), normalized_shape.len());
        let rstd = rstd.values::<f32>()?;
        let n = rows.n;
        let gx = if needs.input(0) {
            let w = weight_or_ones(weight, rows)?;
            Some(read_row_pair::<f32, f32, _>(g, x, rows, |eg, ex| {
                write_rows::<f32, (Vec<f32>, Vec<f32>)>(x, rows, |k, (bg, bx), out| {
                    let (gr, xr) = (row(&eg, k, n, bg), row(&ex, k, n, bx));
                    simd!(input_gradient_row(out, gr, xr, &w, rstd[k]));
                })
            })?)
        } else {
            None
        };
        let gw = match weight {
            Some(w) if needs.input(1) => {
                let sums = read_row_pair::<f32, f32, _>(g, x, rows, |eg, ex| {
                    column_sums::<(Vec<f32>, Vec<f32>)>(rows, n, |k, (bg, bx), acc| {
                        let (gr, xr) = (row(&eg, k, n, bg), row(&ex, k, n, bx));
                        simd!(weight_gradient_row(acc, gr, xr, rstd[k]));
                    })
                })?;
                Some(w.f32_like(sums.iter().map(|&v| v as f32).collect())?)
            }
            _ => None,
        };
        Ok((gx, gw))
    }
    let eps = eps.unwrap_or(f32::EPSILON);
    check(x, normalized_shape, weight, eps)?;
    let rows = Rows::trailing(&x.dims(), normalized_shape.len());
    let n = rows.n;
    let r = read_rows::<f32, _>(x, rows, |e| {
        per_row::<f32, Vec<f32>>(rows, |k, buf| {
            // rows are read outside `simd!`, so that its closure stays small enough to be
            // inlined into (and vectorised as) each instruction-set copy
            let xr = row(&e, k, n, buf);
            simd!(reciprocal_rms(xr, eps))
        })
    })?;
    #[residual]
    let rstd = x.f32_with_layout(r.clone(), Arc::new(Layout::row_major(&[rows.count()])?))?;
    let w = weight_or_ones(weight, rows)?;
    map_rows_along::<f32, f32>(x, rows, |k, xr, out| {
        simd!(normalised_row(out, xr, &w, r[k]));
    })
}

// The per-row arithmetic, `#[inline(always)]` for `simd!`. Sums run in f32 lanes over blocks
// and in f64 across them (`lane_sum`).

/// A row's `1 / sqrt(mean(x^2) + eps)`.
#[inline(always)]
fn reciprocal_rms(r: &[f32], eps: f32) -> f32 {
    let ms = lane_sum(r, r, |v, _| v * v) / r.len() as f64;
    (1.0 / (ms + f64::from(eps)).sqrt()) as f32
}

/// `out = x r w` for one row.
#[inline(always)]
fn normalised_row(out: &mut [f32], xr: &[f32], w: &[f32], r: f32) {
    for ((o, &xi), &wi) in out.iter_mut().zip(xr).zip(w) {
        *o = xi * r * wi;
    }
}

/// `dx = r (gh - xh mean(gh xh))` for one row, `gh = g w`, `xh = x r`.
#[inline(always)]
fn input_gradient_row(out: &mut [f32], gr: &[f32], xr: &[f32], w: &[f32], r: f32) {
    let n = gr.len() as f64;
    for ((o, &gi), &wi) in out.iter_mut().zip(gr).zip(w) {
        *o = gi * wi;
    }
    let b = (lane_sum(out, xr, |gh, xi| gh * xi * r) / n) as f32;
    for (o, &xi) in out.iter_mut().zip(xr) {
        *o = r * (*o - xi * r * b);
    }
}

/// Adds one row's `g xh` into `acc`.
#[inline(always)]
fn weight_gradient_row(acc: &mut [f64], gr: &[f32], xr: &[f32], r: f32) {
    for ((d, &gi), &xi) in acc.iter_mut().zip(gr).zip(xr) {
        *d += f64::from(gi * xi * r);
    }
}

//! `layer_norm`: normalisation over the trailing axes with an optional affine weight and bias,
//! as PyTorch's `layer_norm`. The forward pass keeps each row's mean and reciprocal standard
//! deviation as residuals, so the VJP reads them instead of recomputing them.

// The per-row arithmetic is `#[inline(always)]` so that `simd!` compiles it into each copy.
#![allow(clippy::inline_always)]

use std::sync::Arc;

use autograd_core::kernel::{
    alloc, column_sums, lane_sum, overwrite_rows_summing, overwrite_rows_with, read_row_pair,
    read_rows, row, Rows,
};
use autograd_core::{differentiable, ensure, simd, DType, Layout, Result, Tensor};

/// Refuses a tensor that is not Float32 (`Error::Type`).
fn ensure_f32(what: &str, t: &Tensor) -> Result<()> {
    ensure!(
        t.dtype() == &DType::Float32,
        Type,
        "layer_norm: {what} must be Float32, got {}",
        t.dtype()
    );
    Ok(())
}

/// Checks every argument of [`layer_norm`] against the others, before anything is computed.
fn check(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f32,
) -> Result<()> {
    ensure_f32("the input", x)?;
    let dims = x.dims();
    ensure!(
        !normalized_shape.is_empty()
            && normalized_shape.len() <= dims.len()
            && dims[dims.len() - normalized_shape.len()..] == *normalized_shape,
        Value,
        "layer_norm: normalized_shape {normalized_shape:?} must be the trailing extents of the input's shape {}",
        x.shape()
    );
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            ensure_f32(what, t)?;
            ensure!(
                t.dims() == normalized_shape,
                Value,
                "layer_norm: {what} of shape {} must have normalized_shape {normalized_shape:?}",
                t.shape()
            );
        }
    }
    ensure!(
        eps >= 0.0 && eps.is_finite(),
        Value,
        "layer_norm: eps must be finite and non-negative, got {eps}"
    );
    Ok(())
}

/// The values of an optional per-element parameter, or `fill` for each of the `rows.n`
/// elements of a row; nothing when there is no row (an empty batch may have rows of 2^40).
fn values_or(t: Option<&Tensor>, rows: Rows, fill: f32) -> Result<Vec<f32>> {
    match t {
        _ if rows.count() == 0 => Ok(Vec::new()),
        Some(t) => t.values::<f32>(),
        None => alloc::filled(rows.n, fill),
    }
}

/// Normalises `x` over its trailing axes `normalized_shape` (which must be the last extents of
/// `x`'s shape): every row `r` of `prod(normalized_shape)` elements becomes
/// `(r - mean(r)) / sqrt(var(r) + eps) * weight + bias`, with the population variance, as
/// PyTorch's `layer_norm`. `weight` and `bias` (shape `normalized_shape`) are optional.
///
/// Float32 only (`Error::Type` otherwise); a `normalized_shape` that is empty or not the
/// input's trailing extents, a weight or bias of another shape, or a negative or non-finite
/// `eps` are `Error::Value`. The VJP computes only the gradients the traversal wants.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::layer_norm;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![1, 3]).unwrap();
/// let y = layer_norm(&x, &[3], None, None, 0.0).unwrap().values::<f32>().unwrap();
/// // mean 2, variance 2/3: (x - 2) * sqrt(3/2)
/// assert!((y[0] + 1.224_744_9).abs() < 1e-6 && y[1].abs() < 1e-6);
/// ```
#[differentiable]
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f32,
) -> Result<Tensor> {
    // Per row of n elements, with xh = (x - mu) r, r = 1 / sqrt(var + eps) and gh = g w:
    //   dx = r (gh - mean(gh) - xh mean(gh xh))   (mu and var depend on every x of the row)
    //   dw = sum over rows of g xh,   db = sum over rows of g
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        rstd: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let rows = Rows::trailing(&x.dims(), normalized_shape.len());
        let (mean, rstd) = (mean.values::<f32>()?, rstd.values::<f32>()?);
        let n = rows.n;
        let want_w = weight.is_some() && needs.input(1);
        let want_b = bias.is_some() && needs.input(2);
        let want_params = want_w || want_b;
        // [dw | db] summed over the rows, beside dx when both are wanted (one read of g and x;
        // no sums when only dx is)
        let (gx, sums) = if needs.input(0) {
            let w = values_or(weight, rows, 1.0)?;
            let width = if want_params { n.saturating_mul(2) } else { 0 };
            let (gx, sums) = read_row_pair::<f32, f32, _>(g, x, rows, |eg, ex| {
                overwrite_rows_summing::<f32, (Vec<f32>, Vec<f32>)>(
                    x,
                    rows,
                    width,
                    |k, (bg, bx), out, acc| {
                        let (gr, xr) = (row(&eg, k, n, bg), row(&ex, k, n, bx));
                        let stats = (mean[k], rstd[k]);
                        simd!(input_gradient_row(out, gr, xr, &w, stats));
                        if !acc.is_empty() {
                            simd!(parameter_gradient_row(acc, gr, xr, stats));
                        }
                    },
                )
            })?;
            (Some(gx), sums)
        } else if want_params {
            let sums = read_row_pair::<f32, f32, _>(g, x, rows, |eg, ex| {
                column_sums::<(Vec<f32>, Vec<f32>)>(
                    rows,
                    n.saturating_mul(2),
                    |k, (bg, bx), acc| {
                        let (gr, xr) = (row(&eg, k, n, bg), row(&ex, k, n, bx));
                        simd!(parameter_gradient_row(acc, gr, xr, (mean[k], rstd[k])));
                    },
                )
            })?;
            (None, sums)
        } else {
            (None, Vec::new())
        };
        if !want_params {
            return Ok((gx, None, None));
        }
        let (dw, db) = sums.split_at(n);
        let rounded = |s: &[f64]| s.iter().map(|&v| v as f32).collect::<Vec<f32>>();
        let gw = match weight {
            Some(w) if want_w => Some(w.f32_like(rounded(dw))?),
            _ => None,
        };
        let gb = match bias {
            Some(b) if want_b => Some(b.f32_like(rounded(db))?),
            _ => None,
        };
        Ok((gx, gw, gb))
    }
    check(x, normalized_shape, weight, bias, eps)?;
    let rows = Rows::trailing(&x.dims(), normalized_shape.len());
    let n = rows.n;
    let w = values_or(weight, rows, 1.0)?;
    let b = values_or(bias, rows, 0.0)?;
    // per row: the mean and 1 / sqrt(population variance + eps) (two passes over the row),
    // then the row normalised while it is in cache; every element is written, so the result
    // is not zeroed first
    let (y, stats) = read_rows::<f32, _>(x, rows, |e| {
        overwrite_rows_with::<f32, Vec<f32>, (f32, f32)>(x, rows, |k, buf, out| {
            // rows are read outside `simd!`, so that its closure stays small enough to be
            // inlined into (and vectorised as) each instruction-set copy
            let xr = row(&e, k, n, buf);
            let stats = simd!(row_statistics(xr, eps));
            simd!(normalised_row(out, xr, (&w, &b), stats));
            stats
        })
    })?;
    let stats_layout = Arc::new(Layout::row_major(&[rows.count()])?);
    #[residual]
    let mean = x.f32_with_layout(stats.iter().map(|s| s.0).collect(), stats_layout.clone())?;
    #[residual]
    let rstd = x.f32_with_layout(stats.iter().map(|s| s.1).collect(), stats_layout)?;
    Ok(y)
}

// The per-row arithmetic, `#[inline(always)]` for `simd!`. Sums run in f32 lanes over blocks
// and in f64 across them (`lane_sum`).

/// A row's mean and `1 / sqrt(population variance + eps)`, in two passes. The mean is summed
/// relative to the first element, so a constant row has its exact mean (and normalises to
/// exactly 0, as in PyTorch) however long it is.
#[inline(always)]
fn row_statistics(r: &[f32], eps: f32) -> (f32, f32) {
    let n = r.len() as f64;
    let s = r.first().copied().unwrap_or(0.0);
    let mu = (f64::from(s) + lane_sum(r, r, |v, _| v - s) / n) as f32;
    let var = lane_sum(r, r, |v, _| (v - mu) * (v - mu)) / n;
    (mu, (1.0 / (var + f64::from(eps)).sqrt()) as f32)
}

/// `out = (x - mu) r w + b` for one row.
#[inline(always)]
fn normalised_row(out: &mut [f32], xr: &[f32], (w, b): (&[f32], &[f32]), (mu, r): (f32, f32)) {
    for (((o, &xi), &wi), &bi) in out.iter_mut().zip(xr).zip(w).zip(b) {
        *o = (xi - mu) * r * wi + bi;
    }
}

/// `dx = r (gh - mean(gh) - xh mean(gh xh))` for one row, `gh = g w`, `xh = (x - mu) r`.
#[inline(always)]
fn input_gradient_row(out: &mut [f32], gr: &[f32], xr: &[f32], w: &[f32], (mu, r): (f32, f32)) {
    let n = gr.len() as f64;
    // gh and gh xh need w beside g: fold w into the first operand
    for ((o, &gi), &wi) in out.iter_mut().zip(gr).zip(w) {
        *o = gi * wi;
    }
    let a = (lane_sum(out, xr, |gh, _| gh) / n) as f32;
    let b = (lane_sum(out, xr, |gh, xi| gh * (xi - mu) * r) / n) as f32;
    for (o, &xi) in out.iter_mut().zip(xr) {
        *o = r * (*o - a - (xi - mu) * r * b);
    }
}

/// Adds one row's `g xh` and `g` into `acc = [dw | db]`.
#[inline(always)]
fn parameter_gradient_row(acc: &mut [f64], gr: &[f32], xr: &[f32], (mu, r): (f32, f32)) {
    let (dw, db) = acc.split_at_mut(gr.len());
    for ((d, &gi), &xi) in dw.iter_mut().zip(gr).zip(xr) {
        *d += f64::from(gi * (xi - mu) * r);
    }
    for (d, &gi) in db.iter_mut().zip(gr) {
        *d += f64::from(gi);
    }
}

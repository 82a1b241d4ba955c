//! `cross_entropy` from logits, fused: one pass computes each row's log-sum-exp and loss, and
//! the VJP rebuilds the softmax from the saved logits and that per-row statistic.

use std::sync::Arc;

use autograd_core::kernel::{
    exp_f32, lane_sum, log_sum_exp_shifted, per_row, read_rows, row, row_max, write_rows,
};
use autograd_core::{differentiable, ensure, simd, Captured, DType, Layout, Result, Tensor};

use super::reduction::{reduce_losses, spread, Reduction};
use super::target::{class_targets, Targets};

/// The options of [`cross_entropy`], PyTorch's keyword arguments (the reduction and the class
/// weight are arguments of [`cross_entropy_with`], so that code building this struct with
/// every field keeps compiling). `Default` ignores no target and does not smooth.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CrossEntropyOptions {
    /// Rows whose target equals this value contribute neither loss nor gradient, and are not
    /// counted by the mean. `None` (unlike PyTorch's default of -100): every target must be a
    /// class.
    pub ignore_index: Option<i32>,
    /// `eps` in `[0, 1]`: the target distribution is `(1 - eps) onehot(target) + eps / C`.
    pub label_smoothing: f32,
}

impl Captured for CrossEntropyOptions {}

/// A one-element tensor of layout `(1):(1)` holding `value`, in `like`'s carrier class.
pub(crate) fn scalar_like(like: &Tensor, value: f64) -> Result<Tensor> {
    like.f32_with_layout(vec![value as f32], Arc::new(Layout::row_major(&[1])?))
}

/// The mean cross-entropy between `logits` (`[N, C]` or `[N, C, d1, ...]`, Float32, classes on
/// axis 1) and Int32 class `targets` (`[N]` or `[N, d1, ...]`), as PyTorch's `cross_entropy`
/// with `reduction="mean"`: per row `-sum_c q_c log softmax(logits)_c` with
/// `q = (1 - eps) onehot(target) + eps / C`, averaged over the rows whose target is not
/// `options.ignore_index`. The result is a one-element tensor; when every row is ignored it
/// is NaN (0 / 0, as PyTorch) and the gradient is zero. [`cross_entropy_with`] adds PyTorch's
/// class `weight` and `reduction`.
///
/// Fused: the forward pass keeps only each row's log-sum-exp after its max is taken out (`N`
/// floats, not `N x C` log-probabilities; the VJP finds the max again, so the softmax it
/// rebuilds keeps full precision however large the logits), and the VJP is
/// `(softmax - q) g / count` per non-ignored row. Without smoothing, a `-inf` logit off the
/// target costs nothing, as in PyTorch.
/// A target outside `0..C` that is not ignored, a smoothing outside `[0, 1]` or shapes that do
/// not fit are `Error::Value`; dtypes other than Float32 logits and Int32 (or Int64) targets
/// `Error::Type`; nothing is computed or recorded then.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{cross_entropy, CrossEntropyOptions};
/// let logits = Tensor::from_vec(vec![0.0f32, 0.0], shape![1, 2]).unwrap();
/// let target = Tensor::from_vec(vec![1i32], shape![1]).unwrap();
/// let loss = cross_entropy(&logits, &target, CrossEntropyOptions::default()).unwrap();
/// assert!((loss.values::<f32>().unwrap()[0] - std::f32::consts::LN_2).abs() < 1e-6);
/// ```
pub fn cross_entropy(
    logits: &Tensor,
    targets: &Tensor,
    options: CrossEntropyOptions,
) -> Result<Tensor> {
    cross_entropy_with(logits, targets, None, options, Reduction::Mean)
}

/// [`cross_entropy`] with PyTorch's class `weight` (Float32 `[C]`, no gradient, as in PyTorch)
/// and `reduction`. Row `k` with target `t` costs
/// `(1 - eps) w_t nll_k + (eps / C) sum_c w_c (lse_k - x_kc)` (0 when ignored); the mean
/// divides the sum by the total weight `sum_k w_(t_k)` of the rows not ignored (by their
/// count without a weight), as PyTorch's weighted mean, and `Reduction::None` gives the
/// per-row losses, shaped like `targets`. A weight of another dtype is `Error::Type`, of
/// another length `Error::Value`; otherwise errors as [`cross_entropy`].
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{cross_entropy_with, CrossEntropyOptions, Reduction};
/// let logits = Tensor::from_vec(vec![0.0f32, 0.0, 0.0, 0.0], shape![2, 2]).unwrap();
/// let target = Tensor::from_vec(vec![1i32, 0], shape![2]).unwrap();
/// let w = Tensor::from_vec(vec![1.0f32, 3.0], shape![2]).unwrap();
/// let opts = CrossEntropyOptions::default();
/// let rows = cross_entropy_with(&logits, &target, Some(&w), opts, Reduction::None).unwrap();
/// let ln2 = std::f32::consts::LN_2;
/// assert_eq!(rows.values::<f32>().unwrap(), [3.0 * ln2, ln2]);
/// ```
#[differentiable]
pub fn cross_entropy_with(
    logits: &Tensor,
    targets: &Tensor,
    weight: Option<&Tensor>,
    options: CrossEntropyOptions,
    reduction: Reduction,
) -> Result<Tensor> {
    // loss_k = sum_c q_kc (lse_k - x_kc) with q_kc = (1 - eps) w_t [c = t] + (eps / C) w_c:
    // d loss_k / d x_kc = (sum_c q_kc) softmax_kc - q_kc, times row k's cotangent (0 when
    // ignored), with x_kc - lse_k = (x_kc - max_k) - shifted_k
    fn vjp(
        g: &Tensor,
        logits: &Tensor,
        targets: &Tensor,
        weight: Option<&Tensor>,
        options: CrossEntropyOptions,
        reduction: Reduction,
        shifted: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (rows, t) = class_targets("cross_entropy", logits, targets, options.ignore_index)?;
        let w = class_weights("cross_entropy", weight, rows.n)?;
        let shifted = shifted.values::<f32>()?;
        let scales = spread(g, rows.count(), reduction, divisor(&t, w.as_deref()))?;
        let (n, eps) = (rows.n, options.label_smoothing);
        let (off, on) = (eps / n as f32, 1.0 - eps);
        let dx = read_rows::<f32, _>(logits, rows, |e| {
            write_rows::<f32, Vec<f32>>(logits, rows, |k, buf, out| {
                let Some(target) = t.classes[k] else {
                    out.fill(0.0);
                    return;
                };
                let xr = row(&e, k, n, buf);
                match &w {
                    None => simd!(row_gradient(
                        out,
                        xr,
                        shifted[k],
                        target,
                        scales[k],
                        (on, off)
                    )),
                    Some(w) => {
                        weighted_row_gradient(out, xr, shifted[k], (target, w), scales[k], eps);
                    }
                }
            })
        })?;
        Ok((Some(dx), None, None))
    }
    ensure!(
        (0.0..=1.0).contains(&options.label_smoothing),
        Value,
        "cross_entropy: label_smoothing must be in [0, 1], got {}",
        options.label_smoothing
    );
    let (rows, t) = class_targets("cross_entropy", logits, targets, options.ignore_index)?;
    let w = class_weights("cross_entropy", weight, rows.n)?;
    let (n, eps) = (rows.n, f64::from(options.label_smoothing));
    // per row: its log-sum-exp less its max, and its loss (0 when ignored)
    let per = read_rows::<f32, _>(logits, rows, |e| {
        per_row::<(f32, f64), Vec<f32>>(rows, |k, buf| {
            // the row is read outside `simd!`, so that its closure stays small enough to be
            // inlined into (and vectorised as) each instruction-set copy
            let xr = row(&e, k, n, buf);
            match &w {
                None => simd!(row_loss(xr, t.classes[k], eps)),
                Some(w) => weighted_row_loss(xr, t.classes[k], w, eps),
            }
        })
    })?;
    #[residual]
    let shifted = logits.f32_with_layout(
        per.iter().map(|p| p.0).collect(),
        Arc::new(Layout::row_major(&[rows.count()])?),
    )?;
    let losses: Vec<f64> = per.iter().map(|p| p.1).collect();
    reduce_losses(
        logits,
        &targets.dims(),
        &losses,
        reduction,
        divisor(&t, w.as_deref()),
    )
}

/// The checked class weights of a classification loss: Float32 (`Error::Type`) of shape `[C]`
/// (`Error::Value`), or `None` without a weight.
pub(crate) fn class_weights(
    op: &str,
    weight: Option<&Tensor>,
    classes: usize,
) -> Result<Option<Vec<f32>>> {
    let Some(w) = weight else { return Ok(None) };
    ensure!(
        w.dtype() == &DType::Float32,
        Type,
        "{op}: the class weight must be Float32, got {}",
        w.dtype()
    );
    ensure!(
        w.dims() == [classes],
        Value,
        "{op}: the class weight of shape {} must have one element per class, [{classes}]",
        w.shape()
    );
    Ok(Some(w.values::<f32>()?))
}

/// The divisor of a classification loss's mean: the total weight of the targets not ignored,
/// or their count without a weight.
pub(crate) fn divisor(t: &Targets, w: Option<&[f32]>) -> f64 {
    match w {
        None => t.count as f64,
        Some(w) => t.classes.iter().flatten().map(|&c| f64::from(w[c])).sum(),
    }
}

/// One row's log-sum-exp less its max and its loss with class weights `w` and smoothing `eps`
/// (0 for an ignored row); plain code, as weights are the rare case.
fn weighted_row_loss(xr: &[f32], target: Option<usize>, w: &[f32], eps: f64) -> (f32, f64) {
    let m = row_max(xr);
    let shifted = log_sum_exp_shifted(xr, m);
    let Some(target) = target else {
        return (shifted as f32, 0.0);
    };
    // lse - x_c = shifted - (x_c - m), exact however large the logits
    let nll = |c: usize| shifted - f64::from(xr[c] - m);
    let mut loss = (1.0 - eps) * f64::from(w[target]) * nll(target);
    if eps > 0.0 {
        let smooth: f64 = (0..xr.len()).map(|c| f64::from(w[c]) * nll(c)).sum();
        loss += eps / xr.len() as f64 * smooth;
    }
    (shifted as f32, loss)
}

/// `out = scale ((sum_c q_c) softmax(x) - q)` for one row with class weights `w`, `q` the
/// weighted smoothed target `(1 - eps) w_t [c = t] + (eps / C) w_c`.
fn weighted_row_gradient(
    out: &mut [f32],
    xr: &[f32],
    shifted: f32,
    (target, w): (usize, &[f32]),
    scale: f32,
    eps: f32,
) {
    let m = row_max(xr);
    let off = eps / xr.len() as f32;
    let total = (1.0 - eps) * w[target] + off * w.iter().sum::<f32>();
    for (c, (o, &x)) in out.iter_mut().zip(xr).enumerate() {
        let q = off * w[c]
            + if c == target {
                (1.0 - eps) * w[target]
            } else {
                0.0
            };
        *o = scale * (total * exp_f32((x - m) - shifted) - q);
    }
}

// The per-row arithmetic, `#[inline(always)]` for `simd!`.

/// One row's log-sum-exp less the row's max, and its loss against `target` (0 for an ignored
/// row), with label smoothing `eps` (whose term, over every logit, is left out when `eps` is
/// 0: a `-inf` logit would make it `0 * inf`).
#[allow(clippy::inline_always)]
#[inline(always)]
fn row_loss(xr: &[f32], target: Option<usize>, eps: f64) -> (f32, f64) {
    let m = row_max(xr);
    let shifted = log_sum_exp_shifted(xr, m);
    let lse = f64::from(m) + shifted;
    let loss = match target {
        None => 0.0,
        Some(target) => {
            let nll = lse - f64::from(xr[target]);
            if eps > 0.0 {
                // lse - mean(x), both taken relative to the row max: far-from-zero logits
                // would cancel in f32
                let mean_shifted = lane_sum(xr, xr, |v, _| v - m) / xr.len() as f64;
                (1.0 - eps) * nll + eps * (shifted - mean_shifted)
            } else {
                nll
            }
        }
    };
    (shifted as f32, loss)
}

/// `out = scale (softmax(x) - q)` for one row whose log-sum-exp less its max is `shifted`, `q`
/// the smoothed one-hot target: `on + off` at the target class and `off` elsewhere.
#[allow(clippy::inline_always)]
#[inline(always)]
fn row_gradient(
    out: &mut [f32],
    xr: &[f32],
    shifted: f32,
    target: usize,
    scale: f32,
    (on, off): (f32, f32),
) {
    let m = row_max(xr);
    for (c, (o, &x)) in out.iter_mut().zip(xr).enumerate() {
        let q = if c == target { on + off } else { off };
        *o = scale * (exp_f32((x - m) - shifted) - q);
    }
}

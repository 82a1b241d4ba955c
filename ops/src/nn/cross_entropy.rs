//! `cross_entropy` from logits, fused: one pass computes each row's log-sum-exp and loss, and
//! the VJP rebuilds the softmax from the saved logits and that per-row statistic.

use std::sync::Arc;

use autograd_core::kernel::{
    exp_f32, lane_sum, log_sum_exp_shifted, per_row, read_rows, row, row_max, write_rows,
};
use autograd_core::{differentiable, ensure, simd, Captured, Layout, Result, Tensor};

use super::target::class_targets;
/// The options of [`cross_entropy`], PyTorch's keyword arguments (the reduction is always the
/// mean). `Default` ignores no target and does not smooth.
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
/// is NaN (0 / 0, as PyTorch) and the gradient is zero.
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
#[differentiable]
pub fn cross_entropy(
    logits: &Tensor,
    targets: &Tensor,
    options: CrossEntropyOptions,
) -> Result<Tensor> {
    // loss = (1/n) sum_k sum_c q_kc (lse_k - x_kc) with sum_c q_kc = 1:
    // d loss / d x_kc = (e^(x_kc - lse_k) - q_kc) / n on counted rows, 0 on ignored ones,
    // with x_kc - lse_k = (x_kc - max_k) - shifted_k
    fn vjp(
        g: &Tensor,
        logits: &Tensor,
        targets: &Tensor,
        options: CrossEntropyOptions,
        shifted: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (rows, t) = class_targets("cross_entropy", logits, targets, options.ignore_index)?;
        let shifted = shifted.values::<f32>()?;
        let scale = g.values::<f32>()?[0] / t.count as f32;
        let (n, eps) = (rows.n, options.label_smoothing);
        let (off, on) = (eps / n as f32, 1.0 - eps);
        let dx = read_rows::<f32, _>(logits, rows, |e| {
            write_rows::<f32, Vec<f32>>(logits, rows, |k, buf, out| {
                let Some(target) = t.classes[k] else {
                    out.fill(0.0);
                    return;
                };
                let xr = row(&e, k, n, buf);
                simd!(row_gradient(out, xr, shifted[k], target, scale, (on, off)));
            })
        })?;
        Ok((Some(dx), None))
    }
    ensure!(
        (0.0..=1.0).contains(&options.label_smoothing),
        Value,
        "cross_entropy: label_smoothing must be in [0, 1], got {}",
        options.label_smoothing
    );
    let (rows, t) = class_targets("cross_entropy", logits, targets, options.ignore_index)?;
    let (n, eps) = (rows.n, f64::from(options.label_smoothing));
    // per row: its log-sum-exp less its max, and its loss (0 when ignored)
    let per = read_rows::<f32, _>(logits, rows, |e| {
        per_row::<(f32, f64), Vec<f32>>(rows, |k, buf| {
            // the row is read outside `simd!`, so that its closure stays small enough to be
            // inlined into (and vectorised as) each instruction-set copy
            let xr = row(&e, k, n, buf);
            simd!(row_loss(xr, t.classes[k], eps))
        })
    })?;
    #[residual]
    let shifted = logits.f32_with_layout(
        per.iter().map(|p| p.0).collect(),
        Arc::new(Layout::row_major(&[rows.count()])?),
    )?;
    let total: f64 = per.iter().map(|p| p.1).sum();
    scalar_like(logits, total / t.count as f64)
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

//! The plain losses: `nll_loss` over log-probabilities and `mse_loss`, both mean-reduced to a
//! one-element tensor as PyTorch's defaults.

use autograd_core::ops::broadcast_pair;
use autograd_core::{differentiable, ensure, kernel, DType, Result, Tensor};

use super::cross_entropy::scalar_like;
use super::target::class_targets;

/// The logical position of class `c` of row `k` in a `[outer, n, inner]` tensor.
fn position(k: usize, c: usize, n: usize, inner: usize) -> usize {
    let (o, i) = (k / inner, k % inner);
    (o * n + c) * inner + i
}

/// The mean negative log-likelihood of Int32 class `targets` (`[N]` or `[N, d1, ...]`) under
/// `log_probs` (`[N, C]` or `[N, C, d1, ...]`, Float32, classes on axis 1): `-log_probs[k,
/// target_k]` averaged over the rows whose target is not `ignore_index`, as PyTorch's
/// `nll_loss` with `reduction="mean"` (NaN when every row is ignored, with a zero gradient).
/// Errors as [`cross_entropy`](super::cross_entropy::cross_entropy).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::nll_loss;
/// let lp = Tensor::from_vec(vec![-0.5f32, -1.0, -2.0, -0.1], shape![2, 2]).unwrap();
/// let t = Tensor::from_vec(vec![1i32, 0], shape![2]).unwrap();
/// assert_eq!(nll_loss(&lp, &t, None).unwrap().values::<f32>().unwrap(), [1.5]);
/// ```
#[differentiable]
pub fn nll_loss(log_probs: &Tensor, targets: &Tensor, ignore_index: Option<i32>) -> Result<Tensor> {
    // loss = -(1/n) sum_k lp[k, t_k]: d loss / d lp[k, t_k] = -1/n on counted rows, 0 elsewhere
    fn vjp(
        g: &Tensor,
        log_probs: &Tensor,
        targets: &Tensor,
        ignore_index: Option<i32>,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (rows, t) = class_targets("nll_loss", log_probs, targets, ignore_index)?;
        let step = -g.values::<f32>()?[0] / t.count as f32;
        let mut dx = autograd_core::kernel::alloc::filled(log_probs.size(), 0.0f32)?;
        for (k, c) in t.classes.iter().enumerate() {
            if let Some(c) = *c {
                dx[position(k, c, rows.n, rows.inner)] = step;
            }
        }
        Ok((Some(log_probs.f32_like(dx)?), None))
    }
    let (rows, t) = class_targets("nll_loss", log_probs, targets, ignore_index)?;
    let total = kernel::read::<f32, _>(log_probs, |e| {
        let mut total = 0.0f64;
        for (k, c) in t.classes.iter().enumerate() {
            if let Some(c) = *c {
                e.for_each_in(position(k, c, rows.n, rows.inner), 1, |v| {
                    total -= f64::from(v);
                });
            }
        }
        total
    })?;
    scalar_like(log_probs, total / t.count as f64)
}

/// The mean squared error `mean((a - b)^2)` of two Float32 tensors of equal extents (their
/// shape trees may differ; `Error::Value` for different extents, `Error::Type` for another
/// dtype), as a one-element tensor; NaN for empty tensors.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::mse_loss;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![0.0f32, 4.0], shape![2]).unwrap();
/// assert_eq!(mse_loss(&a, &b).unwrap().values::<f32>().unwrap(), [2.5]);
/// ```
#[differentiable]
pub fn mse_loss(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // loss = (1/n) sum (a - b)^2:  da = 2 (a - b) g / n,  db = -da
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        b: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let scale = 2.0 * g.values::<f32>()?[0] / a.size() as f32;
        // one shape tree for the kernels (the extents are equal; runs without a graph)
        let (a, b) = &broadcast_pair(a, b)?;
        let da = if needs.input(0) {
            Some(kernel::zip(a, b, |x: f32, y: f32| scale * (x - y))?)
        } else {
            None
        };
        let db = if needs.input(1) {
            Some(kernel::zip(a, b, |x: f32, y: f32| scale * (y - x))?)
        } else {
            None
        };
        Ok((da, db))
    }
    for (what, t) in [("a", a), ("b", b)] {
        ensure!(
            t.dtype() == &DType::Float32,
            Type,
            "mse_loss: {what} must be Float32, got {}",
            t.dtype()
        );
    }
    ensure!(
        a.dims() == b.dims(),
        Value,
        "mse_loss: the operands have shapes {} and {} (their extents must be equal)",
        a.shape(),
        b.shape()
    );
    let (a, b) = &broadcast_pair(a, b)?;
    let squares = kernel::zip(a, b, |x: f32, y: f32| (x - y) * (x - y))?;
    let axes: Vec<usize> = (0..squares.layout().rank()).collect();
    let mean = kernel::reduce(
        &squares,
        &axes,
        false,
        || 0.0f64,
        |s, v: f32| s + f64::from(v),
        |s, n| s / n as f64,
    )?;
    let m: f64 = mean.values::<f64>()?.first().copied().unwrap_or(f64::NAN);
    scalar_like(a, m)
}

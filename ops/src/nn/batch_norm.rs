//! `batch_norm`: per-channel normalisation of `[N, C, ...]` by the batch's statistics while
//! training (updating running statistics in place) or by the running statistics in evaluation,
//! as PyTorch's `batch_norm`.

use autograd_core::{ensure, kernel, no_grad, DType, Result, Tensor};

use super::channel_norm::{normalise, statistics, Extents, Grouping};

/// Refuses a tensor that is not Float32 (`Error::Type`).
fn ensure_f32(op: &str, what: &str, t: &Tensor) -> Result<()> {
    ensure!(
        t.dtype() == &DType::Float32,
        Type,
        "{op}: {what} must be Float32, got {}",
        t.dtype()
    );
    Ok(())
}

/// Checks `x` (`[N, C, ...]`, Float32) and the per-channel tensors beside it (Float32 of shape
/// `[C]` each); the extents.
pub(crate) fn check_channels(
    op: &str,
    x: &Tensor,
    per_channel: &[(&str, Option<&Tensor>)],
) -> Result<Extents> {
    ensure_f32(op, "the input", x)?;
    let dims = x.dims();
    ensure!(
        dims.len() >= 2,
        Value,
        "{op}: the input must be [N, C, ...] (rank 2 or more), got shape {:?}",
        x.dims()
    );
    let c = dims[1];
    for &(what, t) in per_channel {
        if let Some(t) = t {
            ensure_f32(op, what, t)?;
            ensure!(
                t.dims() == [c],
                Value,
                "{op}: {what} must have shape [{c}] (the channels of the input of shape {dims:?}), got {:?}",
                t.dims()
            );
        }
    }
    Ok(Extents::of(&dims))
}

/// Checks `eps` (finite, non-negative) for `op`.
pub(crate) fn check_eps(op: &str, eps: f32) -> Result<()> {
    ensure!(
        eps >= 0.0 && eps.is_finite(),
        Value,
        "{op}: eps must be finite and non-negative, got {eps}"
    );
    Ok(())
}

/// `new = (1 - momentum) old + momentum batch` for every element of `running`, in place under
/// `no_grad` (one version bump).
fn blend(running: &Tensor, batch: &[f32], momentum: f32) -> Result<()> {
    let _no_grad = no_grad();
    kernel::update::<f32, _>(running, |old| {
        for (o, &b) in old.iter_mut().zip(batch) {
            *o = momentum * b + (1.0 - momentum) * *o;
        }
        Ok(())
    })
}

/// Batch normalisation of `x` (`[N, C, ...]`, Float32) per channel, as PyTorch's
/// `batch_norm`: `(x - mean) / sqrt(var + eps) * weight + bias`.
///
/// In training (`training`), `mean` and `var` are the batch's (the biased variance, over `N`
/// and the trailing axes), and when given, `running_mean` and `running_var` are updated in
/// place, under `no_grad` and bumping their versions, to `(1 - momentum) old + momentum batch`
/// with the batch's *unbiased* variance. In evaluation the running statistics normalise (they
/// are then required). `weight` and `bias` (shape `[C]`) are optional; the gradient reaches
/// `x`, `weight` and `bias` (through the batch statistics in training), never the running
/// statistics.
///
/// A dtype other than Float32 is `Error::Type`; a rank below 2, a per-channel tensor of a shape
/// other than `[C]`, one running statistic without the other, evaluation without them, a single
/// value per channel in training, a negative or non-finite `eps` or a non-finite `momentum` are
/// `Error::Value`. A failed call changes nothing (the running statistics are written last).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::batch_norm;
/// let x = Tensor::from_vec(vec![1.0f32, 10.0, 3.0, 30.0], shape![2, 2])?;
/// let (mean, var) = (Tensor::from_vec(vec![0.0f32; 2], shape![2])?, Tensor::from_vec(vec![1.0f32; 2], shape![2])?);
/// let y = batch_norm(&x, Some(&mean), Some(&var), None, None, true, 0.1, 0.0)?;
/// assert_eq!(y.values::<f32>()?, [-1.0, -1.0, 1.0, 1.0]);
/// // channel 0: batch mean 2, unbiased variance 2
/// assert_eq!(mean.values::<f32>()?[0], 0.2);
/// assert!((var.values::<f32>()?[0] - 1.1).abs() < 1e-6);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f32,
    eps: f32,
) -> Result<Tensor> {
    const OP: &str = "batch_norm";
    let ext = check_channels(
        OP,
        x,
        &[
            ("weight", weight),
            ("bias", bias),
            ("running_mean", running_mean),
            ("running_var", running_var),
        ],
    )?;
    check_eps(OP, eps)?;
    ensure!(
        momentum.is_finite(),
        Value,
        "{OP}: momentum must be finite, got {momentum}"
    );
    let running = match (running_mean, running_var) {
        (Some(m), Some(v)) => Some((m, v)),
        (None, None) => None,
        _ => autograd_core::bail!(
            Value,
            "{OP}: running_mean and running_var must be given together"
        ),
    };
    if !training {
        let Some((m, v)) = running else {
            autograd_core::bail!(
                Value,
                "{OP}: evaluation mode needs running_mean and running_var"
            );
        };
        let mean = m.values::<f32>()?;
        let rstd: Vec<f32> = v
            .values::<f32>()?
            .iter()
            .map(|&v| (1.0 / (f64::from(v) + f64::from(eps)).sqrt()) as f32)
            .collect();
        return normalise(x, weight, bias, Grouping::Channel, &mean, &rstd, false);
    }
    let count = ext.n * ext.s;
    ensure!(
        count > 1,
        Value,
        "{OP}: training needs more than one value per channel, got input shape {:?}",
        x.dims()
    );
    let stats = statistics(x, ext, Grouping::Channel)?;
    let mean: Vec<f32> = stats.iter().map(|s| s.0 as f32).collect();
    let rstd: Vec<f32> = stats
        .iter()
        .map(|s| (1.0 / (s.1 + f64::from(eps)).sqrt()) as f32)
        .collect();
    let y = normalise(x, weight, bias, Grouping::Channel, &mean, &rstd, true)?;
    if let Some((m, v)) = running {
        let unbiased = count as f64 / (count - 1) as f64;
        let var: Vec<f32> = stats.iter().map(|s| (s.1 * unbiased) as f32).collect();
        blend(m, &mean, momentum)?;
        blend(v, &var, momentum)?;
    }
    Ok(y)
}

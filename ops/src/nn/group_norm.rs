//! `group_norm`: normalisation of each sample over groups of consecutive channels, with a
//! per-channel affine weight and bias, as PyTorch's `group_norm`.

use autograd_core::{ensure, Result, Tensor};

use super::batch_norm::{check_channels, check_eps};
use super::channel_norm::{normalise, statistics, Grouping};

/// Group normalisation of `x` (`[N, C, ...]`, Float32): the channels split into `groups`
/// groups of `C / groups` consecutive channels, each sample's group normalised by its own mean
/// and biased variance, `(x - mean) / sqrt(var + eps) * weight + bias` with `weight` and `bias`
/// of shape `[C]` (optional), as PyTorch's `group_norm`. The gradient reaches `x`, `weight` and
/// `bias`.
///
/// A dtype other than Float32 is `Error::Type`; a rank below 2, zero groups or a group count
/// that does not divide the channels, a weight or bias of another shape than `[C]`, or a
/// negative or non-finite `eps` are `Error::Value`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::group_norm;
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 10.0, 30.0], shape![1, 4])?;
/// let y = group_norm(&x, 2, None, None, 0.0)?;
/// assert_eq!(y.values::<f32>()?, [-1.0, 1.0, -1.0, 1.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn group_norm(
    x: &Tensor,
    groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f32,
) -> Result<Tensor> {
    const OP: &str = "group_norm";
    let ext = check_channels(OP, x, &[("weight", weight), ("bias", bias)])?;
    check_eps(OP, eps)?;
    ensure!(
        groups > 0 && ext.c.is_multiple_of(groups),
        Value,
        "{OP}: the number of groups {groups} must be positive and divide the channels {} (input shape {:?})",
        ext.c,
        x.dims()
    );
    let grouping = Grouping::Group(groups);
    let stats = statistics(x, ext, grouping)?;
    let mean: Vec<f32> = stats.iter().map(|s| s.0 as f32).collect();
    let rstd: Vec<f32> = stats
        .iter()
        .map(|s| (1.0 / (s.1 + f64::from(eps)).sqrt()) as f32)
        .collect();
    normalise(x, weight, bias, grouping, &mean, &rstd, true)
}

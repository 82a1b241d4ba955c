//! The lookups behind [`Embedding`](super::Embedding)'s options: the lookup whose padding row
//! takes no gradient, and PyTorch's max-norm renormalisation of the referenced rows.

use std::collections::BTreeSet;

use autograd_core::kernel::{read_logical, scatter_rows, update};
use autograd_core::ops::embedding;
use autograd_core::{bail, differentiable, no_grad, DType, Result, Tensor};

/// The ids of a lookup as indices, each checked against `num` rows (`Error::Value` when out
/// of range, `Error::Type` for ids that are not Int32 or Int64).
pub(crate) fn ids_of(ids: &Tensor, num: usize) -> Result<Vec<usize>> {
    let raw: Vec<i64> = match ids.dtype() {
        DType::Int32 => ids.values::<i32>()?.into_iter().map(i64::from).collect(),
        DType::Int64 => ids.values::<i64>()?,
        other => bail!(Type, "Embedding: ids must be Int32, got {other}"),
    };
    raw.into_iter()
        .enumerate()
        .map(|(p, id)| match usize::try_from(id) {
            Ok(i) if i < num => Ok(i),
            _ => bail!(
                Value,
                "Embedding: id {id} at position {p} is out of range for {num} rows"
            ),
        })
        .collect()
}

/// The rows of `weight` (`[V, D]`) at `ids`, as [`embedding`], except that row `padding_idx`
/// receives no gradient (PyTorch's `padding_idx`): its lookups are constants.
#[differentiable]
pub(crate) fn embedding_padded(
    weight: &Tensor,
    ids: &Tensor,
    padding_idx: usize,
) -> Result<Tensor> {
    // dw[v] = sum of the cotangent rows of the lookups of v, for every v but padding_idx
    fn vjp(
        g: &Tensor,
        weight: &Tensor,
        ids: &Tensor,
        padding_idx: usize,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (num, dim) = (weight.dims()[0], weight.dims()[1]);
        let ids = ids_of(ids, num)?;
        let dw = read_logical(g, |g: &[f32]| {
            scatter_rows(g, &ids, num, dim, Some(padding_idx))
        })??;
        Ok((Some(weight.f32_like(dw)?), None))
    }
    embedding(weight, ids)
}

/// PyTorch's `embedding_renorm_`: every row of `weight` that `ids` references whose
/// `norm_type`-norm exceeds `max_norm` is scaled in place, under `no_grad`, by
/// `max_norm / (norm + 1e-7)`. One write, so the weight's version is bumped once, as
/// PyTorch's in-place renormalisation bumps it.
pub(crate) fn renormalise(
    weight: &Tensor,
    ids: &Tensor,
    max_norm: f32,
    norm_type: f32,
) -> Result<()> {
    let (num, dim) = (weight.dims()[0], weight.dims()[1]);
    let rows: BTreeSet<usize> = ids_of(ids, num)?.into_iter().collect();
    let _guard = no_grad();
    update::<f32, _>(weight, |w| {
        for &r in &rows {
            let row = &mut w[r * dim..(r + 1) * dim];
            let norm = if norm_type.is_infinite() {
                row.iter().fold(0.0f64, |m, &v| m.max(f64::from(v.abs())))
            } else {
                let p = f64::from(norm_type);
                row.iter()
                    .map(|&v| f64::from(v.abs()).powf(p))
                    .sum::<f64>()
                    .powf(1.0 / p)
            };
            if norm > f64::from(max_norm) {
                let scale = (f64::from(max_norm) / (norm + 1e-7)) as f32;
                for v in row.iter_mut() {
                    *v *= scale;
                }
            }
        }
        Ok(())
    })
}

//! Numpy broadcasting: the differentiable stride-0 view [`broadcast_to`], the result shape of
//! two shapes, and operands brought to it through `broadcast_to`, so a broadcast operand's
//! gradient is summed by that op's VJP and no binary op folds broadcasts itself.

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::{bail, Result};
use crate::kernel::{fresh, read};
use crate::{differentiable, Layout, Tensor};

/// A stride-0 view of `a` with top-level extents `dims` (numpy rules), sharing its storage:
/// the node behind the public [`broadcast_to`](crate::ops::broadcast_to), which resolves `-1`.
#[differentiable(crate = crate, batched)]
pub(crate) fn broadcast_to(a: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // The cotangent is per logical position of the result (the engine folds broadcast aliases
    // only into `.grad`), so each element of `a` receives the sum over its repetitions; K
    // batched cotangents are summed per batch index.
    fn vjp(g: &Tensor, a: &Tensor, dims: &[usize]) -> Result<Option<Tensor>> {
        match crate::batch::extent(g, dims.len()) {
            Some(k) => Ok(Some(sum_to_batched(g, a, k)?)),
            None => Ok(Some(sum_to(g, a)?)),
        }
    }
    a.raw_broadcast_to(dims)
}

/// The numpy broadcast of two lists of top-level extents: aligned at the end, a missing or
/// extent-1 mode takes the other's extent. Ranks may differ; two extents that differ with
/// neither 1 are `Error::Value` naming both shapes.
///
/// ```
/// use autograd_core::ops::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[4, 1, 3], &[2, 1]).unwrap(), [4, 2, 3]);
/// assert!(broadcast_shapes(&[2, 3], &[4]).is_err());
/// ```
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let extent = |s: &[usize], i: usize| {
        // mode i of the result, counted from the end
        (i + s.len()).checked_sub(rank).map_or(1, |j| s[j])
    };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let (p, q) = (extent(a, i), extent(b, i));
        out.push(match (p, q) {
            _ if p == q => p,
            (1, _) => q,
            (_, 1) => p,
            _ => bail!(
                Value,
                "shapes {a:?} and {b:?} do not broadcast: mode {i} has extents {p} and {q}"
            ),
        });
    }
    Ok(out)
}

/// `a` and `b` broadcast to their common shape through the differentiable stride-0 view
/// [`Tensor::broadcast_to`]; an operand already of that shape is passed through unchanged.
/// Operands whose extents then agree but whose shape trees differ (`3` and `(3)`) take the
/// first one's tree: the second is reshaped (differentiably; its logical order is the same).
#[track_caller]
pub fn broadcast_pair(a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
    if a.shape() == b.shape() {
        return Ok((a.clone(), b.clone()));
    }
    let dims = broadcast_shapes(&a.dims(), &b.dims())?;
    let (a, b) = (expand(a, &dims)?, expand(b, &dims)?);
    if a.shape() == b.shape() {
        return Ok((a, b));
    }
    let b = super::view::reshape_to_shape(&b, a.shape())?;
    Ok((a, b))
}

/// `t` broadcast to `dims` unless it already has them.
#[track_caller]
pub(crate) fn expand(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    if t.dims() == dims {
        Ok(t.clone())
    } else {
        broadcast_to(t, dims)
    }
}

/// `a` and `b` broadcast to one shape for the op `op` (a shape error names it). Callers'
/// call sites are tracked, so a `broadcast_to` node records the user's line.
#[track_caller]
pub(crate) fn operands<'t>(
    op: &str,
    a: &'t Tensor,
    b: &'t Tensor,
) -> Result<(Cow<'t, Tensor>, Cow<'t, Tensor>)> {
    if a.shape() == b.shape() {
        return Ok((Cow::Borrowed(a), Cow::Borrowed(b)));
    }
    let (a, b) = broadcast_pair(a, b).map_err(|e| e.context(op))?;
    Ok((Cow::Owned(a), Cow::Owned(b)))
}

/// The cotangent `g` of `broadcast_to(a, g.dims())` summed back to `a`'s shape: each element
/// of `a` receives the sum over the positions that repeat it (`broadcast_to`'s VJP). Sums run in
/// f64. When the repeated modes are the leading ones (the common bias case) the rows of `g`
/// are added into one accumulator row, a pass that vectorises; otherwise a kernel reduction.
pub(crate) fn sum_to(g: &Tensor, a: &Tensor) -> Result<Tensor> {
    sum_back(g, a, None)
}

/// [`sum_to`] of `k` batched cotangents: `g` has a leading batch mode of extent `k` before the
/// broadcast shape, and each batch index is summed back to `a`'s shape on its own.
pub(crate) fn sum_to_batched(g: &Tensor, a: &Tensor, k: usize) -> Result<Tensor> {
    sum_back(g, a, Some(k))
}

/// `acc[j] += row[j]` in double precision for every row of `xs` (rows of `acc.len()`), row
/// after row: `#[inline(always)]` so that `simd!` widens the conversions and additions.
#[allow(clippy::inline_always)]
#[inline(always)]
fn add_rows_into(acc: &mut [f64], xs: &[f32]) {
    for row in xs.chunks_exact(acc.len()) {
        acc.iter_mut()
            .zip(row)
            .for_each(|(s, &v)| *s += f64::from(v));
    }
}

fn sum_back(g: &Tensor, a: &Tensor, batch: Option<usize>) -> Result<Tensor> {
    let dims = g.dims();
    let own = a.dims();
    // the modes after the batch mode (if any) are the broadcast shape, aligned with a's at
    // the end
    let skip = usize::from(batch.is_some());
    let lead = dims.len() - skip - own.len();
    let extent = |i: usize| if i < lead { 1 } else { own[i - lead] };
    let reduced: Vec<usize> = (skip..dims.len())
        .filter(|&i| extent(i - skip) != dims[i])
        .collect();
    let layout = Arc::new(Layout::compact_row_major(crate::batch::shape_for(
        a.shape(),
        batch,
    )?)?);
    // unbatched, with the reduced modes a prefix: g is `rows` copies of a row of a's size
    let prefix = batch.is_none() && reduced.iter().enumerate().all(|(k, &i)| k == i);
    if prefix {
        let m = a.size();
        let summed = read::<f32, _>(g, |x| {
            let xs = x.as_slice()?;
            // (unallocatable sums take the general path below, which reports the error)
            let mut acc = crate::storage::allocation::filled(m, 0.0f64).ok()?;
            if m > 0 {
                crate::simd!(len = xs.len(); add_rows_into(&mut acc, xs));
            }
            Some(acc)
        })?;
        if let Some(acc) = summed {
            return fresh::<f32>(a, layout, |out| {
                out.iter_mut().zip(&acc).for_each(|(o, &s)| *o = s as f32);
                Ok(())
            });
        }
    }
    let r = super::reduce::sum_axes(g, &reduced, true)?;
    r.with_layout_detached(Layout::clone(&layout), r.offset())
}

//! Reductions over a list of axes, and the sum of a Float32 tensor.

use std::sync::Arc;

use super::access::read;
use super::output::fresh;
use super::parallel::parallel;
use crate::error::Result;
use crate::layout::axis::{resolve_axes, IntList};
use crate::layout::Layout;
use crate::storage::scalar::Element;
use crate::tensor::Tensor;

/// The result extents of reducing `dims` over `axes` (negative axes count from the back): the
/// kept extents in order, with `1` in place of each reduced axis when `keepdim`. Fails on an
/// axis out of range or repeated.
pub fn reduced_dims(dims: &[usize], axes: impl IntList, keepdim: bool) -> Result<Vec<usize>> {
    let mut reduced = vec![false; dims.len()];
    for a in resolve_axes("reduce", axes, dims.len())? {
        reduced[a] = true;
    }
    Ok(dims
        .iter()
        .zip(&reduced)
        .filter_map(|(&d, &r)| match (r, keepdim) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect())
}

/// Folds the elements of `a` over the top-level axes `axes` (negative from the back; list every
/// axis to reduce everything): for every kept position, `finish(fold(..fold(init(), x0).., x(r-1)), r)` over
/// its `r` reduced elements in logical order. The accumulator may be a
/// wider type than the elements (sum an `f32` tensor in `f64`). The result has
/// [`reduced_dims`] extents, compact row-major, in fresh storage of `a`'s carrier class.
pub fn reduce<T: Element, A, U: Element>(
    a: &Tensor,
    axes: impl IntList,
    keepdim: bool,
    init: impl Fn() -> A + Sync,
    fold: impl Fn(A, T) -> A + Sync,
    finish: impl Fn(A, usize) -> U + Sync,
) -> Result<Tensor> {
    let l = a.layout();
    let dims = l.dims();
    let axes = resolve_axes("reduce", axes, dims.len())?;
    let out_dims = reduced_dims(&dims, &axes, keepdim)?;
    let kept: Vec<usize> = (0..dims.len()).filter(|i| !axes.contains(i)).collect();
    let mut sorted_axes = axes.clone();
    sorted_axes.sort_unstable();
    let r: usize = axes.iter().map(|&i| dims[i]).product();
    let out_layout = Arc::new(Layout::row_major(&out_dims)?);
    read::<T, _>(a, |x| {
        // The kept modes first, then the reduced ones: each output's elements are then one
        // consecutive stretch of the permuted layout's logical order. The modes are those of
        // the elements read (a compact copy for carriers kernels cannot borrow from).
        let read_layout = x.layout();
        let modes = read_layout.modes();
        // the reduced modes in their own order, so each group is folded in logical order
        let order: Vec<Layout> = kept
            .iter()
            .chain(&sorted_axes)
            .map(|&i| modes[i].clone())
            .collect();
        let permuted = if order.is_empty() {
            read_layout.clone()
        } else {
            Layout::from_modes(&order)?
        };
        let x = x.relayout(&permuted)?;
        fresh::<U>(a, out_layout, |out| {
            let one = |k: usize| {
                let mut acc = Some(init());
                x.for_each_in(k * r, r, |v| acc = acc.take().map(|s| fold(s, v)));
                acc.map(|s| finish(s, r))
            };
            if parallel(out.len().saturating_mul(r.max(1))) && out.len() > 1 {
                // tasks of whole outputs, about CHUNK elements read each
                let per = (super::parallel::CHUNK / r.max(1)).max(1);
                super::for_each_chunk_mut(out, per, |t, block| {
                    for (j, o) in block.iter_mut().enumerate() {
                        if let Some(v) = one(t * per + j) {
                            *o = v;
                        }
                    }
                });
            } else {
                for (k, o) in out.iter_mut().enumerate() {
                    if let Some(v) = one(k) {
                        *o = v;
                    }
                }
            }
            Ok(())
        })
    })?
}

/// The sum of every element of a Float32 tensor, accumulated in `f64`. Unlike [`reduce`], the
/// order of additions is not the logical order: a contiguous tensor is summed in blocks with
/// several independent accumulators (and blocks on several threads), which vectorises; with
/// `f64` accumulation of `f32` values the result differs from the sequential sum only in
/// rounding far below `f32` precision.
///
/// ```
/// use autograd_core::{kernel, shape, Tensor};
/// let a = Tensor::from_vec((1..=100).map(|x| x as f32).collect(), shape![10, 10]).unwrap();
/// assert_eq!(kernel::sum_f32(&a).unwrap(), 5050.0);
/// assert_eq!(kernel::sum_f32(&a.transpose(0, 1).unwrap()).unwrap(), 5050.0);
/// ```
pub fn sum_f32(a: &Tensor) -> Result<f64> {
    read::<f32, _>(a, |x| match x.as_slice() {
        Some(s) if parallel(s.len()) => {
            // block sums added in block order: the result does not depend on the threads
            let chunk = super::parallel::CHUNK;
            super::map_tasks(s.len().div_ceil(chunk), |k| {
                block_sum(&s[k * chunk..((k + 1) * chunk).min(s.len())])
            })
            .iter()
            .sum::<f64>()
        }
        Some(s) => block_sum(s),
        None => {
            let data = x.data();
            let mut total = 0.0f64;
            x.for_each_run_in(0, a.size(), |r| {
                total += match r.stride {
                    0 => f64::from(data[r.start]) * r.len as f64,
                    1 => block_sum(&data[r.start..r.start + r.len]),
                    s => (0..r.len).map(|k| f64::from(data[r.start + k * s])).sum(),
                };
            });
            total
        }
    })
}

/// `s` summed in `f64` with eight independent accumulators.
fn block_sum(s: &[f32]) -> f64 {
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let chunks = s.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f64::from(v);
        }
    }
    acc.iter().sum::<f64>() + tail.iter().map(|&v| f64::from(v)).sum::<f64>()
}

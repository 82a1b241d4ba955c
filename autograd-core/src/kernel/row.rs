//! Rows for the row-wise network kernels (softmax, normalisation, losses): a row is the run of
//! elements along one axis, or over the trailing axes, read from any layout (transposed,
//! sliced, broadcast) through the kernel layer and written into a compact row-major result,
//! rows split across threads above the kernel layer's threshold.

// The per-row arithmetic is `#[inline(always)]` so that `simd!` compiles it into each copy.
#![allow(clippy::inline_always)]

use crate::error::{ensure, Result};
use crate::kernel::{self, alloc, Elements};
use crate::layout::Layout;
use crate::tensor::scalar::Element;
use crate::tensor::Tensor;

/// Elements a parallel task handles at least (as the kernel layer's chunks).
const TASK: usize = 1 << 13;

/// How a tensor splits into rows: seen as `[outer, n, inner]`, row `k = o * inner + i` holds
/// the `n` elements `(o, 0..n, i)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    /// Blocks before the row axis.
    pub outer: usize,
    /// Elements in a row.
    pub n: usize,
    /// Rows per block (the elements after the row axis); 1 when rows are consecutive.
    pub inner: usize,
    /// The top-level axis rows run along, when they run along one.
    axis: Option<usize>,
}

impl Rows {
    /// The rows along the top-level `axis` of extents `dims` (`Error::Value` when out of range).
    pub fn along(op: &str, dims: &[usize], axis: usize) -> Result<Rows> {
        ensure!(
            axis < dims.len(),
            Value,
            "{op}: axis {axis} is out of range for {} axes",
            dims.len()
        );
        Ok(Rows {
            outer: dims[..axis].iter().product(),
            n: dims[axis],
            inner: dims[axis + 1..].iter().product(),
            axis: Some(axis),
        })
    }

    /// The rows over the last `k <= dims.len()` axes taken together.
    pub fn trailing(dims: &[usize], k: usize) -> Rows {
        let split = dims.len() - k;
        Rows {
            outer: dims[..split].iter().product(),
            n: dims[split..].iter().product(),
            inner: 1,
            axis: None,
        }
    }

    /// The number of rows.
    pub fn count(&self) -> usize {
        self.outer * self.inner
    }
}

/// Whether work over `elements` is split across threads (the kernel layer's rule).
fn parallel(elements: usize) -> bool {
    elements >= kernel::PARALLEL_THRESHOLD && kernel::threads() > 1
}

/// Runs `f` on `e` seen so that row `k` is its logical positions `k n..(k + 1) n`: `e` itself
/// when rows are consecutive, else under its own layout with the row axis moved last. (The
/// layout comes from `e`, not from the tensor: a carrier the kernel layer cannot borrow from
/// hands over a compact copy.)
///
/// Rows that are not one slice are gathered into a buffer of `n` elements per task ([`row`]),
/// inside loops that cannot return an error; `n` comes from the input (a broadcast row may
/// have 2^40 elements), so it is allocated once here, fallibly, first.
fn rows_view<T: Element, R>(
    e: Elements<'_, T>,
    rows: Rows,
    f: impl FnOnce(Elements<'_, T>) -> Result<R>,
) -> Result<R> {
    if e.as_slice().is_none() && rows.count() > 0 {
        drop(alloc::with_capacity::<T>(rows.n)?);
    }
    match rows.axis {
        Some(axis) if rows.inner > 1 => {
            let mut modes = e.layout().modes();
            let row = modes.remove(axis);
            modes.push(row);
            let l = Layout::from_modes(&modes)?;
            f(e.relayout(&l)?)
        }
        _ => f(e),
    }
}

/// Runs `f` on the elements of `t` (as `T`) seen with consecutive rows (see [`row`]).
pub fn read_rows<T: Element, R>(
    t: &Tensor,
    rows: Rows,
    f: impl FnOnce(Elements<'_, T>) -> Result<R>,
) -> Result<R> {
    kernel::read::<T, _>(t, |e| rows_view(e, rows, f))?
}

/// [`read_rows`] for two tensors of one shape at once.
pub fn read_row_pair<T: Element, U: Element, R>(
    a: &Tensor,
    b: &Tensor,
    rows: Rows,
    f: impl FnOnce(Elements<'_, T>, Elements<'_, U>) -> Result<R>,
) -> Result<R> {
    kernel::read_pair::<T, U, _>(a, b, |ea, eb| {
        rows_view(ea, rows, move |ea| rows_view(eb, rows, move |eb| f(ea, eb)))
    })?
}

/// Row `k` (`n` elements) of `e`, whose layout puts rows consecutively: borrowed when `e` is
/// one slice, else gathered into `buf` (a size [`read_rows`] has checked can be allocated).
pub fn row<'a: 'r, 'r, T: Element>(
    e: &Elements<'a, T>,
    k: usize,
    n: usize,
    buf: &'r mut Vec<T>,
) -> &'r [T] {
    if let Some(all) = e.as_slice() {
        return &all[k * n..(k + 1) * n];
    }
    buf.resize(n, T::default());
    e.copy_range(k * n, buf);
    buf
}

/// A compact row-major tensor of `like`'s shape in fresh storage of `like`'s carrier class,
/// whose row `k` (as `rows` splits the shape) `f(k, scratch, out_row)` writes; `scratch` is
/// per-thread state for gathering input rows.
pub fn write_rows<V: Element, S: Default + Send>(
    like: &Tensor,
    rows: Rows,
    f: impl Fn(usize, &mut S, &mut [V]) + Sync,
) -> Result<Tensor> {
    kernel::fresh_like::<V>(like, |out| {
        let Rows { n, inner, .. } = rows;
        if n == 0 || out.is_empty() {
            return Ok(());
        }
        if inner == 1 {
            each_row(out, n, &f);
            return Ok(());
        }
        // Rows along an inner axis are strided in the result: compute them consecutively,
        // then transpose every `[inner, n]` block into its `[n, inner]` place.
        let mut tmp = alloc::filled(out.len(), V::default())?;
        each_row(&mut tmp, n, &f);
        let block = n * inner;
        let transpose = |(o, t): (&mut [V], &[V])| {
            for i in 0..inner {
                for j in 0..n {
                    o[j * inner + i] = t[i * n + j];
                }
            }
        };
        if parallel(out.len()) {
            kernel::for_each_chunk_mut(out, block, |k, o| {
                transpose((o, &tmp[k * block..(k + 1) * block]));
            });
        } else {
            out.chunks_mut(block)
                .zip(tmp.chunks(block))
                .for_each(transpose);
        }
        Ok(())
    })
}

/// `f(k, scratch, out_row)` for every row of `n` elements of `out`.
fn each_row<V: Element, S: Default + Send>(
    out: &mut [V],
    n: usize,
    f: &(impl Fn(usize, &mut S, &mut [V]) + Sync),
) {
    if parallel(out.len()) {
        // a task takes whole rows, at least TASK elements of them
        let rows = (TASK / n).max(1);
        kernel::for_each_chunk_mut(out, rows * n, |t, block| {
            let mut s = S::default();
            for (j, o) in block.chunks_mut(n).enumerate() {
                f(t * rows + j, &mut s, o);
            }
        });
    } else {
        let mut s = S::default();
        for (k, o) in out.chunks_mut(n).enumerate() {
            f(k, &mut s, o);
        }
    }
}

/// `f(k, scratch)` for every row `k` of `rows`, in order, in parallel above the threshold:
/// per-row statistics and losses. `Error::Value` when the results cannot be allocated.
pub fn per_row<R: Send, S: Default + Send>(
    rows: Rows,
    f: impl Fn(usize, &mut S) -> R + Sync,
) -> Result<Vec<R>> {
    let count = rows.count();
    let mut out = alloc::with_capacity(count)?;
    if parallel(count.saturating_mul(rows.n)) {
        let per = (TASK / rows.n.max(1)).max(1);
        let parts = kernel::map_tasks(count.div_ceil(per), |t| {
            let mut s = S::default();
            (t * per..((t + 1) * per).min(count))
                .map(|k| f(k, &mut s))
                .collect::<Vec<R>>()
        });
        out.extend(parts.into_iter().flatten());
    } else {
        let mut s = S::default();
        out.extend((0..count).map(|k| f(k, &mut s)));
    }
    Ok(out)
}

/// Per-column sums over every row: `f(k, scratch, acc)` adds row `k`'s contribution into
/// `acc` (of length `width`); partial sums of row ranges are added up across threads.
/// `Error::Value` when `width` sums cannot be allocated.
pub fn column_sums<S: Default + Send>(
    rows: Rows,
    width: usize,
    f: impl Fn(usize, &mut S, &mut [f64]) + Sync,
) -> Result<Vec<f64>> {
    let count = rows.count();
    let per_task = (TASK / rows.n.max(1)).max(1);
    let range = |lo: usize, hi: usize| -> Result<Vec<f64>> {
        let mut s = S::default();
        let mut acc = alloc::filled(width, 0.0f64)?;
        for k in lo..hi {
            f(k, &mut s, &mut acc);
        }
        Ok(acc)
    };
    if parallel(count.saturating_mul(rows.n)) {
        let partial = kernel::map_tasks(count.div_ceil(per_task), |t| {
            range(t * per_task, ((t + 1) * per_task).min(count))
        });
        // added in task order, so the result does not depend on which thread ran what
        let mut total = alloc::filled(width, 0.0f64)?;
        for p in partial {
            total.iter_mut().zip(&p?).for_each(|(x, y)| *x += y);
        }
        Ok(total)
    } else {
        range(0, count)
    }
}

#[cfg(test)]
mod tests {
    use super::Rows;

    #[test]
    fn rows_split_around_the_axis() {
        let r = Rows::along("t", &[2, 3, 4], 1).unwrap();
        assert_eq!((r.outer, r.n, r.inner, r.count()), (2, 3, 4, 8));
        let r = Rows::trailing(&[2, 3, 4], 2);
        assert_eq!((r.outer, r.n, r.inner, r.count()), (2, 12, 1, 2));
        assert!(Rows::along("t", &[2], 1).is_err());
    }
}

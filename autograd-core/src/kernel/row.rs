//! The `map_rows` family: row-wise kernels (softmax, normalisation, losses, a bias per row). A
//! row is the run of elements along one axis, or over the trailing axes ([`Rows`]), read from
//! any layout (transposed, sliced, broadcast) and written into a compact row-major result, rows
//! split across threads above [`PARALLEL_THRESHOLD`](super::PARALLEL_THRESHOLD).
//!
//! [`map_rows`] and [`map_rows_along`] are the whole of a row map; a kernel that reads two
//! tensors' rows, skips rows or returns per-row values builds on the parts: [`read_rows`] or
//! [`read_row_pair`], [`row`], then [`write_rows`], [`per_row`] or [`column_sums`] (or
//! [`overwrite_rows_with`] and [`overwrite_rows_summing`] for rows and per-row values or
//! column sums in one pass).
//!
//! ```
//! use autograd_core::{kernel, shape, Tensor};
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
//! // each column (a row along axis 0), scaled by its index
//! let rows = kernel::Rows::along("scale", &a.dims(), 0).unwrap();
//! let y = kernel::map_rows_along(&a, rows, |k, x: &[f32], out: &mut [f32]| {
//!     out.iter_mut().zip(x).for_each(|(o, &v)| *o = v * k as f32);
//! })
//! .unwrap();
//! assert_eq!(y.values::<f32>().unwrap(), [0.0, 2.0, 6.0, 0.0, 5.0, 12.0]);
//! ```

use super::access::{read, read_pair, Elements};
use super::output::{fresh_like_with, Init};
use super::parallel::{parallel, CHUNK};
use super::team::{for_each_chunk_mut, map_chunks_mut, map_tasks};
use crate::error::{ensure, Result};
use crate::layout::Layout;
use crate::storage::allocation::{filled, with_capacity};
use crate::storage::scalar::Element;
use crate::tensor::Tensor;

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

    /// The rows over the last `k` axes taken together (all of them when `k` exceeds the rank).
    pub fn trailing(dims: &[usize], k: usize) -> Rows {
        let split = dims.len().saturating_sub(k);
        Rows {
            outer: dims[..split].iter().product(),
            n: dims[split..].iter().product(),
            inner: 1,
            axis: None,
        }
    }

    /// The rows along the last top-level axis of extents `dims` (one row of one element for a
    /// scalar).
    pub fn last(dims: &[usize]) -> Rows {
        Rows::trailing(dims, dims.len().min(1))
    }

    /// The number of rows.
    pub fn count(&self) -> usize {
        self.outer * self.inner
    }
}

/// `f(row, out_row)` for every row along the last top-level axis of `a` (softmax and
/// normalisation kernels): `row` is a contiguous slice (gathered when `a` is strided), and
/// `out_row` the matching row of a compact row-major result of `a`'s shape in fresh storage of
/// `a`'s carrier class.
pub fn map_rows<T: Element, U: Element>(
    a: &Tensor,
    f: impl Fn(&[T], &mut [U]) + Sync,
) -> Result<Tensor> {
    map_rows_along(a, Rows::last(&a.dims()), move |_, row, out| f(row, out))
}

/// [`map_rows`] for any split into rows: `f(k, row, out_row)` for every row `k` of `a` as
/// `rows` splits it (a row along an inner axis is gathered, and its result scattered back into
/// place). The result is compact row-major, of `a`'s shape, in fresh storage of `a`'s carrier
/// class.
pub fn map_rows_along<T: Element, U: Element>(
    a: &Tensor,
    rows: Rows,
    f: impl Fn(usize, &[T], &mut [U]) + Sync,
) -> Result<Tensor> {
    read_rows::<T, _>(a, rows, |e| {
        write_rows::<U, Vec<T>>(a, rows, |k, buf, out| f(k, row(&e, k, rows.n, buf), out))
    })
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
        drop(with_capacity::<T>(rows.n)?);
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
    read::<T, _>(t, |e| rows_view(e, rows, f))?
}

/// [`read_rows`] for two tensors of one shape at once.
pub fn read_row_pair<T: Element, U: Element, R>(
    a: &Tensor,
    b: &Tensor,
    rows: Rows,
    f: impl FnOnce(Elements<'_, T>, Elements<'_, U>) -> Result<R>,
) -> Result<R> {
    read_pair::<T, U, _>(a, b, |ea, eb| {
        rows_view(ea, rows, move |ea| rows_view(eb, rows, move |eb| f(ea, eb)))
    })?
}

/// Row `k` (`n` elements) of `e`, whose layout puts rows consecutively: borrowed when `e` is
/// one slice, else gathered into `buf` (a size [`read_rows`] has checked can be allocated).
///
/// # Panics
/// When row `k` reaches past `e`'s elements, as slice indexing does.
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
/// whose row `k` (as `rows`, made from that shape, splits it) `f(k, scratch, out_row)` writes;
/// `scratch` is per-thread state for gathering input rows. `out_row` starts as zeros.
pub fn write_rows<V: Element, S: Default + Send>(
    like: &Tensor,
    rows: Rows,
    f: impl Fn(usize, &mut S, &mut [V]) + Sync,
) -> Result<Tensor> {
    each_row_into(like, rows, Init::Zeroed, f)
}

/// [`write_rows`] for an `f` that writes every element of `out_row`, which starts with
/// unspecified values (a reused buffer is not zeroed first: one pass over the result less).
pub fn overwrite_rows<V: Element, S: Default + Send>(
    like: &Tensor,
    rows: Rows,
    f: impl Fn(usize, &mut S, &mut [V]) + Sync,
) -> Result<Tensor> {
    each_row_into(like, rows, Init::Overwritten, f)
}

/// A fresh result (zeroed or not, as `init` says) whose row `k` `f(k, scratch, out_row)`
/// writes: [`write_rows`] and [`overwrite_rows`].
fn each_row_into<V: Element, S: Default + Send>(
    like: &Tensor,
    rows: Rows,
    init: Init,
    f: impl Fn(usize, &mut S, &mut [V]) + Sync,
) -> Result<Tensor> {
    write_rows_from(like, rows, init, |out| {
        each_row(out, rows.n, &f);
        Ok(())
    })
}

/// [`overwrite_rows`] that also sums columns over the rows: `f(k, scratch, out_row, acc)`
/// writes every element of row `k` and adds the row's contribution into `acc` (`width` sums),
/// so that a kernel wanting both (LayerNorm's input and parameter gradients) reads its input
/// rows once. The sums are those [`column_sums`] gives: partial sums of the same row ranges,
/// added in task order. `Error::Value` when `width` sums cannot be allocated.
pub fn overwrite_rows_summing<V: Element, S: Default + Send>(
    like: &Tensor,
    rows: Rows,
    width: usize,
    f: impl Fn(usize, &mut S, &mut [V], &mut [f64]) + Sync,
) -> Result<(Tensor, Vec<f64>)> {
    let mut sums = None;
    let out = write_rows_from(like, rows, Init::Overwritten, |out| {
        sums = Some(each_row_summing(out, rows.n, width, &f)?);
        Ok(())
    })?;
    // no row (an empty result): every sum is zero
    let sums = match sums {
        Some(sums) => sums,
        None => filled(width, 0.0f64)?,
    };
    Ok((out, sums))
}

/// [`overwrite_rows`] whose `f(k, scratch, out_row)` also returns a value for row `k`: the
/// result and the rows' values in row order, so that a kernel computing per-row statistics
/// (LayerNorm's mean and deviation) writes each row while it is still in cache.
/// `Error::Value` when the values cannot be allocated.
pub fn overwrite_rows_with<V: Element, S: Default + Send, R: Send>(
    like: &Tensor,
    rows: Rows,
    f: impl Fn(usize, &mut S, &mut [V]) -> R + Sync,
) -> Result<(Tensor, Vec<R>)> {
    let mut values = None;
    let out = write_rows_from(like, rows, Init::Overwritten, |out| {
        values = Some(each_row_with(out, rows.n, rows.count(), &f)?);
        Ok(())
    })?;
    if let Some(values) = values {
        return Ok((out, values));
    }
    // no element: the rows (if any) are empty
    let mut values = with_capacity(rows.count())?;
    let mut s = S::default();
    values.extend((0..rows.count()).map(|k| f(k, &mut s, &mut [])));
    Ok((out, values))
}

/// A fresh result of `like`'s shape whose rows, made consecutive, `fill` writes (every element
/// when `init` is [`Init::Overwritten`]); rows along an inner axis are then transposed into
/// place. `fill` is not called when there is no element.
fn write_rows_from<V: Element>(
    like: &Tensor,
    rows: Rows,
    init: Init,
    fill: impl FnOnce(&mut [V]) -> Result<()>,
) -> Result<Tensor> {
    fresh_like_with::<V>(like, init, |out| {
        let Rows { n, inner, .. } = rows;
        if n == 0 || out.is_empty() {
            return Ok(());
        }
        if inner == 1 {
            return fill(out);
        }
        // Rows along an inner axis are strided in the result: compute them consecutively,
        // then transpose every `[inner, n]` block into its `[n, inner]` place.
        let mut tmp = filled(out.len(), V::default())?;
        fill(&mut tmp)?;
        let block = n * inner;
        let transpose = |(o, t): (&mut [V], &[V])| {
            for i in 0..inner {
                for j in 0..n {
                    o[j * inner + i] = t[i * n + j];
                }
            }
        };
        if parallel(out.len()) {
            for_each_chunk_mut(out, block, |k, o| {
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
        // a task takes whole rows, at least CHUNK elements of them
        let rows = (CHUNK / n).max(1);
        for_each_chunk_mut(out, rows * n, |t, block| {
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

/// [`each_row`] keeping what `f` returns for each of the `count` rows, in row order.
fn each_row_with<V: Element, S: Default + Send, R: Send>(
    out: &mut [V],
    n: usize,
    count: usize,
    f: &(impl Fn(usize, &mut S, &mut [V]) -> R + Sync),
) -> Result<Vec<R>> {
    let mut values = with_capacity(count)?;
    if parallel(out.len()) {
        let rows = (CHUNK / n).max(1);
        let parts = map_chunks_mut(out, rows * n, |t, block| {
            let mut s = S::default();
            block
                .chunks_mut(n)
                .enumerate()
                .map(|(j, o)| f(t * rows + j, &mut s, o))
                .collect::<Vec<R>>()
        });
        values.extend(parts.into_iter().flatten());
    } else {
        let mut s = S::default();
        values.extend(out.chunks_mut(n).enumerate().map(|(k, o)| f(k, &mut s, o)));
    }
    Ok(values)
}

/// [`each_row`] with per-column sums: a task's rows add into its own `width` sums, and the
/// tasks' sums are added in task order (the row ranges [`column_sums`] takes).
fn each_row_summing<V: Element, S: Default + Send>(
    out: &mut [V],
    n: usize,
    width: usize,
    f: &(impl Fn(usize, &mut S, &mut [V], &mut [f64]) + Sync),
) -> Result<Vec<f64>> {
    let run = |first: usize, block: &mut [V]| -> Result<Vec<f64>> {
        let (mut s, mut acc) = (S::default(), filled(width, 0.0f64)?);
        for (j, o) in block.chunks_mut(n).enumerate() {
            f(first + j, &mut s, o, &mut acc);
        }
        Ok(acc)
    };
    if !parallel(out.len()) {
        return run(0, out);
    }
    let rows = (CHUNK / n).max(1);
    in_task_order(
        width,
        map_chunks_mut(out, rows * n, |t, block| run(t * rows, block)),
    )
}

/// The sum of the tasks' `width` partial sums, added in task order, so that the result does
/// not depend on which thread ran what (and [`column_sums`] and [`overwrite_rows_summing`]
/// give the same bits).
fn in_task_order(width: usize, partial: Vec<Result<Vec<f64>>>) -> Result<Vec<f64>> {
    let mut total = filled(width, 0.0f64)?;
    for p in partial {
        total.iter_mut().zip(&p?).for_each(|(x, y)| *x += y);
    }
    Ok(total)
}

/// `f(k, scratch)` for every row `k` of `rows`, in order, in parallel above the threshold:
/// per-row statistics and losses. `Error::Value` when the results cannot be allocated.
pub fn per_row<R: Send, S: Default + Send>(
    rows: Rows,
    f: impl Fn(usize, &mut S) -> R + Sync,
) -> Result<Vec<R>> {
    let count = rows.count();
    let mut out = with_capacity(count)?;
    if parallel(count.saturating_mul(rows.n)) {
        let per = (CHUNK / rows.n.max(1)).max(1);
        let parts = map_tasks(count.div_ceil(per), |t| {
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
    let per_task = (CHUNK / rows.n.max(1)).max(1);
    let range = |lo: usize, hi: usize| -> Result<Vec<f64>> {
        let mut s = S::default();
        let mut acc = filled(width, 0.0f64)?;
        for k in lo..hi {
            f(k, &mut s, &mut acc);
        }
        Ok(acc)
    };
    if parallel(count.saturating_mul(rows.n)) {
        let partial = map_tasks(count.div_ceil(per_task), |t| {
            range(t * per_task, ((t + 1) * per_task).min(count))
        });
        in_task_order(width, partial)
    } else {
        range(0, count)
    }
}

#[cfg(test)]
mod tests {
    use super::{
        column_sums, overwrite_rows, overwrite_rows_summing, overwrite_rows_with, per_row,
        write_rows, Rows,
    };
    use crate::{shape, Tensor};

    /// Rows written with a value each give the rows [`overwrite_rows`] writes and the values
    /// [`per_row`] returns, in row order, trailing and along an inner axis, split across
    /// threads; empty rows still give one value each.
    #[test]
    fn rows_written_with_their_values_match_the_two_passes() {
        let dims = [64, 3, 1024];
        let x = Tensor::from_vec(vec![0.0f32; 64 * 3 * 1024], shape![64, 3, 1024]).unwrap();
        for rows in [
            Rows::trailing(&dims, 1),
            Rows::along("t", &dims, 1).unwrap(),
        ] {
            let write = |k: usize, out: &mut [f32]| {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = (k * 3 + i) as f32;
                }
            };
            let (fused, values) =
                overwrite_rows_with::<f32, (), (usize, f32)>(&x, rows, |k, (), out| {
                    write(k, out);
                    (k, out[out.len() - 1])
                })
                .unwrap();
            let apart = overwrite_rows::<f32, ()>(&x, rows, |k, (), out| write(k, out)).unwrap();
            let want = per_row::<(usize, f32), ()>(rows, |k, ()| (k, (k * 3 + rows.n - 1) as f32))
                .unwrap();
            assert_eq!(fused.dims(), dims);
            assert_eq!(
                fused.values::<f32>().unwrap(),
                apart.values::<f32>().unwrap()
            );
            assert_eq!(values, want);
        }
        let empty = Tensor::from_vec(Vec::<f32>::new(), shape![4, 0]).unwrap();
        let (out, values) = overwrite_rows_with::<f32, (), usize>(
            &empty,
            Rows::trailing(&[4, 0], 1),
            |k, (), o| k + o.len(),
        )
        .unwrap();
        assert_eq!(out.dims(), [4, 0]);
        assert_eq!(values, [0, 1, 2, 3]);
    }

    /// Rows written with their column sums beside them give the rows [`overwrite_rows`] writes
    /// and, bit for bit, the sums [`column_sums`] adds up, for trailing rows and rows along an
    /// inner axis, with enough rows to be split across threads; no row gives zero sums.
    #[test]
    fn rows_written_with_column_sums_match_the_two_passes() {
        let dims = [64, 3, 1024];
        let x = Tensor::from_vec(vec![0.0f32; 64 * 3 * 1024], shape![64, 3, 1024]).unwrap();
        // an irregular value per (row, element), so that the order of the sums shows
        let value = |k: usize, i: usize| ((k * 7919 + i * 104_729) % 1000) as f32 / 997.0 + 0.1;
        for rows in [
            Rows::trailing(&dims, 1),
            Rows::along("t", &dims, 1).unwrap(),
        ] {
            let width = 2 * rows.n;
            let write = |k: usize, out: &mut [f32]| {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = value(k, i);
                }
            };
            let add = |k: usize, acc: &mut [f64]| {
                for (i, a) in acc.iter_mut().enumerate() {
                    *a += f64::from(value(k, i % rows.n)) / 3.0;
                }
            };
            let (fused, sums) =
                overwrite_rows_summing::<f32, ()>(&x, rows, width, |k, (), out, acc| {
                    write(k, out);
                    add(k, acc);
                })
                .unwrap();
            let apart = overwrite_rows::<f32, ()>(&x, rows, |k, (), out| write(k, out)).unwrap();
            let want = column_sums::<()>(rows, width, |k, (), acc| add(k, acc)).unwrap();
            assert_eq!(fused.dims(), dims);
            assert_eq!(
                fused.values::<f32>().unwrap(),
                apart.values::<f32>().unwrap()
            );
            assert_eq!(sums.len(), width);
            assert_eq!(sums, want);
            // the sums are the rows' sums (to rounding), not zeros or one task's part
            let first: f64 = (0..rows.count())
                .map(|k| f64::from(value(k, 0)) / 3.0)
                .sum();
            assert!(
                (sums[0] - first).abs() < 1e-9 * first,
                "{} vs {first}",
                sums[0]
            );
        }
        let empty = Tensor::from_vec(Vec::<f32>::new(), shape![0, 5]).unwrap();
        let rows = Rows::trailing(&[0, 5], 1);
        let (out, sums) =
            overwrite_rows_summing::<f32, ()>(&empty, rows, 10, |_, (), _, _| {}).unwrap();
        assert_eq!(out.dims(), [0, 5]);
        assert_eq!(sums, vec![0.0; 10]);
    }

    /// Rows written whole come out the same from both doors, trailing rows and rows along an
    /// inner axis (whose results are transposed into place), the overwriting door given a
    /// pooled buffer of stale values (96 KiB, above the pool's smallest size).
    #[test]
    fn overwritten_rows_match_zeroed_rows_when_every_element_is_written() {
        let dims = [2, 3, 4096];
        let len = 2 * 3 * 4096;
        let x = Tensor::from_vec((0..len).map(|v| v as f32).collect(), shape![2, 3, 4096]).unwrap();
        for rows in [
            Rows::trailing(&dims, 1),
            Rows::along("t", &dims, 1).unwrap(),
        ] {
            let f = |k: usize, (): &mut (), out: &mut [f32]| {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = (k * 10 + i) as f32;
                }
            };
            // a buffer of the result's size, dropped: it goes back to the pool
            drop(Tensor::from_vec(vec![f32::NAN; len], shape![2, 3, 4096]).unwrap());
            let overwritten = overwrite_rows::<f32, ()>(&x, rows, f).unwrap();
            let zeroed = write_rows::<f32, ()>(&x, rows, f).unwrap();
            assert_eq!(overwritten.dims(), dims);
            assert_eq!(
                overwritten.values::<f32>().unwrap(),
                zeroed.values::<f32>().unwrap()
            );
        }
    }

    #[test]
    fn rows_split_around_the_axis() {
        let r = Rows::along("t", &[2, 3, 4], 1).unwrap();
        assert_eq!((r.outer, r.n, r.inner, r.count()), (2, 3, 4, 8));
        let r = Rows::trailing(&[2, 3, 4], 2);
        assert_eq!((r.outer, r.n, r.inner, r.count()), (2, 12, 1, 2));
        assert!(Rows::along("t", &[2], 1).is_err());
        assert_eq!(Rows::last(&[2, 3, 4]), Rows::trailing(&[2, 3, 4], 1));
        let r = Rows::last(&[]);
        assert_eq!((r.outer, r.n, r.inner, r.count()), (1, 1, 1, 1));
    }
}

//! Selecting elements along an axis with their indices: `max_axis`/`min_axis` (PyTorch's
//! `torch.max(x, dim)`) and `topk`. Each returns `(values, indices)`, the indices Int64; the
//! values' gradient goes to the selected positions only (a scatter of the cotangent), unlike
//! `max_axes`, which splits it among ties.
//!
//! One pass per row: the extremum keeps its first occurrence (a NaN beats every number, and
//! the first NaN wins); `topk` keeps the `k` best seen so far in a small sorted buffer, so a
//! row costs about one comparison per element, or selects with `select_nth_unstable` when `k`
//! is large.

use std::cmp::Ordering;

use super::order::{along_axis, ordered, scatter_back, Ordered};
use crate::error::{ensure, Result};
use crate::kernel::{self, per_row, read_rows, row, Rows};
use crate::layout::axis::Axis;
use crate::{differentiable, Tensor};

/// The largest element along `axis` (negative from the back) and its index, as PyTorch's
/// `torch.max(a, dim, keepdim)`: `(values, indices)` with the axis dropped (kept with extent 1
/// when `keepdim`), the indices Int64. Ties give the first index; a NaN is the largest (the
/// first NaN and its index are returned). The gradient reaches the returned index only.
/// Float32 (differentiable), Float64, Int32 or Int64; an empty axis is `Error::Value`.
///
/// ```
/// use autograd_core::{ops::max_axis, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 5.0, 5.0, 7.0, 0.0, 2.0], shape![2, 3])?;
/// let (values, indices) = max_axis(&a, -1, false)?;
/// assert_eq!(values.values::<f32>()?, [5.0, 7.0]);
/// assert_eq!(indices.values::<i64>()?, [1, 0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn max_axis(a: &Tensor, axis: impl Into<Axis>, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let axis = axis.into().resolve_for("max_axis", a.layout().rank())?;
    node::extremum(a, axis, keepdim, Best::Largest)
}

/// The smallest element along `axis` and its index, as PyTorch's `torch.min(a, dim,
/// keepdim)`; ties give the first index and a NaN counts as the smallest (as PyTorch's, NaN
/// propagates). Otherwise as [`max_axis`].
#[track_caller]
pub fn min_axis(a: &Tensor, axis: impl Into<Axis>, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let axis = axis.into().resolve_for("min_axis", a.layout().rank())?;
    node::extremum(a, axis, keepdim, Best::Smallest)
}

/// The `k` largest (or smallest, `largest = false`) elements along `axis` (negative from the
/// back) and their indices, as PyTorch's `torch.topk`: `(values, indices)` with the axis's
/// extent `k`, the indices Int64. NaN counts as larger than every number. With `sorted` the
/// values run best first; without, in the order of their indices. **Ties** go to the lower
/// index (deterministic; PyTorch's CPU kernel leaves the choice among equal values
/// unspecified). The gradient scatters the cotangent to the indices. `k` larger than the
/// axis is `Error::Value`; dtypes as [`max_axis`].
///
/// ```
/// use autograd_core::{ops::topk, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 4.0, 2.0, 4.0, 3.0], shape![5])?;
/// let (values, indices) = topk(&a, 3, -1, true, true)?;
/// assert_eq!(values.values::<f32>()?, [4.0, 4.0, 3.0]);
/// assert_eq!(indices.values::<i64>()?, [1, 3, 4]);
/// let (low, at) = topk(&a, 2, 0, false, true)?;
/// assert_eq!((low.values::<f32>()?, at.values::<i64>()?), (vec![1.0, 2.0], vec![0, 2]));
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn topk(
    a: &Tensor,
    k: usize,
    axis: impl Into<Axis>,
    largest: bool,
    sorted: bool,
) -> Result<(Tensor, Tensor)> {
    let axis = axis.into().resolve_for("topk", a.layout().rank())?;
    let n = a.dims()[axis];
    ensure!(
        k <= n,
        Value,
        "topk: k = {k} is larger than axis {axis} of extent {n} (shape {})",
        a.shape()
    );
    let best = if largest {
        Best::Largest
    } else {
        Best::Smallest
    };
    node::topk(a, k, axis, best, sorted)
}

/// Which end of the order a selection keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Best {
    /// The largest (NaN first).
    Largest,
    /// The smallest.
    Smallest,
}

impl crate::graph::captured::Captured for Best {}

impl Best {
    /// Whether `x` ranks strictly before `y` (ties rank neither way).
    #[inline]
    fn before<T: Ordered>(self, x: T, y: T) -> bool {
        let c = x.order(y);
        match self {
            Best::Largest => c == Ordering::Greater,
            Best::Smallest => c == Ordering::Less,
        }
    }
}

/// The extremum of one row and its index: the first best element (for `min`, a NaN is the
/// smallest, as PyTorch's `min` propagates NaN).
fn row_extremum<T: Ordered>(x: &[T], best: Best) -> (T, i64) {
    let mut at = 0;
    for (j, &v) in x.iter().enumerate().skip(1) {
        let b = x[at];
        if b.is_nan_elem() {
            break;
        }
        if v.is_nan_elem() || best.before(v, b) {
            at = j;
        }
    }
    // extents fit i64: they count elements of an allocated tensor
    (x[at], at as i64)
}

/// Elements per block of [`row_topk`]'s pre-check.
const BLOCK: usize = 16;

/// `v` (at index `j`) placed into `top` (sorted best first, ties by index): written over the
/// last slot when `top` is full (the caller checked that `v` beats it), else appended, then
/// moved up past every element it ranks before. A new element usually ranks near the end, so
/// this is a step or two.
fn insert_ranked<T: Ordered>(top: &mut Vec<(T, usize)>, v: T, j: usize, best: Best, k: usize) {
    if top.len() == k {
        top[k - 1] = (v, j);
    } else {
        top.push((v, j));
    }
    let mut at = top.len() - 1;
    while at > 0 && best.before(v, top[at - 1].0) {
        top.swap(at, at - 1);
        at -= 1;
    }
}

/// Whether some element of `block` may rank before `worst`: `!(v <= worst)` for the largest
/// (true for a NaN on either side), `!(v >= worst)` for the smallest; a fold without early
/// exit, so that it compiles to plain comparisons. [`Best::before`] decides the few that pass.
#[allow(clippy::neg_cmp_op_on_partial_ord, clippy::needless_bitwise_bool)]
fn could_beat<T: Ordered>(block: &[T], worst: T, best: Best) -> bool {
    match best {
        Best::Largest => block.iter().fold(false, |a, &v| a | !(v <= worst)),
        Best::Smallest => block.iter().fold(false, |a, &v| a | !(v >= worst)),
    }
}

/// The `k` best of one row with their indices (best first; ties to the lower index).
fn row_topk<T: Ordered>(x: &[T], k: usize, best: Best) -> (Vec<T>, Vec<i64>) {
    if k == 0 {
        return (Vec::new(), Vec::new());
    }
    let top = if k <= 64 {
        let mut top: Vec<(T, usize)> = Vec::with_capacity(k);
        if let Some(t) = threshold(x, k, best) {
            // only elements ranking at least as well as `t` can be among the k best
            for (j, &v) in x.iter().enumerate() {
                let candidate = match best {
                    Best::Largest => v >= t,
                    Best::Smallest => v <= t,
                };
                if candidate && (top.len() < k || best.before(v, top[k - 1].0)) {
                    insert_ranked(&mut top, v, j, best, k);
                }
            }
            return unzip_top(top);
        }
        for (j, &v) in x.iter().enumerate().take(k) {
            insert_ranked(&mut top, v, j, best, k);
        }
        // a block whose elements all rank at most as the worst kept costs one comparison
        // each; the few elements that may beat it are placed exactly
        let mut base = k.min(x.len());
        for block in x[base..].chunks(BLOCK) {
            if could_beat(block, top[k - 1].0, best) {
                for (j, &v) in block.iter().enumerate() {
                    let worst = top[k - 1].0;
                    if could_beat(&[v], worst, best) && best.before(v, worst) {
                        insert_ranked(&mut top, v, base + j, best, k);
                    }
                }
            }
            base += block.len();
        }
        top
    } else {
        let mut all: Vec<(T, usize)> = x.iter().copied().zip(0..).collect();
        let rank = |p: &(T, usize), q: &(T, usize)| {
            if best.before(p.0, q.0) {
                Ordering::Less
            } else if best.before(q.0, p.0) {
                Ordering::Greater
            } else {
                p.1.cmp(&q.1)
            }
        };
        if k < all.len() {
            all.select_nth_unstable_by(k - 1, rank);
            all.truncate(k);
        }
        all.sort_unstable_by(rank);
        all
    };
    unzip_top(top)
}

/// The kept `(value, index)` pairs as values and Int64 indices.
fn unzip_top<T: Ordered>(top: Vec<(T, usize)>) -> (Vec<T>, Vec<i64>) {
    // extents fit i64: they count elements of an allocated tensor
    top.into_iter().map(|(v, j)| (v, j as i64)).unzip()
}

/// Lanes of [`threshold`]'s running extremes.
const LANES: usize = 16;

/// A value at least `k` elements of `x` rank at least as well as (so every one of the `k` best
/// does too): the `k`-th best of the best elements of [`LANES`] interleaved groups, found in
/// one pass of plain comparisons. `None` when `x` holds a NaN, is shorter than two rounds of
/// lanes, or `k` exceeds the lanes (the caller then scans every element exactly).
#[allow(clippy::needless_bitwise_bool)]
fn threshold<T: Ordered>(x: &[T], k: usize, best: Best) -> Option<T> {
    if k > LANES || x.len() < 2 * LANES {
        return None;
    }
    let mut m: [T; LANES] = std::array::from_fn(|l| x[l]);
    let mut nan = [false; LANES];
    let mut chunks = x.chunks_exact(LANES);
    // one loop per direction, so that each compiles to lane-wise comparisons
    match best {
        Best::Largest => {
            for c in &mut chunks {
                for l in 0..LANES {
                    m[l] = if c[l] > m[l] { c[l] } else { m[l] };
                    nan[l] |= c[l].is_nan_elem();
                }
            }
        }
        Best::Smallest => {
            for c in &mut chunks {
                for l in 0..LANES {
                    m[l] = if c[l] < m[l] { c[l] } else { m[l] };
                    nan[l] |= c[l].is_nan_elem();
                }
            }
        }
    }
    if nan.iter().any(|&n| n) || chunks.remainder().iter().any(|v| v.is_nan_elem()) {
        return None;
    }
    // without NaN the order is total
    m.sort_unstable_by(|&p, &q| {
        if best.before(p, q) {
            Ordering::Less
        } else if best.before(q, p) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    });
    Some(m[k - 1])
}

/// The extremum of every row along `axis`, for one element type.
fn extremum_of<T: Ordered>(
    a: &Tensor,
    axis: usize,
    keepdim: bool,
    best: Best,
) -> Result<(Tensor, Tensor)> {
    let dims = a.dims();
    let rows = Rows::along("max_axis/min_axis", &dims, axis)?;
    let out = kernel::reduced_dims(&dims, &[axis], keepdim)?;
    ensure!(
        rows.n > 0 || rows.count() == 0,
        Value,
        "max_axis/min_axis: axis {axis} of shape {} is empty",
        a.shape()
    );
    let n = rows.n;
    let pairs = read_rows::<T, _>(a, rows, |e| {
        per_row(rows, |k, buf: &mut Vec<T>| {
            row_extremum(row(&e, k, n, buf), best)
        })
    })?;
    let (values, indices): (Vec<T>, Vec<i64>) = pairs.into_iter().unzip();
    Ok((
        super::group_rows::emit(a, &out, &values)?,
        super::group_rows::emit(a, &out, &indices)?,
    ))
}

/// The top `k` of every row along `axis`, for one element type.
fn topk_of<T: Ordered>(
    a: &Tensor,
    k: usize,
    axis: usize,
    best: Best,
    sorted: bool,
) -> Result<(Tensor, Tensor)> {
    let mut dims = a.dims();
    let rows = Rows::along("topk", &dims, axis)?;
    let n = rows.n;
    let parts = read_rows::<T, _>(a, rows, |e| {
        per_row(rows, |r, buf: &mut Vec<T>| {
            let (mut values, mut indices) = row_topk(row(&e, r, n, buf), k, best);
            if !sorted {
                let mut by_index: Vec<(i64, T)> = indices.into_iter().zip(values).collect();
                by_index.sort_unstable_by_key(|p| p.0);
                (indices, values) = by_index.into_iter().unzip();
            }
            (values, indices)
        })
    })?;
    let (values, indices): (Vec<Vec<T>>, Vec<Vec<i64>>) = parts.into_iter().unzip();
    dims[axis] = k;
    Ok((
        along_axis(a, &dims, rows, k, &values)?,
        along_axis(a, &dims, rows, k, &indices)?,
    ))
}

mod node {
    use super::{
        differentiable, extremum_of, ordered, scatter_back, topk_of, Best, Result, Tensor,
    };

    /// [`max_axis`](super::max_axis) and [`min_axis`](super::min_axis) along a resolved axis.
    #[differentiable(crate = crate)]
    pub(super) fn extremum(
        a: &Tensor,
        axis: usize,
        keepdim: bool,
        best: Best,
    ) -> Result<(Tensor, Tensor)> {
        // y(k) = x(k, i_k)  =>  dx(k, i_k) = g(k), zero elsewhere
        fn vjp(
            (g, _): (Option<&Tensor>, Option<&Tensor>),
            a: &Tensor,
            axis: usize,
            keepdim: bool,
            output: (&Tensor, &Tensor),
        ) -> Result<Option<Tensor>> {
            let Some(g) = g else { return Ok(None) };
            // the picked positions, with the axis kept (extent 1) for the scatter
            let mut kept = a.dims();
            kept[axis] = 1;
            let (g, indices) = if keepdim {
                (g.clone(), output.1.clone())
            } else {
                (g.reshape(&kept)?, output.1.reshape(&kept)?)
            };
            Ok(Some(scatter_back(a, axis, &g, &indices)?))
        }
        ordered!("max_axis/min_axis", a, T => extremum_of::<T>(a, axis, keepdim, best))
    }

    /// [`topk`](super::topk) along a resolved axis (`k` checked against its extent).
    #[differentiable(crate = crate)]
    pub(super) fn topk(
        a: &Tensor,
        k: usize,
        axis: usize,
        best: Best,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        // y(.., j, ..) = x(.., i_j, ..)  =>  dx(.., i_j, ..) = g(.., j, ..), zero elsewhere
        fn vjp(
            (g, _): (Option<&Tensor>, Option<&Tensor>),
            a: &Tensor,
            axis: usize,
            output: (&Tensor, &Tensor),
        ) -> Result<Option<Tensor>> {
            let Some(g) = g else { return Ok(None) };
            Ok(Some(scatter_back(a, axis, g, output.1)?))
        }
        ordered!("topk", a, T => topk_of::<T>(a, k, axis, best, sorted))
    }
}

/// Method forms of the selections along an axis.
impl Tensor {
    /// [`max_axis`]: `(values, indices)` of the maximum along `axis`.
    #[track_caller]
    pub fn max_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<(Tensor, Tensor)> {
        max_axis(self, axis, keepdim)
    }

    /// [`min_axis`]: `(values, indices)` of the minimum along `axis`.
    #[track_caller]
    pub fn min_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<(Tensor, Tensor)> {
        min_axis(self, axis, keepdim)
    }

    /// [`topk`]: `(values, indices)` of the `k` largest or smallest along `axis`.
    #[track_caller]
    pub fn topk(
        &self,
        k: usize,
        axis: impl Into<Axis>,
        largest: bool,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        topk(self, k, axis, largest, sorted)
    }
}

#[cfg(test)]
mod tests {
    use super::{row_extremum, row_topk, Best};

    #[test]
    fn both_topk_paths_keep_the_lower_index_among_ties() {
        let x = [1.0f32, 3.0, 3.0, 2.0, 3.0, f32::NAN];
        let (v, i) = row_topk(&x, 3, Best::Largest);
        assert!(v[0].is_nan());
        assert_eq!((&v[1..], i), (&[3.0f32, 3.0][..], vec![5, 1, 2]));
        assert_eq!(row_topk(&x, 2, Best::Smallest).1, [0, 3]);
        // the selection path (k > 64) agrees with the buffer path
        let long: Vec<i32> = (0..200).map(|j| (j * 37) % 11).collect();
        let (_, big) = row_topk(&long, 70, Best::Smallest);
        let mut want: Vec<i64> = (0..200).collect();
        want.sort_by_key(|&j| (long[usize::try_from(j).unwrap()], j));
        assert_eq!(big, want[..70]);
    }

    #[test]
    fn long_rows_with_ties_agree_with_a_full_sort() {
        // 400 elements with many ties: the blocked scan equals a full sort
        let x: Vec<f32> = (0..400).map(|j| ((j * 37) % 23) as f32 - 11.0).collect();
        for (best, sign) in [(Best::Largest, -1.0f32), (Best::Smallest, 1.0)] {
            for k in [1, 3, 6] {
                let (v, i) = row_topk(&x, k, best);
                let mut want: Vec<usize> = (0..400).collect();
                want.sort_by(|&a, &b| (sign * x[a]).total_cmp(&(sign * x[b])).then(a.cmp(&b)));
                let want: Vec<i64> = want[..k].iter().map(|&j| j as i64).collect();
                assert_eq!(i, want, "k = {k}");
                assert_eq!(v, want.iter().map(|&j| x[j as usize]).collect::<Vec<_>>());
            }
        }
        // a NaN is the largest
        let mut y = x.clone();
        y[390] = f32::NAN;
        assert_eq!(row_topk(&y, 2, Best::Largest).1[0], 390);
    }

    #[test]
    fn extrema_return_the_first_best_or_the_first_nan() {
        assert_eq!(row_extremum(&[1, 5, 5, 2], Best::Largest), (5, 1));
        assert_eq!(row_extremum(&[1, 0, 0], Best::Smallest), (0, 1));
        let (v, i) = row_extremum(&[1.0f64, f64::NAN, 9.0, f64::NAN], Best::Smallest);
        assert!(v.is_nan() && i == 1);
    }
}

//! Layout and indexing ops: concat, stack, index_select, gather, scatter_add and embedding.
//!
//! The forward kernels copy elements by row-major position over the top-level modes (each
//! input read once, in logical order), so they take any layout: transposed, sliced, broadcast.
//! Results are compact row-major, in fresh storage of the first input's carrier class.
//! Indices are Int32 (or Int64) tensors; a negative or too-large index is `Error::Value` naming
//! the index, the axis and the extent, raised before anything is computed.

use std::sync::Arc;

use crate::error::{bail, ensure};
use crate::kernel::element::Num;
use crate::{differentiable, kernel, DType, Element, Layout, Result, Tensor};

/// Runs `$body` with `$T` bound to the storage element type of `$dtype`.
macro_rules! by_dtype {
    ($dtype:expr, $op:expr, |$T:ident| $body:expr) => {
        crate::kernel::element::dispatch!(
            $dtype, $op, $T => $body,
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{} does not take {} tensors"
        )
    };
}

/// A compact row-major result of extents `dims` in fresh storage of `like`'s carrier class,
/// written by `f`.
pub(super) fn emit<T: Element>(
    like: &Tensor,
    dims: &[usize],
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    kernel::fresh(like, Arc::new(Layout::row_major(dims)?), f)
}

/// [`emit`] for a kernel that writes every element: a reused buffer is not zeroed first.
fn emit_overwritten<T: Element>(
    like: &Tensor,
    dims: &[usize],
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    kernel::fresh_overwritten(like, Arc::new(Layout::row_major(dims)?), f)
}

/// The values of an index tensor (Int32 or Int64) in logical order.
pub(super) fn index_values(op: &str, indices: &Tensor) -> Result<Vec<i64>> {
    match indices.dtype() {
        DType::Int32 => Ok(indices
            .values::<i32>()?
            .into_iter()
            .map(i64::from)
            .collect()),
        DType::Int64 => indices.values::<i64>(),
        other => bail!(Type, "{op}: indices must be Int32 (or Int64), got {other}"),
    }
}

/// Every index checked against `extent`, as positions.
pub(super) fn checked(op: &str, indices: &[i64], axis: usize, extent: usize) -> Result<Vec<usize>> {
    indices
        .iter()
        .map(|&i| match usize::try_from(i) {
            Ok(u) if u < extent => Ok(u),
            _ => bail!(
                Value,
                "{op}: index {i} is out of range for axis {axis} of extent {extent}"
            ),
        })
        .collect()
}

/// Gradient sums accumulated in `f64` (repeated indices add many terms), rounded once.
pub(super) fn rounded(sums: Vec<f64>) -> Vec<f32> {
    sums.into_iter().map(|v| v as f32).collect()
}

/// Refuses an axis beyond `rank` top-level modes.
pub(super) fn check_axis(op: &str, axis: usize, rank: usize, t: &Tensor) -> Result<()> {
    ensure!(
        axis < rank,
        Value,
        "{op}: axis {axis} is out of range for shape {} of {rank} axes",
        t.shape()
    );
    Ok(())
}

/// Row-major strides of `dims`.
pub(super) fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// For every row-major position of `dims`, `sum_d coord[d] * stride[d]` (`Error::Value` when
/// that many cannot be allocated).
pub(super) fn offsets(dims: &[usize], stride: &[usize]) -> Result<Vec<usize>> {
    let n = dims
        .iter()
        .try_fold(1usize, |p, &d| p.checked_mul(d))
        .unwrap_or(usize::MAX);
    let mut out = crate::storage::allocation::with_capacity(n)?;
    let mut coord = vec![0; dims.len()];
    let mut at = 0;
    for _ in 0..n {
        out.push(at);
        for d in (0..dims.len()).rev() {
            coord[d] += 1;
            at += stride[d];
            if coord[d] < dims[d] {
                break;
            }
            at -= stride[d] * dims[d];
            coord[d] = 0;
        }
    }
    Ok(out)
}

/// `out = [p_0[o] | p_1[o] | ...]` for every outer index `o`, where `p_i[o]` is the `o`-th run
/// of `chunks[i]` elements of piece `i`.
fn interleave<T: Copy>(pieces: &[Vec<T>], chunks: &[usize], outer: usize, out: &mut [T]) {
    let mut w = 0;
    for o in 0..outer {
        for (p, &c) in pieces.iter().zip(chunks) {
            out[w..w + c].copy_from_slice(&p[o * c..(o + 1) * c]);
            w += c;
        }
    }
}

/// The inverse of [`interleave`] for the pieces `wanted`: the gradient of each piece.
fn split(
    g: &Tensor,
    xs: &[Tensor],
    chunks: &[usize],
    outer: usize,
    wanted: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let g = g.values::<f32>()?;
    let row: usize = chunks.iter().sum();
    let mut at = 0;
    let mut out = Vec::with_capacity(xs.len());
    for (i, (x, &c)) in xs.iter().zip(chunks).enumerate() {
        if wanted.get(i).copied().unwrap_or(true) {
            let mut d = crate::storage::allocation::with_capacity(x.size())?;
            for o in 0..outer {
                d.extend_from_slice(&g[o * row + at..o * row + at + c]);
            }
            out.push(Some(x.f32_like(d)?));
        } else {
            out.push(None);
        }
        at += c;
    }
    Ok(out)
}

/// The common dtype of `xs`, which must be non-empty.
fn common_dtype<'a>(op: &str, xs: &'a [Tensor]) -> Result<&'a DType> {
    let Some(first) = xs.first() else {
        bail!(Value, "{op} needs at least one tensor")
    };
    for (i, x) in xs.iter().enumerate() {
        ensure!(
            x.dtype() == first.dtype(),
            Type,
            "{op}: tensor {i} has dtype {} but tensor 0 has {}",
            x.dtype(),
            first.dtype()
        );
    }
    Ok(first.dtype())
}

/// The tensors of `xs` joined along the existing top-level `axis`; every other extent must
/// agree. The result is in fresh storage of `xs[0]`'s carrier class.
///
/// ```
/// use autograd_core::{ops::concat, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2, 1]).unwrap();
/// let b = Tensor::from_vec(vec![3.0f32, 4.0, 5.0, 6.0], shape![2, 2]).unwrap();
/// let c = concat(&[a, b], 1).unwrap();
/// assert_eq!(c.values::<f32>().unwrap(), [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
/// ```
#[differentiable(crate = crate)]
pub(crate) fn concat(xs: &[Tensor], axis: usize) -> Result<Tensor> {
    // y[o, :] = [x_0[o, :] | x_1[o, :] | ...]  =>  dx_i = the slab of g that x_i filled
    fn vjp(
        g: &Tensor,
        xs: &[Tensor],
        axis: usize,
        needs: &NeedsGrad,
    ) -> Result<Vec<Option<Tensor>>> {
        unjoin(g, xs, axis, needs.slice(0))
    }
    let dtype = common_dtype("concat", xs)?;
    let first = xs[0].dims();
    check_axis("concat", axis, first.len(), &xs[0])?;
    let mut out_dims = first.clone();
    out_dims[axis] = 0;
    for (i, x) in xs.iter().enumerate() {
        let d = x.dims();
        let agrees = d.len() == first.len()
            && d.iter()
                .zip(&first)
                .enumerate()
                .all(|(k, (a, b))| k == axis || a == b);
        ensure!(
            agrees,
            Value,
            "concat along axis {axis}: tensor {i} has shape {} but tensor 0 has {}",
            x.shape(),
            xs[0].shape()
        );
        out_dims[axis] = match out_dims[axis].checked_add(d[axis]) {
            Some(n) => n,
            None => bail!(
                Value,
                "concat along axis {axis}: the joined extent overflows (tensor {i} has shape {})",
                x.shape()
            ),
        };
    }
    let outer: usize = first[..axis].iter().product();
    let chunks: Vec<usize> = xs
        .iter()
        .map(|x| x.dims()[axis..].iter().product())
        .collect();
    join(xs, dtype, "concat", &out_dims, &chunks, outer)
}

/// The gradients of the tensors `join` interleaved along `axis` (`concat` and `stack` alike:
/// `x_i` filled `x_i.dims()[axis..]` elements of every block before `axis`).
fn unjoin(g: &Tensor, xs: &[Tensor], axis: usize, wanted: &[bool]) -> Result<Vec<Option<Tensor>>> {
    let outer: usize = g.dims()[..axis].iter().product();
    let chunks: Vec<usize> = xs
        .iter()
        .map(|x| x.dims()[axis..].iter().product())
        .collect();
    split(g, xs, &chunks, outer, wanted)
}

/// The tensors of `xs` (all of `dtype`) interleaved into one of `out_dims`: for each of
/// `outer` blocks, `chunks[i]` elements of `xs[i]` in turn.
fn join(
    xs: &[Tensor],
    dtype: &DType,
    op: &str,
    out_dims: &[usize],
    chunks: &[usize],
    outer: usize,
) -> Result<Tensor> {
    by_dtype!(dtype, op, |T| {
        let pieces = xs
            .iter()
            .map(Tensor::values::<T>)
            .collect::<Result<Vec<_>>>()?;
        emit::<T>(&xs[0], out_dims, |out| {
            interleave(&pieces, chunks, outer, out);
            Ok(())
        })
    })
}

/// The tensors of `xs`, all of one shape, stacked along a new top-level `axis`
/// (`0..=rank`).
///
/// ```
/// use autograd_core::{ops::stack, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![3.0f32, 4.0], shape![2]).unwrap();
/// let s = stack(&[a, b], 1).unwrap();
/// assert_eq!(s.dims(), [2, 2]);
/// assert_eq!(s.values::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
/// ```
#[differentiable(crate = crate)]
pub(crate) fn stack(xs: &[Tensor], axis: usize) -> Result<Tensor> {
    // y[o, i, :] = x_i[o, :]  =>  dx_i[o, :] = g[o, i, :]
    fn vjp(
        g: &Tensor,
        xs: &[Tensor],
        axis: usize,
        needs: &NeedsGrad,
    ) -> Result<Vec<Option<Tensor>>> {
        unjoin(g, xs, axis, needs.slice(0))
    }
    let dtype = common_dtype("stack", xs)?;
    let first = xs[0].dims();
    ensure!(
        axis <= first.len(),
        Value,
        "stack: axis {axis} is out of range for a result of {} axes",
        first.len() + 1
    );
    for (i, x) in xs.iter().enumerate() {
        ensure!(
            x.dims() == first,
            Value,
            "stack: tensor {i} has shape {} but tensor 0 has {}",
            x.shape(),
            xs[0].shape()
        );
    }
    let mut out_dims = first.clone();
    out_dims.insert(axis, xs.len());
    let outer: usize = first[..axis].iter().product();
    let chunk: usize = first[axis..].iter().product();
    let chunks = vec![chunk; xs.len()];
    join(xs, dtype, "stack", &out_dims, &chunks, outer)
}

/// The sub-tensors of `a` at `indices` (a one-axis Int32 tensor) along `axis`:
/// `y[.., j, ..] = a[.., indices[j], ..]`. Indices may repeat.
///
/// ```
/// use autograd_core::{ops::index_select, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![3, 2]).unwrap();
/// let i = Tensor::from_vec(vec![2i32, 0, 2], shape![3]).unwrap();
/// let y = index_select(&a, 0, &i).unwrap();
/// assert_eq!(y.values::<f32>().unwrap(), [5.0, 6.0, 1.0, 2.0, 5.0, 6.0]);
/// ```
#[differentiable(crate = crate)]
pub(crate) fn index_select(a: &Tensor, axis: usize, indices: &Tensor) -> Result<Tensor> {
    // y[o, j, i] = a[o, idx[j], i]  =>  da[o, k, i] = sum_{j : idx[j] = k} g[o, j, i]
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        axis: usize,
        indices: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dims = a.dims();
        let idx = checked(
            "index_select",
            &index_values("index_select", indices)?,
            axis,
            dims[axis],
        )?;
        let (outer, inner) = around(&dims, axis);
        let (n, m) = (dims[axis], idx.len());
        let g = g.values::<f32>()?;
        let mut da = crate::storage::allocation::filled(a.size(), 0.0f64)?;
        for o in 0..outer {
            for (j, &k) in idx.iter().enumerate() {
                let (src, dst) = ((o * m + j) * inner, (o * n + k) * inner);
                for i in 0..inner {
                    da[dst + i] += f64::from(g[src + i]);
                }
            }
        }
        Ok((Some(a.f32_like(rounded(da))?), None))
    }
    let dims = a.dims();
    check_axis("index_select", axis, dims.len(), a)?;
    ensure!(
        indices.dims().len() == 1,
        Value,
        "index_select: indices must have one axis, got shape {}",
        indices.shape()
    );
    let idx = checked(
        "index_select",
        &index_values("index_select", indices)?,
        axis,
        dims[axis],
    )?;
    let (outer, inner) = around(&dims, axis);
    let n = dims[axis];
    let mut out_dims = dims.clone();
    out_dims[axis] = idx.len();
    by_dtype!(a.dtype(), "index_select", |T| {
        kernel::read_logical(a, |x: &[T]| {
            emit_overwritten::<T>(a, &out_dims, |out| {
                let mut w = 0;
                for o in 0..outer {
                    for &k in &idx {
                        let src = (o * n + k) * inner;
                        out[w..w + inner].copy_from_slice(&x[src..src + inner]);
                        w += inner;
                    }
                }
                Ok(())
            })
        })?
    })
}

/// The elements before and after `axis`: `(prod dims[..axis], prod dims[axis + 1..])`.
pub(super) fn around(dims: &[usize], axis: usize) -> (usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis + 1..].iter().product(),
    )
}

/// Where `gather`/`scatter_add` read and write: for every position `p` of `indices` (row-major),
/// the row-major offset in a tensor of extents `dims` of `p`'s coordinate with its `axis` entry
/// replaced by `indices[p]`. Checks ranks, extents and every index.
pub(super) fn scattered(
    op: &str,
    dims: &[usize],
    axis: usize,
    indices: &Tensor,
) -> Result<Vec<usize>> {
    let idims = indices.dims();
    ensure!(
        idims.len() == dims.len(),
        Value,
        "{op}: indices of shape {} need {} axes like the tensor they index",
        indices.shape(),
        dims.len()
    );
    for (d, (&i, &n)) in idims.iter().zip(dims).enumerate() {
        ensure!(
            d == axis || i <= n,
            Value,
            "{op}: indices extent {i} on axis {d} exceeds the tensor's extent {n}"
        );
    }
    let idx = checked(op, &index_values(op, indices)?, axis, dims[axis])?;
    let stride = strides(dims);
    let mut base_stride = stride.clone();
    base_stride[axis] = 0;
    Ok(offsets(&idims, &base_stride)?
        .into_iter()
        .zip(idx)
        .map(|(b, k)| b + k * stride[axis])
        .collect())
}

/// `y[p] = a[p with its axis coordinate replaced by indices[p]]`, with `y` of the shape of
/// `indices` (an Int32 tensor of `a`'s rank whose extents off `axis` do not exceed `a`'s).
///
/// ```
/// use autograd_core::{ops::gather, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2]).unwrap();
/// let i = Tensor::from_vec(vec![1i32, 1, 0, 1], shape![2, 2]).unwrap();
/// assert_eq!(gather(&a, 1, &i).unwrap().values::<f32>().unwrap(), [2.0, 2.0, 3.0, 4.0]);
/// ```
#[differentiable(crate = crate)]
pub(crate) fn gather(a: &Tensor, axis: usize, indices: &Tensor) -> Result<Tensor> {
    // y[p] = a[s(p)]  =>  da[q] = sum_{p : s(p) = q} g[p]  (a scatter-add of g)
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        axis: usize,
        indices: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let at = scattered("gather", &a.dims(), axis, indices)?;
        let g = g.values::<f32>()?;
        let mut da = crate::storage::allocation::filled(a.size(), 0.0f64)?;
        for (&q, &v) in at.iter().zip(&g) {
            da[q] += f64::from(v);
        }
        Ok((Some(a.f32_like(rounded(da))?), None))
    }
    let dims = a.dims();
    check_axis("gather", axis, dims.len(), a)?;
    let at = scattered("gather", &dims, axis, indices)?;
    let out_dims = indices.dims();
    by_dtype!(a.dtype(), "gather", |T| {
        kernel::read_logical(a, |x: &[T]| {
            emit::<T>(a, &out_dims, |out| {
                for (o, &q) in out.iter_mut().zip(&at) {
                    *o = x[q];
                }
                Ok(())
            })
        })?
    })
}

/// A copy of `a` with `src[p]` added at `p`'s coordinate with its `axis` entry replaced by
/// `indices[p]`, for every position `p` of `indices` (repeated targets add up). `indices` and
/// `src` have `a`'s rank; `indices`' extents do not exceed `src`'s, nor `a`'s off `axis`.
///
/// ```
/// use autograd_core::{ops::scatter_add, shape, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32; 3], shape![3]).unwrap();
/// let i = Tensor::from_vec(vec![0i32, 2, 0], shape![3]).unwrap();
/// let s = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
/// assert_eq!(scatter_add(&a, 0, &i, &s).unwrap().values::<f32>().unwrap(), [4.0, 0.0, 2.0]);
/// ```
#[differentiable(crate = crate)]
pub(crate) fn scatter_add(
    a: &Tensor,
    axis: usize,
    indices: &Tensor,
    src: &Tensor,
) -> Result<Tensor> {
    // y = a + sum_p src[r(p)] e_{s(p)}  =>  da = g;  dsrc[r(p)] = g[s(p)] (0 where no index reads)
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        axis: usize,
        indices: &Tensor,
        src: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let at = scattered("scatter_add", &a.dims(), axis, indices)?;
        let from = offsets(&indices.dims(), &strides(&src.dims()))?;
        let g = g.values::<f32>()?;
        let mut dsrc = crate::storage::allocation::filled(src.size(), 0.0f32)?;
        for (&q, &r) in at.iter().zip(&from) {
            dsrc[r] = g[q];
        }
        Ok((Some(a.f32_like(g)?), None, Some(src.f32_like(dsrc)?)))
    }
    let dims = a.dims();
    check_axis("scatter_add", axis, dims.len(), a)?;
    ensure!(
        src.dtype() == a.dtype(),
        Type,
        "scatter_add: src has dtype {} but the tensor has {}",
        src.dtype(),
        a.dtype()
    );
    let sdims = src.dims();
    let idims = indices.dims();
    ensure!(
        sdims.len() == idims.len() && idims.iter().zip(&sdims).all(|(i, s)| i <= s),
        Value,
        "scatter_add: indices of shape {} do not fit in src of shape {}",
        indices.shape(),
        src.shape()
    );
    let at = scattered("scatter_add", &dims, axis, indices)?;
    let from = offsets(&idims, &strides(&sdims))?;
    match a.dtype() {
        DType::Float32 => add_into::<f32>(a, src, &dims, &at, &from),
        DType::Float64 => add_into::<f64>(a, src, &dims, &at, &from),
        DType::Int32 => add_into::<i32>(a, src, &dims, &at, &from),
        DType::Int64 => add_into::<i64>(a, src, &dims, &at, &from),
        other => bail!(Type, "scatter_add does not take {other} tensors"),
    }
}

/// `a` with `src[from[p]]` added at `at[p]`, for one element type (integers wrap).
fn add_into<T: Num>(
    a: &Tensor,
    src: &Tensor,
    dims: &[usize],
    at: &[usize],
    from: &[usize],
) -> Result<Tensor> {
    kernel::read_logical_pair(a, src, |x: &[T], s: &[T]| {
        emit::<T>(a, dims, |out| {
            out.copy_from_slice(x);
            for (&q, &r) in at.iter().zip(from) {
                out[q] = out[q].plus(s[r]);
            }
            Ok(())
        })
    })?
}

/// Rows of `weight` (`[V, D]`) picked by `ids` (Int32, any shape): the result has shape
/// `[..ids, D]`. The gradient scatter-adds the cotangent rows back, so a repeated id gets the
/// sum of its rows' cotangents.
///
/// ```
/// use autograd_core::{ops::embedding, shape, Tensor};
/// let w = Tensor::from_vec(vec![0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5], shape![3, 2]).unwrap();
/// let ids = Tensor::from_vec(vec![2i32, 0, 2, 1], shape![2, 2]).unwrap();
/// let y = embedding(&w, &ids).unwrap();
/// assert_eq!(y.dims(), [2, 2, 2]);
/// assert_eq!(y.values::<f32>().unwrap()[..4], [2.0, 2.5, 0.0, 0.5]);
/// ```
#[differentiable(crate = crate)]
pub fn embedding(weight: &Tensor, ids: &Tensor) -> Result<Tensor> {
    // y[k, j] = w[id_k, j]  =>  dw[v, j] = sum_{k : id_k = v} g[k, j]
    fn vjp(g: &Tensor, weight: &Tensor, ids: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (v, d) = embedding_dims(weight)?;
        let ids = checked("embedding", &index_values("embedding", ids)?, 0, v)?;
        let dw = kernel::read_logical(g, |g: &[f32]| kernel::scatter_rows(g, &ids, v, d, None))??;
        Ok((Some(weight.f32_like(dw)?), None))
    }
    let (v, d) = embedding_dims(weight)?;
    let ids_v = checked("embedding", &index_values("embedding", ids)?, 0, v)?;
    let mut out_dims = ids.dims();
    out_dims.push(d);
    by_dtype!(weight.dtype(), "embedding", |T| {
        kernel::read_logical(weight, |w: &[T]| {
            emit_overwritten::<T>(weight, &out_dims, |out| {
                for (k, &id) in ids_v.iter().enumerate() {
                    out[k * d..(k + 1) * d].copy_from_slice(&w[id * d..(id + 1) * d]);
                }
                Ok(())
            })
        })?
    })
}

/// `(V, D)` of an embedding table, which must have two axes.
fn embedding_dims(weight: &Tensor) -> Result<(usize, usize)> {
    match weight.dims()[..] {
        [v, d] => Ok((v, d)),
        _ => bail!(
            Value,
            "embedding: the weight must have shape [V, D], got {}",
            weight.shape()
        ),
    }
}

/// Method forms of the indexing ops that take no axis (those that do are in `index_axes`).
impl Tensor {
    /// [`embedding`] with `self` as the `[V, D]` table: `w.embedding(&ids)?`.
    pub fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        embedding(self, ids)
    }
}

#[cfg(test)]
mod tests {
    use super::{offsets, strides};

    #[test]
    fn offsets_walk_row_major_positions() {
        assert_eq!(strides(&[2, 3, 4]), [12, 4, 1]);
        assert_eq!(offsets(&[2, 2], &[3, 1]).unwrap(), [0, 1, 3, 4]);
        assert_eq!(offsets(&[2, 2], &[0, 1]).unwrap(), [0, 1, 0, 1]);
    }
}

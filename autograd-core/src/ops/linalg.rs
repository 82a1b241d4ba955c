//! Linear algebra: matrix products over strided operands (a transposed operand reaches GEMM as
//! swapped strides, without a copy), batched with broadcast batch modes, and `linear`.

use std::sync::Arc;

use crate::error::{ensure, Result};
use crate::kernel::{self, gemm_f32, MatMut};
use crate::layout::Layout;
use crate::ops::{broadcast_to, squeeze, unsqueeze};
use crate::{differentiable, Tensor};

/// Which operand of a product is used transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Trans {
    a: bool,
    b: bool,
}

/// `t` with every mode flat, copying only when a matrix mode is nested.
fn flat(t: &Tensor) -> Result<Tensor> {
    let l = t.layout();
    let r = l.rank();
    if r >= 2 && l.mode_is_leaf(r - 2) && l.mode_is_leaf(r - 1) {
        return Ok(t.clone());
    }
    let values = t.values::<f32>()?;
    t.f32_with_layout(values, Arc::new(Layout::row_major(&t.dims())?))
}

/// The batch extents and the matrix extents `(rows, cols)` of a rank >= 2 tensor.
fn split_dims(t: &Tensor, what: &str) -> Result<(Vec<usize>, usize, usize)> {
    let dims = t.dims();
    ensure!(
        dims.len() >= 2,
        Value,
        "{what}: operand of shape {} needs at least two axes (a matrix)",
        t.shape()
    );
    let n = dims.len();
    Ok((dims[..n - 2].to_vec(), dims[n - 2], dims[n - 1]))
}

/// `op(a) · op(b)` for every batch index of `a` and `b`, which have one batch shape, in fresh
/// compact storage of `a`'s carrier class. No node is recorded.
fn product(a: &Tensor, b: &Tensor, trans: Trans) -> Result<Tensor> {
    product_on(a, b, trans, kernel::threads())
}

/// [`product`] on at most `threads` threads.
fn product_on(a: &Tensor, b: &Tensor, trans: Trans, threads: usize) -> Result<Tensor> {
    let (a, b) = (flat(a)?, flat(b)?);
    let (batch, ar, ac) = split_dims(&a, "matmul")?;
    let (batch_b, br, bc) = split_dims(&b, "matmul")?;
    ensure!(
        batch == batch_b,
        Value,
        "matmul: batch shapes {batch:?} and {batch_b:?} differ"
    );
    let (m, k) = if trans.a { (ac, ar) } else { (ar, ac) };
    let (k2, n) = if trans.b { (bc, br) } else { (br, bc) };
    ensure!(
        k == k2,
        Value,
        "matmul: inner dimensions differ: {} x {} times {} x {} (shapes {} and {})",
        m,
        k,
        k2,
        n,
        a.shape(),
        b.shape()
    );
    let mut out_dims = batch.clone();
    out_dims.extend([m, n]);
    let count: usize = batch.iter().product();
    let layout = Arc::new(Layout::row_major(&out_dims)?);
    kernel::read_pair::<f32, f32, _>(&a, &b, |ea, eb| {
        // every matrix of the result is written (GEMM without accumulation)
        kernel::fresh_overwritten::<f32>(&a, layout, |out| {
            let mut index = vec![0usize; batch.len()];
            for (i, c) in out.chunks_mut((m * n).max(1)).take(count).enumerate() {
                if i > 0 {
                    advance(&mut index, &batch);
                }
                let (Some(ma), Some(mb)) =
                    (ea.matrix(&index, trans.a)?, eb.matrix(&index, trans.b)?)
                else {
                    crate::error::bail!(
                        Runtime,
                        "matmul: a matrix mode is nested after flattening"
                    );
                };
                gemm_f32(ma, mb, MatMut::row_major(c, m, n), false, threads)?;
            }
            Ok(())
        })
    })?
}

/// Advances a row-major batch coordinate by one.
fn advance(index: &mut [usize], dims: &[usize]) {
    for (i, d) in index.iter_mut().zip(dims).rev() {
        *i += 1;
        if *i < *d {
            return;
        }
        *i = 0;
    }
}

/// `a · b` for operands of one batch shape `[..., m, k]` and `[..., k, n]`.
#[differentiable(crate = crate, batched)]
fn batched_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // d(A B) = g Bᵀ dA + Aᵀ g dB, per batch index; K batched cotangents read A and B beside
    // them (a stride-0 batch mode, no copy)
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        b: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let k = crate::batch::extent(g, a.layout().rank());
        let ga = if needs.input(0) {
            let b = crate::batch::beside(b, k)?;
            Some(product(g, &b, Trans { a: false, b: true })?)
        } else {
            None
        };
        let gb = if needs.input(1) {
            let a = crate::batch::beside(a, k)?;
            Some(product(&a, g, Trans { a: true, b: false })?)
        } else {
            None
        };
        Ok((ga, gb))
    }
    product(a, b, Trans { a: false, b: false })
}

/// The matrix product `a · b` of `[..., m, k]` and `[..., k, n]`: batch axes broadcast as
/// numpy's `matmul` does (through the differentiable `broadcast_to`, so a broadcast operand's
/// gradient sums over the batch), and a transposed or sliced operand reaches the GEMM kernel
/// through its strides, without a copy. A vector operand is promoted as PyTorch does: `[k]`
/// on the left is a row `[1, k]`, on the right a column `[k, 1]`, and the promoted axis is
/// removed from the result (two vectors give their dot product, a scalar). A scalar operand
/// is `Error::Value`.
///
/// Products run on the kernel threads in bands whose number follows the thread count, so
/// results may differ in rounding between thread counts (as MKL's do in PyTorch); with one
/// thread count they are the same on every run.
///
/// ```
/// use autograd_core::{ops::matmul, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2]).unwrap();
/// let b = Tensor::from_vec(vec![5.0f32, 6.0, 7.0, 8.0], shape![2, 2]).unwrap();
/// assert_eq!(matmul(&a, &b).unwrap().values::<f32>().unwrap(), [19.0, 22.0, 43.0, 50.0]);
/// let v = Tensor::from_vec(vec![1.0f32, 1.0], shape![2]).unwrap();
/// assert_eq!(matmul(&a, &v).unwrap().values::<f32>().unwrap(), [3.0, 7.0]);
/// ```
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (ra, rb) = (a.dims().len(), b.dims().len());
    ensure!(
        ra >= 1 && rb >= 1,
        Value,
        "matmul: operands of shapes {} and {} must have at least one axis each",
        a.shape(),
        b.shape()
    );
    match (ra, rb) {
        (1, 1) => squeeze(
            &squeeze(&matrix_matmul(&unsqueeze(a, 0)?, &unsqueeze(b, 1)?)?, 1)?,
            0,
        ),
        (1, _) => squeeze(&matrix_matmul(&unsqueeze(a, 0)?, b)?, rb - 2),
        (_, 1) => squeeze(&matrix_matmul(a, &unsqueeze(b, 1)?)?, ra - 1),
        _ => matrix_matmul(a, b),
    }
}

/// [`matmul`] of operands with at least two axes each.
fn matrix_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (batch_a, m, _) = split_dims(a, "matmul")?;
    let (batch_b, _, n) = split_dims(b, "matmul")?;
    if batch_a == batch_b {
        return batched_matmul(a, b);
    }
    let batch = broadcast_batch(&batch_a, &batch_b)?;
    let (_, _, k) = split_dims(a, "matmul")?;
    let (_, k2, _) = split_dims(b, "matmul")?;
    let mut da = batch.clone();
    da.extend([m, k]);
    let mut db = batch;
    db.extend([k2, n]);
    batched_matmul(&broadcast_to(a, &da)?, &broadcast_to(b, &db)?)
}

/// The broadcast of two batch shapes (numpy rules, aligned at the end).
fn broadcast_batch(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let at = |s: &[usize], i: usize| (i + s.len()).checked_sub(n).map_or(1, |j| s[j]);
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => crate::error::bail!(
                Value,
                "matmul: batch shapes {a:?} and {b:?} do not broadcast (axis {i}: {x} vs {y})"
            ),
        })
        .collect()
}

/// `x` as a `[rows, in]` matrix (leading axes flattened): itself when its storage allows, else
/// a compact copy.
fn rows_of(x: &Tensor) -> Result<Tensor> {
    let dims = x.dims();
    let inner = dims.last().copied().unwrap_or(1);
    let rows: usize = dims[..dims.len().saturating_sub(1)].iter().product();
    let target = Layout::row_major(&[rows, inner])?;
    let l = x.layout();
    if x.subtensor_count() == 1 && l.is_row_major_contiguous() && l.size() == l.cosize() {
        return x.with_layout_detached(target, x.offset());
    }
    let values = x.values::<f32>()?;
    x.f32_with_layout(values, Arc::new(target))
}

/// `x · wᵀ + bias` for `x` of shape `[..., in]`, `w` of shape `[out, in]` and an optional
/// `bias` of shape `[out]`, as PyTorch's `Linear` computes it: one GEMM with `w` read
/// transposed through its strides, and only the gradients the traversal wants (functional
/// `grad` asking for the parameters skips the data batch's).
#[differentiable(crate = crate, batched)]
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    // y = x wᵀ + b:  dx = g w,  dw = gᵀ x,  db = the column sums of g. K batched cotangents
    // are K times the rows for dx; dw and db are per batch index, with x read beside them.
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let k = crate::batch::extent(g, x.layout().rank());
        let g2 = rows_of(g)?;
        // g as [K, rows, out] when batched (a view: g2 is compact)
        let per_index = |k: usize| {
            let (rows, out) = (g2.dims()[0] / k.max(1), g2.dims()[1]);
            g2.with_layout_detached(Layout::row_major(&[k, rows, out])?, g2.offset())
        };
        let gx = |threads| -> Result<Option<Tensor>> {
            if !needs.input(0) {
                return Ok(None);
            }
            let gx = product_on(&g2, w, Trans { a: false, b: false }, threads)?;
            let dims: Vec<usize> = k.into_iter().chain(x.dims()).collect();
            Ok(Some(gx.with_layout_detached(Layout::row_major(&dims)?, 0)?))
        };
        let gw = |threads| -> Result<Option<Tensor>> {
            let trans = Trans { a: true, b: false };
            Ok(match (needs.input(1), k) {
                (false, _) => None,
                (true, None) => Some(product_on(&g2, &rows_of(x)?, trans, threads)?),
                (true, Some(k)) => {
                    let x3 = crate::batch::beside(&rows_of(x)?, Some(k))?;
                    Some(product_on(&per_index(k)?, &x3, trans, threads)?)
                }
            })
        };
        // Two products of one size: side by side, each on half the threads, rather than one
        // after the other each split across all (small GEMMs split poorly).
        let threads = kernel::threads();
        let (gx, gw) = if threads > 1 && needs.input(0) && needs.input(1) {
            let (gx, gw) = kernel::join(|| gx(threads / 2), || gw(threads - threads / 2));
            (gx?, gw?)
        } else {
            (gx(threads)?, gw(threads)?)
        };
        // the column sums of g: a row at a time (the reduced mode leads)
        let gb = match (bias, k) {
            (Some(b), None) if needs.input(2) => Some(super::broadcast::sum_to(&g2, b)?),
            (Some(_), Some(k)) if needs.input(2) => {
                Some(crate::ops::sum_axes(&per_index(k)?, &[1], false)?)
            }
            _ => None,
        };
        Ok((gx, gw, gb))
    }
    let dims = x.dims();
    ensure!(
        !dims.is_empty() && w.dims().len() == 2 && w.dims()[1] == dims[dims.len() - 1],
        Value,
        "linear: input of shape {} and weight of shape {} do not fit (weight must be [out, in] with in = the input's last extent)",
        x.shape(),
        w.shape()
    );
    let out = w.dims()[0];
    if let Some(b) = bias {
        ensure!(
            b.dims() == [out],
            Value,
            "linear: bias of shape {} must be [{out}]",
            b.shape()
        );
    }
    let y2 = product(&rows_of(x)?, w, Trans { a: false, b: true })?;
    let y2 = match bias {
        Some(b) => add_rows(&y2, b)?,
        None => y2,
    };
    let mut out_dims = dims[..dims.len() - 1].to_vec();
    out_dims.push(out);
    y2.with_layout_detached(Layout::row_major(&out_dims)?, 0)
}

/// `y[i, :] + b` for every row of `y`, a compact `[rows, n]` matrix the caller just made (no
/// one else holds it): added in place on the CPU, so the bias costs no second buffer.
fn add_rows(y: &Tensor, b: &Tensor) -> Result<Tensor> {
    let bias = b.values::<f32>()?;
    if kernel::is_cpu(y) && !bias.is_empty() {
        kernel::update::<f32, _>(y, |s| {
            crate::simd!(len = s.len(); add_to_rows(s, &bias));
            Ok(())
        })?;
        return Ok(y.clone());
    }
    kernel::map_rows(y, |row: &[f32], out: &mut [f32]| {
        out.copy_from_slice(row);
        add_to_rows(out, &bias);
    })
}

/// `row += bias` for every row of `rows` (rows of `bias.len()`; nothing when it is empty),
/// `#[inline(always)]` so that `simd!` widens it.
#[allow(clippy::inline_always)]
#[inline(always)]
fn add_to_rows(rows: &mut [f32], bias: &[f32]) {
    if bias.is_empty() {
        return;
    }
    for row in rows.chunks_mut(bias.len()) {
        row.iter_mut().zip(bias).for_each(|(o, &c)| *o += c);
    }
}

impl Tensor {
    /// [`matmul`]: `self · other`.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        matmul(self, other)
    }
}

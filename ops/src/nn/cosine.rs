//! `cosine_similarity` along an axis, with PyTorch's broadcasting and its rule for small
//! norms: each norm is clamped below at `eps` for the division only, so the gradient still
//! flows through the unclamped norm.

use autograd_core::kernel::Rows;
use autograd_core::ops::broadcast_pair;
use autograd_core::{differentiable, ensure, Axis, Result, Tensor};

use super::elementwise_loss::ensure_f32;
use super::reduction::shaped_like;

/// The cosine similarity of `a` and `b` along axis `dim` (negative from the back), PyTorch's
/// `cosine_similarity(a, b, dim, eps)`: per row, `sum(a / max(|a|, eps) * b / max(|b|, eps))`,
/// so a zero vector gives 0. The operands broadcast (numpy rules, each then receiving the sum
/// of its repetitions' gradients); the result has their common shape without `dim`. As in
/// PyTorch the clamp is not differentiated: the gradient is that of the expression with the
/// clamped norms held as values in the division and the true norm's gradient (0 at a zero
/// vector) in their place, so a zero vector's gradient is `b / (eps |b|)`. PyTorch's `eps`
/// default is `1e-8`.
///
/// Float32 only (`Error::Type`); shapes that do not broadcast, a `dim` outside their rank or an
/// `eps` that is negative or not finite are `Error::Value`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::cosine_similarity;
/// let a = Tensor::from_vec(vec![1.0f32, 0.0, 3.0, 4.0], shape![2, 2]).unwrap();
/// let b = Tensor::from_vec(vec![2.0f32, 0.0], shape![2]).unwrap();
/// let c = cosine_similarity(&a, &b, 1, 1e-8).unwrap();
/// assert_eq!(c.values::<f32>().unwrap(), [1.0, 0.6]);
/// ```
pub fn cosine_similarity(a: &Tensor, b: &Tensor, dim: impl Into<Axis>, eps: f32) -> Result<Tensor> {
    let op = "cosine_similarity";
    ensure_f32(op, "a", a)?;
    ensure_f32(op, "b", b)?;
    ensure!(
        eps >= 0.0 && eps.is_finite(),
        Value,
        "{op}: eps must be finite and non-negative, got {eps}"
    );
    let dims = autograd_core::ops::broadcast_shapes(&a.dims(), &b.dims())?;
    let dim = dim
        .into()
        .resolve(dims.len())
        .map_err(|e| e.context(format!("{op} over the broadcast shape {dims:?}")))?;
    let (a, b) = broadcast_pair(a, b)?;
    cosine(&a, &b, dim, eps)
}

/// Per row of the axis: `(a . b, |a|, |b|)` in double precision.
struct RowStats {
    dot: f64,
    na: f64,
    nb: f64,
}

/// The rows of `a` and `b` (equal extents) along `dim`, by row index, with their positions in
/// logical order.
fn row_positions(dims: &[usize], dim: usize) -> Result<(Rows, impl Fn(usize, usize) -> usize)> {
    let rows = Rows::along("cosine_similarity", dims, dim)?;
    let (n, inner) = (rows.n, rows.inner);
    Ok((rows, move |k: usize, c: usize| {
        let (o, i) = (k / inner.max(1), k % inner.max(1));
        (o * n + c) * inner + i
    }))
}

/// Every row's statistics.
fn statistics(x: &[f32], y: &[f32], dims: &[usize], dim: usize) -> Result<Vec<RowStats>> {
    let (rows, at) = row_positions(dims, dim)?;
    Ok((0..rows.count())
        .map(|k| {
            let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
            for c in 0..rows.n {
                let (u, v) = (f64::from(x[at(k, c)]), f64::from(y[at(k, c)]));
                dot += u * v;
                na += u * u;
                nb += v * v;
            }
            RowStats {
                dot,
                na: na.sqrt(),
                nb: nb.sqrt(),
            }
        })
        .collect())
}

/// [`cosine_similarity`] of operands of equal extents.
#[differentiable]
fn cosine(a: &Tensor, b: &Tensor, dim: usize, eps: f32) -> Result<Tensor> {
    // y = dot / (A B) with A = max(|a|, eps), B = max(|b|, eps) held constant but for the norm:
    //   da = g (b / (A B) - dot / (A^2 B) a / |a|),  db symmetric (a / |a| read as 0 at |a| = 0)
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        b: &Tensor,
        dim: usize,
        eps: f32,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dims = a.dims();
        let (x, y) = (a.values::<f32>()?, b.values::<f32>()?);
        let stats = statistics(&x, &y, &dims, dim)?;
        let gs = g.values::<f32>()?;
        let (rows, at) = row_positions(&dims, dim)?;
        let eps = f64::from(eps);
        let side = |u: &[f32], v: &[f32], swap: bool| -> Vec<f32> {
            let mut out = vec![0.0f32; u.len()];
            for (k, s) in stats.iter().enumerate() {
                let (nu, nv) = if swap { (s.nb, s.na) } else { (s.na, s.nb) };
                let (cu, cv) = (nu.max(eps), nv.max(eps));
                let gk = f64::from(gs[k]);
                for c in 0..rows.n {
                    let p = at(k, c);
                    let unit = if nu > 0.0 { f64::from(u[p]) / nu } else { 0.0 };
                    let d = f64::from(v[p]) / (cu * cv) - s.dot / (cu * cu * cv) * unit;
                    out[p] = (gk * d) as f32;
                }
            }
            out
        };
        let da = if needs.input(0) {
            Some(a.f32_like(side(&x, &y, false))?)
        } else {
            None
        };
        let db = if needs.input(1) {
            Some(b.f32_like(side(&y, &x, true))?)
        } else {
            None
        };
        Ok((da, db))
    }
    let dims = a.dims();
    let (x, y) = (a.values::<f32>()?, b.values::<f32>()?);
    let eps = f64::from(eps);
    let out: Vec<f32> = statistics(&x, &y, &dims, dim)?
        .iter()
        .map(|s| (s.dot / (s.na.max(eps) * s.nb.max(eps))) as f32)
        .collect();
    let mut out_dims = dims;
    out_dims.remove(dim);
    shaped_like(a, &out_dims, out)
}

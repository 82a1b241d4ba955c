//! Float32 elementwise kernels over tensors: typed slices on the CPU fast path, logical-order
//! values otherwise. Results are compact row-major in fresh storage of the first input's class.

use std::sync::Arc;

use autograd_core::{ensure, CpuCarrier, DType, Layout, Result, Tensor, SMALL_F32};

fn check_f32(op: &str, t: &Tensor) -> Result<()> {
    ensure!(
        t.dtype() == &DType::Float32,
        Type,
        "{op} takes Float32 tensors, got {}",
        t.dtype()
    );
    Ok(())
}

/// The CPU carrier when the fast path applies: one non-empty CPU subtensor whose storage order
/// is logical order. Empty tensors take the general path, which reads no storage at all.
fn dense_cpu(t: &Tensor) -> Option<&CpuCarrier> {
    if t.subtensor_count() != 1 || t.size() == 0 || !t.layout().is_row_major_contiguous() {
        return None;
    }
    t.carrier().ok()?.as_cpu()
}

/// The run `off..off + n` of `s`, or `Error::Runtime` when the carrier no longer holds it (a
/// tensor's layout is checked to fit its carrier when the tensor is made, so this is a guard,
/// never a slice past the end).
fn run(s: &[f32], off: usize, n: usize) -> Result<&[f32]> {
    off.checked_add(n)
        .and_then(|end| s.get(off..end))
        .ok_or_else(|| {
            autograd_core::Error::Runtime(format!(
                "elements {off}..{off}+{n} lie outside a carrier of {} elements",
                s.len()
            ))
        })
}

/// `layout`, or the compact row-major layout of `like`'s shape.
fn layout_for(like: &Tensor, layout: Option<&Arc<Layout>>) -> Result<Arc<Layout>> {
    match layout {
        Some(l) => Ok(l.clone()),
        None => Ok(Arc::new(Layout::compact_row_major(like.shape().clone())?)),
    }
}

fn output(like: &Tensor, values: Vec<f32>, layout: Option<&Arc<Layout>>) -> Result<Tensor> {
    like.f32_with_layout(values, layout_for(like, layout)?)
}

/// `f(a_i)` for every element, compact row-major.
pub(crate) fn map(op: &str, a: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
    check_f32(op, a)?;
    if let Some(cpu) = dense_cpu(a) {
        let (off, n) = (a.offset(), a.size());
        if n <= SMALL_F32 {
            let small = cpu.with_slice::<f32, _>(|s| {
                let mut out = [0.0; SMALL_F32];
                out.iter_mut()
                    .zip(run(s, off, n)?)
                    .for_each(|(o, &x)| *o = f(x));
                Ok(out)
            })??;
            return output_small(a, &small[..n]);
        }
        let values = cpu.with_slice::<f32, _>(|s| {
            run(s, off, n).map(|x| x.iter().map(|&x| f(x)).collect())
        })??;
        return output(a, values, reuse(a));
    }
    let values = a.values::<f32>()?.into_iter().map(f).collect();
    output(a, values, None)
}

/// `f(a_i, b_i)` for every element of two tensors of one shape, compact row-major.
pub(crate) fn zip(op: &str, a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Tensor> {
    check_f32(op, a)?;
    check_f32(op, b)?;
    ensure!(
        a.shape() == b.shape(),
        Value,
        "{op}: shapes {} and {} differ (broadcast explicitly with broadcast_to)",
        a.shape(),
        b.shape()
    );
    if let (Some(ca), Some(cb)) = (dense_cpu(a), dense_cpu(b)) {
        let (oa, ob, n) = (a.offset(), b.offset(), a.size());
        if n <= SMALL_F32 {
            let small = ca.with_slice_pair::<f32, _>(cb, |x, y| {
                let mut out = [0.0; SMALL_F32];
                out.iter_mut()
                    .zip(run(x, oa, n)?.iter().zip(run(y, ob, n)?))
                    .for_each(|(o, (&p, &q))| *o = f(p, q));
                Ok(out)
            })??;
            return output_small(a, &small[..n]);
        }
        let values = ca.with_slice_pair::<f32, _>(cb, |x, y| {
            Ok(run(x, oa, n)?
                .iter()
                .zip(run(y, ob, n)?)
                .map(|(&p, &q)| f(p, q))
                .collect())
        })??;
        return output(a, values, reuse(a));
    }
    let x = a.values::<f32>()?;
    let y = b.values::<f32>()?;
    output(a, x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect(), None)
}

/// A small result (at most `SMALL_F32` values) from a stack buffer, without a heap buffer.
fn output_small(like: &Tensor, values: &[f32]) -> Result<Tensor> {
    like.f32_from_slice(values, layout_for(like, reuse(like))?)
}

/// The input's own layout when it is compact and row-major (so the result can share it).
fn reuse(a: &Tensor) -> Option<&Arc<Layout>> {
    (a.layout().is_compact()).then(|| a.layout_arc())
}

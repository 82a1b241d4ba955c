//! Float32 elementwise kernels over tensors: typed slices on the CPU fast path, logical-order
//! values otherwise. Results are compact row-major in fresh storage of the first input's class.

use std::sync::Arc;

use autograd_core::{ensure, CpuCarrier, DType, Layout, Result, Tensor};

fn check_f32(op: &str, t: &Tensor) -> Result<()> {
    ensure!(
        t.dtype() == &DType::Float32,
        Type,
        "{op} takes Float32 tensors, got {}",
        t.dtype()
    );
    Ok(())
}

/// The CPU carrier when the fast path applies: one CPU subtensor whose storage order is
/// logical order.
fn dense_cpu(t: &Tensor) -> Option<&CpuCarrier> {
    if t.subtensor_count() != 1 || !t.layout().is_row_major_contiguous() {
        return None;
    }
    t.carrier().ok()?.as_cpu()
}

fn output(like: &Tensor, values: Vec<f32>, layout: Option<&Arc<Layout>>) -> Result<Tensor> {
    let layout = match layout {
        Some(l) => l.clone(),
        None => Arc::new(Layout::compact_row_major(like.shape().clone())?),
    };
    like.f32_with_layout(values, layout)
}

/// `f(a_i)` for every element, compact row-major.
pub(crate) fn map(op: &str, a: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
    check_f32(op, a)?;
    if let Some(cpu) = dense_cpu(a) {
        let (off, n) = (a.offset(), a.size());
        let values =
            cpu.with_slice::<f32, _>(|s| s[off..off + n].iter().map(|&x| f(x)).collect())?;
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
        let values = ca.with_slice_pair::<f32, _>(cb, |x, y| {
            x[oa..oa + n]
                .iter()
                .zip(&y[ob..ob + n])
                .map(|(&p, &q)| f(p, q))
                .collect()
        })?;
        return output(a, values, reuse(a));
    }
    let x = a.values::<f32>()?;
    let y = b.values::<f32>()?;
    output(a, x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect(), None)
}

/// The input's own layout when it is compact and row-major (so the result can share it).
fn reuse(a: &Tensor) -> Option<&Arc<Layout>> {
    (a.layout().is_compact()).then(|| a.layout_arc())
}

//! What the elementwise losses share: the checks of an (input, target) pair, the per-element
//! losses of a pair, and the VJP of a loss whose elements depend on one pair each.

use autograd_core::{ensure, DType, Result, Tensor};

use super::reduction::{spread, Reduction};

/// Refuses a tensor that is not Float32 (`Error::Type`).
pub(crate) fn ensure_f32(op: &str, what: &str, t: &Tensor) -> Result<()> {
    ensure!(
        t.dtype() == &DType::Float32,
        Type,
        "{op}: {what} must be Float32, got {}",
        t.dtype()
    );
    Ok(())
}

/// Checks an elementwise loss's operands: both Float32 (`Error::Type`) with equal extents
/// (`Error::Value`; their shape trees may differ). Answers the extents.
pub(crate) fn check_pair(op: &str, input: &Tensor, target: &Tensor) -> Result<Vec<usize>> {
    ensure_f32(op, "the input", input)?;
    ensure_f32(op, "the target", target)?;
    ensure!(
        input.dims() == target.dims(),
        Value,
        "{op}: the input of shape {} and the target of shape {} must have equal extents",
        input.shape(),
        target.shape()
    );
    Ok(input.dims())
}

/// `f(x, y)` for every pair of elements of `a` and `b` (equal extents), in logical order, in
/// double precision for the reduction that follows.
pub(crate) fn per_element(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Vec<f64>> {
    let (x, y) = (a.values::<f32>()?, b.values::<f32>()?);
    Ok(x.iter()
        .zip(&y)
        .map(|(&x, &y)| f64::from(f(x, y)))
        .collect())
}

/// The VJP of an elementwise loss of `a` and `b` reduced by `reduction` (dividing by
/// `divisor` for the mean): each element's cotangent times `d(x, y)`, the partial derivatives
/// of its loss, for the operands `want` asks for.
pub(crate) fn pair_vjp(
    g: &Tensor,
    (a, b): (&Tensor, &Tensor),
    (reduction, divisor): (Reduction, f64),
    want: (bool, bool),
    d: impl Fn(f32, f32) -> (f32, f32),
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let gs = spread(g, a.size(), reduction, divisor)?;
    let (x, y) = (a.values::<f32>()?, b.values::<f32>()?);
    let parts: Vec<(f32, f32)> = gs
        .iter()
        .zip(x.iter().zip(&y))
        .map(|(&g, (&x, &y))| {
            let (dx, dy) = d(x, y);
            (g * dx, g * dy)
        })
        .collect();
    let da = if want.0 {
        Some(a.f32_like(parts.iter().map(|p| p.0).collect())?)
    } else {
        None
    };
    let db = if want.1 {
        Some(b.f32_like(parts.iter().map(|p| p.1).collect())?)
    } else {
        None
    };
    Ok((da, db))
}

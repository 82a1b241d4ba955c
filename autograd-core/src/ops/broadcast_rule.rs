//! Numpy broadcasting of operands: the result shape of two shapes, and operands brought to it
//! through the differentiable [`broadcast_to`], so a broadcast operand's gradient is summed by
//! that op's VJP and no binary op folds broadcasts itself.

use super::broadcast::broadcast_to;
use crate::error::{bail, Result};
use crate::Tensor;

/// The numpy broadcast of two lists of top-level extents: aligned at the end, a missing or
/// extent-1 mode takes the other's extent. Ranks may differ; two extents that differ with
/// neither 1 are `Error::Value` naming both shapes.
///
/// ```
/// use autograd_core::ops::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[4, 1, 3], &[2, 1]).unwrap(), [4, 2, 3]);
/// assert!(broadcast_shapes(&[2, 3], &[4]).is_err());
/// ```
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let extent = |s: &[usize], i: usize| {
        // mode i of the result, counted from the end
        (i + s.len())
            .checked_sub(rank)
            .map_or(1, |j| s[j])
    };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let (p, q) = (extent(a, i), extent(b, i));
        out.push(match (p, q) {
            _ if p == q => p,
            (1, _) => q,
            (_, 1) => p,
            _ => bail!(
                Value,
                "shapes {a:?} and {b:?} do not broadcast: mode {i} has extents {p} and {q}"
            ),
        });
    }
    Ok(out)
}

/// `a` and `b` broadcast to their common shape through the differentiable stride-0 view
/// [`broadcast_to`]; an operand already of that shape is passed through unchanged.
pub fn broadcast_pair(a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
    if a.shape() == b.shape() {
        return Ok((a.clone(), b.clone()));
    }
    let dims = broadcast_shapes(&a.dims(), &b.dims())?;
    Ok((expand(a, &dims)?, expand(b, &dims)?))
}

/// `t` broadcast to `dims` unless it already has them.
pub(crate) fn expand(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    if t.dims() == dims {
        Ok(t.clone())
    } else {
        broadcast_to(t, dims)
    }
}

/// Runs `f` on `a` and `b` broadcast to one shape; a shape error names the op.
pub(crate) fn broadcasting(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    f: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if a.shape() == b.shape() {
        return f(a, b);
    }
    let (x, y) = broadcast_pair(a, b).map_err(|e| e.context(op))?;
    f(&x, &y)
}

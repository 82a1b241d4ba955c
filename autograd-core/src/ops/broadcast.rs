//! Broadcasting: the differentiable stride-0 view binary ops broadcast their operands with.

use crate::{differentiable, Result, Tensor};

/// A stride-0 view of `a` with top-level extents `dims` (numpy rules), sharing its storage.
#[differentiable(crate = crate, batched)]
pub fn broadcast_to(a: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // The cotangent is per logical position of the result (the engine folds broadcast aliases
    // only into `.grad`), so each element of `a` receives the sum over its repetitions; K
    // batched cotangents are summed per batch index.
    fn vjp(g: &Tensor, a: &Tensor, dims: &[usize]) -> Result<Option<Tensor>> {
        match crate::batch::extent(g, dims.len()) {
            Some(k) => Ok(Some(super::broadcast_rule::sum_to_batched(g, a, k)?)),
            None => Ok(Some(super::broadcast_rule::sum_to(g, a)?)),
        }
    }
    a.raw_broadcast_to(dims)
}

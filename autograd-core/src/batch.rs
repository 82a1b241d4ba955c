//! Batched cotangents: how a VJP sees the K cotangents of a batched functional [`grad`](crate::grad)
//! when its op opts in with `#[differentiable(batched)]`
//! ([`Operation::backward_batched`](crate::Operation::backward_batched)).
//!
//! The cotangent `g` then has one leading batch mode of extent K before the result's shape,
//! and the VJP returns each gradient with the same leading mode before its input's shape, batch
//! index `k` holding the VJP of cotangent `k`. A VJP that is linear in `g` position by position
//! (a map of `g`) needs nothing; one that combines `g` with saved tensors reads them
//! [`beside`] the cotangent, a stride-0 view over the batch, so no saved tensor is copied.
//!
//! ```
//! use autograd_core::{batch, shape, Tensor};
//! let y = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
//! let g = Tensor::from_vec(vec![0.0f32; 12], shape![4, 3]).unwrap(); // four cotangents for y
//! let k = batch::extent(&g, y.layout().rank());
//! assert_eq!(k, Some(4));
//! assert_eq!(batch::beside(&y, k).unwrap().dims(), [4, 3]);
//! assert_eq!(batch::extent(&y, y.layout().rank()), None);
//! ```

use crate::error::Result;
use crate::layout::int_tuple::Shape;
use crate::layout::Layout;
use crate::tensor::Tensor;

/// The batch extent K of `g`, a cotangent for a result with `result_rank` top-level modes:
/// `Some(K)` when `g` has one more top-level mode (the leading batch mode), else `None`.
pub fn extent(g: &Tensor, result_rank: usize) -> Option<usize> {
    let l = g.layout();
    (l.rank() == result_rank + 1).then(|| l.dims()[0])
}

/// `t` read beside a cotangent of batch extent `k`: a view of `t` with a leading stride-0
/// mode of extent K (no copy), or `t` itself when `k` is `None`.
pub fn beside(t: &Tensor, k: Option<usize>) -> Result<Tensor> {
    match k {
        Some(k) => t.with_layout_detached(t.layout().prepend_mode(k, 0)?, t.offset()),
        None => Ok(t.clone()),
    }
}

/// `shape` with a leading batch mode of extent `k` (the shape of `k` stacked tensors).
pub fn batched_shape(shape: &Shape, k: usize) -> Result<Shape> {
    Ok(Layout::compact_row_major(shape.clone())?
        .prepend_mode(k, 1)?
        .shape()
        .clone())
}

/// [`batched_shape`] when `k` is `Some`, else `shape`: the shape a batched VJP gives a
/// gradient of an input of `shape`.
pub fn shape_for(shape: &Shape, k: Option<usize>) -> Result<Shape> {
    match k {
        Some(k) => batched_shape(shape, k),
        None => Ok(shape.clone()),
    }
}

/// `f(g_i, t_i)` for a cotangent `g` and a saved tensor `t` of the result's shape (the
/// elementwise VJP pattern, `g · f'(x)`), for one cotangent or K batched ones: `t` is read
/// beside a batched `g`. The result has `g`'s shape, in fresh storage of `g`'s carrier class.
pub fn zip_with(g: &Tensor, t: &Tensor, f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Tensor> {
    let t = beside(t, extent(g, t.layout().rank()))?;
    crate::kernel::zip(g, &t, f)
}

/// [`zip_with`] for a cotangent the VJP took by value: computed in `g`'s own storage when
/// nothing else reaches it (see [`crate::kernel::zip_owned`]).
pub fn zip_with_owned(g: Tensor, t: &Tensor, f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Tensor> {
    let t = beside(t, extent(&g, t.layout().rank()))?;
    crate::kernel::zip_owned(g, &t, f)
}

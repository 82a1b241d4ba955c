//! Reading elements at computed positions, as PyTorch's `masked_select` (the elements where a
//! Bool mask is true, as one axis) and `take_along_dim` (a gather whose indices broadcast
//! against the input). Both broadcast with the differentiable `expand`, so a broadcast input's
//! gradient sums over its copies, and read through `gather` or [`node::take`], whose gradient
//! puts each cotangent back where its element came from.

use super::broadcast::{broadcast_shapes, expand};
use super::index::gather;
use super::view::reshape;
use crate::error::{ensure, Result};
use crate::graph::grad_mode::no_grad;
use crate::layout::axis::OptionalAxis;
use crate::{DType, Tensor};

/// The elements of `a` where `mask` is true, in row-major order, as a one-axis tensor: PyTorch's
/// `torch.masked_select`. `a` and the Bool `mask` broadcast together, so an element of `a` is
/// taken once per true position it is broadcast to. The gradient puts the cotangent back at the
/// taken positions (zero elsewhere, summed over broadcast copies).
///
/// `Error::Type` for a mask that is not Bool, `Error::Value` for shapes that do not broadcast.
///
/// ```
/// use autograd_core::ops::masked_select;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// let m = Tensor::from_vec(vec![true, false], shape![2])?; // the first column
/// assert_eq!(masked_select(&a, &m)?.values::<f32>()?, [1.0, 3.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn masked_select(a: &Tensor, mask: &Tensor) -> Result<Tensor> {
    ensure!(
        *mask.dtype() == DType::Bool,
        Type,
        "masked_select: the mask must be Bool, not {}",
        mask.dtype()
    );
    let joint =
        broadcast_shapes(&a.dims(), &mask.dims()).map_err(|e| e.context("masked_select"))?;
    let chosen = {
        let _off = no_grad();
        expand(mask, &joint)?.values::<bool>()?
    };
    let at: Vec<usize> = chosen
        .iter()
        .enumerate()
        .filter_map(|(p, &m)| m.then_some(p))
        .collect();
    node::take(&expand(a, &joint)?, &at)
}

/// The elements of `a` at `indices` along `axis`, as PyTorch's `torch.take_along_dim`: with an
/// axis, `indices` (Int32 or Int64, of `a`'s rank) and `a` broadcast on every other axis and
/// the result is `gather(a, axis, indices)` of the broadcast shape; with `None` both are
/// flattened first (`take_along_dim(a, i, None)` reads `a.flatten()[i.flatten()]`). A typical
/// use reads the values an `argsort` or `argmax` names.
///
/// `Error::Value` for ranks that differ, shapes that do not broadcast off the axis, or an index
/// out of range (naming it); `Error::Type` for indices that are not integers. The gradient
/// adds each cotangent into the element it read.
///
/// ```
/// use autograd_core::ops::take_along_dim;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![10.0f32, 30.0, 20.0, 60.0, 40.0, 50.0], shape![2, 3])?;
/// let i = Tensor::from_vec(vec![1i64, 0], shape![2, 1])?;
/// assert_eq!(take_along_dim(&a, &i, -1)?.values::<f32>()?, [30.0, 60.0]);
/// let j = Tensor::from_vec(vec![5i64, 0], shape![2])?;
/// assert_eq!(take_along_dim(&a, &j, None)?.values::<f32>()?, [50.0, 10.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn take_along_dim(
    a: &Tensor,
    indices: &Tensor,
    axis: impl Into<OptionalAxis>,
) -> Result<Tensor> {
    let axis = match axis.into() {
        OptionalAxis::Flat => {
            let flat = reshape(a, &[a.size()])?;
            let at = {
                let _off = no_grad();
                reshape(indices, &[indices.size()])?
            };
            return gather(&flat, 0, &at);
        }
        OptionalAxis::Along(axis) => axis,
    };
    let (dims, idims) = (a.dims(), indices.dims());
    let axis = axis.resolve_for("take_along_dim", dims.len())?;
    ensure!(
        dims.len() == idims.len(),
        Value,
        "take_along_dim: the input of shape {dims:?} and the indices of shape {idims:?} need the same number of axes"
    );
    let mut joint = Vec::with_capacity(dims.len());
    for (d, (&n, &i)) in dims.iter().zip(&idims).enumerate() {
        let both = if d == axis {
            n
        } else {
            let b = broadcast_shapes(&[n], &[i]).map_err(|_| {
                crate::Error::Value(format!(
                    "take_along_dim: the input of shape {dims:?} and the indices of shape {idims:?} do not broadcast on axis {d}"
                ))
            })?;
            b[0]
        };
        joint.push(both);
    }
    let mut ijoint = joint.clone();
    ijoint[axis] = idims[axis];
    let spread = {
        let _off = no_grad();
        expand(indices, &ijoint)?
    };
    gather(&expand(a, &joint)?, axis, &spread)
}

pub(crate) mod node {
    use crate::error::Result;
    use crate::kernel::read_logical;
    use crate::ops::index::{emit, rounded};
    use crate::storage::allocation::filled;
    use crate::{differentiable, Tensor};

    /// `a`'s elements at the logical positions `at`, in that order, as one axis (the callers
    /// check the positions).
    #[differentiable(crate = crate)]
    pub(crate) fn take(a: &Tensor, at: &[usize]) -> Result<Tensor> {
        // y[p] = a[at p]  =>  da[q] = sum of g[p] over the p with at p = q
        fn vjp(g: &Tensor, a: &Tensor, at: &[usize]) -> Result<Option<Tensor>> {
            let mut da = filled(a.size(), 0.0f64)?;
            read_logical(g, |g: &[f32]| {
                for (&q, &v) in at.iter().zip(g) {
                    da[q] += f64::from(v);
                }
            })?;
            Ok(Some(a.f32_like(rounded(da))?))
        }
        crate::kernel::element::dispatch!(
            a.dtype(), "masked_select", T => read_logical(a, |x: &[T]| {
                emit::<T>(a, &[at.len()], |out| {
                    for (o, &q) in out.iter_mut().zip(at) {
                        *o = x[q];
                    }
                    Ok(())
                })
            })?,
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
        )
    }
}

/// Method forms of the reading ops.
impl Tensor {
    /// [`masked_select`] of this tensor.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        masked_select(self, mask)
    }

    /// [`take_along_dim`] of this tensor.
    #[track_caller]
    pub fn take_along_dim(
        &self,
        indices: &Tensor,
        axis: impl Into<OptionalAxis>,
    ) -> Result<Tensor> {
        take_along_dim(self, indices, axis)
    }
}

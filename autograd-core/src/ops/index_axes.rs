//! The public joining and indexing ops along an axis, with the axis as PyTorch writes it
//! (negative from the back): each resolves it against the inputs' rank (`stack` against one
//! more, since it inserts an axis) and calls the node of the same name in `index`.

use super::index;
use crate::layout::axis::Axis;
use crate::{Result, Tensor};

/// The rank of `a` (its number of top-level modes).
fn rank(a: &Tensor) -> usize {
    a.layout().rank()
}

/// The tensors of `xs` joined along the existing top-level `axis` (negative from the back of
/// `xs[0]`'s axes); every other extent must agree. The result is in fresh storage of `xs[0]`'s
/// carrier class.
///
/// `Error::Value` for an empty `xs`, an axis out of range or extents that disagree.
///
/// ```
/// use autograd_core::{ops::concat, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2, 1]).unwrap();
/// let b = Tensor::from_vec(vec![3.0f32, 4.0, 5.0, 6.0], shape![2, 2]).unwrap();
/// let c = concat(&[a, b], -1).unwrap();
/// assert_eq!(c.values::<f32>().unwrap(), [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
/// ```
#[track_caller]
pub fn concat(xs: &[Tensor], axis: impl Into<Axis>) -> Result<Tensor> {
    let axis = match xs.first() {
        Some(x) => axis.into().resolve_for("concat", rank(x))?,
        // the node reports the empty list
        None => 0,
    };
    index::concat(xs, axis)
}

/// The tensors of `xs`, all of one shape, stacked along a new top-level `axis` (`-rank -
/// 1..=rank`; `-1` appends it).
///
/// `Error::Value` for an empty `xs`, an axis out of range or shapes that differ.
#[track_caller]
pub fn stack(xs: &[Tensor], axis: impl Into<Axis>) -> Result<Tensor> {
    let axis = match xs.first() {
        Some(x) => axis.into().resolve_for("stack", rank(x) + 1)?,
        None => 0,
    };
    index::stack(xs, axis)
}

/// The sub-tensors of `a` at `indices` (a one-axis Int32 tensor) along `axis` (negative from
/// the back): `y[.., j, ..] = a[.., indices[j], ..]`. Indices may repeat.
#[track_caller]
pub fn index_select(a: &Tensor, axis: impl Into<Axis>, indices: &Tensor) -> Result<Tensor> {
    let axis = axis.into().resolve_for("index_select", rank(a))?;
    index::index_select(a, axis, indices)
}

/// `y[p] = a[p with its axis coordinate replaced by indices[p]]` along `axis` (negative from
/// the back), with `y` of the shape of `indices` (an Int32 tensor of `a`'s rank whose extents
/// off `axis` do not exceed `a`'s).
#[track_caller]
pub fn gather(a: &Tensor, axis: impl Into<Axis>, indices: &Tensor) -> Result<Tensor> {
    let axis = axis.into().resolve_for("gather", rank(a))?;
    index::gather(a, axis, indices)
}

/// A copy of `a` with `src[p]` added at `p`'s coordinate with its `axis` (negative from the
/// back) entry replaced by `indices[p]`, for every position `p` of `indices` (repeated targets
/// add up). `indices` and `src` have `a`'s rank; `indices`' extents do not exceed `src`'s, nor
/// `a`'s off `axis`.
#[track_caller]
pub fn scatter_add(
    a: &Tensor,
    axis: impl Into<Axis>,
    indices: &Tensor,
    src: &Tensor,
) -> Result<Tensor> {
    let axis = axis.into().resolve_for("scatter_add", rank(a))?;
    index::scatter_add(a, axis, indices, src)
}

/// Method forms of the joining and indexing ops along an axis.
impl Tensor {
    /// [`concat()`]: `Tensor::concat(&[a, b], -1)`.
    #[track_caller]
    pub fn concat(xs: &[Tensor], axis: impl Into<Axis>) -> Result<Tensor> {
        concat(xs, axis)
    }
    /// [`stack`]: `Tensor::stack(&[a, b], axis)`.
    #[track_caller]
    pub fn stack(xs: &[Tensor], axis: impl Into<Axis>) -> Result<Tensor> {
        stack(xs, axis)
    }
    /// [`index_select`]: `x.index_select(0, &ids)?`.
    #[track_caller]
    pub fn index_select(&self, axis: impl Into<Axis>, indices: &Tensor) -> Result<Tensor> {
        index_select(self, axis, indices)
    }
    /// [`gather`].
    #[track_caller]
    pub fn gather(&self, axis: impl Into<Axis>, indices: &Tensor) -> Result<Tensor> {
        gather(self, axis, indices)
    }
    /// [`scatter_add`]: a copy of `self` with `src` added at `indices` along `axis`.
    #[track_caller]
    pub fn scatter_add(
        &self,
        axis: impl Into<Axis>,
        indices: &Tensor,
        src: &Tensor,
    ) -> Result<Tensor> {
        scatter_add(self, axis, indices, src)
    }
}

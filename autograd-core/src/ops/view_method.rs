//! Method forms of the view ops: `x.transpose(0, -1)?`, `x.reshape(&[-1, 2])?`, `x.unbind(0)?`. Each
//! calls the op of the same name in [`crate::ops`]; the non-recording `raw_*` forms the ops are
//! built on stay with the tensor (`tensor/view.rs`).

use crate::layout::axis::{Axis, IntList};
use crate::{Result, Tensor};

/// The differentiable views. Each records a node (see [`crate::ops`]) when graph construction
/// is enabled and `self` is differentiable; each shares `self`'s storage (no copy) except
/// `reshape`/`flatten` when no layout expresses the result. A view that must leave the graph
/// is [`Tensor::with_layout_detached`], or the view followed by [`Tensor::detach`].
///
/// Inside a `#[differentiable]` forward body graph construction is disabled, so these methods
/// record nothing there: a kernel may use them freely to look at its inputs.
impl Tensor {
    /// Top-level modes `a` and `b` swapped (a view; negative axes count from the back); see
    /// [`crate::ops::transpose`].
    ///
    /// ```
    /// use autograd_core::{shape, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3])?;
    /// let t = x.transpose(0, 1)?;
    /// assert_eq!(t.values::<f32>()?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// assert_eq!(t.autograd_ctx().map(|n| n.name().to_string()), Some("transpose".into()));
    /// # Ok::<(), autograd_core::Error>(())
    /// ```
    #[track_caller]
    pub fn transpose(&self, a: impl Into<Axis>, b: impl Into<Axis>) -> Result<Tensor> {
        crate::ops::transpose(self, a, b)
    }

    /// The top-level modes reordered: mode `i` of the result is mode `order[i]` of `self` (a
    /// view; negative axes count from the back); see [`crate::ops::permute`].
    #[track_caller]
    pub fn permute(&self, order: impl IntList) -> Result<Tensor> {
        crate::ops::permute(self, order)
    }

    /// The same elements (logical order) with flat extents `dims`, one of which may be `-1`
    /// (inferred): a view when storage order is logical order, otherwise a compact copy; see
    /// [`crate::ops::reshape`].
    #[track_caller]
    pub fn reshape(&self, dims: impl IntList) -> Result<Tensor> {
        crate::ops::reshape(self, dims)
    }

    /// [`Tensor::reshape`] that never copies (one size may be `-1`): `Error::Value` when no view
    /// exists; see
    /// [`crate::ops::view`].
    #[track_caller]
    pub fn view(&self, dims: impl IntList) -> Result<Tensor> {
        crate::ops::view(self, dims)
    }

    /// Top-level modes `start..=end` merged into one (PyTorch's `flatten(start_dim, end_dim)`;
    /// `flatten(0, -1)` gives one mode); see [`crate::ops::flatten`].
    #[track_caller]
    pub fn flatten(&self, start: impl Into<Axis>, end: impl Into<Axis>) -> Result<Tensor> {
        crate::ops::flatten(self, start, end)
    }

    /// A mode of extent 1 inserted at position `dim` (`-rank - 1..=rank`), a view; see
    /// [`crate::ops::unsqueeze`].
    #[track_caller]
    pub fn unsqueeze(&self, dim: impl Into<Axis>) -> Result<Tensor> {
        crate::ops::unsqueeze(self, dim)
    }

    /// Mode `dim` (negative from the back), of extent 1, removed (a view); `Error::Value` when
    /// its extent is not 1; see
    /// [`crate::ops::squeeze`].
    #[track_caller]
    pub fn squeeze(&self, dim: impl Into<Axis>) -> Result<Tensor> {
        crate::ops::squeeze(self, dim)
    }

    /// Elements `start..start + len` of the leaf top-level mode `dim` (negative from the back;
    /// a view); see
    /// [`crate::ops::narrow`].
    #[track_caller]
    pub fn narrow(&self, dim: impl Into<Axis>, start: usize, len: usize) -> Result<Tensor> {
        crate::ops::narrow(self, dim, start, len)
    }

    /// Elements `range` of the leaf top-level mode `dim` (`x[.., a..b]`): [`Tensor::narrow`]
    /// with `start = range.start`, `len = range.len()`; an empty or reversed range within the
    /// extent is empty, and a range reaching past the extent is `Error::Value`, as narrow's is
    /// (Rust's slices refuse it too).
    #[track_caller]
    pub fn slice(&self, dim: impl Into<Axis>, range: std::ops::Range<usize>) -> Result<Tensor> {
        let len = range.end.saturating_sub(range.start);
        crate::ops::narrow(self, dim, range.start, len)
    }

    /// The sub-tensor at `index` along top-level mode `dim` (negative from the back), with
    /// that mode removed (a view);
    /// see [`crate::ops::select`].
    #[track_caller]
    pub fn select(&self, dim: impl Into<Axis>, index: usize) -> Result<Tensor> {
        crate::ops::select(self, dim, index)
    }

    /// Every sub-tensor along top-level mode `dim` (negative from the back), that mode removed
    /// (views); see
    /// [`crate::ops::unbind`].
    #[track_caller]
    pub fn unbind(&self, dim: impl Into<Axis>) -> Result<Vec<Tensor>> {
        crate::ops::unbind(self, dim)
    }

    /// A stride-0 view with top-level extents `dims`, numpy style: modes align at the end, new
    /// leading modes and modes of one element (nested or not) repeat, `-1` keeps an extent; see
    /// [`crate::ops::broadcast_to`].
    #[track_caller]
    pub fn broadcast_to(&self, dims: impl IntList) -> Result<Tensor> {
        crate::ops::broadcast_to(self, dims)
    }

    /// PyTorch's name for [`Tensor::broadcast_to`] (`x.expand(&[4, -1])?` keeps mode 1).
    #[track_caller]
    pub fn expand(&self, dims: impl IntList) -> Result<Tensor> {
        crate::ops::broadcast_to(self, dims)
    }

    /// Every mode of extent 1 removed (PyTorch's `squeeze()`), a view; see
    /// [`crate::ops::squeeze_all`].
    #[track_caller]
    pub fn squeeze_all(&self) -> Result<Tensor> {
        crate::ops::squeeze_all(self)
    }

    /// Mode `dim` split into modes of extents `sizes` (one may be `-1`); see
    /// [`crate::ops::unflatten`].
    #[track_caller]
    pub fn unflatten(&self, dim: impl Into<Axis>, sizes: impl IntList) -> Result<Tensor> {
        crate::ops::unflatten(self, dim, sizes)
    }

    /// Axes `source` moved to positions `destination`, the others in order (a view); see
    /// [`crate::ops::movedim`].
    #[track_caller]
    pub fn movedim(&self, source: impl IntList, destination: impl IntList) -> Result<Tensor> {
        crate::ops::movedim(self, source, destination)
    }

    /// Consecutive views along `dim`: pieces of one size (the last smaller) or of listed sizes;
    /// see [`crate::ops::split`].
    #[track_caller]
    pub fn split(&self, sizes: impl IntList, dim: impl Into<Axis>) -> Result<Vec<Tensor>> {
        crate::ops::split(self, sizes, dim)
    }

    /// At most `chunks` consecutive views along `dim`, of `ceil(extent / chunks)` elements; see
    /// [`crate::ops::chunk`].
    #[track_caller]
    pub fn chunk(&self, chunks: usize, dim: impl Into<Axis>) -> Result<Vec<Tensor>> {
        crate::ops::chunk(self, chunks, dim)
    }
}

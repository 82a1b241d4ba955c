//! Views: new tensors over the same carrier with another layout or offset.
//!
//! The public view methods (`transpose`, `permute`, `reshape`, `view`, `flatten`, `unsqueeze`,
//! `squeeze`, `narrow`, `slice`, `select`, `unbind`, `broadcast_to`, `expand`) are the
//! differentiable ops of [`crate::ops`], and are defined there (`ops/view_method.rs`): they record
//! a node like any other op. The `raw_*` helpers here compute
//! the same views without recording anything; the ops call them, and they are crate-private.
//! The one public way to leave the graph while viewing storage is
//! [`Tensor::with_layout_detached`] (or [`Tensor::detach`] after a view).
//!
//! Views share storage, so a mutation through a view bumps the version every alias sees.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::layout::int_tuple::{IntTuple, Shape, Stride};
use crate::layout::{check_fits, Layout};
use crate::tensor::{record_width, Parts, Tensor};

impl Tensor {
    fn view_with(&self, op: &str, layout: Layout, offset: usize) -> Result<Tensor> {
        let Parts::One { carrier, .. } = &self.0.parts else {
            bail!(
                NotImplemented,
                "{op} takes a one-subtensor tensor, this one has {}",
                self.subtensor_count()
            )
        };
        check_fits(&layout, offset, carrier.len() / record_width(&self.0.dtype))?;
        Ok(Tensor::from_inner(
            self.0.dtype.clone(),
            Arc::new(layout),
            Parts::One {
                carrier: carrier.clone(),
                offset,
            },
        ))
    }

    /// The offset of a view cut out of `self` `shift` elements further into the carrier, with
    /// checked arithmetic. An empty view addresses nothing, so a cut that lands past the end of
    /// the carrier (`m[:, 5][2..2]` of a row-major matrix) is placed at the carrier's end.
    fn cut_offset(&self, op: &str, shift: usize, layout: &Layout) -> Result<usize> {
        let Parts::One { carrier, offset } = &self.0.parts else {
            bail!(
                NotImplemented,
                "{op} takes a one-subtensor tensor, this one has {}",
                self.subtensor_count()
            )
        };
        let Some(moved) = offset.checked_add(shift) else {
            bail!(
                Value,
                "{op}: the view's offset {offset} + {shift} overflows a storage offset"
            )
        };
        if layout.size() == 0 {
            return Ok(moved.min(carrier.len() / record_width(&self.0.dtype)));
        }
        Ok(moved)
    }

    /// A handle to the same elements with no autograd state (a new leaf, or a plain alias).
    pub fn detach(&self) -> Tensor {
        let parts = match &self.0.parts {
            Parts::One { carrier, offset } => Parts::One {
                carrier: carrier.clone(),
                offset: *offset,
            },
            Parts::Many(v) => Parts::Many(v.clone()),
        };
        Tensor::from_inner(self.0.dtype.clone(), self.0.layout.clone(), parts)
    }

    /// The escape hatch out of the graph: the same carrier under an arbitrary `layout` at an
    /// absolute carrier `offset` (validated to fit the carrier), as a new tensor with **no
    /// autograd state**: it records no node, so no gradient flows from it back to `self`.
    ///
    /// Use it to build a leaf with a special layout (a stride-0 or strided-with-holes
    /// parameter) or for kernels that manage the graph themselves. The differentiable views
    /// (`transpose`, `narrow`, `broadcast_to`, …) are the methods to use inside a model.
    ///
    /// ```
    /// use autograd_core::{shape, stride, Layout, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3])?;
    /// // a [2, 3] leaf whose rows alias x's storage (stride 0)
    /// let b = x.with_layout_detached(Layout::new(shape![2, 3], stride![0, 1])?, 0)?;
    /// assert!(b.autograd_ctx().is_none());
    /// assert_eq!(b.values::<f32>()?, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    /// # Ok::<(), autograd_core::Error>(())
    /// ```
    pub fn with_layout_detached(&self, layout: Layout, offset: usize) -> Result<Tensor> {
        self.view_with("with_layout_detached", layout, offset)
    }

    fn leaf_mode(&self, op: &str, dim: usize) -> Result<(usize, usize)> {
        let l = self.layout();
        ensure!(
            dim < l.rank(),
            Value,
            "{op}: mode {dim} is out of range for layout {l} of rank {}",
            l.rank()
        );
        ensure!(
            l.mode_is_leaf(dim),
            NotImplemented,
            "{op}: mode {dim} of layout {l} is nested; only leaf modes can be cut"
        );
        let leaf = l.mode_leaves(dim)[0];
        Ok((leaf.extent, leaf.stride))
    }

    fn replace_mode(&self, dim: usize, extent: usize, stride: usize) -> Result<Layout> {
        let mut modes = self.layout().modes();
        modes[dim] = Layout::new(Shape::from(extent), Stride::from(stride))?;
        self.rebuild(&modes)
    }

    /// A layout with the given top-level modes, keeping a single-leaf shape a leaf.
    fn rebuild(&self, modes: &[Layout]) -> Result<Layout> {
        match self.layout().shape().tree() {
            IntTuple::Int(_) if modes.len() == 1 => Ok(modes[0].clone()),
            _ => Layout::from_modes(modes),
        }
    }

    /// Elements `start..start + len` of the leaf top-level mode `dim`.
    pub(crate) fn raw_narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        let (extent, stride) = self.leaf_mode("narrow", dim)?;
        ensure!(
            start.checked_add(len).is_some_and(|end| end <= extent),
            Value,
            "narrow: range {start}..{} is out of bounds for mode {dim} of extent {extent}",
            start.saturating_add(len)
        );
        let layout = self.replace_mode(dim, len, stride)?;
        let Some(shift) = start.checked_mul(stride) else {
            bail!(
                Value,
                "narrow: start {start} times stride {stride} of mode {dim} overflows a storage offset"
            )
        };
        let offset = self.cut_offset("narrow", shift, &layout)?;
        self.view_with("narrow", layout, offset)
    }

    /// The sub-tensor at `index` along top-level mode `dim`, with that mode removed.
    pub(crate) fn raw_select(&self, dim: usize, index: usize) -> Result<Tensor> {
        let l = self.layout();
        ensure!(
            dim < l.rank(),
            Value,
            "select: mode {dim} is out of range for layout {l} of rank {}",
            l.rank()
        );
        let extent = l.dims()[dim];
        ensure!(
            index < extent,
            Value,
            "select: index {index} is out of range for mode {dim} of extent {extent}"
        );
        let mode = l.mode(dim)?;
        let shift = mode.offset_of_index(index)?;
        let mut modes = l.modes();
        modes.remove(dim);
        let layout = Layout::from_modes(&modes)?;
        let offset = self.cut_offset("select", shift, &layout)?;
        self.view_with("select", layout, offset)
    }

    /// The top-level modes reordered: mode `i` of the result is mode `order[i]` of `self`.
    pub(crate) fn raw_permute(&self, order: &[usize]) -> Result<Tensor> {
        let rank = self.layout().rank();
        let mut seen = vec![false; rank];
        ensure!(
            order.len() == rank,
            Value,
            "permute: order {order:?} has {} entries for rank {rank}",
            order.len()
        );
        for &i in order {
            ensure!(
                i < rank && !seen[i],
                Value,
                "permute: {order:?} is not a permutation of 0..{rank}"
            );
            seen[i] = true;
        }
        let modes = self.layout().modes();
        let reordered: Vec<Layout> = order.iter().map(|&i| modes[i].clone()).collect();
        let layout = self.rebuild(&reordered)?;
        self.view_with("permute", layout, self.offset())
    }

    /// Top-level modes `a` and `b` swapped.
    pub(crate) fn raw_transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        let rank = self.layout().rank();
        ensure!(
            a < rank && b < rank,
            Value,
            "transpose: modes {a} and {b} must be below rank {rank}"
        );
        let mut order: Vec<usize> = (0..rank).collect();
        order.swap(a, b);
        self.raw_permute(&order)
    }

    /// A stride-0 view with top-level extents `dims`, numpy style: modes align at the end, new
    /// leading modes and modes of one element (nested or not) repeat.
    pub(crate) fn raw_broadcast_to(&self, dims: &[usize]) -> Result<Tensor> {
        let l = self.layout();
        let own = l.dims();
        ensure!(
            dims.len() >= own.len(),
            Value,
            "broadcast_to: cannot broadcast shape {} to fewer modes {dims:?}",
            l.shape()
        );
        let lead = dims.len() - own.len();
        let mut modes = Vec::with_capacity(dims.len());
        for (i, &d) in dims.iter().enumerate() {
            if i < lead {
                modes.push(Layout::new(Shape::from(d), Stride::from(0usize))?);
                continue;
            }
            let j = i - lead;
            if own[j] == d {
                modes.push(l.mode(j)?);
            } else if own[j] == 1 {
                // a mode of one element (every leaf extent 1, nested or not) repeats
                modes.push(Layout::new(Shape::from(d), Stride::from(0usize))?);
            } else {
                bail!(
                    Value,
                    "broadcast_to: mode {j} of shape {} has extent {} and cannot become {d}",
                    l.shape(),
                    own[j]
                );
            }
        }
        self.view_with("broadcast_to", Layout::from_modes(&modes)?, self.offset())
    }

    /// The same elements with flat extents `dims`: a view when storage order is logical order,
    /// otherwise a compact copy.
    pub(crate) fn raw_reshape(&self, dims: &[usize]) -> Result<Tensor> {
        self.check_reshape("reshape", dims)?;
        self.raw_reshape_to("reshape", &Shape::from(dims))
    }

    /// `Error::Value` naming `dims` when they do not hold exactly `self`'s elements.
    fn check_reshape(&self, op: &str, dims: &[usize]) -> Result<()> {
        let target = Layout::row_major(dims)?;
        ensure!(
            target.size() == self.size(),
            Value,
            "{op}: shape {} has {} elements but {dims:?} needs {}",
            self.shape(),
            self.size(),
            target.size()
        );
        Ok(())
    }

    /// The same elements (in logical order) under `shape`, flat or nested, of the same size: a
    /// view of the same storage when a layout expresses it (always when storage order is
    /// logical order; for strided storage when the modes `shape` merges or splits are
    /// contiguous among themselves, as PyTorch's `view` requires), otherwise a compact copy.
    pub(crate) fn raw_reshape_to(&self, op: &str, shape: &Shape) -> Result<Tensor> {
        if let Some(layout) = self.reshaped_layout(op, shape)? {
            return self.view_with(op, layout, self.offset());
        }
        let copy = self.contiguous()?;
        copy.view_with(op, Layout::compact_row_major(shape.clone())?, 0)
    }

    /// The layout under which `self`'s storage, unchanged, holds its elements in logical order
    /// with `shape`, or `None` when none does; `Error::Value` when the sizes differ.
    fn reshaped_layout(&self, op: &str, shape: &Shape) -> Result<Option<Layout>> {
        let target = Layout::compact_row_major(shape.clone())?;
        ensure!(
            target.size() == self.size(),
            Value,
            "{op}: shape {} has {} elements but {shape} needs {}",
            self.shape(),
            self.size(),
            target.size()
        );
        let l = self.layout();
        if self.subtensor_count() != 1 {
            return Ok(None);
        }
        // an empty tensor has no element to place: every layout of its new shape expresses it
        // (PyTorch's computeStride views any empty tensor)
        if l.is_row_major_contiguous() || l.size() == 0 {
            return Ok(Some(target));
        }
        if !l.is_flat() {
            return Ok(None);
        }
        let old: Vec<(usize, usize)> = (0..l.rank())
            .map(|i| {
                let leaf = l.mode_leaves(i)[0];
                (leaf.extent, leaf.stride)
            })
            .collect();
        let Some(strides) = view_strides(&old, &target.dims()) else {
            return Ok(None);
        };
        // The strides follow `shape`'s own tree: one per top-level mode, and inside a nested
        // mode its leaves compact from the mode's stride, first leaf fastest (the order nested
        // modes are indexed in).
        let per_mode = |mode: &IntTuple, s: usize| {
            let mut next = s as i64;
            mode.map_leaves(&mut |extent| {
                let here = next;
                next = next.saturating_mul(extent);
                here
            })
        };
        let stride = match shape.tree() {
            tuple @ IntTuple::Int(_) => per_mode(tuple, strides.first().copied().unwrap_or(0)),
            IntTuple::Tuple(modes) => IntTuple::Tuple(
                modes
                    .iter()
                    .zip(&strides)
                    .map(|(m, &s)| per_mode(m, s))
                    .collect(),
            ),
        };
        Layout::new(shape.clone(), stride).map(Some)
    }

    /// `raw_reshape` that refuses to copy: `Error::Value` when no view has extents `dims`.
    pub(crate) fn raw_view(&self, dims: &[usize]) -> Result<Tensor> {
        self.check_reshape("view", dims)?;
        let shape = Shape::from(dims);
        match self.reshaped_layout("view", &shape)? {
            Some(layout) => self.view_with("view", layout, self.offset()),
            None => bail!(
                Value,
                "view: no layout of storage laid out as {} has extents {dims:?} (the modes it merges or splits are not contiguous among themselves); use reshape, which copies",
                self.layout()
            ),
        }
    }

    /// Top-level modes `start..=end` merged into one flat mode (the others keep their extents,
    /// as flat modes): a view when storage order is logical order, otherwise a copy.
    pub(crate) fn raw_flatten(&self, start: usize, end: usize) -> Result<Tensor> {
        let dims = self.dims();
        ensure!(
            start <= end && end < dims.len(),
            Value,
            "flatten: modes {start}..={end} are not a range of modes below rank {}",
            dims.len()
        );
        let merged: usize = dims[start..=end].iter().product();
        let mut out = dims[..start].to_vec();
        out.push(merged);
        out.extend_from_slice(&dims[end + 1..]);
        self.raw_reshape_to("flatten", &Shape::from(out.as_slice()))
    }

    /// A leaf mode of extent 1 inserted at top-level position `dim` (`0..=rank`): always a view.
    pub(crate) fn raw_unsqueeze(&self, dim: usize) -> Result<Tensor> {
        let mut modes = self.layout().modes();
        ensure!(
            dim <= modes.len(),
            Value,
            "unsqueeze: position {dim} is out of range for layout {} of rank {}",
            self.layout(),
            modes.len()
        );
        modes.insert(dim, Layout::new(Shape::from(1usize), Stride::from(1usize))?);
        self.view_with("unsqueeze", Layout::from_modes(&modes)?, self.offset())
    }

    /// Top-level mode `dim`, which must have extent 1, removed: always a view.
    pub(crate) fn raw_squeeze(&self, dim: usize) -> Result<Tensor> {
        let l = self.layout();
        let dims = l.dims();
        ensure!(
            dim < dims.len(),
            Value,
            "squeeze: mode {dim} is out of range for layout {l} of rank {}",
            dims.len()
        );
        ensure!(
            dims[dim] == 1,
            Value,
            "squeeze: mode {dim} of layout {l} has extent {}, not 1",
            dims[dim]
        );
        let mut modes = l.modes();
        modes.remove(dim);
        self.view_with("squeeze", Layout::from_modes(&modes)?, self.offset())
    }
}

/// The strides of a flat view with extents `new` of flat modes `old` (`(extent, stride)` each,
/// logical order row-major), or `None` when a mode `new` forms would have to span storage the
/// modes do not lay out evenly. PyTorch's `computeStride`: the old modes split into chunks that
/// are contiguous among themselves (extent-1 modes join any chunk), and each chunk must be
/// formed exactly by consecutive new extents, which then take strides from the chunk's base.
fn view_strides(old: &[(usize, usize)], new: &[usize]) -> Option<Vec<usize>> {
    let mut strides = vec![0usize; new.len()];
    // the new modes not given a stride yet are `..unassigned`
    let mut unassigned = new.len();
    let mut base = old.last()?.1;
    let (mut chunk, mut formed) = (1usize, 1usize);
    for d in (0..old.len()).rev() {
        chunk = chunk.checked_mul(old[d].0)?;
        let chunk_ends = d == 0 || {
            let (extent, stride) = old[d - 1];
            extent != 1 && Some(stride) != chunk.checked_mul(base)
        };
        if !chunk_ends {
            continue;
        }
        while unassigned > 0 && (formed < chunk || new[unassigned - 1] == 1) {
            strides[unassigned - 1] = formed.checked_mul(base)?;
            formed = formed.checked_mul(new[unassigned - 1])?;
            unassigned -= 1;
        }
        if formed != chunk {
            return None;
        }
        if d > 0 {
            base = old[d - 1].1;
            (chunk, formed) = (1, 1);
        }
    }
    (unassigned == 0).then_some(strides)
}

#[cfg(test)]
mod tests {
    use super::view_strides;

    #[test]
    fn strides_of_views_follow_pytorch_s_rule() {
        // narrowed rows (3,4):(6,1) split their last mode: (3,2,2):(6,2,1)
        assert_eq!(
            view_strides(&[(3, 6), (4, 1)], &[3, 2, 2]),
            Some(vec![6, 2, 1])
        );
        // a transposed (6,4):(1,6) splits its second mode: (6,2,2):(1,12,6)
        assert_eq!(
            view_strides(&[(6, 1), (4, 6)], &[6, 2, 2]),
            Some(vec![1, 12, 6])
        );
        // ... but cannot merge its two modes: no stride walks them in row-major order
        assert_eq!(view_strides(&[(6, 1), (4, 6)], &[24]), None);
        // a broadcast (4,3):(0,1) gains a unit mode and keeps its stride-0 mode
        assert_eq!(
            view_strides(&[(4, 0), (3, 1)], &[4, 1, 3]),
            Some(vec![0, 3, 1])
        );
        assert_eq!(view_strides(&[(4, 0), (3, 1)], &[12]), None);
        // merging padded rows (2,3):(4,1) is impossible; splitting them is fine
        assert_eq!(view_strides(&[(2, 4), (3, 1)], &[6]), None);
        assert_eq!(
            view_strides(&[(2, 4), (3, 1)], &[2, 3, 1]),
            Some(vec![4, 1, 1])
        );
    }
}

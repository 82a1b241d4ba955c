//! Raw views: new tensors over the same carrier with another layout or offset.
//!
//! These record no autograd node (the op library's differentiable views do); they share storage,
//! so a mutation through a view bumps the version every alias sees.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::int_tuple::{IntTuple, Shape, Stride};
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

    /// The same carrier under an arbitrary layout at an absolute carrier `offset`, validated to
    /// fit the carrier.
    pub fn with_layout(&self, layout: Layout, offset: usize) -> Result<Tensor> {
        self.view_with("with_layout", layout, offset)
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
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
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
    pub fn select(&self, dim: usize, index: usize) -> Result<Tensor> {
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
    pub fn permute(&self, order: &[usize]) -> Result<Tensor> {
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
    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        let rank = self.layout().rank();
        ensure!(
            a < rank && b < rank,
            Value,
            "transpose: modes {a} and {b} must be below rank {rank}"
        );
        let mut order: Vec<usize> = (0..rank).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// A stride-0 view with top-level extents `dims`, numpy style: modes align at the end, new
    /// leading modes and extent-1 leaf modes repeat.
    pub fn broadcast_to(&self, dims: &[usize]) -> Result<Tensor> {
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
            } else if own[j] == 1 && l.mode_is_leaf(j) {
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
    pub fn reshape(&self, dims: &[usize]) -> Result<Tensor> {
        let target = Layout::row_major(dims)?;
        ensure!(
            target.size() == self.size(),
            Value,
            "reshape: shape {} has {} elements but {dims:?} needs {}",
            self.shape(),
            self.size(),
            target.size()
        );
        if self.subtensor_count() == 1 && self.layout().is_row_major_contiguous() {
            return self.view_with("reshape", target, self.offset());
        }
        let copy = self.contiguous()?;
        copy.view_with("reshape", target, 0)
    }
}

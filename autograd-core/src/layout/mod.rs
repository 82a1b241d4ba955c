//! Hierarchical CuTe-style layouts: a shape and a congruent stride mapping coordinates to offsets.
//!
//! Two orders matter. CuTe's *colexicographic* index runs over the whole shape with the first
//! leaf fastest. The *logical* order, used wherever values are listed, is row-major over the
//! top-level modes (last mode fastest, as numpy and ndarray expect) with each nested mode's
//! sub-coordinate taken as its colexicographic index. For flat shapes it is plain row-major.

// The integer trees layouts are made of, and the per-thread interning of compact layouts.
pub(crate) mod int_tuple;
pub(crate) mod layout_cache;
// How a layout's coordinates share storage, decided exactly when a layout is built.
mod aliasing;
// Axes and integer lists as PyTorch writes them (negative axes), and `-1` sizes.
pub mod axis;
pub mod inferred_shape;

pub use aliasing::Aliasing;

use std::fmt;

use crate::error::{bail, ensure, Result};
use crate::layout::aliasing::{check_nested_modes, classify};
use crate::layout::int_tuple::{IntTuple, Shape, Stride};

/// One leaf mode of a layout: an extent and the stride between its consecutive coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Leaf {
    /// Number of coordinates along this mode.
    pub extent: usize,
    /// Storage distance between consecutive coordinates.
    pub stride: usize,
}

/// A validated hierarchical layout: `shape` and `stride` are congruent trees of non-negative
/// integers.
///
/// ```
/// use autograd_core::{shape, stride, Layout};
/// let l = Layout::new(shape![2, [4, 3]], stride![1, [0, 2]]).unwrap();
/// assert_eq!(l.to_string(), "(2,(4,3)):(1,(0,2))");
/// assert_eq!((l.size(), l.cosize(), l.rank(), l.depth()), (24, 6, 2, 2));
/// // colexicographic index 3 is coordinate (1, 1): offset 1 + 0
/// assert_eq!(l.offset_of_index(3).unwrap(), 1);
/// ```
pub struct Layout {
    shape: Shape,
    stride: Stride,
    leaves: Vec<Leaf>,
    /// Leaf index range of every top-level mode.
    modes: Vec<(usize, usize)>,
    size: usize,
    cosize: usize,
    aliasing: Aliasing,
    /// Leaves in logical iteration order (fastest first), coalesced, extent-1 leaves dropped.
    logical: Vec<Leaf>,
    /// Set only on the interned layouts of [`crate::layout::layout_cache`], which live as long as the
    /// process; a clone is an ordinary layout.
    immortal: bool,
}

impl Clone for Layout {
    fn clone(&self) -> Layout {
        Layout {
            shape: self.shape.clone(),
            stride: self.stride.clone(),
            leaves: self.leaves.clone(),
            modes: self.modes.clone(),
            size: self.size,
            cosize: self.cosize,
            aliasing: self.aliasing,
            logical: self.logical.clone(),
            immortal: false,
        }
    }
}

/// A layout's trees as `shape:stride`, formatted only when an error message is built.
struct Shown<'a>(&'a Shape, &'a Stride);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0, self.1)
    }
}

fn to_usize(x: i64, what: &str, layout: &Shown<'_>) -> Result<usize> {
    if x == int_tuple::TOO_LARGE {
        bail!(
            Value,
            "a {what} in layout {layout} does not fit in i64 (it was a usize above {}); no layout can address that much",
            i64::MAX
        );
    }
    usize::try_from(x).map_err(|_| {
        crate::Error::Value(format!(
            "{what} {x} in layout {layout} is negative; {what}s must be non-negative"
        ))
    })
}

/// The product of extents, 0 as soon as one is 0. Exact for the extents of a validated layout
/// (their nonzero product fits in `isize`); saturates instead of overflowing for any others.
fn extent_product(leaves: &[Leaf]) -> usize {
    if leaves.iter().any(|l| l.extent == 0) {
        return 0;
    }
    leaves.iter().fold(1, |acc, l| acc.saturating_mul(l.extent))
}

impl Layout {
    /// A layout from congruent shape and stride trees with non-negative leaves.
    ///
    /// Fails with `Error::Value` for non-congruent trees, negative extents or strides (or ones
    /// converted from a `usize` above `i64::MAX`), or a layout that does not fit in memory
    /// addresses. A zero extent hides nothing: the layout is refused when the product of its
    /// *nonzero* extents exceeds `isize::MAX`, or when the offsets its modes span,
    /// `sum((extent - 1) * stride)` over the nonzero extents, reach `isize::MAX`, even though
    /// such a layout holds no element. So every mode of a valid layout is a valid layout, and
    /// every view that keeps or shrinks the extents stays addressable.
    ///
    /// Fails with `Error::NotImplemented` when the injectivity of the layout, or of one of its
    /// nested modes, could only be decided by enumerating more than 2^24 coordinates over a span
    /// wider than 2^30 (see the design notes); no valid layout has a mode that fails so.
    ///
    /// ```
    /// use autograd_core::{shape, stride, ErrorKind, Layout};
    /// // empty, but its second mode alone would hold 2^80 elements
    /// let e = Layout::new(shape![0, [1i64 << 40, 1i64 << 40]], stride![1, [1, 1]]).unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::Value);
    /// ```
    pub fn new(shape: impl Into<Shape>, stride: impl Into<Stride>) -> Result<Layout> {
        let (shape, stride) = (shape.into(), stride.into());
        ensure!(
            shape.0.congruent(&stride.0),
            Value,
            "shape {shape} and stride {stride} are not congruent (they must have the same tree structure)"
        );
        let shown = Shown(&shape, &stride);
        let extents = shape.0.leaves();
        let strides = stride.0.leaves();
        let mut leaves = Vec::with_capacity(extents.len());
        for (&e, &s) in extents.iter().zip(&strides) {
            leaves.push(Leaf {
                extent: to_usize(e, "extent", &shown)?,
                stride: to_usize(s, "stride", &shown)?,
            });
        }
        let mut modes = Vec::with_capacity(shape.0.rank());
        let mut start = 0;
        for m in shape.0.modes() {
            let n = m.leaves().len();
            modes.push((start, start + n));
            start += n;
        }
        let limit = isize::MAX as usize;
        // Products and spans over the nonzero extents: a zero extent elsewhere does not make
        // a mode of 2^80 elements addressable.
        let mut nonzero_size: usize = 1;
        let mut span: usize = 0;
        for l in leaves.iter().filter(|l| l.extent > 0) {
            nonzero_size = nonzero_size
                .checked_mul(l.extent)
                .filter(|s| *s <= limit)
                .ok_or_else(|| {
                    crate::Error::Value(format!(
                        "layout {shown} has more elements than fit in memory (counting the nonzero extents only)"
                    ))
                })?;
            span = (l.extent - 1)
                .checked_mul(l.stride)
                .and_then(|x| x.checked_add(span))
                .filter(|s| *s < limit)
                .ok_or_else(|| {
                    crate::Error::Value(format!(
                        "layout {shown} addresses more storage than fits in memory"
                    ))
                })?;
        }
        let empty = leaves.iter().any(|l| l.extent == 0);
        let size = if empty { 0 } else { nonzero_size };
        let cosize = if empty { 0 } else { span + 1 };
        let aliasing = classify(&leaves, size).map_err(|e| e.context(format!("layout {shown}")))?;
        if empty || aliasing == Aliasing::Other {
            // The modes of an injective or broadcast layout inherit a decision; these may not.
            check_nested_modes(&shape.0, &leaves, &mut 0, true)
                .map_err(|e| e.context(format!("layout {shown}")))?;
        }
        let fastest_first: Vec<Leaf> = modes
            .iter()
            .rev()
            .flat_map(|&(a, b)| leaves[a..b].iter().copied())
            .collect();
        let logical = coalesce(&fastest_first);
        Ok(Layout {
            shape,
            stride,
            leaves,
            modes,
            size,
            cosize,
            aliasing,
            logical,
            immortal: false,
        })
    }

    /// The canonical injective layout of a shape: compact, first mode fastest at every depth.
    ///
    /// `[4, 2]` gives strides `[1, 4]` and `[2, [4, 3]]` gives `[1, [2, 8]]`. Fails with
    /// `Error::Value` when the strides overflow (the shape does not fit in memory).
    pub fn canonical(shape: impl Into<Shape>) -> Result<Layout> {
        let shape = shape.into();
        let mut next = Some(1i64);
        let stride = shape.0.map_leaves(&mut |e| compact_stride(&mut next, e));
        ensure_strides(next, &shape)?;
        Layout::new(shape, Stride(stride))
    }

    /// The compact layout whose storage order is the logical order: row-major over the top-level
    /// modes, colexicographic inside each nested mode. For flat shapes, C order.
    pub fn compact_row_major(shape: impl Into<Shape>) -> Result<Layout> {
        let shape = shape.into();
        let modes = shape.0.modes();
        let mut strides = vec![IntTuple::Int(0); modes.len()];
        let mut next = Some(1i64);
        for (i, m) in modes.iter().enumerate().rev() {
            strides[i] = m.map_leaves(&mut |e| compact_stride(&mut next, e));
        }
        ensure_strides(next, &shape)?;
        let stride = match shape.0 {
            IntTuple::Int(_) => strides.pop().unwrap_or(IntTuple::Int(1)),
            IntTuple::Tuple(_) => IntTuple::Tuple(strides),
        };
        Layout::new(shape, Stride(stride))
    }

    /// The flat row-major layout of `dims` (C order), as ndarray's standard layout.
    ///
    /// Fails with `Error::Value` when the extents do not fit in memory.
    pub fn row_major(dims: &[usize]) -> Result<Layout> {
        Layout::compact_row_major(Shape::from(dims))
    }

    /// A layout whose top-level modes are the given layouts, in order.
    pub fn from_modes(modes: &[Layout]) -> Result<Layout> {
        Layout::new(
            Shape(IntTuple::Tuple(
                modes.iter().map(|m| m.shape.0.clone()).collect(),
            )),
            Stride(IntTuple::Tuple(
                modes.iter().map(|m| m.stride.0.clone()).collect(),
            )),
        )
    }

    /// The shape tree.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    /// The stride tree.
    pub fn stride(&self) -> &Stride {
        &self.stride
    }
    /// Number of logical coordinates.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Whether this is an interned layout that lives as long as the process.
    pub(crate) fn is_immortal(&self) -> bool {
        self.immortal
    }
    /// Marks a layout the interner is about to leak.
    pub(crate) fn make_immortal(&mut self) {
        self.immortal = true;
    }
    /// One past the largest offset (0 for an empty layout): the storage a layout needs.
    pub fn cosize(&self) -> usize {
        self.cosize
    }
    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.modes.len()
    }
    /// Nesting depth of the shape tree.
    pub fn depth(&self) -> usize {
        self.shape.0.depth()
    }
    /// The leaf modes in tree order (the colexicographic order: first leaf fastest).
    pub fn leaves(&self) -> &[Leaf] {
        &self.leaves
    }
    /// The top-level mode `i` as a layout of its own.
    pub fn mode(&self, i: usize) -> Result<Layout> {
        ensure!(
            i < self.rank(),
            Value,
            "mode {i} is out of range for layout {self} of rank {}",
            self.rank()
        );
        match (&self.shape.0, &self.stride.0) {
            (IntTuple::Tuple(s), IntTuple::Tuple(d)) => {
                Layout::new(Shape(s[i].clone()), Stride(d[i].clone()))
            }
            _ => Ok(self.clone()),
        }
    }
    /// Every top-level mode as a layout (always `rank()` of them: a mode of a valid layout is
    /// valid, see [`Layout::new`]).
    pub fn modes(&self) -> Vec<Layout> {
        let modes: Vec<Layout> = (0..self.rank()).filter_map(|i| self.mode(i).ok()).collect();
        debug_assert_eq!(
            modes.len(),
            self.rank(),
            "a mode of {self} is not a valid layout"
        );
        modes
    }
    /// The size of every top-level mode: the extents of the logical (row-major) view. A mode
    /// with a zero extent has size 0, whatever its other extents.
    pub fn dims(&self) -> Vec<usize> {
        self.modes
            .iter()
            .map(|&(a, b)| extent_product(&self.leaves[a..b]))
            .collect()
    }
    /// The leaves of top-level mode `i` (empty when `i` is out of range).
    pub fn mode_leaves(&self, i: usize) -> &[Leaf] {
        self.modes.get(i).map_or(&[], |&(a, b)| &self.leaves[a..b])
    }
    /// Whether top-level mode `i` exists and is a single leaf.
    pub fn mode_is_leaf(&self, i: usize) -> bool {
        match &self.shape.0 {
            IntTuple::Int(_) => i == 0,
            IntTuple::Tuple(v) => matches!(v.get(i), Some(IntTuple::Int(_))),
        }
    }
    /// Whether every top-level mode is a leaf.
    pub fn is_flat(&self) -> bool {
        (0..self.rank()).all(|i| self.mode_is_leaf(i))
    }

    /// The offset of a colexicographic linear index over the whole shape (CuTe's `layout(i)`).
    pub fn offset_of_index(&self, index: usize) -> Result<usize> {
        ensure!(
            index < self.size,
            Value,
            "index {index} is out of range for layout {self} of size {}",
            self.size
        );
        Ok(colex_offset(&self.leaves, index))
    }

    /// The offset of a hierarchical coordinate. At every node the coordinate is either a tuple
    /// congruent to that node, or one integer read as a colexicographic index into it.
    pub fn offset_of_coord(&self, coord: &IntTuple) -> Result<usize> {
        let mut leaf = 0;
        let off = coord_offset(&self.shape.0, coord, &self.leaves, &mut leaf).map_err(|m| {
            crate::Error::Value(format!("coordinate {coord} for layout {self}: {m}"))
        })?;
        Ok(off)
    }

    /// The offset of one coordinate per top-level mode; a nested mode's coordinate is its
    /// colexicographic index.
    pub fn offset_of_top(&self, coord: &[usize]) -> Result<usize> {
        ensure!(
            coord.len() == self.rank(),
            Value,
            "coordinate {coord:?} has {} entries but layout {self} has {} top-level modes",
            coord.len(),
            self.rank()
        );
        let mut off = 0;
        for (i, (&c, &(a, b))) in coord.iter().zip(&self.modes).enumerate() {
            let leaves = &self.leaves[a..b];
            let extent = extent_product(leaves);
            ensure!(c < extent, Value, "coordinate {coord:?} is out of range: entry {i} must be below {extent} for layout {self}");
            off += colex_offset(leaves, c);
        }
        Ok(off)
    }

    /// The offset of the `index`-th element in logical order.
    pub fn offset_of_logical(&self, index: usize) -> Result<usize> {
        ensure!(
            index < self.size,
            Value,
            "index {index} is out of range for layout {self} of size {}",
            self.size
        );
        let mut rest = index;
        let mut off = 0;
        for l in self.logical_leaves() {
            off += (rest % l.extent) * l.stride;
            rest /= l.extent;
        }
        Ok(off)
    }

    /// The coalesced leaves in logical iteration order, fastest first, extent-1 leaves dropped:
    /// walking them as an odometer visits the offsets in logical order. The first is the run
    /// kernels stride along; an empty list means one element at offset 0.
    pub fn runs(&self) -> &[Leaf] {
        &self.logical
    }

    /// Leaves in logical iteration order, fastest first: the last top-level mode's leaves first.
    pub fn logical_leaves(&self) -> Vec<Leaf> {
        self.modes
            .iter()
            .rev()
            .flat_map(|&(a, b)| self.leaves[a..b].iter().copied())
            .collect()
    }

    /// Calls `f` with every offset in logical order.
    pub fn for_each_offset(&self, mut f: impl FnMut(usize)) {
        self.for_each_run(|start, len, stride| {
            let mut o = start;
            for _ in 0..len {
                f(o);
                o += stride;
            }
        });
    }

    /// Calls `f(start, len, stride)` for each run of the innermost coalesced leaf in logical
    /// order: `len` offsets from `start`, `stride` apart. Kernels copy a run with stride 1 as
    /// one slice.
    pub fn for_each_run(&self, mut f: impl FnMut(usize, usize, usize)) {
        if self.size == 0 {
            return;
        }
        let unit = Leaf {
            extent: 1,
            stride: 0,
        };
        let (inner, outer) = self
            .logical
            .split_first()
            .map_or((unit, &[][..]), |(a, b)| (*a, b));
        let mut small = [0usize; 8];
        let mut large = Vec::new();
        let counter: &mut [usize] = if outer.len() <= small.len() {
            &mut small[..outer.len()]
        } else {
            large.resize(outer.len(), 0);
            &mut large
        };
        let mut base = 0usize;
        loop {
            f(base, inner.extent, inner.stride);
            // advance the odometer over the outer leaves
            let mut k = 0;
            loop {
                if k == outer.len() {
                    return;
                }
                counter[k] += 1;
                base += outer[k].stride;
                if counter[k] < outer[k].extent {
                    break;
                }
                base -= outer[k].stride * outer[k].extent;
                counter[k] = 0;
                k += 1;
            }
        }
    }

    /// Every offset in logical order; `Error::Value` when that many cannot be allocated (a
    /// broadcast layout may have 2^40 positions).
    pub fn try_offsets(&self) -> Result<Vec<usize>> {
        let mut out = crate::storage::allocation::with_capacity(self.size)?;
        self.for_each_offset(|o| out.push(o));
        Ok(out)
    }

    /// Every offset in logical order.
    ///
    /// # Panics
    /// When the offsets cannot be allocated, where [`Layout::try_offsets`] returns an error.
    #[deprecated(
        since = "0.1.0",
        note = "panics when the offsets cannot be allocated; use `try_offsets`"
    )]
    pub fn offsets(&self) -> Vec<usize> {
        self.try_offsets()
            .unwrap_or_else(|e| panic!("Layout::offsets: {e}"))
    }

    /// How distinct coordinates share storage (exact).
    pub fn aliasing(&self) -> Aliasing {
        self.aliasing
    }

    /// Whether distinct coordinates always map to distinct offsets (exact).
    pub fn is_injective(&self) -> bool {
        self.aliasing == Aliasing::None
    }

    /// Injective with no holes: the offsets are exactly `0..size`.
    pub fn is_compact(&self) -> bool {
        self.is_injective() && self.cosize == self.size
    }

    /// For a flat layout that fills its storage exactly (compact), the dense layout that
    /// reads storage in order: storage slot `j` holds logical position `storage_order()(j)`.
    /// Writing logical values into such a layout is then a gather in storage order, which
    /// splits into chunks of storage. `None` for any other layout.
    pub(crate) fn storage_order(&self) -> Option<Layout> {
        if !self.is_compact() || !self.is_flat() || self.size == 0 {
            return None;
        }
        let dims = self.dims();
        let mut modes: Vec<(usize, usize, usize)> = Vec::with_capacity(dims.len());
        let mut logical = 1usize;
        for (i, &d) in dims.iter().enumerate().rev() {
            if d > 1 {
                modes.push((self.mode_leaves(i)[0].stride, d, logical));
            }
            logical = logical.checked_mul(d)?;
        }
        // compact and flat: the storage strides, largest first, are row-major over the extents
        modes.sort_unstable_by_key(|m| std::cmp::Reverse(m.0));
        let shape: Vec<usize> = modes.iter().map(|m| m.1).collect();
        let stride: Vec<usize> = modes.iter().map(|m| m.2).collect();
        Layout::new(Shape::from(shape), Stride::from(stride)).ok()
    }

    /// Whether offsets in logical order are `0, 1, 2, …` (storage order is logical order).
    pub fn is_row_major_contiguous(&self) -> bool {
        match self.logical.as_slice() {
            [] => true,
            [only] => only.stride == 1,
            _ => false,
        }
    }

    /// The same layout with a leaf batch mode `extent:stride` put before the top-level modes.
    pub fn prepend_mode(&self, extent: usize, stride: usize) -> Result<Layout> {
        let mut shapes = vec![IntTuple::from(extent)];
        let mut strides = vec![IntTuple::from(stride)];
        shapes.extend(self.shape.0.modes());
        strides.extend(self.stride.0.modes());
        Layout::new(
            Shape(IntTuple::Tuple(shapes)),
            Stride(IntTuple::Tuple(strides)),
        )
    }

    /// Whether `self` has the same shape tree as `other`.
    pub fn same_shape(&self, other: &Layout) -> bool {
        self.shape == other.shape
    }
}

fn colex_offset(leaves: &[Leaf], index: usize) -> usize {
    let mut rest = index;
    let mut off = 0;
    for l in leaves {
        off += (rest % l.extent) * l.stride;
        rest /= l.extent;
    }
    off
}

fn coord_offset(
    shape: &IntTuple,
    coord: &IntTuple,
    leaves: &[Leaf],
    next: &mut usize,
) -> Result<usize, String> {
    let n = shape.leaves().len();
    let here = &leaves[*next..*next + n];
    match (shape, coord) {
        // an integer coordinate into any node: its colexicographic index
        (_, IntTuple::Int(c)) => {
            *next += n;
            let extent = extent_product(here);
            let c = usize::try_from(*c).map_err(|_| format!("entry {c} is negative"))?;
            if c >= extent {
                return Err(format!("entry {c} must be below {extent} for mode {shape}"));
            }
            Ok(colex_offset(here, c))
        }
        // a tuple coordinate into a tuple node: congruent children
        (IntTuple::Tuple(s), IntTuple::Tuple(c)) if s.len() == c.len() => {
            let mut off = 0;
            for (si, ci) in s.iter().zip(c) {
                off += coord_offset(si, ci, leaves, next)?;
            }
            Ok(off)
        }
        // a tuple coordinate that does not match the node
        _ => Err(format!("{coord} does not match mode {shape}")),
    }
}

/// The stride of the next leaf of a compact layout, advancing `next` past a leaf of `extent`
/// (an extent of 0 or less takes no room); `next` becomes `None` once it overflows.
fn compact_stride(next: &mut Option<i64>, extent: i64) -> i64 {
    let s = next.unwrap_or(i64::MAX);
    *next = next.and_then(|n| n.checked_mul(extent.max(1)));
    s
}

/// Fails unless the compact strides of `shape` fit (`next` is what `compact_stride` left).
fn ensure_strides(next: Option<i64>, shape: &Shape) -> Result<()> {
    ensure!(
        next.is_some(),
        Value,
        "the compact strides of shape {shape} overflow: it has more elements than fit in memory"
    );
    Ok(())
}

/// Merges adjacent leaves (fastest first) that form one arithmetic progression; drops extent-1.
/// A merge that would overflow is skipped (a validated layout never asks for one).
fn coalesce(leaves: &[Leaf]) -> Vec<Leaf> {
    let mut out: Vec<Leaf> = Vec::with_capacity(leaves.len());
    for &l in leaves.iter().filter(|l| l.extent != 1) {
        let merged = out.last().and_then(|last| {
            (last.stride.checked_mul(last.extent) == Some(l.stride))
                .then(|| last.extent.checked_mul(l.extent))
                .flatten()
        });
        match (out.last_mut(), merged) {
            (Some(last), Some(extent)) => last.extent = extent,
            _ => out.push(l),
        }
    }
    out
}

// Everything else a layout holds is derived from its shape and stride.
impl PartialEq for Layout {
    fn eq(&self, other: &Layout) -> bool {
        std::ptr::eq(self, other) || (self.stride == other.stride && self.shape == other.shape)
    }
}

impl Eq for Layout {}

impl std::hash::Hash for Layout {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.shape.hash(state);
        self.stride.hash(state);
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.shape, self.stride)
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Layout({self})")
    }
}

/// Fails unless `layout` addresses only `0..len` after adding `offset`, and `offset` itself lies
/// in `0..=len`: an empty layout addresses nothing but still sits somewhere, at the very end of
/// the carrier at the farthest, so kernels may slice `offset..offset + size` without a check.
pub(crate) fn check_fits(layout: &Layout, offset: usize, len: usize) -> Result<()> {
    if layout.size() == 0 {
        ensure!(
            offset <= len,
            Value,
            "empty layout {layout} at offset {offset} lies past the end of a carrier of {len} elements (an empty tensor may sit at offset {len} at the farthest)"
        );
        return Ok(());
    }
    match offset.checked_add(layout.cosize()) {
        Some(end) if end <= len => Ok(()),
        _ => bail!(
            Value,
            "layout {layout} at offset {offset} needs {} storage elements but the carrier holds {len}",
            offset.saturating_add(layout.cosize())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{shape, stride};

    fn l(s: Shape, d: Stride) -> Layout {
        Layout::new(s, d).unwrap()
    }

    #[test]
    fn canonical_examples() {
        assert_eq!(
            Layout::canonical(shape![4, 2]).unwrap().stride(),
            &stride![1, 4]
        );
        assert_eq!(
            Layout::canonical(shape![2, [4, 3]]).unwrap().stride(),
            &stride![1, [2, 8]]
        );
        assert_eq!(
            Layout::compact_row_major(shape![2, [4, 3]])
                .unwrap()
                .stride(),
            &stride![12, [1, 4]]
        );
        assert_eq!(
            Layout::row_major(&[2, 3, 4]).unwrap().stride(),
            &stride![12, 4, 1]
        );
    }

    #[test]
    fn storage_order_inverts_a_permutation() {
        // [2, 3, 4] stored as [3, 2, 4] (modes 0 and 1 swapped in storage), with a size-1 mode
        let p = l(shape![2, 3, 1, 4], stride![4, 8, 5, 1]);
        let order = p.storage_order().unwrap();
        assert_eq!(order.size(), p.size());
        let mut offsets = Vec::new();
        p.for_each_offset(|o| offsets.push(o));
        // slot j holds logical position order(j): reading the slots in order through it
        // gives back every logical position whose offset is j
        let mut logical = Vec::new();
        order.for_each_offset(|i| logical.push(i));
        for (slot, &pos) in logical.iter().enumerate() {
            assert_eq!(offsets[pos], slot);
        }
        assert!(l(shape![2, 3], stride![3, 1]).storage_order().is_some());
        assert!(
            l(shape![2, 3], stride![4, 1]).storage_order().is_none(),
            "holes"
        );
        assert!(
            l(shape![2, 3], stride![0, 1]).storage_order().is_none(),
            "broadcast"
        );
        assert!(
            l(shape![2, 0], stride![1, 2]).storage_order().is_none(),
            "empty"
        );
    }

    #[test]
    fn rejects_bad_trees() {
        assert_eq!(
            Layout::new(shape![2, 3], stride![1]).unwrap_err().kind(),
            crate::ErrorKind::Value
        );
        assert_eq!(
            Layout::new(shape![-2], stride![1]).unwrap_err().kind(),
            crate::ErrorKind::Value
        );
        assert_eq!(
            Layout::new(shape![2], stride![-1]).unwrap_err().kind(),
            crate::ErrorKind::Value
        );
        assert!(Layout::new(shape![1i64 << 40, 1i64 << 40], stride![1, 1]).is_err());
    }

    #[test]
    fn orders() {
        let lay = l(shape![2, [2, 3]], stride![100, [1, 10]]);
        // logical order: mode 0 slowest; inside mode 1 colexicographic
        assert_eq!(
            lay.try_offsets().unwrap(),
            vec![0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121]
        );
        assert_eq!(lay.offset_of_index(1).unwrap(), 100);
        assert_eq!(lay.offset_of_top(&[1, 3]).unwrap(), 111);
        assert_eq!(
            lay.offset_of_coord(&IntTuple::from(vec![
                IntTuple::from(1),
                IntTuple::from(vec![1, 2])
            ]))
            .unwrap(),
            121
        );
        assert_eq!(
            lay.offset_of_coord(&IntTuple::from(vec![1, 5])).unwrap(),
            121
        );
        assert!(lay.offset_of_top(&[2, 0]).is_err());
        assert!(lay.offset_of_coord(&IntTuple::from(vec![1, 2, 3])).is_err());
        assert_eq!(lay.offset_of_logical(7).unwrap(), 101);
        assert!(l(shape![3, 4], stride![4, 1]).is_row_major_contiguous());
        assert!(!l(shape![3, 4], stride![1, 3]).is_row_major_contiguous());
    }
}

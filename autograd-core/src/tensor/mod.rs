//! The `Tensor` handle: logical dtype, layout, and the subtensors that hold its elements.
//!
//! Values are listed in *logical order* (see [`crate::layout`]): row-major over the top-level
//! modes, so a flat tensor built from a `Vec` reads back in the order it was given, as in numpy.

// The data model around the handle: the handle's storage block, views, constructors and
// ndarray interop. Dtypes, scalars and CPU buffers are in `storage`.
pub(crate) mod array;
pub(crate) mod construct;
pub(crate) mod handle;
pub(crate) mod view;

use std::fmt;
use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::graph::op::Node;
use crate::layout::int_tuple::{IntTuple, Shape};
use crate::layout::layout_cache::KeptLayout;
use crate::layout::{check_fits, Layout};
use crate::runtime::ids::id_source;
use crate::runtime::word_lock::{WordGuard, WordLock};
use crate::storage::allocation::filled;
use crate::storage::carrier::{Carrier, CpuCarrier};
use crate::storage::dtype::{DType, PackedDType};
use crate::storage::scalar::{Buffer, Element, Scalar};
use crate::tensor::handle::Handle;

/// A cheap-to-clone handle to a tensor. Clones are the same tensor: they share `.grad`, the
/// autograd node and the retain flag, like a Python object reference.
#[derive(Clone)]
pub struct Tensor(pub(crate) Handle);

pub(crate) struct TensorInner {
    pub(crate) dtype: PackedDType,
    /// The placement layout (for a multi-subtensor tensor: the compact row-major layout of its
    /// shape, since it has no single placement).
    pub(crate) layout: KeptLayout,
    pub(crate) parts: Parts,
    /// The gradient and the node, behind a lock whose word also holds the identity (never
    /// reused, as an address would be once the tensor is dropped) shifted left by one, and in
    /// bit 0 whether a non-leaf retains its gradient: both read without taking the lock, and
    /// no bytes beside the state, so that a small result stays within its allocation size
    /// class.
    pub(crate) autograd: WordLock<AutogradState>,
}

pub(crate) enum Parts {
    One {
        carrier: Arc<dyn Carrier>,
        offset: usize,
    },
    /// Pieces along the first top-level mode, in order.
    Many(Box<[Subtensor]>),
}

/// One piece of a tensor's authoritative representation: a carrier, a layout and an offset.
#[derive(Clone, Debug)]
pub struct Subtensor {
    /// The storage.
    pub carrier: Arc<dyn Carrier>,
    /// The placement layout inside the carrier.
    pub layout: Arc<Layout>,
    /// Where the layout's offset 0 sits in the carrier (in elements of the logical dtype).
    pub offset: usize,
}

#[derive(Default)]
pub(crate) struct AutogradState {
    pub(crate) grad: Option<Tensor>,
    pub(crate) ctx: Option<Node>,
}

/// Storage elements one logical element occupies: the leaf field count of a compound dtype.
pub(crate) fn record_width(dtype: &DType) -> usize {
    match dtype {
        DType::Compound(c) => c.leaf_dtypes().len(),
        _ => 1,
    }
}

/// Whether storage of the simple dtype `storage` can hold tensors of the logical dtype `logical`.
fn storage_admits(logical: &DType, storage: &DType) -> bool {
    match logical {
        DType::Compound(c) => c.leaf_dtypes().iter().all(|d| d == storage),
        other => other.admits(storage),
    }
}

impl TensorInner {
    /// A new tensor's header, with an identity never handed out before.
    pub(crate) fn new(
        dtype: impl Into<PackedDType>,
        layout: impl Into<KeptLayout>,
        parts: Parts,
    ) -> TensorInner {
        id_source!(TensorIds);
        TensorInner {
            dtype: dtype.into(),
            layout: layout.into(),
            parts,
            autograd: WordLock::new(TensorIds::next() << 1, AutogradState::default()),
        }
    }
}

impl Tensor {
    pub(crate) fn from_inner(
        dtype: impl Into<PackedDType>,
        layout: impl Into<KeptLayout>,
        parts: Parts,
    ) -> Tensor {
        Tensor(Handle::new(TensorInner::new(dtype, layout, parts)))
    }

    /// A tensor over `carrier` with `layout` placed at `offset`, validated to fit the carrier.
    /// Its logical dtype is the carrier's element dtype.
    pub fn from_parts(
        carrier: Arc<dyn Carrier>,
        layout: impl Into<Arc<Layout>>,
        offset: usize,
    ) -> Result<Tensor> {
        let layout = layout.into();
        check_fits(&layout, offset, carrier.len())?;
        let dtype = carrier.dtype();
        Ok(Tensor::from_inner(
            dtype,
            layout,
            Parts::One { carrier, offset },
        ))
    }

    pub(crate) fn from_carrier_unchecked(
        carrier: Arc<dyn Carrier>,
        layout: impl Into<KeptLayout>,
        dtype: impl Into<PackedDType>,
    ) -> Tensor {
        Tensor::from_inner(dtype, layout, Parts::One { carrier, offset: 0 })
    }

    /// A tensor of `shape` holding `data` in logical (row-major) order, without copying.
    ///
    /// ```
    /// use autograd_core::{shape, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
    /// assert_eq!(t.get(&[1, 0]).unwrap().to_f64(), 4.0);
    /// assert_eq!(t.layout().to_string(), "(2,3):(3,1)");
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        let layout = crate::layout::layout_cache::compact(shape.into())?;
        ensure!(
            data.len() == layout.size(),
            Value,
            "{} values cannot fill shape {} of {} elements",
            data.len(),
            layout.shape(),
            layout.size()
        );
        Ok(Tensor::from_carrier_unchecked(
            CpuCarrier::from_vec(data),
            layout,
            T::DTYPE,
        ))
    }

    /// A tensor of `shape` whose every element is `value` (stored as the value's dtype).
    pub fn full(shape: impl Into<Shape>, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        let layout = crate::layout::layout_cache::compact(shape.into())?;
        let n = layout.size();
        let buffer = match value {
            Scalar::F32(x) => Buffer::F32(filled(n, x)?),
            Scalar::F64(x) => Buffer::F64(filled(n, x)?),
            Scalar::I32(x) => Buffer::I32(filled(n, x)?),
            Scalar::I64(x) => Buffer::I64(filled(n, x)?),
            Scalar::Bool(x) => Buffer::Bool(filled(n, x)?),
        };
        Ok(Tensor::from_carrier_unchecked(
            CpuCarrier::shared(buffer),
            layout,
            value.dtype(),
        ))
    }

    /// A tensor of `shape` and simple `dtype` filled with zeros (false for Bool).
    pub fn zeros(shape: impl Into<Shape>, dtype: &DType) -> Result<Tensor> {
        let layout = crate::layout::layout_cache::compact(shape.into())?;
        let buffer = Buffer::zeros(dtype, layout.size())?;
        Ok(Tensor::from_carrier_unchecked(
            CpuCarrier::shared(buffer),
            layout,
            dtype.clone(),
        ))
    }

    /// A tensor of `shape` and simple `dtype` filled with ones (true for Bool).
    pub fn ones(shape: impl Into<Shape>, dtype: &DType) -> Result<Tensor> {
        let one = Scalar::I32(1);
        match dtype {
            DType::Bool => Tensor::full(shape, true),
            d => Tensor::full(shape, one.cast(d)?),
        }
    }

    /// A one-element Float32 tensor of layout `(1):(1)`: what `backward()` accepts without a
    /// cotangent.
    pub fn scalar(value: f32) -> Tensor {
        Tensor::from_carrier_unchecked(
            CpuCarrier::from_vec(vec![value]),
            Arc::new(Layout::row_major(&[1]).unwrap_or_else(|_| unreachable!("(1):(1) is valid"))),
            DType::Float32,
        )
    }

    /// The same storage seen under another logical dtype: a category containing the storage
    /// dtype, or a compound dtype whose fields all have the storage dtype (each logical element
    /// is then a record of consecutive storage elements).
    pub fn with_logical_dtype(&self, dtype: DType) -> Result<Tensor> {
        let Parts::One { carrier, offset } = &self.0.parts else {
            bail!(
                NotImplemented,
                "with_logical_dtype takes a one-subtensor tensor"
            )
        };
        let storage = carrier.dtype();
        ensure!(
            storage_admits(&dtype, &storage),
            Type,
            "logical dtype {dtype} cannot describe {storage} storage"
        );
        let w_old = record_width(&self.0.dtype);
        let w_new = record_width(&dtype);
        ensure!(
            w_old == w_new || (w_old == 1 && offset.is_multiple_of(w_new)),
            Value,
            "cannot reinterpret {} elements as {dtype}: record widths differ",
            *self.0.dtype
        );
        let new_offset = if w_old == w_new {
            *offset
        } else {
            offset / w_new
        };
        check_fits(&self.0.layout, new_offset, carrier.len() / w_new)?;
        Ok(Tensor::from_inner(
            dtype,
            self.0.layout.clone(),
            Parts::One {
                carrier: carrier.clone(),
                offset: new_offset,
            },
        ))
    }

    /// A tensor made of `pieces` stacked along their first top-level mode, each piece kept as
    /// its own subtensor (no copy). Pieces must share the dtype and every other mode's shape,
    /// and have a leaf first mode.
    pub fn from_subtensors(pieces: &[Tensor]) -> Result<Tensor> {
        ensure!(
            !pieces.is_empty(),
            Value,
            "from_subtensors needs at least one piece"
        );
        let first = &pieces[0];
        let mut subs = Vec::with_capacity(pieces.len());
        let mut extent = 0usize;
        for (i, p) in pieces.iter().enumerate() {
            let sub = p.single().map_err(|e| e.context(format!("piece {i}")))?;
            let l = &sub.layout;
            ensure!(
                p.dtype() == first.dtype(),
                Type,
                "piece {i} has dtype {} but piece 0 has {}",
                p.dtype(),
                first.dtype()
            );
            // a shared category label must not hide pieces of different storage dtypes
            let storage = sub.carrier.dtype();
            let storage0 = first.part_carrier(0).dtype();
            ensure!(
                storage == storage0,
                Type,
                "piece {i} stores {storage} elements but piece 0 stores {storage0}"
            );
            ensure!(
                l.rank() >= 1 && l.mode_is_leaf(0),
                Value,
                "piece {i} (layout {l}) needs a leaf first mode"
            );
            ensure!(
                l.shape().0.modes()[1..] == first.layout().shape().0.modes()[1..],
                Value,
                "piece {i} has shape {} whose trailing modes differ from piece 0's {}",
                l.shape(),
                first.layout().shape()
            );
            extent = extent.checked_add(l.dims()[0]).ok_or_else(|| {
                crate::Error::Value(format!(
                    "from_subtensors: the pieces' first modes add up to more than {} elements",
                    usize::MAX
                ))
            })?;
            subs.push(sub);
        }
        let mut modes = first.layout().shape().0.modes();
        modes[0] = IntTuple::from(extent);
        let layout = Layout::compact_row_major(Shape(IntTuple::Tuple(modes)))?;
        Ok(Tensor::from_inner(
            first.dtype().clone(),
            Arc::new(layout),
            Parts::Many(subs.into_boxed_slice()),
        ))
    }

    /// The logical dtype.
    pub fn dtype(&self) -> &DType {
        &self.0.dtype
    }
    /// The placement layout; see [`Tensor::subtensors`] for multi-subtensor tensors.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// The placement layout as a shared handle, for results that reuse it without a copy.
    pub fn layout_arc(&self) -> Arc<Layout> {
        self.0.layout.to_arc()
    }
    /// The placement layout as tensors and nodes keep it (no count touched when interned).
    pub(crate) fn kept_layout(&self) -> KeptLayout {
        self.0.layout.clone()
    }
    /// The shape tree.
    pub fn shape(&self) -> &Shape {
        self.0.layout.shape()
    }
    /// The extent of every top-level mode.
    pub fn dims(&self) -> Vec<usize> {
        self.0.layout.dims()
    }
    /// Number of logical elements.
    pub fn size(&self) -> usize {
        self.0.layout.size()
    }
    /// How many subtensors hold the elements.
    pub fn subtensor_count(&self) -> usize {
        match &self.0.parts {
            Parts::One { .. } => 1,
            Parts::Many(v) => v.len(),
        }
    }
    /// The subtensors, in order along the first mode.
    pub fn subtensors(&self) -> Vec<Subtensor> {
        match &self.0.parts {
            Parts::One { carrier, offset } => {
                vec![Subtensor {
                    carrier: carrier.clone(),
                    layout: self.0.layout.to_arc(),
                    offset: *offset,
                }]
            }
            Parts::Many(v) => v.to_vec(),
        }
    }
    /// The one subtensor, or `Error::NotImplemented` for a multi-subtensor tensor.
    pub fn single(&self) -> Result<Subtensor> {
        match &self.0.parts {
            Parts::One { carrier, offset } => Ok(Subtensor {
                carrier: carrier.clone(),
                layout: self.0.layout.to_arc(),
                offset: *offset,
            }),
            Parts::Many(v) => bail!(
                NotImplemented,
                "this operation needs a tensor with one subtensor, but this one (shape {}) has {}",
                self.shape(),
                v.len()
            ),
        }
    }
    /// The carrier of a one-subtensor tensor.
    pub fn carrier(&self) -> Result<&Arc<dyn Carrier>> {
        match &self.0.parts {
            Parts::One { carrier, .. } => Ok(carrier),
            Parts::Many(v) => bail!(
                NotImplemented,
                "a tensor with {} subtensors has no single carrier",
                v.len()
            ),
        }
    }
    /// The offset of a one-subtensor tensor in its carrier.
    pub fn offset(&self) -> usize {
        match &self.0.parts {
            Parts::One { offset, .. } => *offset,
            Parts::Many(_) => 0,
        }
    }
    /// The unique carriers in order of first appearance.
    pub fn carriers(&self) -> Vec<Arc<dyn Carrier>> {
        match &self.0.parts {
            Parts::One { carrier, .. } => vec![carrier.clone()],
            Parts::Many(v) => {
                let mut out: Vec<Arc<dyn Carrier>> = Vec::new();
                for s in v {
                    if !out.iter().any(|c| c.id() == s.carrier.id()) {
                        out.push(s.carrier.clone());
                    }
                }
                out
            }
        }
    }
    /// Whether two handles are the same tensor.
    pub fn same_tensor(&self, other: &Tensor) -> bool {
        Handle::ptr_eq(&self.0, &other.0)
    }
    /// This tensor's identity, shared by its clones and never reused by another tensor.
    pub fn id(&self) -> u64 {
        self.0.autograd.payload() >> 1
    }

    /// Whether later traversals accumulate into this tensor's `.grad` though it has a node.
    pub(crate) fn retains_grad(&self) -> bool {
        self.0.autograd.payload() & 1 == 1
    }

    pub(crate) fn set_retains_grad(&self, retain: bool) {
        let mut state = self.state();
        let id_retain = (state.payload() & !1) | u64::from(retain);
        state.set_payload(id_retain);
    }

    pub(crate) fn state(&self) -> WordGuard<'_, AutogradState> {
        self.0.autograd.lock()
    }

    /// Sets the autograd node without checks (recording).
    pub(crate) fn attach_node(&self, node: Node) {
        self.state().ctx = Some(node);
    }

    /// [`Tensor::attach_node`] without taking the lock when this is the only handle.
    pub(crate) fn attach_node_owned(&mut self, node: Node) {
        match self.0.autograd_mut() {
            Some(state) => state.ctx = Some(node),
            None => self.attach_node(node),
        }
    }

    /// Every `(subtensor, storage offset)` in logical order (offsets in logical elements).
    pub(crate) fn for_each_slot(&self, mut f: impl FnMut(usize, usize)) {
        match &self.0.parts {
            Parts::One { offset, .. } => self.0.layout.for_each_offset(|o| f(0, offset + o)),
            Parts::Many(v) => {
                for (i, s) in v.iter().enumerate() {
                    s.layout.for_each_offset(|o| f(i, s.offset + o));
                }
            }
        }
    }

    /// The one carrier, and the offset into it, of a tensor nothing else can observe: this is
    /// its only handle (so `&mut self` keeps it so), it has no node and no `.grad` and does not
    /// retain one, and no other tensor, view or reference holds the carrier. Its storage may
    /// then be reused unseen: kept as a gradient, or overwritten by a kernel it was handed to.
    pub(crate) fn sole_carrier(&mut self) -> Option<(&Arc<dyn Carrier>, usize)> {
        let untracked = !self.retains_grad()
            && self
                .0
                .autograd_mut()
                .is_some_and(|state| state.ctx.is_none() && state.grad.is_none());
        let Parts::One { carrier, offset } = &self.0.parts else {
            return None;
        };
        let sole = untracked && Arc::strong_count(carrier) == 1 && Arc::weak_count(carrier) == 0;
        sole.then_some((carrier, *offset))
    }

    pub(crate) fn part_carrier(&self, part: usize) -> &Arc<dyn Carrier> {
        match &self.0.parts {
            Parts::One { carrier, .. } => carrier,
            Parts::Many(v) => &v[part].carrier,
        }
    }

    /// The subtensor and storage offset of a coordinate with one entry per top-level mode.
    pub(crate) fn locate(&self, coord: &[usize]) -> Result<(usize, usize)> {
        match &self.0.parts {
            Parts::One { offset, .. } => Ok((0, offset + self.0.layout.offset_of_top(coord)?)),
            Parts::Many(v) => {
                ensure!(
                    coord.len() == self.0.layout.rank(),
                    Value,
                    "coordinate {coord:?} has {} entries but shape {} has {} top-level modes",
                    coord.len(),
                    self.shape(),
                    self.0.layout.rank()
                );
                let mut start = 0;
                for (i, s) in v.iter().enumerate() {
                    let n = s.layout.dims()[0];
                    if coord[0] < start + n {
                        let mut local = coord.to_vec();
                        local[0] -= start;
                        return Ok((i, s.offset + s.layout.offset_of_top(&local)?));
                    }
                    start += n;
                }
                bail!(Value, "coordinate {coord:?} is out of range: entry 0 must be below {start} for shape {}", self.shape())
            }
        }
    }

    /// Why two logical elements share a storage slot, or `None` when each has its own: a
    /// non-injective piece layout, or pieces of a multi-subtensor tensor that overlap in one
    /// carrier.
    pub(crate) fn storage_clash(&self) -> Option<String> {
        let subs = self.subtensors();
        if let Some(s) = subs.iter().find(|s| !s.layout.is_injective()) {
            return Some(format!(
                "the layout {} maps several coordinates to one storage slot",
                s.layout
            ));
        }
        if subs.len() < 2 || self.carriers().len() == subs.len() {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        let mut clash = None;
        for (i, s) in subs.iter().enumerate() {
            s.layout.for_each_offset(|o| {
                if !seen.insert((s.carrier.id(), s.offset + o)) && clash.is_none() {
                    clash = Some((i, s.offset + o));
                }
            });
        }
        clash.map(|(i, o)| {
            format!(
                "subtensor {i} shares storage slot {o} of its carrier with an earlier subtensor"
            )
        })
    }

    /// The element at a coordinate with one entry per top-level mode (a nested mode's entry is
    /// its colexicographic index).
    pub fn get(&self, coord: &[usize]) -> Result<Scalar> {
        let (part, off) = self.locate(coord)?;
        ensure!(
            record_width(&self.0.dtype) == 1,
            NotImplemented,
            "an element of compound dtype {} has several fields; use get_record",
            *self.0.dtype
        );
        self.part_carrier(part).read(off)
    }

    /// The fields of the element at a coordinate (one value for a non-compound dtype).
    pub fn get_record(&self, coord: &[usize]) -> Result<Vec<Scalar>> {
        let (part, off) = self.locate(coord)?;
        let w = record_width(&self.0.dtype);
        (0..w)
            .map(|k| self.part_carrier(part).read(off * w + k))
            .collect()
    }

    /// The element at a hierarchical coordinate of a one-subtensor tensor.
    pub fn get_coord(&self, coord: &IntTuple) -> Result<Scalar> {
        let sub = self.single()?;
        ensure!(
            record_width(&self.0.dtype) == 1,
            NotImplemented,
            "use get_record for compound dtype {}",
            *self.0.dtype
        );
        sub.carrier
            .read(sub.offset + sub.layout.offset_of_coord(coord)?)
    }
}

// Dropping a long graph must not recurse: a tensor's node owns its inputs, whose nodes own
// theirs. A node whose last owner is going away is emptied here, and the nodes of the inputs
// it was the last owner of are taken out of them first and emptied in turn from a local stack,
// so no drop ever reaches a node through another. A node can also own graph tensors outside
// its saved state (a `custom_gradient` closure that captured one): a node dropped that way
// while a loop runs on this thread is handed to that loop through `PENDING` instead of
// starting a nested one. Where the thread-local is gone (thread exit), the loop runs without
// it: saved state, the graph's spine, is still emptied iteratively.
thread_local! {
    /// Nodes handed to the `drop_node` loop running on this thread; `None` when none runs.
    static PENDING: std::cell::RefCell<Option<Vec<Node>>> = const { std::cell::RefCell::new(None) };
}

/// Ends this thread's `drop_node` loop, also when a drop unwinds through it.
struct Draining;

impl Drop for Draining {
    fn drop(&mut self) {
        let left = PENDING
            .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.take()))
            .ok()
            .flatten();
        drop(left);
    }
}

/// The nodes handed to this thread's loop since it last looked.
fn handed_over() -> Vec<Node> {
    PENDING
        .try_with(|p| {
            p.try_borrow_mut()
                .ok()
                .and_then(|mut p| p.as_mut().map(std::mem::take))
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}

fn drop_node(node: Node) {
    // A loop already runs on this thread (this drop comes from one of its nodes): hand over.
    let mut node = Some(node);
    let _ = PENDING.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if let Some(queue) = p.as_mut() {
                queue.extend(node.take());
            }
        }
    });
    let Some(node) = node else { return };
    let draining = PENDING
        .try_with(|p| {
            p.try_borrow_mut()
                .map(|mut p| *p = Some(Vec::new()))
                .is_ok()
        })
        .unwrap_or(false)
        .then_some(Draining);
    let mut stack = vec![node];
    loop {
        let Some(node) = stack.pop() else {
            stack.extend(handed_over());
            if stack.is_empty() {
                break;
            }
            continue;
        };
        if Arc::strong_count(&node) != 1 {
            continue;
        }
        if let Some((of, _)) = node.__result_of() {
            // A stand-in for another node's result: that node is emptied here too, if this
            // was its last holder, instead of from the stand-in's drop.
            stack.push(of.clone());
            continue;
        }
        let Some(saved) = node.saved().take() else {
            // Released while a tensor held it (a loss, a kept activation): it goes to the
            // allocator, not the cache. Cached, it would be the next forward's first node,
            // out of the order the release left the others in; the backward of W1s measured
            // 1.1-2x slower so, at the same instruction count.
            continue;
        };
        // Handle by handle, so that a tensor saved twice (`x * x`) is emptied when its last
        // handle goes, not from that handle's drop.
        saved.drain(|t| {
            if t.0.is_unique() {
                if let Some(inner) = t.state().ctx.take() {
                    stack.push(inner);
                }
            }
        });
        // `node` is dropped here (its allocation cached for a later `Arc` of its size when
        // this was its only reference): what its own fields held waits in `PENDING` until the
        // stack runs dry (one thread-local look per batch, not per node)
        crate::runtime::arc_cache::recycle(node);
    }
    drop(draining);
}

impl Drop for TensorInner {
    fn drop(&mut self) {
        let state = self.autograd.get_mut();
        if let Some(node) = state.ctx.take() {
            if Arc::strong_count(&node) == 1 {
                drop_node(node);
            }
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}, {}", self.dtype(), self.layout())?;
        if self.subtensor_count() > 1 {
            write!(f, ", {} subtensors", self.subtensor_count())?;
        }
        if let Some(node) = &self.state().ctx {
            write!(f, ", node {}", node.name())?;
        }
        f.write_str(")")
    }
}

// `Display` lives in `construct.rs`, beside the readers.

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
};
#[cfg(test)]
mod tests {
    /// W3 keeps a million of these alive; growing them is a memory regression. A node with
    /// inline saved inputs, the result layout and one stored word must stay within 104 bytes
    /// with its reference counts (a 112-byte glibc allocation). Carrier sizes are checked
    /// beside the carrier.
    #[test]
    fn graph_records_stay_small() {
        assert!(std::mem::size_of::<super::TensorInner>() <= 72);
        assert!(std::mem::size_of::<crate::graph::saved::SavedInput>() <= 16);
        assert!(std::mem::size_of::<crate::SavedState>() <= 72);
    }
}

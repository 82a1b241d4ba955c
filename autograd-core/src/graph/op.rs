//! Autograd nodes: the `Operation` trait, the state a node saves, and recording a node.

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::graph::grad_mode::is_grad_enabled;
use crate::runtime::ids::id_source;
use crate::runtime::word_lock::{backoff, WordGuard, WordLock};
use crate::storage::carrier::CarrierId;
use crate::tensor::{Parts, Tensor};

/// An autograd node, shared by its result tensor and the nodes that consume that result.
pub type Node = Arc<dyn Operation>;

/// The versions of every unique carrier of one saved input, in order of first appearance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSnapshot {
    first: (CarrierId, u64),
    rest: Box<[(CarrierId, u64)]>,
}

impl VersionSnapshot {
    /// The current versions of `t`'s unique carriers.
    pub fn of(t: &Tensor) -> VersionSnapshot {
        if let Ok(c) = t.carrier() {
            return VersionSnapshot {
                first: (c.id(), c.version()),
                rest: Box::new([]),
            };
        }
        let mut entries = t.carriers().into_iter().map(|c| (c.id(), c.version()));
        let first = entries.next().unwrap_or((CarrierId::fresh(), 0));
        VersionSnapshot {
            first,
            rest: entries.collect(),
        }
    }

    /// `(carrier identity, version)` pairs in order.
    pub fn entries(&self) -> impl Iterator<Item = (CarrierId, u64)> + '_ {
        std::iter::once(self.first).chain(self.rest.iter().copied())
    }

    /// The first carrier of `t` whose version differs from this snapshot:
    /// `(id, saved version, current version)`.
    pub fn first_change(&self, t: &Tensor) -> Option<(CarrierId, u64, u64)> {
        if self.rest.is_empty() {
            if let Ok(c) = t.carrier() {
                let now = c.version();
                return (c.id() != self.first.0 || now != self.first.1).then_some((
                    self.first.0,
                    self.first.1,
                    now,
                ));
            }
        }
        let now = VersionSnapshot::of(t);
        let change = self
            .entries()
            .zip(now.entries())
            .find(|(a, b)| a != b)
            .map(|(a, b)| (a.0, a.1, b.1));
        change
    }
}

/// One saved positional input: the tensor and the version of its first carrier when it was
/// saved (a tensor's carriers never change, so the identities are the saved tensor's own). Two
/// words, so that one- and two-input nodes keep their inputs inline; the versions of further
/// carriers of a multi-subtensor input live in the node's [`SavedExtra`].
pub(crate) type SavedInput = (Tensor, u64);

/// A saved input modified since the forward pass: `(input index, (carrier, saved version,
/// current version))`.
pub(crate) type Modification = (usize, (CarrierId, u64, u64));

/// The versions of every unique carrier of `t`, in order.
fn carrier_versions(t: &Tensor) -> (u64, Box<[u64]>) {
    if let Ok(c) = t.carrier() {
        return (c.version(), Box::new([]));
    }
    let mut versions = t.carriers().into_iter().map(|c| c.version());
    let first = versions.next().unwrap_or(0);
    (first, versions.collect())
}

/// A node's saved inputs in argument order. One- and two-input ops (nearly all) keep them
/// inline in the node, which saves an allocation and a pointer hop per node in every pass.
#[derive(Debug)]
pub(crate) enum SavedInputs {
    /// Exactly one input.
    One([SavedInput; 1]),
    /// Exactly two inputs.
    Two([SavedInput; 2]),
    /// Any other number.
    Many(Box<[SavedInput]>),
}

impl SavedInputs {
    /// Saves `inputs` with their current versions; the versions of carriers after each
    /// input's first go to `more` (one entry per input), left empty when no input has any.
    fn of(inputs: &[&Tensor], more: &mut Vec<Box<[u64]>>) -> SavedInputs {
        let mut entry = |i: usize, t: &Tensor| {
            let (first, rest) = carrier_versions(t);
            if !rest.is_empty() {
                more.resize_with(inputs.len(), Default::default);
                more[i] = rest;
            }
            (t.clone(), first)
        };
        match inputs {
            [a] => SavedInputs::One([entry(0, a)]),
            [a, b] => SavedInputs::Two([entry(0, a), entry(1, b)]),
            _ => SavedInputs::Many(
                inputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| entry(i, t))
                    .collect(),
            ),
        }
    }
}

impl std::ops::Deref for SavedInputs {
    type Target = [SavedInput];
    fn deref(&self) -> &[SavedInput] {
        match self {
            SavedInputs::One(a) => a,
            SavedInputs::Two(a) => a,
            SavedInputs::Many(a) => a,
        }
    }
}

/// What most nodes do not keep, one word wide: residual tensors, and the versions of the
/// carriers after the first of multi-subtensor inputs. Every byte of the node counts when a
/// graph holds a million of them.
#[derive(Debug, Default)]
pub(crate) struct SavedExtra(Option<Box<Extra>>);

#[derive(Debug)]
struct Extra {
    context: Box<[Tensor]>,
    /// Empty, or one entry per saved input.
    more_versions: Box<[Box<[u64]>]>,
}

impl SavedExtra {
    fn new(context: Vec<Tensor>, more_versions: Vec<Box<[u64]>>) -> SavedExtra {
        if context.is_empty() && more_versions.is_empty() {
            return SavedExtra(None);
        }
        SavedExtra(Some(Box::new(Extra {
            context: context.into(),
            more_versions: more_versions.into(),
        })))
    }

    pub(crate) fn context(&self) -> &[Tensor] {
        self.0.as_deref().map_or(&[], |e| &e.context)
    }

    /// Whether no input has carriers after its first.
    fn more_versions_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|e| e.more_versions.is_empty())
    }

    fn more_versions(&self, input: usize) -> &[u64] {
        self.0
            .as_deref()
            .and_then(|e| e.more_versions.get(input))
            .map_or(&[], |v| &v[..])
    }
}

/// What a recorded node keeps for its backward: saved inputs with their versions, and the
/// context (residual tensors forward chose to keep). Graph release empties it.
#[derive(Debug)]
pub struct Saved {
    /// Saved positional tensor inputs with the versions of their first carriers, in
    /// argument order.
    pub(crate) inputs: SavedInputs,
    /// Residual tensors, and the versions of further carriers of multi-subtensor inputs.
    pub(crate) extra: SavedExtra,
}

impl Saved {
    /// Saved input `index` (argument order).
    ///
    /// # Panics
    /// When `index` is not below [`Saved::input_count`]: generated code indexes only inputs it
    /// saved itself.
    pub fn input(&self, index: usize) -> &Tensor {
        &self.inputs[index].0
    }

    /// The number of saved inputs.
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// The saved inputs in argument order.
    pub fn inputs(&self) -> impl ExactSizeIterator<Item = &Tensor> + '_ {
        self.inputs.iter().map(|(t, _)| t)
    }

    /// The residual tensors kept for backward.
    pub fn context(&self) -> &[Tensor] {
        self.extra.context()
    }

    /// Hands every saved tensor handle (inputs, then residuals) to `f` by value, one at a
    /// time, so that `f` sees whether the handle it holds is the last one.
    pub(crate) fn drain(self, mut f: impl FnMut(Tensor)) {
        match self.inputs {
            SavedInputs::One(a) => a.into_iter().for_each(|(t, _)| f(t)),
            SavedInputs::Two(a) => a.into_iter().for_each(|(t, _)| f(t)),
            SavedInputs::Many(a) => a.into_vec().into_iter().for_each(|(t, _)| f(t)),
        }
        if let Some(extra) = self.extra.0 {
            extra.context.into_vec().into_iter().for_each(f);
        }
    }

    /// Every saved version of input `index`'s carriers, in carrier order.
    fn versions(&self, index: usize) -> impl Iterator<Item = u64> + '_ {
        let first = self.inputs.get(index).map(|(_, v)| *v);
        first
            .into_iter()
            .chain(self.extra.more_versions(index).iter().copied())
    }

    /// The saved input versions of input `index`, paired with its carriers' identities.
    pub(crate) fn snapshot(&self, index: usize) -> VersionSnapshot {
        let t = &self.inputs[index].0;
        let mut entries = t
            .carriers()
            .into_iter()
            .map(|c| c.id())
            .zip(self.versions(index));
        let first = entries
            .next()
            .unwrap_or((CarrierId::fresh(), self.inputs[index].1));
        VersionSnapshot {
            first,
            rest: entries.collect(),
        }
    }

    /// The first saved input modified since it was saved (it runs twice per VJP): one look
    /// per input when every input has one carrier and none was written.
    pub(crate) fn modification(&self) -> Option<Modification> {
        let untouched = self.extra.more_versions_empty()
            && self.inputs.iter().all(|(t, first)| match &t.0.parts {
                Parts::One { carrier, .. } => carrier.version() == *first,
                Parts::Many(_) => false,
            });
        if untouched {
            return None;
        }
        self.first_modification()
    }

    /// [`Saved::modification`] in full, input by input.
    #[cold]
    #[inline(never)]
    fn first_modification(&self) -> Option<Modification> {
        self.inputs
            .iter()
            .enumerate()
            .find_map(|(i, (t, first))| self.change_of(i, t, *first).map(|c| (i, c)))
    }

    /// The first carrier of input `index`, `t`, whose version changed since it was saved (its
    /// first carrier at version `first`): `(id, saved version, current version)`.
    fn change_of(&self, index: usize, t: &Tensor, first: u64) -> Option<(CarrierId, u64, u64)> {
        if self.extra.more_versions(index).is_empty() {
            if let Ok(c) = t.carrier() {
                let now = c.version();
                return (now != first).then(|| (c.id(), first, now));
            }
        }
        t.carriers()
            .into_iter()
            .zip(self.versions(index))
            .find_map(|(c, saved)| {
                let now = c.version();
                (now != saved).then(|| (c.id(), saved, now))
            })
    }
}

/// A node's saved state, locked: live, claimed by a traversal that will release it (still
/// readable), or released. Claiming and releasing change the state in place; the saved
/// tensors never move. The claim token is the lock word's payload, so it costs no bytes.
struct Slot<'a>(WordGuard<'a, Option<Saved>>);

impl Slot<'_> {
    fn saved(&self) -> Option<&Saved> {
        self.0.as_ref()
    }

    /// The [`TraversalToken`] of the traversal holding the claim, 0 when unclaimed (always 0
    /// once released).
    fn claimed_by(&self) -> u64 {
        self.0.payload()
    }

    /// Claims live, unclaimed state for the traversal `me`; answers whether `me` holds it
    /// (also when it already did).
    fn claim_for(&mut self, me: TraversalToken) -> bool {
        let free = self.0.is_some() && self.claimed_by() == 0;
        if free {
            self.0.set_payload(me.0);
        }
        free || self.claimed_by() == me.0
    }

    /// Gives up any claim.
    fn unclaim(&mut self) {
        self.0.set_payload(0);
    }

    /// Discards the saved state.
    fn release(&mut self) -> Option<Saved> {
        self.unclaim();
        self.0.take()
    }
}

/// The identity of one releasing traversal: a process-wide serial number in the low 39 bits
/// (two live traversals share one only 2^39 traversals apart) and its thread's number in the
/// 24 above (63 bits in all: the payload of a node's lock word), so that a claim held by an
/// enclosing traversal of the same thread is told from one a traversal of another thread
/// holds. Never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraversalToken(u64);

impl TraversalToken {
    const SERIAL_BITS: u32 = 39;

    /// A token for a new traversal of the current thread.
    pub(crate) fn fresh() -> TraversalToken {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        let max_thread = (1u64 << (63 - Self::SERIAL_BITS)) - 1;
        // A thread that is exiting (token 0), or past 2^24 threads, takes the top number; its
        // claims then count as one thread's, which fails fast instead of waiting.
        let thread = match thread_token() {
            0 => max_thread,
            t => t.min(max_thread),
        };
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed) & ((1 << Self::SERIAL_BITS) - 1);
        // serial 0 (once every 2^39) still gives a non-zero token: thread numbers start at 1
        TraversalToken((thread << Self::SERIAL_BITS) | serial)
    }

    /// Whether the claim `other` belongs to a traversal of this token's thread.
    fn same_thread(self, other: u64) -> bool {
        self.0 >> Self::SERIAL_BITS == other >> Self::SERIAL_BITS
    }
}

/// A number for the current thread, unique in the process (0 once the thread is exiting).
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    #[cfg(not(loom))]
    thread_local! {
        static TOKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    // a loom model's threads share one OS thread, and each needs its own number
    #[cfg(loom)]
    loom::thread_local! {
        static TOKEN: std::cell::Cell<u64> = std::cell::Cell::new(0);
    }
    TOKEN
        .try_with(|t| {
            if t.get() == 0 {
                t.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            t.get()
        })
        .unwrap_or(0)
}

/// The identity of one autograd node, never reused in the life of the process (an address
/// would be reused once the node is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u64);

id_source!(NodeIds);

impl NodeId {
    fn fresh() -> NodeId {
        NodeId(NodeIds::next())
    }

    /// Above every node identity handed out so far, on any thread, and at or below every one
    /// this thread records from now on (checkpoint replay tells the nodes it recorded from
    /// older ones by it).
    pub(crate) fn watermark() -> NodeId {
        NodeId(NodeIds::watermark())
    }

    /// The identity as a number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node#{}", self.0)
    }
}

/// The releasable state of a node plus where it was recorded.
pub struct SavedState {
    saved: WordLock<Option<Saved>>,
    id: NodeId,
    location: &'static Location<'static>,
}

// What a node's lock lends to several threads at once must itself be `Sync`; and the public
// state keeps the auto traits it had behind a `Mutex`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    const fn assert_unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
    assert_send_sync::<Option<Saved>>();
    assert_send_sync::<SavedState>();
    assert_unwind_safe::<SavedState>();
};

impl fmt::Debug for SavedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lock().saved().map(|s| s.inputs.len());
        write!(f, "SavedState({n:?} inputs, recorded at {})", self.location)
    }
}

impl SavedState {
    /// State saving `inputs` (with their current versions) and `context`.
    #[track_caller]
    pub fn new(inputs: &[&Tensor], context: Vec<Tensor>) -> SavedState {
        SavedState::at(inputs, context, Location::caller())
    }

    /// State saving `inputs` and `context`, recorded at `location`.
    pub fn at(
        inputs: &[&Tensor],
        context: Vec<Tensor>,
        location: &'static Location<'static>,
    ) -> SavedState {
        let mut more = Vec::new();
        let inputs = SavedInputs::of(inputs, &mut more);
        SavedState::from_parts(inputs, more, context, location)
    }

    fn from_parts(
        inputs: SavedInputs,
        more_versions: Vec<Box<[u64]>>,
        context: Vec<Tensor>,
        location: &'static Location<'static>,
    ) -> SavedState {
        SavedState {
            saved: WordLock::new(
                0,
                Some(Saved {
                    inputs,
                    extra: SavedExtra::new(context, more_versions),
                }),
            ),
            id: NodeId::fresh(),
            location,
        }
    }

    /// This node's identity.
    pub fn id(&self) -> NodeId {
        self.id
    }

    fn lock(&self) -> Slot<'_> {
        Slot(self.saved.lock())
    }

    /// Where the forward call that recorded this node was made.
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// The saved inputs, or `None` after release.
    pub fn inputs(&self) -> Vec<Tensor> {
        self.lock()
            .saved()
            .map(|s| s.inputs.iter().map(|(t, _)| t.clone()).collect())
            .unwrap_or_default()
    }

    /// The saved input versions, empty after release.
    pub fn input_versions(&self) -> Vec<VersionSnapshot> {
        self.lock()
            .saved()
            .map(|s| (0..s.inputs.len()).map(|i| s.snapshot(i)).collect())
            .unwrap_or_default()
    }

    /// The context tensors, empty after release.
    pub fn context(&self) -> Vec<Tensor> {
        self.lock()
            .saved()
            .map(|s| s.context().to_vec())
            .unwrap_or_default()
    }

    /// Whether graph release already discarded the state.
    pub fn is_released(&self) -> bool {
        self.lock().saved().is_none()
    }

    /// Runs `f` on the saved state, or fails naming `retain_graph=True` after release.
    pub fn with<R>(&self, op: &str, f: impl FnOnce(&Saved) -> R) -> Result<R> {
        match self.lock().saved() {
            Some(s) => Ok(f(s)),
            None => Err(self.released_error(op)),
        }
    }

    /// [`SavedState::with`], then, with a traversal token, under the same lock, claims the
    /// state for that traversal (see [`SavedState::claim`]); answers whether the traversal
    /// holds the claim. `f` says whether to go on to the claim (`None`: it succeeded).
    pub(crate) fn with_then_claim<F>(
        &self,
        op: &str,
        claim: Option<TraversalToken>,
        f: impl FnOnce(&Saved) -> Option<F>,
    ) -> Result<(Option<F>, bool)> {
        let mut slot = self.lock();
        let Some(saved) = slot.saved() else {
            return Err(self.released_error(op));
        };
        let failure = f(saved);
        let Some(me) = claim.filter(|_| failure.is_none()) else {
            return Ok((failure, false));
        };
        let claimed = slot.claim_for(me);
        Ok((None, claimed))
    }

    /// Why the traversal `me` could not claim this node: it was released, or an enclosing
    /// traversal of this thread (one whose VJP is running `me`) holds it.
    pub(crate) fn claim_error(&self, op: &str, me: TraversalToken) -> crate::Error {
        let holder = self.lock().claimed_by();
        if holder != 0 && holder != me.0 && me.same_thread(holder) {
            return crate::Error::Runtime(format!(
                "the graph of {op} (recorded at {}) is being traversed by an enclosing backward on this thread, whose VJP is running this one; a traversal inside a VJP cannot release the graph that runs it: pass retain_graph=True to the inner traversal",
                self.location
            ));
        }
        self.released_error(op)
    }

    /// The error for a traversal that reaches this node after its graph was released.
    pub(crate) fn released_error(&self, op: &str) -> crate::Error {
        crate::Error::Runtime(format!(
            "the graph of {op} (recorded at {}) was already released by an earlier traversal; pass retain_graph=True to the first traversal to traverse it again",
            self.location
        ))
    }

    /// Discards the state, returning it so the caller decides where it is dropped.
    pub fn take(&self) -> Option<Saved> {
        self.lock().release()
    }

    /// Marks the state as claimed by the traversal `me`, which will release it; fails when it
    /// was released or another traversal claimed it first.
    pub(crate) fn claim(&self, op: &str, me: TraversalToken) -> Result<()> {
        if self.lock().claim_for(me) {
            Ok(())
        } else {
            Err(self.claim_error(op, me))
        }
    }

    /// [`SavedState::claim`], but while a traversal on another thread holds the claim, waits
    /// for it to finish (the node is then released, and this fails) or to fail (the claim is
    /// then this one's). Traversals take these claims in one global order (by node id), so
    /// two of them never wait for each other, and exactly one of two racing traversals wins.
    /// A claim of an enclosing traversal of this thread fails at once: that traversal cannot
    /// finish while this one runs inside it.
    pub(crate) fn claim_waiting(&self, op: &str, me: TraversalToken) -> Result<()> {
        let mut spins = 0u32;
        loop {
            let wait = {
                let mut slot = self.lock();
                if slot.claim_for(me) {
                    return Ok(());
                }
                slot.saved().is_some() && !me.same_thread(slot.claimed_by())
            };
            if !wait {
                return Err(self.claim_error(op, me));
            }
            backoff(&mut spins);
        }
    }

    /// Gives up `me`'s claim (its traversal failed): the state is live again, unless someone
    /// released the node meanwhile. Another traversal's claim is left alone.
    pub(crate) fn unclaim(&self, me: TraversalToken) {
        let mut slot = self.lock();
        if slot.claimed_by() == me.0 {
            slot.unclaim();
        }
    }

    /// Releases the state `me` claimed, returning it so the caller drops it outside the lock.
    pub(crate) fn release_claimed(&self, me: TraversalToken) -> Option<Saved> {
        let mut slot = self.lock();
        if slot.claimed_by() != me.0 {
            return None;
        }
        slot.release()
    }
}

/// A recorded differentiable operation: the autograd node of its result.
///
/// Implementations hold a [`SavedState`] and compute the vector-Jacobian product in
/// [`backward`](Operation::backward), returning one entry per saved input. Most ops are
/// written with `#[differentiable]`, which generates this impl.
///
/// What a VJP receives and returns, also for broadcast (stride-0) tensors: the cotangent of
/// the result holds one value per *logical position*, in an injective layout, exactly as if
/// the result did not alias storage; a result that is a stride-0 view therefore gets each
/// position's own contribution, and a VJP whose forward made one storage slot serve many
/// positions sums over them itself (`broadcast_to`'s VJP sums over the repetitions). For each
/// input the VJP returns a cotangent per logical position of that input, never pre-summed
/// over positions that share storage, in the input's own layout when it is injective, else in
/// any injective layout of its shape. The engine sums per storage slot only where a gradient
/// leaves the graph: into `.grad` and into `grad`'s results.
pub trait Operation: Send + Sync + 'static {
    /// The op's name, for messages.
    fn name(&self) -> &str;

    /// The releasable saved state.
    fn saved(&self) -> &SavedState;

    /// The vector-Jacobian product: one cotangent (or `None`) per saved input, in order.
    fn backward(&self, gradient: &Tensor) -> Result<Vec<Option<Tensor>>>;

    /// A name for saved input `index` (a parameter name for macro-defined ops).
    fn input_name(&self, index: usize) -> Option<&str> {
        let _ = index;
        None
    }

    /// The vector-Jacobian product when the traversal knows which gradients it will use:
    /// `needed[i]` is false when input `i`'s gradient would be discarded (the input is not
    /// differentiable, or no requested tensor depends on it), so the op may skip computing it
    /// and return `None` there. The engine calls it through [`Operation::backward_into`]; the
    /// default ignores `needed`.
    fn backward_needed(&self, gradient: &Tensor, needed: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let _ = needed;
        self.backward(gradient)
    }

    /// [`Operation::backward_needed`] writing its gradients into `out` (on success, whatever
    /// `out` held before is replaced; after an error its contents are unspecified), so that a
    /// traversal reuses one vector for every node it runs instead of allocating one per node.
    /// The engine calls this for single-result nodes and hands the cotangent over: when nothing
    /// else holds it, the op may compute a gradient in its storage instead of allocating (see
    /// [`crate::kernel::map_owned`]). The default takes `backward_needed`'s vector.
    /// `#[differentiable]` ops fill `out` directly with their gradients as their VJP returned
    /// them, in any layout of their inputs' shapes, and tell the engine, which lays them out;
    /// they read their saved state only for what the VJP takes, so a released node is reported
    /// by the engine rather than here. A wrapper forwarding to another node should forward
    /// `backward_needed`, whose gradients address their inputs exactly.
    fn backward_into(
        &self,
        gradient: Tensor,
        needed: &[bool],
        out: &mut Vec<Option<Tensor>>,
    ) -> Result<()> {
        *out = self.backward_needed(&gradient, needed)?;
        Ok(())
    }

    /// The vector-Jacobian products of `K` cotangents at once, for batched functional
    /// [`grad`](crate::grad): `gradients` has a leading batch mode of extent K before the
    /// result's shape, and gradient `i` must have a leading batch mode of extent K before
    /// input `i`'s shape (any injective layout), its batch index `k` holding the VJP of
    /// cotangent `k`. `None` (the default) says the node has no batched VJP, and the engine
    /// runs its VJP once per cotangent and stacks the results. `#[differentiable(batched)]`
    /// implements this with the
    /// op's own VJP, which then must accept such a cotangent (see [`crate::batch`]).
    fn backward_batched(
        &self,
        gradients: &Tensor,
        needed: &[bool],
    ) -> Option<Result<Vec<Option<Tensor>>>> {
        let _ = (gradients, needed);
        None
    }

    /// The number of results this node was recorded on: one, unless it was recorded with
    /// [`Recording::finish_several`].
    fn outputs(&self) -> usize {
        1
    }

    /// The vector-Jacobian product of a node with several results: `gradients[k]` is the
    /// cotangent of result `k`, `None` for a result the traversal did not reach (at least one
    /// is present). The engine calls this for nodes whose [`Operation::outputs`] is not one;
    /// the default serves one-result nodes.
    fn backward_outputs(
        &self,
        gradients: &[Option<Tensor>],
        needed: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        match gradients {
            [Some(g)] => self.backward_needed(g, needed),
            _ => Err(crate::Error::Runtime(format!(
                "{} has one result but was given {} cotangents; a node with several results implements Operation::backward_outputs",
                self.name(),
                gradients.len()
            ))),
        }
    }

    /// For the engine: whether [`Operation::backward_into`] returns gradients of its inputs'
    /// shapes in any layout, for the engine to lay out as `#[differentiable]` ops lay out the
    /// gradients of their other entry points (hand-written ops' gradients must already address
    /// their inputs exactly).
    #[doc(hidden)]
    fn __lays_out_gradients(&self) -> bool {
        false
    }

    /// For the engine: a stand-in for result `k` of another node (see
    /// [`Recording::finish_several`]).
    #[doc(hidden)]
    fn __result_of(&self) -> Option<(&Node, usize)> {
        None
    }
}

/// The `autograd_ctx` that result `index` (not the first) of a node with several results
/// holds: the node at that result. [`Tensor::autograd_ctx`] answers with the node itself.
struct ResultOf {
    node: Node,
    index: usize,
}

impl Operation for ResultOf {
    fn name(&self) -> &str {
        self.node.name()
    }
    fn saved(&self) -> &SavedState {
        self.node.saved()
    }
    fn backward(&self, gradient: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let mut gradients = vec![None; self.node.outputs()];
        gradients[self.index] = Some(gradient.clone());
        let needed = vec![true; self.node.saved().inputs().len()];
        self.node.backward_outputs(&gradients, &needed)
    }
    fn input_name(&self, index: usize) -> Option<&str> {
        self.node.input_name(index)
    }
    fn outputs(&self) -> usize {
        self.node.outputs()
    }
    fn __result_of(&self) -> Option<(&Node, usize)> {
        Some((&self.node, self.index))
    }
}

/// The spec's read-only view of a node, the same for every implementation (the engine reads
/// a node only through [`Operation::saved`], so these are not overridable).
impl dyn Operation {
    /// The saved positional tensor inputs in argument order; empty after release.
    pub fn inputs(&self) -> Vec<Tensor> {
        self.saved().inputs()
    }

    /// The saved input versions, one per saved input; empty after release.
    pub fn input_versions(&self) -> Vec<VersionSnapshot> {
        self.saved().input_versions()
    }

    /// The residual tensors kept for backward; empty after release.
    pub fn context(&self) -> Vec<Tensor> {
        self.saved().context()
    }

    /// Discards the saved inputs, versions and context.
    pub fn release(&self) {
        drop(self.saved().take());
    }

    /// Whether the node was released.
    pub fn is_released(&self) -> bool {
        self.saved().is_released()
    }

    /// This node's identity, never reused.
    pub fn id(&self) -> NodeId {
        self.saved().id()
    }
}

impl fmt::Debug for dyn Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (recorded at {})",
            self.name(),
            self.saved().location()
        )
    }
}

/// Describes saved input `index` of `node` for messages: `input 1 (`b`) of mul`.
pub(crate) fn describe_input(node: &dyn Operation, index: usize) -> String {
    match node.input_name(index) {
        Some(n) => format!("input {index} (`{n}`) of {}", node.name()),
        None => format!("input {index} of {}", node.name()),
    }
}

/// Describes `node` with its recording site.
pub(crate) fn describe_node(node: &dyn Operation) -> String {
    format!("{} (recorded at {})", node.name(), node.saved().location())
}

/// Whether a forward call with these positional tensor inputs should save them: graph
/// construction is enabled on this thread and some input is differentiable.
pub fn should_record(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.is_differentiable())
}

/// A forward call being recorded: its positional tensor inputs saved with their versions
/// *before* the forward pass reads them, so a concurrent in-place write during the forward is
/// caught by the version check instead of mixing old and new values into the graph.
#[derive(Debug)]
#[must_use = "a recording attaches nothing until `finish`"]
pub struct Recording {
    inputs: SavedInputs,
    more_versions: Vec<Box<[u64]>>,
    location: &'static Location<'static>,
}

impl Recording {
    /// Starts recording a forward call with these positional tensor inputs, or `None` when
    /// [`should_record`] does not hold (the forward then records nothing).
    #[track_caller]
    pub fn begin(inputs: &[&Tensor]) -> Option<Recording> {
        if !should_record(inputs) {
            return None;
        }
        let mut more_versions = Vec::new();
        let inputs = SavedInputs::of(inputs, &mut more_versions);
        Some(Recording {
            inputs,
            more_versions,
            location: Location::caller(),
        })
    }

    /// Attaches `make(saved)` as the node of `result` when `result` is differentiable, and
    /// returns `result`. A result some other handle or graph already holds (an input the
    /// forward handed back, a tensor with a node) is replaced by a fresh handle to the same
    /// storage first, so a node never owns its own result and no cycle can form.
    pub fn finish<O: Operation>(
        self,
        result: Tensor,
        context: Vec<Tensor>,
        make: impl FnOnce(SavedState) -> O,
    ) -> Tensor {
        let mut result = own_result(result);
        if result.is_differentiable() {
            let node: Node = crate::runtime::arc_cache::new_arc(make(SavedState::from_parts(
                self.inputs,
                self.more_versions,
                context,
                self.location,
            )));
            result.attach_node_owned(node);
        }
        result
    }
}

impl Recording {
    /// [`Recording::finish`] for a forward call with several results: one node, `make(saved)`,
    /// whose [`Operation::outputs`] must equal `results.len()`, attached to every
    /// differentiable result (each result's `autograd_ctx` is that node), and the results
    /// returned in order. A node with several results implements
    /// [`Operation::backward_outputs`].
    pub fn finish_several<O: Operation>(
        self,
        results: Vec<Tensor>,
        context: Vec<Tensor>,
        make: impl FnOnce(SavedState) -> O,
    ) -> Result<Vec<Tensor>> {
        let results: Vec<Tensor> = results.into_iter().map(own_result).collect();
        let node: Node = Arc::new(make(SavedState::from_parts(
            self.inputs,
            self.more_versions,
            context,
            self.location,
        )));
        crate::error::ensure!(
            node.outputs() == results.len(),
            Value,
            "{} reports {} results but the forward call made {}",
            node.name(),
            node.outputs(),
            results.len()
        );
        for (index, result) in results.iter().enumerate() {
            if !result.is_differentiable() {
                continue;
            }
            if index == 0 {
                result.attach_node(node.clone());
            } else {
                result.attach_node(Arc::new(ResultOf {
                    node: node.clone(),
                    index,
                }));
            }
        }
        Ok(results)
    }
}

/// `result` as a tensor a new node may be attached to: itself when this is its only handle
/// and it has no node, else a fresh handle (no node, no `.grad`) to the same storage.
pub(crate) fn own_result(mut result: Tensor) -> Tensor {
    // A unique handle is read without its lock (nothing else can reach it).
    let owned = result
        .0
        .autograd_mut()
        .is_some_and(|state| state.ctx.is_none());
    if owned {
        result
    } else {
        result.detach()
    }
}

/// Records `make(saved)` as `result`'s autograd node when [`should_record`] holds for
/// `inputs` and `result` is differentiable; otherwise builds nothing. Returns the result (a
/// fresh handle when `result` was shared, see [`Recording::finish`]).
///
/// The versions are taken now, after the forward pass: a forward that may race with
/// in-place writers should use [`Recording::begin`] before reading its inputs.
#[track_caller]
pub fn record<O: Operation>(
    result: Tensor,
    inputs: &[&Tensor],
    context: Vec<Tensor>,
    make: impl FnOnce(SavedState) -> O,
) -> Tensor {
    match Recording::begin(inputs) {
        Some(recording) => recording.finish(result, context, make),
        None => result,
    }
}

//! The state a node saves for its backward: inputs with their versions, residuals, and the
//! one-word lock that claims and releases it.

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::runtime::ids::id_source;
use crate::runtime::word_lock::{backoff, WordGuard, WordLock};
use crate::storage::carrier::CarrierId;
use crate::tensor::{Parts, Tensor};

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
    pub(crate) fn of(inputs: &[&Tensor], more: &mut Vec<Box<[u64]>>) -> SavedInputs {
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

    pub(crate) fn from_parts(
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

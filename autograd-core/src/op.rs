//! Autograd nodes: the `Operation` trait, the state a node saves, and recording a node.

use std::fmt;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::carrier::CarrierId;
use crate::error::Result;
use crate::grad_mode::is_grad_enabled;
use crate::tensor::Tensor;

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

/// The versions of a saved input's unique carriers, without their identities: a tensor's
/// carriers never change, so the identities are the saved tensor's own. Two words, so that
/// saved inputs fit inline in the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedVersions {
    first: u64,
    rest: Option<Box<MoreVersions>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MoreVersions(Box<[u64]>);

impl SavedVersions {
    fn of(t: &Tensor) -> SavedVersions {
        if let Ok(c) = t.carrier() {
            return SavedVersions {
                first: c.version(),
                rest: None,
            };
        }
        let mut versions = t.carriers().into_iter().map(|c| c.version());
        let first = versions.next().unwrap_or(0);
        let rest: Box<[u64]> = versions.collect();
        SavedVersions {
            first,
            rest: (!rest.is_empty()).then(|| Box::new(MoreVersions(rest))),
        }
    }

    fn versions(&self) -> impl Iterator<Item = u64> + '_ {
        let rest = self.rest.as_deref().map_or(&[][..], |r| &r.0[..]);
        std::iter::once(self.first).chain(rest.iter().copied())
    }

    /// The snapshot these versions form with `t`, the tensor they were saved with.
    pub fn snapshot(&self, t: &Tensor) -> VersionSnapshot {
        let mut entries = t
            .carriers()
            .into_iter()
            .map(|c| c.id())
            .zip(self.versions());
        let first = entries.next().unwrap_or((CarrierId::fresh(), self.first));
        VersionSnapshot {
            first,
            rest: entries.collect(),
        }
    }

    /// The first carrier of `t` (the tensor these versions were saved with) whose version
    /// changed since: `(id, saved version, current version)`.
    pub fn first_change(&self, t: &Tensor) -> Option<(CarrierId, u64, u64)> {
        if self.rest.is_none() {
            if let Ok(c) = t.carrier() {
                let now = c.version();
                return (now != self.first).then(|| (c.id(), self.first, now));
            }
        }
        t.carriers()
            .into_iter()
            .zip(self.versions())
            .find_map(|(c, saved)| {
                let now = c.version();
                (now != saved).then(|| (c.id(), saved, now))
            })
    }
}

/// One saved positional input: the tensor and its carriers' versions when it was saved.
pub type SavedInput = (Tensor, SavedVersions);

/// A node's saved inputs in argument order. One- and two-input ops (nearly all) keep them
/// inline in the node, which saves an allocation and a pointer hop per node in every pass.
#[derive(Debug)]
pub enum SavedInputs {
    /// Exactly one input.
    One([SavedInput; 1]),
    /// Exactly two inputs.
    Two([SavedInput; 2]),
    /// Any other number.
    Many(Box<[SavedInput]>),
}

impl SavedInputs {
    /// Saves `inputs` with their current versions.
    fn of(inputs: &[&Tensor]) -> SavedInputs {
        let entry = |t: &Tensor| (t.clone(), SavedVersions::of(t));
        match inputs {
            [a] => SavedInputs::One([entry(a)]),
            [a, b] => SavedInputs::Two([entry(a), entry(b)]),
            _ => SavedInputs::Many(inputs.iter().map(|t| entry(t)).collect()),
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

/// A node's residual tensors, one word wide: most ops keep none, and every byte of the node
/// counts when a graph holds a million of them.
#[derive(Debug)]
pub struct SavedContext(Option<Box<ContextTensors>>);

#[derive(Debug)]
struct ContextTensors(Box<[Tensor]>);

impl SavedContext {
    fn new(tensors: Vec<Tensor>) -> SavedContext {
        SavedContext((!tensors.is_empty()).then(|| Box::new(ContextTensors(tensors.into()))))
    }
}

impl std::ops::Deref for SavedContext {
    type Target = [Tensor];
    fn deref(&self) -> &[Tensor] {
        self.0.as_deref().map_or(&[], |c| &c.0)
    }
}

/// What a recorded node keeps for its backward: saved inputs with their versions, and the
/// context (residual tensors forward chose to keep). Graph release empties it.
#[derive(Debug)]
pub struct Saved {
    /// Saved positional tensor inputs with the versions of their carriers, in argument order
    /// ([`SavedVersions::snapshot`] pairs them with the carriers' identities).
    pub inputs: SavedInputs,
    /// Residual tensors kept for backward.
    pub context: SavedContext,
}

/// A node's saved state: live, claimed by a traversal that will release it (still readable),
/// or released.
enum Slot {
    Live(Saved),
    Claimed(Saved),
    Released,
}

impl Slot {
    fn saved(&self) -> Option<&Saved> {
        match self {
            Slot::Live(s) | Slot::Claimed(s) => Some(s),
            Slot::Released => None,
        }
    }
}

/// The releasable state of a node plus where it was recorded.
pub struct SavedState {
    saved: Mutex<Slot>,
    location: &'static Location<'static>,
}

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
        SavedState {
            saved: Mutex::new(Slot::Live(Saved {
                inputs: SavedInputs::of(inputs),
                context: SavedContext::new(context),
            })),
            location,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.saved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
            .map(|s| s.inputs.iter().map(|(t, v)| v.snapshot(t)).collect())
            .unwrap_or_default()
    }

    /// The context tensors, empty after release.
    pub fn context(&self) -> Vec<Tensor> {
        self.lock()
            .saved()
            .map(|s| s.context.to_vec())
            .unwrap_or_default()
    }

    /// Whether graph release already discarded the state.
    pub fn is_released(&self) -> bool {
        matches!(*self.lock(), Slot::Released)
    }

    /// Runs `f` on the saved state, or fails naming `retain_graph=True` after release.
    pub fn with<R>(&self, op: &str, f: impl FnOnce(&Saved) -> R) -> Result<R> {
        match self.lock().saved() {
            Some(s) => Ok(f(s)),
            None => Err(self.released_error(op)),
        }
    }

    /// The error for a traversal that reaches this node after its graph was released.
    pub(crate) fn released_error(&self, op: &str) -> crate::Error {
        crate::Error::Runtime(format!(
            "the graph of {op} (recorded at {}) was already released by an earlier traversal; pass retain_graph=True to the first traversal to traverse it again",
            self.location
        ))
    }

    /// Replaces the state by what `f` makes of it, under the lock.
    fn transition<R>(&self, f: impl FnOnce(Slot) -> (Slot, R)) -> R {
        let mut slot = self.lock();
        let (next, out) = f(std::mem::replace(&mut *slot, Slot::Released));
        *slot = next;
        out
    }

    /// Discards the state, returning it so the caller decides where it is dropped.
    pub fn take(&self) -> Option<Saved> {
        self.transition(|slot| match slot {
            Slot::Live(s) | Slot::Claimed(s) => (Slot::Released, Some(s)),
            Slot::Released => (Slot::Released, None),
        })
    }

    /// Marks the state as claimed by a traversal that will release it; fails when it was
    /// released or another traversal claimed it first.
    pub(crate) fn claim(&self, op: &str) -> Result<()> {
        let claimed = self.transition(|slot| match slot {
            Slot::Live(s) => (Slot::Claimed(s), true),
            other => (other, false),
        });
        if claimed {
            Ok(())
        } else {
            Err(self.released_error(op))
        }
    }

    /// Gives up a claim (the claiming traversal failed): the state is live again, unless
    /// someone released the node meanwhile.
    pub(crate) fn unclaim(&self) {
        self.transition(|slot| match slot {
            Slot::Claimed(s) => (Slot::Live(s), ()),
            other => (other, ()),
        });
    }

    /// Releases claimed state, returning it so the caller drops it outside the lock.
    pub(crate) fn release_claimed(&self) -> Option<Saved> {
        self.transition(|slot| match slot {
            Slot::Claimed(s) => (Slot::Released, Some(s)),
            other => (other, None),
        })
    }
}

/// A recorded differentiable operation: the autograd node of its result.
///
/// Implementations hold a [`SavedState`] and compute the vector-Jacobian product in
/// [`backward`](Operation::backward), returning one entry per saved input. Most ops are
/// written with `#[differentiable]`, which generates this impl.
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

    /// The saved positional tensor inputs in argument order; empty after release.
    fn inputs(&self) -> Vec<Tensor> {
        self.saved().inputs()
    }

    /// The saved input versions, one per saved input; empty after release.
    fn input_versions(&self) -> Vec<VersionSnapshot> {
        self.saved().input_versions()
    }

    /// The residual tensors kept for backward; empty after release.
    fn context(&self) -> Vec<Tensor> {
        self.saved().context()
    }

    /// Discards the saved inputs, versions and context.
    fn release(&self) {
        drop(self.saved().take());
    }

    /// Whether the node was released.
    fn is_released(&self) -> bool {
        self.saved().is_released()
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

/// Records `make(saved)` as `result`'s autograd node when [`should_record`] holds for
/// `inputs` and `result` is differentiable; otherwise builds nothing. Returns `result`.
///
/// This is the one place every op (hand-written or generated) records itself.
#[track_caller]
pub fn record<O: Operation>(
    result: Tensor,
    inputs: &[&Tensor],
    context: Vec<Tensor>,
    make: impl FnOnce(SavedState) -> O,
) -> Tensor {
    if should_record(inputs) && result.is_differentiable() {
        let node: Node = Arc::new(make(SavedState::new(inputs, context)));
        result.attach_node(node);
    }
    result
}

//! Autograd nodes: the `Operation` trait, the read-only view of a node, and node descriptions.

use std::fmt;
use std::sync::Arc;

use crate::error::Result;
pub(crate) use crate::graph::recording::own_result;
pub use crate::graph::recording::{record, should_record, Recording};
pub(crate) use crate::graph::saved::{Modification, TraversalToken};
pub use crate::graph::saved::{NodeId, Saved, SavedState, VersionSnapshot};
use crate::graph::vjp_call::{VjpCall, Written};
use crate::tensor::Tensor;

/// An autograd node, shared by its result tensor and the nodes that consume that result.
pub type Node = Arc<dyn Operation>;

/// A recorded differentiable operation: the autograd node of its result.
///
/// Implementations hold a [`SavedState`] and compute the vector-Jacobian product in
/// [`backward`](Operation::backward), returning one entry per saved input. Most ops are
/// written with `#[differentiable]`, which generates this impl.
///
/// The engine calls one method, [`vjp`](Operation::vjp), with a [`VjpCall`] that carries the
/// cotangents (of one result, of several, or a batch of them), the mask of wanted gradients
/// and the vector to write them into. Its provided form serves the call through the other
/// entry points, so a hand-written op implements `backward` and, when it can do better, one
/// of `backward_needed`, `backward_into`, `backward_outputs` or `backward_batched`.
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

    /// The engine's one entry point: runs the VJP for `call`'s cotangents, writing one gradient
    /// per saved input into `call.gradients`, and says how they are laid out. Provided: served
    /// by [`backward_into`](Operation::backward_into) for one cotangent,
    /// [`backward_outputs`](Operation::backward_outputs) for several and
    /// [`backward_batched`](Operation::backward_batched) for a batch. `#[differentiable]`
    /// implements it directly.
    fn vjp(&self, call: VjpCall<'_>) -> Result<Written> {
        crate::graph::vjp_call::by_entry_points(self, call)
    }

    /// A name for saved input `index` (a parameter name for macro-defined ops).
    fn input_name(&self, index: usize) -> Option<&str> {
        let _ = index;
        None
    }

    /// The vector-Jacobian product when the traversal knows which gradients it will use:
    /// `needed[i]` is false when input `i`'s gradient would be discarded (the input is not
    /// differentiable, or no requested tensor depends on it), so the op may skip computing it
    /// and return `None` there. The provided [`Operation::vjp`] reaches it through
    /// [`Operation::backward_into`]; the default ignores `needed`.
    fn backward_needed(&self, gradient: &Tensor, needed: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let _ = needed;
        self.backward(gradient)
    }

    /// [`Operation::backward_needed`] writing its gradients into `out` (on success, whatever
    /// `out` held before is replaced; after an error its contents are unspecified), so that a
    /// traversal reuses one vector for every node it runs instead of allocating one per node.
    /// The provided [`Operation::vjp`] calls this for one cotangent and hands it over: when
    /// nothing else holds it, the op may compute a gradient in its storage instead of
    /// allocating (see [`crate::kernel::map_owned`]). The default takes `backward_needed`'s
    /// vector. A wrapper forwarding to another node should forward `backward_needed`, whose
    /// gradients address their inputs exactly.
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
    /// is present). The provided [`Operation::vjp`] calls this for nodes whose
    /// [`Operation::outputs`] is not one; the default serves one-result nodes.
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

    /// For the engine: a stand-in for result `k` of another node (see
    /// [`Recording::finish_several`]).
    #[doc(hidden)]
    fn __result_of(&self) -> Option<(&Node, usize)> {
        None
    }
}

/// The `autograd_ctx` that result `index` (not the first) of a node with several results
/// holds: the node at that result. [`Tensor::autograd_ctx`] answers with the node itself.
pub(crate) struct ResultOf {
    pub(crate) node: Node,
    pub(crate) index: usize,
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

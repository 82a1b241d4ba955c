//! Recording a forward call: its inputs saved before the forward reads them, its node attached
//! to its result.

use std::panic::Location;
use std::sync::Arc;

use crate::error::Result;
use crate::graph::grad_mode::is_grad_enabled;
use crate::graph::op::{Node, Operation, ResultOf};
use crate::graph::saved::{SavedInputs, SavedState};
use crate::tensor::Tensor;

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

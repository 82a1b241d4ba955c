//! What a graph keeps alive between forward and backward: the storage its nodes' saved inputs
//! and residuals hold. Attention's two forms and activation checkpointing are judged by it.

use std::collections::HashSet;

use crate::error::Result;
use crate::graph::op::Node;
use crate::storage::carrier::CarrierId;
use crate::Tensor;

/// Bytes of distinct storage held by the saved state (saved inputs and residuals) of every
/// live node reachable from `t`; each carrier counts once however many tensors view it.
/// Released nodes hold nothing. A leaf has no graph: 0.
///
/// Saved leaves (parameters, data) count too: the graph keeps them alive. Values captured
/// inside a hand-written `Operation` outside its `SavedState` cannot be seen and do not count.
pub fn graph_bytes(t: &Tensor) -> Result<usize> {
    let mut nodes: HashSet<u64> = HashSet::new();
    let mut carriers: HashSet<CarrierId> = HashSet::new();
    let mut stack: Vec<Node> = t.autograd_ctx().into_iter().collect();
    let mut bytes = 0usize;
    while let Some(node) = stack.pop() {
        if !nodes.insert(node.id().get()) {
            continue;
        }
        let saved = node.saved();
        if saved.is_released() {
            continue;
        }
        for held in saved.inputs().iter().chain(saved.context().iter()) {
            for c in held.carriers() {
                if carriers.insert(c.id()) {
                    let width = c.dtype().size_of().unwrap_or(0);
                    bytes = bytes.saturating_add(c.len().saturating_mul(width));
                }
            }
        }
        for input in saved.inputs() {
            if let Some(child) = input.autograd_ctx() {
                stack.push(child);
            }
        }
    }
    Ok(bytes)
}

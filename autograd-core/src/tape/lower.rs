//! Lowering a recorded tensor graph to a `Tape<Tensor>`: one node per leaf tensor and per
//! recorded operation, parents before children, each operation's node calling its VJP.
//!
//! The lowered tape and the engine compute the same leaf gradients (the engine sums a node's
//! contributions in its own topological order, so sums may differ in the last bits), which lets
//! each check the other.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::engine::gradient;
use crate::engine::{run_vjp, Router, Step};
use crate::error::{bail, ensure, Result};
use crate::graph::op::{describe_input, describe_node, Node as OpNode, Operation};
use crate::graph::vjp_call::Cotangent;
use crate::tensor::Tensor;

use super::{Node, Tape};

fn op_key(op: &OpNode) -> u64 {
    op.id().get()
}

/// A recorded graph lowered to a tape, with the tape ids of the tensors it was built from.
pub struct Lowered {
    tape: Tape<Tensor>,
    output: usize,
    /// Tape id by tensor identity, for every tensor met while lowering.
    by_tensor: HashMap<u64, usize>,
    /// Tape id by operation identity.
    by_op: HashMap<u64, usize>,
    /// Keeps every tensor met alive, so the lowered tape can read their values.
    pinned: Vec<Tensor>,
}

impl fmt::Debug for Lowered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lowered")
            .field("nodes", &self.tape.size())
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

/// An operation being lowered: its result, its saved inputs, and the next input to visit.
struct Frame {
    value: Tensor,
    op: OpNode,
    inputs: Vec<Tensor>,
    context: Vec<Tensor>,
    next: usize,
}

impl Frame {
    fn new(value: Tensor, op: OpNode) -> Result<Frame> {
        ensure!(
            op.outputs() == 1,
            NotImplemented,
            "lowering {}: a node with {} results has no tape form (a tape node has one value)",
            describe_node(&*op),
            op.outputs()
        );
        let (inputs, context) = op.saved().with(&describe_node(&*op), |s| {
            let inputs = s.inputs.iter().map(|(t, _)| t.clone()).collect();
            (inputs, s.context().to_vec())
        })?;
        Ok(Frame {
            value,
            op,
            inputs,
            context,
            next: 0,
        })
    }
}

impl Tape<Tensor> {
    /// Lowers the graph recorded for `output` into a tape whose last node is `output`.
    ///
    /// Leaves (tensors without an autograd node) become nodes without parents; a leaf that is
    /// not differentiable does not require a gradient. Each recorded operation becomes one node
    /// whose VJP checks the saved input versions, calls [`Operation::backward`] with graph
    /// construction disabled, and validates each input gradient as the engine does. The graph
    /// is walked with explicit stacks, so its depth is not limited by the thread's stack.
    ///
    /// The tape shares the graph (it does not release it): run it before a traversal that
    /// releases the graph, or traverse with `retain_graph`.
    pub fn lower(output: &Tensor) -> Result<Lowered> {
        let mut lowered = Lowered {
            tape: Tape::empty(),
            output: 0,
            by_tensor: HashMap::new(),
            by_op: HashMap::new(),
            pinned: Vec::new(),
        };
        let Some(root) = output.autograd_ctx() else {
            lowered.output = lowered.add_leaf(output);
            return Ok(lowered);
        };
        let mut open: HashSet<u64> = HashSet::from([op_key(&root)]);
        let mut stack = vec![Frame::new(output.clone(), root)?];
        while let Some(top) = stack.last_mut() {
            if let Some(child) = top.inputs.get(top.next).cloned() {
                top.next += 1;
                if lowered.id_of(&child).is_some() {
                    continue;
                }
                let Some(op) = child.autograd_ctx() else {
                    lowered.add_leaf(&child);
                    continue;
                };
                let key = op_key(&op);
                ensure!(
                    open.insert(key),
                    Runtime,
                    "the autograd graph has a cycle through {} (a node was assigned as the autograd_ctx of one of its own inputs)",
                    describe_node(&*op)
                );
                stack.push(Frame::new(child, op)?);
            } else if let Some(frame) = stack.pop() {
                open.remove(&op_key(&frame.op));
                lowered.output = lowered.add_op(frame)?;
            }
        }
        Ok(lowered)
    }
}

impl Lowered {
    /// The lowered tape.
    pub fn tape(&self) -> &Tape<Tensor> {
        &self.tape
    }

    /// The tape and the id of the output node.
    pub fn into_parts(self) -> (Tape<Tensor>, usize) {
        (self.tape, self.output)
    }

    /// The id of the output node (the last node).
    pub fn output(&self) -> usize {
        self.output
    }

    /// The tape id of `t`: of a leaf by tensor identity, of an operation's result by tensor
    /// identity or, for another handle sharing that result's autograd node, by the node.
    /// `None` when `t` is not part of the lowered graph.
    pub fn id_of(&self, t: &Tensor) -> Option<usize> {
        if let Some(&id) = self.by_tensor.get(&t.id()) {
            return Some(id);
        }
        let op = t.autograd_ctx()?;
        self.by_op.get(&op_key(&op)).copied()
    }

    /// [`Tape::backward_dense_all`] from the output with cotangent `seed`, validated against
    /// the output as the engine validates a cotangent: one gradient per node id.
    pub fn backward_all(&self, seed: &Tensor) -> Result<Vec<Tensor>> {
        let value = self
            .tape
            .value(self.output)
            .unwrap_or_else(|| unreachable!("a lowered tape has its output node"));
        // the output checks of the engine's `grad`
        value.ensure_differentiable("backward_all of a lowered output")?;
        crate::error::ensure!(
            value.subtensor_count() == 1,
            NotImplemented,
            "backward_all needs an output with one subtensor, this one has {}",
            value.subtensor_count()
        );
        let seed =
            gradient::check_cotangent(value, seed.clone()).map_err(|e| e.context("the seed"))?;
        // The sweep carries cotangents per logical position, as the engine does; a broadcast
        // node's gradient is folded per storage slot at the end, as the engine folds `.grad`.
        let grads = self.tape.backward_dense_all(self.output, seed)?;
        grads
            .into_iter()
            .enumerate()
            .map(|(id, g)| match self.tape.value(id) {
                Some(value) if value.is_differentiable() => gradient::fold_for(value, g),
                _ => Ok(g),
            })
            .collect()
    }

    fn pin(&mut self, t: &Tensor, id: usize) {
        self.by_tensor.insert(t.id(), id);
        self.pinned.push(t.clone());
    }

    fn add_leaf(&mut self, leaf: &Tensor) -> usize {
        let node = Node::leaf(leaf.clone())
            .with_requires_grad(leaf.is_differentiable())
            .with_owns_value(false);
        let id = self.tape.add_node(node);
        self.pin(leaf, id);
        id
    }

    fn add_op(&mut self, frame: Frame) -> Result<usize> {
        let Frame {
            value,
            op,
            inputs,
            context,
            ..
        } = frame;
        let mut parents = Vec::with_capacity(inputs.len());
        for (j, t) in inputs.iter().enumerate() {
            let Some(id) = self.id_of(t) else {
                bail!(
                    Runtime,
                    "lowering {}: {} was not lowered before its consumer",
                    describe_node(&*op),
                    describe_input(&*op, j)
                )
            };
            parents.push(id);
        }
        let input_carriers: HashSet<_> = inputs
            .iter()
            .flat_map(Tensor::carriers)
            .map(|c| c.id())
            .collect();
        let owns_value = !value
            .carriers()
            .iter()
            .any(|c| input_carriers.contains(&c.id()));
        let vjp = {
            let op = op.clone();
            let parents = parents.clone();
            move |g: &Tensor| operation_vjp(&*op, &parents, g)
        };
        let node = Node::new(value.clone(), parents, vjp)
            .named(op.name())
            .with_requires_grad(value.is_differentiable())
            .with_owns_value(owns_value)
            .with_cleanup(context);
        let id = self.tape.add_node(node);
        self.by_op.insert(op_key(&op), id);
        self.pin(&value, id);
        Ok(id)
    }
}

/// The VJP of a lowered operation node: the engine's own step (version checks, backward under
/// `no_grad`, count and layout validation), with contributions addressed to tape ids.
fn operation_vjp(
    op: &dyn Operation,
    parents: &[usize],
    g: &Tensor,
) -> Result<Vec<(usize, Tensor)>> {
    let mut route = ToParents {
        parents,
        out: Vec::with_capacity(parents.len()),
    };
    let step = Step {
        cotangent: Cotangent::One(g.clone()),
        result: None,
        claim: None,
    };
    run_vjp(op, step, &mut Vec::new(), &mut route)?;
    Ok(route.out)
}

/// Every gradient of a lowered node, addressed to the tape id of its input.
struct ToParents<'p> {
    parents: &'p [usize],
    out: Vec<(usize, Tensor)>,
}

impl Router for ToParents<'_> {
    fn wants(&mut self, _: usize, _: &Tensor) -> bool {
        true
    }

    fn send(&mut self, j: usize, _: &Tensor, g: Tensor) -> Result<()> {
        self.out.push((self.parents[j], g));
        Ok(())
    }
}

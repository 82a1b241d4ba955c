//! Reverse-mode traversal: discover the graph, propagate cotangents in topological order into
//! staging, and commit (accumulate `.grad`, release nodes) only when everything succeeded.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{bail, Result};
use crate::grad_mode::no_grad;
use crate::gradient;
use crate::op::{describe_input, describe_node, Node};
use crate::tensor::Tensor;

fn node_key(node: &Node) -> usize {
    Arc::as_ptr(node).cast::<()>() as usize
}

/// One reached node in topological order with its saved inputs and their producers.
struct Step {
    node: Node,
    inputs: Vec<Tensor>,
    /// For each saved input, the step of its producing node.
    producers: Vec<Option<usize>>,
    /// Whether propagating through this node can reach a requested tensor.
    useful: bool,
}

impl Step {
    fn new(node: Node) -> Step {
        Step {
            node,
            inputs: Vec::new(),
            producers: Vec::new(),
            useful: true,
        }
    }
}

/// The reached graph in topological order (every consumer before its producers), root first.
pub(crate) struct Plan {
    steps: Vec<Step>,
}

impl Plan {
    /// Discovers every node reachable from `root`, refusing released nodes before anything
    /// else runs, and orders them topologically with explicit stacks.
    pub(crate) fn discover(root: &Node) -> Result<Plan> {
        let mut index: HashMap<usize, usize> = HashMap::new();
        let mut found: Vec<Step> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        let mut stack = vec![0usize];
        index.insert(node_key(root), 0);
        found.push(Step::new(root.clone()));
        pending.push(0);
        while let Some(i) = stack.pop() {
            let node = found[i].node.clone();
            let inputs: Vec<Tensor> = node.saved().with(&describe_node(&*node), |s| {
                s.inputs.iter().map(|(t, _)| t.clone()).collect()
            })?;
            let mut producers = Vec::with_capacity(inputs.len());
            for t in &inputs {
                let Some(child) = t.autograd_ctx() else {
                    producers.push(None);
                    continue;
                };
                let key = node_key(&child);
                let j = *index.entry(key).or_insert_with(|| {
                    found.push(Step::new(child));
                    pending.push(0);
                    stack.push(found.len() - 1);
                    found.len() - 1
                });
                pending[j] += 1;
                producers.push(Some(j));
            }
            found[i].inputs = inputs;
            found[i].producers = producers;
        }
        // Kahn's algorithm from the root: a node is ready once every reached consumer ran.
        let mut order = Vec::with_capacity(found.len());
        let mut ready = vec![0usize];
        while let Some(i) = ready.pop() {
            order.push(i);
            for &p in found[i].producers.iter().flatten() {
                pending[p] -= 1;
                if pending[p] == 0 {
                    ready.push(p);
                }
            }
        }
        if order.len() != found.len() {
            bail!(Runtime, "the autograd graph has a cycle (a node was assigned as the autograd_ctx of one of its own inputs)");
        }
        let mut position = vec![0usize; found.len()];
        for (pos, &i) in order.iter().enumerate() {
            position[i] = pos;
        }
        let mut slots: Vec<Option<Step>> = found.into_iter().map(Some).collect();
        let steps = order
            .iter()
            .filter_map(|&i| slots[i].take())
            .map(|mut step| {
                for p in step.producers.iter_mut().flatten() {
                    *p = position[*p];
                }
                step
            })
            .collect();
        Ok(Plan { steps })
    }

    /// Marks the steps through which a tensor accepted by `wanted` can be reached.
    pub(crate) fn prune(&mut self, wanted: &dyn Fn(&Tensor) -> bool) {
        for i in (0..self.steps.len()).rev() {
            let step = &self.steps[i];
            let useful = step
                .inputs
                .iter()
                .zip(&step.producers)
                .any(|(t, p)| wanted(t) || p.is_some_and(|p| self.steps[p].useful));
            self.steps[i].useful = useful;
        }
    }

    /// Releases every reached node.
    pub(crate) fn release(&self) {
        for s in &self.steps {
            s.node.release();
        }
    }
}

/// Where propagated gradients go.
pub(crate) enum Sink<'a> {
    /// `backward`: leaves, and non-leaves that asked to retain their gradient.
    Accumulate,
    /// Functional `grad`: only the requested tensors, by identity.
    Collect(&'a dyn Fn(&Tensor) -> bool),
}

/// Gradients staged per tensor, summed in the order they arrive.
#[derive(Default)]
pub(crate) struct Staging {
    entries: HashMap<usize, (Tensor, Tensor)>,
}

impl Staging {
    pub(crate) fn add(&mut self, target: &Tensor, g: Tensor) -> Result<()> {
        match self.entries.get_mut(&target.id()) {
            Some((_, sum)) => *sum = gradient::add(sum, &g)?,
            None => {
                self.entries.insert(target.id(), (target.clone(), g));
            }
        }
        Ok(())
    }

    pub(crate) fn get(&self, target: &Tensor) -> Option<&Tensor> {
        self.entries.get(&target.id()).map(|(_, g)| g)
    }

    /// Adds every staged gradient into its tensor's `.grad` as a detached copy in fresh
    /// storage of the tensor's carrier class. All new values are computed before any is set.
    pub(crate) fn commit(self) -> Result<()> {
        let mut entries: Vec<(Tensor, Tensor)> = self.entries.into_values().collect();
        entries.sort_by_key(|(t, _)| t.id());
        let mut guards = Vec::with_capacity(entries.len());
        let mut new = Vec::with_capacity(entries.len());
        for (t, g) in &entries {
            let guard = t.state();
            let class = t.carrier()?;
            let value = match &guard.grad {
                Some(old) => gradient::add(&gradient::detached_copy(g, class)?, old)?,
                None => gradient::detached_copy(g, class)?,
            };
            new.push(value);
            guards.push(guard);
        }
        for (mut guard, value) in guards.into_iter().zip(new) {
            guard.grad = Some(value);
        }
        Ok(())
    }
}

/// Runs the plan from `root_cotangent`, staging what `sink` wants. Version checks happen just
/// before each node runs; nothing outside `staging` changes.
pub(crate) fn propagate(
    plan: &Plan,
    root_cotangent: Tensor,
    sink: &Sink<'_>,
    staging: &mut Staging,
) -> Result<()> {
    let mut cotangents: Vec<Option<Tensor>> = vec![None; plan.steps.len()];
    if let Some(first) = cotangents.first_mut() {
        *first = Some(root_cotangent);
    }
    for (i, step) in plan.steps.iter().enumerate() {
        let Some(g) = cotangents[i].take() else {
            continue;
        };
        if !step.useful {
            continue;
        }
        let node = &*step.node;
        check_versions(node)?;
        let grads = {
            let _guard = no_grad();
            node.backward(&g)
                .map_err(|e| e.context(format!("backward of {}", describe_node(node))))?
        };
        if grads.len() != step.inputs.len() {
            bail!(
                Value,
                "backward of {} returned {} gradients for {} saved tensor inputs",
                describe_node(node),
                grads.len(),
                step.inputs.len()
            );
        }
        for (j, (gi, input)) in grads.into_iter().zip(&step.inputs).enumerate() {
            let Some(gi) = gi else { continue };
            if !input.is_differentiable() {
                continue;
            }
            let gi = gradient::buffer_for(input, &gi).map_err(|e| {
                e.context(format!(
                    "gradient for {} (recorded at {})",
                    describe_input(node, j),
                    node.saved().location()
                ))
            })?;
            let producer = step.producers[j];
            match sink {
                Sink::Accumulate => {
                    if producer.is_none() || input.retains_grad() {
                        staging.add(input, gi.clone())?;
                    }
                }
                Sink::Collect(wanted) => {
                    if wanted(input) {
                        staging.add(input, gi.clone())?;
                    }
                }
            }
            if let Some(p) = producer {
                if plan.steps[p].useful {
                    cotangents[p] = Some(match cotangents[p].take() {
                        Some(sum) => gradient::add(&sum, &gi)?,
                        None => gi,
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_versions(node: &dyn crate::op::Operation) -> Result<()> {
    let what = describe_node(node);
    let change = node.saved().with(&what, |s| {
        s.inputs
            .iter()
            .enumerate()
            .find_map(|(i, (t, snap))| snap.first_change(t).map(|c| (i, c)))
    })?;
    match change {
        Some((i, (id, saved, now))) => bail!(
            Runtime,
            "in-place modification of {} (recorded at {}): {id} is at version {now} but the forward pass saved version {saved}; run backward before mutating saved tensors",
            describe_input(node, i),
            node.saved().location()
        ),
        None => Ok(()),
    }
}

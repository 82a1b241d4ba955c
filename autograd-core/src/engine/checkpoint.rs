//! Activation checkpointing: a region whose interior graph is not kept, replayed during
//! backward inside a nested, isolated functional `grad`.
//!
//! The forward run keeps only the boundary: the region's inputs and declared dependencies are
//! the node's saved inputs, so the outer traversal version-checks them and routes the
//! gradients the replay returns for them exactly as for any op's inputs (a parameter shared by
//! several checkpointed blocks sums its contributions in the outer staging; nothing is cleared
//! or counted twice). The replay runs a functional `grad`, which never reads or writes `.grad`,
//! from inside the node's VJP: the engine is re-entrant.

use std::any::TypeId;
use std::sync::Arc;

use crate::engine::autograd::{grad, GradOptions};
use crate::engine::custom_gradient::guarded;
use crate::engine::IdSet;
use crate::error::{bail, ensure, Result};
use crate::graph::grad_mode::{no_grad, GradModeGuard};
use crate::graph::op::{NodeId, Operation, Recording, Saved, SavedState};
use crate::layout::{Aliasing, Layout};
use crate::storage::dtype::DType;
use crate::tensor::Tensor;

/// The name of every node [`checkpoint`] records (drawn distinctly by `to_dot`).
pub(crate) const CHECKPOINT: &str = "checkpoint";

/// A region: the replay arguments in, the region's result out.
type Region = dyn Fn(&[Tensor]) -> Result<Tensor> + Send + Sync;

/// Evaluates `recompute(inputs)` without keeping its interior graph, and returns its result
/// with one `checkpoint` node that keeps only `inputs` and `dependencies`; backward runs the
/// region again and differentiates the replay.
///
/// `recompute` receives fresh leaf aliases of `inputs` (handles to the same storage with no
/// graph; a broadcast input is passed as a compact copy) and must compute from those, not from
/// the originals. Every differentiable leaf the region reads and wants a gradient for
/// (parameters) must be listed in `dependencies`: the replay returns their gradients to the
/// outer traversal, which accumulates them into `.grad` like any other leaf's. Other leaves
/// the region reads are constants.
///
/// The region must be deterministic (same result layout, shape, dtype and carrier class, same
/// values) for the gradients to be those of the first run; that is the caller's
/// responsibility, and only the metadata is checked. Dropout-like randomness needs its seed
/// fixed in the closure.
///
/// Errors: `Error::Value` for a dependency that is not a differentiable leaf, is listed twice
/// or is also an input; `Error::NotImplemented` for a multi-subtensor input or a dependency
/// whose layout aliases storage. During backward, `Error::Runtime` when the replay reaches a
/// tensor with a graph the region did not make (captured outside graph state, or an original
/// input used instead of its alias), when the replayed result differs from the first run's in
/// layout, dtype or carrier class, or when `recompute` fails or panics. A failing replay fails
/// the traversal as a failing VJP does: nothing is accumulated or released.
///
/// The first run's graph construction is disabled; nothing is recorded when graph
/// construction is disabled or no input or dependency is differentiable.
#[track_caller]
pub fn checkpoint<F>(inputs: &[&Tensor], dependencies: &[&Tensor], recompute: F) -> Result<Tensor>
where
    F: Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
{
    validate_boundary(inputs, dependencies)?;
    let boundary: Vec<&Tensor> = inputs.iter().chain(dependencies).copied().collect();
    let recording = Recording::begin(&boundary);
    let result = {
        let _guard = no_grad();
        let args = replay_args(inputs)?;
        guarded("checkpoint: the first run of recompute", || {
            recompute(&args)
        })?
    };
    let Some(recording) = recording else {
        return Ok(result);
    };
    let first = Signature::of(&result);
    Ok(recording.finish(result, Vec::new(), |saved| Checkpoint {
        saved,
        region: Box::new(recompute),
        inputs: inputs.len(),
        first,
    }))
}

/// The checks of [`checkpoint`]'s arguments, before anything runs.
fn validate_boundary(inputs: &[&Tensor], dependencies: &[&Tensor]) -> Result<()> {
    for (i, t) in inputs.iter().enumerate() {
        ensure!(
            t.subtensor_count() == 1,
            NotImplemented,
            "checkpoint: input {i} has {} subtensors; checkpoint takes one-subtensor inputs",
            t.subtensor_count()
        );
    }
    let mut seen = IdSet::default();
    for (k, d) in dependencies.iter().enumerate() {
        ensure!(
            d.is_differentiable(),
            Value,
            "checkpoint: dependency {k} is {}, not a differentiable (Float32) tensor",
            d.dtype()
        );
        ensure!(
            d.autograd_ctx().is_none(),
            Value,
            "checkpoint: dependency {k} has a graph ({}); dependencies must be leaves (parameters), pass a computed tensor as an input",
            d.autograd_ctx().map_or_else(String::new, |n| n.name().to_owned())
        );
        ensure!(
            seen.insert(d.id()),
            Value,
            "checkpoint: dependency {k} is listed twice"
        );
        ensure!(
            !inputs.iter().any(|t| t.same_tensor(d)),
            Value,
            "checkpoint: dependency {k} is also an input; list it once"
        );
        ensure!(
            d.subtensor_count() == 1 && d.layout().aliasing() == Aliasing::None,
            NotImplemented,
            "checkpoint: dependency {k} (layout {}) aliases storage or has several subtensors; pass it as an input",
            d.layout()
        );
    }
    Ok(())
}

/// Fresh leaves standing for `inputs` in a run of the region: an alias of each (same storage,
/// no graph), or a compact copy of a broadcast input, whose gradient must stay per position.
fn replay_args(inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    inputs
        .iter()
        .map(|t| match t.layout().aliasing() {
            Aliasing::Broadcast if t.is_differentiable() => t.contiguous(),
            _ => Ok(t.detach()),
        })
        .collect()
}

/// What a replay must reproduce of the first run's result. The carrier class is kept by
/// identity and name, not by a carrier handle, which would keep the first result's storage
/// alive.
struct Signature {
    layout: Arc<Layout>,
    dtype: DType,
    class: TypeId,
    class_name: &'static str,
}

impl Signature {
    fn of(t: &Tensor) -> Signature {
        Signature {
            layout: t.layout_arc(),
            dtype: t.dtype().clone(),
            class: t.part_carrier(0).class_id(),
            class_name: t.part_carrier(0).class_name(),
        }
    }

    /// Fails with `Error::Runtime` unless `replayed` matches the first run.
    fn check(&self, replayed: &Tensor) -> Result<()> {
        let why = if replayed.dtype() != &self.dtype {
            format!("dtype {} (first run: {})", replayed.dtype(), self.dtype)
        } else if replayed.layout() != &*self.layout {
            format!(
                "layout {} (first run: {}); a shape change means recompute is not deterministic",
                replayed.layout(),
                self.layout
            )
        } else if replayed.subtensor_count() != 1
            || replayed.part_carrier(0).class_id() != self.class
        {
            format!(
                "a {} carrier (first run: {})",
                replayed.part_carrier(0).class_name(),
                self.class_name
            )
        } else {
            return Ok(());
        };
        bail!(
            Runtime,
            "checkpoint: the replay of recompute produced {why}; the region must be deterministic"
        )
    }
}

/// The node of [`checkpoint`]: saved inputs are the region's inputs, then its dependencies.
struct Checkpoint {
    saved: SavedState,
    region: Box<Region>,
    /// How many of the saved inputs are region inputs (the rest are dependencies).
    inputs: usize,
    first: Signature,
}

impl Operation for Checkpoint {
    fn name(&self) -> &str {
        CHECKPOINT
    }

    fn saved(&self) -> &SavedState {
        &self.saved
    }

    fn backward(&self, gradient: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let n = self.saved.with(CHECKPOINT, Saved::input_count)?;
        self.backward_needed(gradient, &vec![true; n])
    }

    fn backward_needed(&self, gradient: &Tensor, needed: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let boundary: Vec<Tensor> = self
            .saved
            .with(CHECKPOINT, |s| s.inputs().cloned().collect())?;
        let (inputs, dependencies) = boundary.split_at(self.inputs.min(boundary.len()));
        let args = replay_args(&inputs.iter().collect::<Vec<_>>())?;
        let (output, start) = {
            let _guard = GradModeGuard::set(true);
            let start = NodeId::watermark();
            let output = guarded("checkpoint: the replay of recompute", || {
                (self.region)(&args)
            })?;
            (output, start)
        };
        self.first.check(&output)?;
        ensure_closed(&output, inputs, start)?;
        // The requested leaves: the needed differentiable aliases, then the needed dependencies.
        let wanted: Vec<(usize, &Tensor)> = args
            .iter()
            .chain(dependencies)
            .enumerate()
            .filter(|(j, t)| needed.get(*j).copied().unwrap_or(true) && t.is_differentiable())
            .collect();
        let mut grads = vec![None; boundary.len()];
        if wanted.is_empty() {
            return Ok(grads);
        }
        let targets: Vec<&Tensor> = wanted.iter().map(|(_, t)| *t).collect();
        // The cotangent comes per logical position in any injective layout (the VJP contract);
        // `grad` takes the replayed output's own.
        let gradient = output
            .gradient_like(gradient.clone())
            .map_err(|e| e.context("checkpoint: the cotangent of the region's output"))?;
        let found = grad(&output, &targets, &gradient, GradOptions::default())
            .map_err(|e| e.context("checkpoint: differentiating the replay"))?;
        for ((j, _), g) in wanted.into_iter().zip(found) {
            grads[j] = g;
        }
        Ok(grads)
    }

    fn input_name(&self, index: usize) -> Option<&str> {
        Some(if index < self.inputs {
            "region input"
        } else {
            "dependency"
        })
    }
}

/// Fails with `Error::Runtime` when the graph of the replayed `output` reaches a tensor with a
/// node recorded before the replay began (graph state the region captured from outside) or
/// one of the original `inputs` (which the region must read through its arguments), or when
/// the output is one of those inputs itself (its gradient would be lost). Walks the
/// replay's nodes once each, iteratively.
fn ensure_closed(output: &Tensor, inputs: &[Tensor], start: NodeId) -> Result<()> {
    if let Some(i) = inputs.iter().position(|x| x.same_tensor(output)) {
        bail!(Runtime, "checkpoint: recompute returned input {i} itself, not a result computed from the argument standing for it; its gradient would be lost");
    }
    let mut seen = IdSet::default();
    let mut stack: Vec<_> = output.autograd_ctx().into_iter().collect();
    if stack.iter().any(|n| n.id() < start) {
        bail!(Runtime, "checkpoint: recompute returned a tensor whose graph was recorded outside the region; the replay must compute its result from its arguments");
    }
    while let Some(node) = stack.pop() {
        if !seen.insert(node.id().get()) {
            continue;
        }
        let held: Vec<Tensor> = node.saved().with(node.name(), |s| {
            s.inputs().chain(s.context()).cloned().collect()
        })?;
        for t in held {
            if let Some(i) = inputs.iter().position(|x| x.same_tensor(&t)) {
                bail!(Runtime, "checkpoint: recompute read input {i} itself, not the argument standing for it; a replay must compute from its arguments");
            }
            let Some(next) = t.autograd_ctx() else {
                continue;
            };
            ensure!(
                next.id() >= start,
                Runtime,
                "checkpoint: recompute reaches a tensor produced by {} (recorded at {}) outside the region: captured graph state; pass it as an input, or declare a leaf parameter as a dependency",
                next.name(),
                next.saved().location()
            );
            stack.push(next);
        }
    }
    Ok(())
}

//! Where a traversal's gradients go: its mode. `backward` accumulates into `.grad`, functional
//! `grad` collects the requested tensors' gradients, and either may be profiled.

use std::time::Instant;

use crate::engine::profile::BackwardProfile;
use crate::engine::staging::Staging;
use crate::error::Result;
use crate::graph::op::Operation;
use crate::tensor::Tensor;

/// A traversal's mode: which gradients it keeps, where, and what it observes of each VJP.
/// (Batched and several-result traversals differ in their cotangents, not their sink: see
/// [`super::Pending`].)
pub(crate) trait Sink {
    /// Whether the gradient reaching `input` is kept; `leaf` when no node of the graph
    /// produced `input`.
    fn keeps(&self, input: &Tensor, leaf: bool) -> bool;
    /// Keeps `g`, a gradient of `input`.
    fn keep(&mut self, input: &Tensor, g: Tensor) -> Result<()>;
    /// A VJP is about to run.
    fn before_vjp(&mut self) {}
    /// `node`'s VJP ran and handed on `bytes` of gradients.
    fn after_vjp(&mut self, node: &dyn Operation, bytes: usize) {
        let _ = (node, bytes);
    }
}

/// `backward`: the gradients of leaves, and of non-leaves that asked to retain theirs, staged
/// for `.grad`.
pub(crate) struct Accumulate<'s>(pub(crate) &'s mut Staging);

impl Sink for Accumulate<'_> {
    fn keeps(&self, input: &Tensor, leaf: bool) -> bool {
        leaf || input.retains_grad()
    }
    fn keep(&mut self, input: &Tensor, g: Tensor) -> Result<()> {
        self.0.add(input, g)
    }
}

/// Functional `grad`: the gradients of the requested tensors only, by identity.
pub(crate) struct Collect<'s> {
    pub(crate) wanted: &'s dyn Fn(&Tensor) -> bool,
    pub(crate) staging: &'s mut Staging,
}

impl Sink for Collect<'_> {
    fn keeps(&self, input: &Tensor, _leaf: bool) -> bool {
        (self.wanted)(input)
    }
    fn keep(&mut self, input: &Tensor, g: Tensor) -> Result<()> {
        self.staging.add(input, g)
    }
}

/// Another sink, with every VJP timed and its gradients' bytes counted into a profile.
pub(crate) struct Profiled<'p, S> {
    pub(crate) sink: S,
    pub(crate) profile: &'p mut BackwardProfile,
    started: Option<Instant>,
}

impl<'p, S: Sink> Profiled<'p, S> {
    pub(crate) fn new(sink: S, profile: &'p mut BackwardProfile) -> Profiled<'p, S> {
        Profiled {
            sink,
            profile,
            started: None,
        }
    }
}

impl<S: Sink> Sink for Profiled<'_, S> {
    fn keeps(&self, input: &Tensor, leaf: bool) -> bool {
        self.sink.keeps(input, leaf)
    }
    fn keep(&mut self, input: &Tensor, g: Tensor) -> Result<()> {
        self.sink.keep(input, g)
    }
    fn before_vjp(&mut self) {
        self.started = Some(Instant::now());
    }
    fn after_vjp(&mut self, node: &dyn Operation, bytes: usize) {
        if let Some(t0) = self.started.take() {
            self.profile.record(node, t0.elapsed(), bytes);
        }
    }
}

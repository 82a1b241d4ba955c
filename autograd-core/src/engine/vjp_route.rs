//! The traversal's routing of one step's gradients.

use crate::engine::pending::Pending;
use crate::engine::plan::{Plan, Producers, Span, NO_PRODUCER};
use crate::engine::sink::Sink;
use crate::engine::vjp::Router;
use crate::error::Result;
use crate::tensor::Tensor;

/// Where step `i`'s input gradients go: to the sink when it keeps them, and on to the result
/// slot of the input's producer when that step is useful.
pub(super) struct Route<'r, S> {
    plan: &'r Plan,
    span: Span,
    producers: Producers<'r>,
    sink: &'r mut S,
    pending: &'r mut Pending,
    /// Each input's route `(kept, forwarded to)`, worked out when the VJP is told what it must
    /// compute and read back when its gradient arrives (most nodes have at most four inputs).
    known: [(bool, Option<usize>); 4],
}

impl<'r, S: Sink> Route<'r, S> {
    pub(super) fn new(plan: &'r Plan, i: usize, sink: &'r mut S, pending: &'r mut Pending) -> Self {
        let span = plan.span(i);
        Route {
            plan,
            span,
            producers: span.producers(&plan.producers),
            sink,
            pending,
            known: [(false, None); 4],
        }
    }

    fn route(&self, j: usize, input: &Tensor) -> (bool, Option<usize>) {
        let producer = self.producers.as_slice()[j];
        let producer = (producer != NO_PRODUCER).then_some(producer as usize);
        let keep = self.sink.keeps(input, producer.is_none());
        let forward = producer
            .filter(|&p| self.plan.useful(p))
            .map(|p| self.plan.edge_slot(self.span, j, p));
        (keep, forward)
    }
}

impl<S: Sink> Router for Route<'_, S> {
    fn wants(&mut self, j: usize, input: &Tensor) -> bool {
        let (keep, forward) = self.route(j, input);
        if let Some(known) = self.known.get_mut(j) {
            *known = (keep, forward);
        }
        keep || forward.is_some()
    }

    fn send(&mut self, j: usize, input: &Tensor, g: Tensor) -> Result<()> {
        let route = match self.known.get(j) {
            Some(&known) => known,
            None => self.route(j, input),
        };
        match route {
            (true, Some(slot)) => {
                self.sink.keep(input, g.clone())?;
                self.pending.add_from(slot, input, g)
            }
            (true, None) => self.sink.keep(input, g),
            (false, Some(slot)) => self.pending.add_from(slot, input, g),
            (false, None) => Ok(()),
        }
    }
}

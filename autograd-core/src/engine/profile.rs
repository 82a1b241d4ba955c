//! An opt-in profile of one backward traversal: where backward spends its time, per node and
//! per op name, and how many bytes of gradients each produced.
//!
//! The engine measures only when a profile is asked for ([`Tensor::backward_profiled`]); an
//! ordinary traversal pays one branch per node and allocates nothing for it.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::graph::op::{NodeId, Operation};
use crate::tensor::Tensor;

/// What one node's VJP cost in a profiled traversal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProfile {
    /// The node.
    pub node: NodeId,
    /// Its op name.
    pub op: String,
    /// Time of its VJP, with the engine's checks of its results (a checkpoint's includes its
    /// replay and nested traversal).
    pub time: Duration,
    /// Bytes of the gradients it produced that the traversal used (4 per Float32 element).
    pub gradient_bytes: usize,
}

/// What all nodes of one op name cost in a profiled traversal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpProfile {
    /// The op name.
    pub op: String,
    /// How many of its nodes ran.
    pub calls: usize,
    /// Their total VJP time.
    pub time: Duration,
    /// The bytes of gradients they produced.
    pub gradient_bytes: usize,
}

/// The profile of one backward traversal, from [`Tensor::backward_profiled`]: per node in the
/// order they ran, and per op name ([`BackwardProfile::ops`]). `Display` prints a table.
#[derive(Debug, Clone, Default)]
pub struct BackwardProfile {
    nodes: Vec<NodeProfile>,
    /// Where each node's figures are in `nodes`, so that drawing a graph of a million nodes
    /// with their figures looks each up once.
    index: crate::runtime::ids::IdMap<usize>,
    total: Duration,
}

impl BackwardProfile {
    /// Every node whose VJP ran, in the order it ran.
    pub fn nodes(&self) -> &[NodeProfile] {
        &self.nodes
    }

    /// The figures of node `id`, when it ran.
    pub fn node(&self, id: NodeId) -> Option<&NodeProfile> {
        self.index.get(&id.get()).map(|&i| &self.nodes[i])
    }

    /// Per op name, the most expensive first (ties by name).
    pub fn ops(&self) -> Vec<OpProfile> {
        let mut by_name: HashMap<&str, OpProfile> = HashMap::new();
        for n in &self.nodes {
            let e = by_name.entry(&n.op).or_insert_with(|| OpProfile {
                op: n.op.clone(),
                calls: 0,
                time: Duration::ZERO,
                gradient_bytes: 0,
            });
            e.calls += 1;
            e.time += n.time;
            e.gradient_bytes = e.gradient_bytes.saturating_add(n.gradient_bytes);
        }
        let mut ops: Vec<OpProfile> = by_name.into_values().collect();
        ops.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.op.cmp(&b.op)));
        ops
    }

    /// Wall time of the whole traversal: discovery, every VJP, and the commit.
    pub fn total(&self) -> Duration {
        self.total
    }

    /// Records one node's VJP (the engine calls this only while profiling).
    pub(crate) fn record(&mut self, node: &dyn Operation, time: Duration, gradient_bytes: usize) {
        self.index.insert(node.saved().id().get(), self.nodes.len());
        self.nodes.push(NodeProfile {
            node: node.saved().id(),
            op: node.name().to_owned(),
            time,
            gradient_bytes,
        });
    }
}

impl fmt::Display for BackwardProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ops = self.ops();
        let width = ops.iter().map(|o| o.op.len()).max().unwrap_or(2).max(5);
        let vjp: Duration = ops.iter().map(|o| o.time).sum();
        writeln!(
            f,
            "{:<width$} {:>6} {:>12} {:>7} {:>14}",
            "op", "calls", "time (µs)", "share", "grad bytes"
        )?;
        for o in &ops {
            let share = if vjp.is_zero() {
                0.0
            } else {
                100.0 * o.time.as_secs_f64() / vjp.as_secs_f64()
            };
            writeln!(
                f,
                "{:<width$} {:>6} {:>12.1} {:>6.1}% {:>14}",
                o.op,
                o.calls,
                o.time.as_secs_f64() * 1e6,
                share,
                o.gradient_bytes
            )?;
        }
        write!(
            f,
            "{:<width$} {:>6} {:>12.1}  (traversal total {:.1} µs)",
            "all",
            self.nodes.len(),
            vjp.as_secs_f64() * 1e6,
            self.total.as_secs_f64() * 1e6
        )
    }
}

impl Tensor {
    /// [`Tensor::backward_with`], measuring every node's VJP: the same gradients, accumulation
    /// and release, plus a [`BackwardProfile`] of the traversal. To draw the figures into the
    /// graph with [`to_dot_with_profile`](crate::to_dot_with_profile), pass `retain_graph`
    /// so that the graph is still there to draw.
    pub fn backward_profiled(
        &self,
        gradient: Option<&Tensor>,
        retain_graph: bool,
    ) -> Result<BackwardProfile> {
        let mut profile = BackwardProfile::default();
        let started = Instant::now();
        self.backward_impl(gradient, retain_graph, Some(&mut profile))?;
        profile.total = started.elapsed();
        Ok(profile)
    }
}

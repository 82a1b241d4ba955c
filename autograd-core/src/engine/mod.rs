//! Reverse-mode traversal: discover the graph, propagate cotangents in topological order into
//! staging, and commit (accumulate `.grad`, release nodes) only when everything succeeded.

// The traversal's surface and companions: `autograd` (backward, grad, backwards_traversal),
// `sole_tree` (the sole-edge release), `gradient` (staging and accumulation), checkpointing,
// closure VJPs, profiles, DOT output, graph footprints and the grad mode.
pub(crate) mod autograd;
pub(crate) mod checkpoint;
pub(crate) mod custom_gradient;
pub(crate) mod dot;
pub(crate) mod footprint;
pub(crate) mod grad_mode;
pub(crate) mod gradient;
pub(crate) mod profile;
pub(crate) mod sole_tree;

// The traversal itself: its plan, the claim of what it releases, pending cotangents, one
// node's VJP, and staged gradients.
mod claim;
mod pending;
mod plan;
mod staging;
mod vjp;

pub(crate) use claim::Claim;
pub(crate) use pending::Cotangent;
use pending::Pending;
pub(crate) use plan::{cycle_error, node_key, Plan};
pub(crate) use staging::Staging;
pub(crate) use vjp::run_vjp;

use std::cell::Cell;
use std::sync::Arc;

use crate::engine::profile::BackwardProfile;
use crate::error::Result;
pub(crate) use crate::graph::ids::{IdMap, IdSet};
use crate::layout::Layout;
use crate::tensor::Tensor;
use plan::NO_PRODUCER;

/// Where propagated gradients go.
pub(crate) enum Sink<'a> {
    /// `backward`: leaves, and non-leaves that asked to retain their gradient.
    Accumulate,
    /// Functional `grad`: only the requested tensors, by identity.
    Collect(&'a dyn Fn(&Tensor) -> bool),
}

/// Runs the plan from `root_cotangent`, staging what `sink` wants. Version checks happen just
/// before and just after each node runs; nothing outside `staging` changes.
pub(crate) fn propagate(
    plan: &Plan,
    root_cotangent: Tensor,
    sink: &Sink<'_>,
    staging: &mut Staging,
    claim: Option<&mut Claim<'_>>,
    profile: Option<&mut BackwardProfile>,
) -> Result<()> {
    let cotangents = Pending::seeded(plan.root_slot, root_cotangent);
    propagate_with(plan, cotangents, None, sink, staging, claim, profile).map(|_| ())
}

/// Cotangents for results of a plan's steps, `(step, result, cotangent)`; several for one
/// result are summed in this order.
pub(crate) type Seeds = Vec<(usize, usize, Tensor)>;

/// [`propagate`] from `seeds`, accumulating.
pub(crate) fn propagate_from(
    plan: &Plan,
    seeds: Seeds,
    staging: &mut Staging,
    claim: Option<&mut Claim<'_>>,
    profile: Option<&mut BackwardProfile>,
) -> Result<()> {
    let mut cotangents = Pending::default();
    for (i, k, g) in seeds {
        let slots = plan.slots_of(i);
        debug_assert!(k < slots.len());
        cotangents.add(slots.start + k, g)?;
    }
    propagate_with(
        plan,
        cotangents,
        None,
        &Sink::Accumulate,
        staging,
        claim,
        profile,
    )
    .map(|_| ())
}

/// [`propagate`] of `K` cotangents at once: `root_cotangent` has a leading batch mode of
/// extent K before the root's shape, and every node runs its [`Operation::backward_batched`],
/// or its VJP once per cotangent when it has none. Returns `false`, having staged only partial
/// sums that the caller discards, when a node reached has several results.
pub(crate) fn propagate_batched(
    plan: &Plan,
    root_cotangent: Tensor,
    (batch, root_layout): (usize, &Arc<Layout>),
    sink: &Sink<'_>,
    staging: &mut Staging,
) -> Result<bool> {
    propagate_with(
        plan,
        Pending::seeded(plan.root_slot, root_cotangent),
        Some((batch, root_layout)),
        sink,
        staging,
        None,
        None,
    )
}

/// With `batch`, `(K, the root result's layout)`.
fn propagate_with(
    plan: &Plan,
    mut cotangents: Pending,
    batch: Option<(usize, &Arc<Layout>)>,
    sink: &Sink<'_>,
    staging: &mut Staging,
    mut claim: Option<&mut Claim<'_>>,
    mut profile: Option<&mut BackwardProfile>,
) -> Result<bool> {
    // Batched: the layout of the result each slot holds the K cotangents of, so that a node
    // running its VJP once per cotangent gets each with its result's exact shape.
    let mut results: Vec<Option<Arc<Layout>>> = Vec::new();
    let batch = batch.map(|(k, root)| {
        results.resize(plan.slot_count(), None);
        results[plan.root_slot] = Some(root.clone());
        k
    });
    let mut several: Vec<Option<Tensor>> = Vec::new();
    // One vector for every node's gradients, instead of one allocated per node.
    let mut grads: Vec<Option<Tensor>> = Vec::new();
    for i in plan.order() {
        let slots = plan.slots_of(i);
        let g = if slots.len() == 1 {
            let Some(g) = cotangents.take(slots.start)? else {
                continue;
            };
            if !plan.useful(i) {
                continue;
            }
            match batch {
                Some(k) => Cotangent::Batched(g, k, results[slots.start].take()),
                None => Cotangent::One(g),
            }
        } else if batch.is_some() {
            return Ok(false);
        } else {
            several.clear();
            for slot in slots {
                several.push(cotangents.take(slot)?);
            }
            if !plan.useful(i) || several.iter().all(Option::is_none) {
                continue;
            }
            Cotangent::Several(&several)
        };
        let span = plan.span(i);
        let producers = span.producers(&plan.producers);
        let producers = producers.as_slice();
        // Where input j's gradient goes: staged for the sink, and/or on to a result slot of
        // its producer.
        let route = |j: usize, input: &Tensor| {
            let producer = (producers[j] != NO_PRODUCER).then_some(producers[j] as usize);
            let keep = match sink {
                Sink::Accumulate => producer.is_none() || input.retains_grad(),
                Sink::Collect(wanted) => wanted(input),
            };
            let forward = producer
                .filter(|&p| plan.useful(p))
                .map(|p| plan.edge_slot(span, j, p));
            (keep, forward)
        };
        // Each input's route, worked out once when the VJP is told what it must compute and
        // read back when its gradient arrives (most nodes have at most four inputs).
        let routes: [Cell<(bool, Option<usize>)>; 4] = Default::default();
        let needed = |j: usize, input: &Tensor| {
            let (keep, forward) = route(j, input);
            if let Some(r) = routes.get(j) {
                r.set((keep, forward));
            }
            keep || forward.is_some()
        };
        let claiming = claim.as_deref().filter(|c| !c.claimed(i)).map(|c| c.token);
        // Profiling (opt-in) times the VJP and counts the bytes of the gradients it produced.
        let started = profile.is_some().then(std::time::Instant::now);
        let mut bytes = 0usize;
        run_vjp(
            &*plan.nodes[i],
            g,
            claiming,
            needed,
            || {},
            &mut grads,
            |j, input, gi| {
                if started.is_some() {
                    bytes = bytes.saturating_add(gi.size() * std::mem::size_of::<f32>());
                }
                let routed = routes.get(j).map_or_else(|| route(j, input), Cell::get);
                if let (Some(_), (_, Some(slot))) = (batch, routed) {
                    results[slot].get_or_insert_with(|| input.layout_arc());
                }
                match routed {
                    (true, Some(slot)) => {
                        staging.add(input, gi.clone())?;
                        cotangents.add(slot, gi)
                    }
                    (true, None) => staging.add(input, gi),
                    (false, Some(slot)) => cotangents.add(slot, gi),
                    (false, None) => Ok(()),
                }
            },
        )?;
        if let (Some(p), Some(t0)) = (profile.as_deref_mut(), started) {
            p.record(&*plan.nodes[i], t0.elapsed(), bytes);
        }
        if let Some(claim) = claim.as_deref_mut() {
            claim.claimed_by_vjp(i);
        }
    }
    Ok(true)
}

//! Reverse-mode traversal: discover the graph, propagate cotangents in topological order into
//! staging, and commit (accumulate `.grad`, release nodes) only when everything succeeded.

// The traversal's surface and companions: `autograd` (backward, grad, backwards_traversal),
// `sole_tree` (the sole-edge release), `gradient` (staging and accumulation), checkpointing,
// closure VJPs, profiles, DOT output and graph footprints.
pub(crate) mod autograd;
pub(crate) mod checkpoint;
pub(crate) mod custom_gradient;
pub(crate) mod dot;
pub(crate) mod footprint;
pub(crate) mod gradient;
pub(crate) mod profile;
pub(crate) mod sole_tree;

// The traversal itself, in the order a newcomer reads it: `propagate` below; the plan it runs
// (discovery, order); the pending cotangents each step takes; one node's VJP with the spec's
// checks (`vjp`) and the routing of its gradients (`vjp_route`); the sinks that are its modes;
// the staging they fill until the commit; the claim of the nodes a releasing traversal frees.
mod claim;
mod pending;
mod plan;
mod sink;
mod staging;
mod vjp;
mod vjp_route;

pub(crate) use claim::Claim;
pub(crate) use pending::{Pending, Seeds};
pub(crate) use plan::{cycle_error, node_key, Plan};
pub(crate) use sink::Collect;
use sink::{Accumulate, Profiled, Sink};
pub(crate) use staging::Staging;
pub(crate) use vjp::{run_vjp, Router, Step};

use crate::engine::profile::BackwardProfile;
use crate::error::Result;
pub(crate) use crate::runtime::ids::{IdMap, IdSet};
use pending::Taken;
use vjp_route::Route;

/// Runs `plan`'s steps in order from the `pending` cotangents, each step taking its
/// cotangents, running its VJP ([`run_vjp`], which checks the spec's rules around it) and
/// routing each input's gradient to `sink` and/or on to the result slot of its producer.
/// Nothing outside `sink` changes, except that `claim`, when the traversal releases the graph,
/// claims each node it ran. Returns `false` (having kept partial sums the caller discards)
/// when a batched traversal meets a node of several results.
pub(crate) fn propagate<S: Sink>(
    plan: &Plan,
    mut pending: Pending,
    sink: &mut S,
    mut claim: Option<&mut Claim<'_>>,
) -> Result<bool> {
    // One vector for every node's gradients, one for a node's several cotangents.
    let (mut grads, mut several) = (Vec::new(), Vec::new());
    for i in plan.order() {
        let (cotangent, result) = match pending.take_step(plan, i, &mut several)? {
            Taken::Run(cotangent, result) => (cotangent, result),
            Taken::Skip => continue,
            Taken::Unbatchable => return Ok(false),
        };
        let node = &*plan.nodes[i];
        let step = Step {
            cotangent,
            result,
            claim: claim.as_deref().and_then(|c| c.unclaimed(i)),
        };
        sink.before_vjp();
        let bytes = run_vjp(
            node,
            step,
            &mut grads,
            &mut Route::new(plan, i, sink, &mut pending),
        )?;
        sink.after_vjp(node, bytes);
        if let Some(claim) = claim.as_deref_mut() {
            claim.claimed_by_vjp(i);
        }
    }
    Ok(true)
}

/// [`propagate`] for `backward`: the gradients staged for `.grad`, profiled when `profile` is
/// given.
pub(crate) fn propagate_to_grad(
    plan: &Plan,
    pending: Pending,
    staging: &mut Staging,
    claim: Option<&mut Claim<'_>>,
    profile: Option<&mut BackwardProfile>,
) -> Result<()> {
    match profile {
        Some(profile) => {
            let mut sink = Profiled::new(Accumulate(staging), profile);
            propagate(plan, pending, &mut sink, claim)
        }
        None => propagate(plan, pending, &mut Accumulate(staging), claim),
    }
    .map(|_| ())
}

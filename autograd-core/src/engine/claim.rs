//! Claims of the nodes a releasing traversal will release.

use super::plan::{flag, Plan};
use crate::error::Result;
use crate::graph::op::{Node, NodeId, TraversalToken};

/// A plan's nodes claimed by a traversal that will release the graph, so that of two
/// traversals racing over one graph exactly one commits. The nodes another traversal can reach
/// (the root and nodes with several ways in) are claimed before anything runs, in node-id
/// order, waiting for a racing traversal to finish or fail; a node reachable only through
/// those is claimed right after its VJP ran (while its memory is still hot), and the rest
/// before the commit. Finishing hands the release to the plan's drop; dropping an unfinished
/// claim makes every claimed node live again, so a failed traversal releases nothing.
pub(crate) struct Claim<'p> {
    /// The plan, whose [`flag::CLAIMED`] bits say which of its nodes this claim holds (a plan
    /// has at most one claim).
    plan: &'p Plan,
    /// Whose claims these are.
    pub(super) token: TraversalToken,
    finished: bool,
}

impl<'p> Claim<'p> {
    /// Claims the plan's shared nodes; fails (claiming nothing) once one was released.
    pub(crate) fn begin(plan: &'p Plan) -> Result<Claim<'p>> {
        Claim::begin_as(plan, TraversalToken::fresh(), &[])
    }

    /// [`Claim::begin`], without waiting: `None` (with nothing of the plan claimed) unless
    /// every shared node of the plan, and every node of `also` (outside the plan), could be
    /// claimed for `token` at once.
    pub(crate) fn try_begin_as(
        plan: &'p Plan,
        token: TraversalToken,
        also: &[Node],
    ) -> Option<Claim<'p>> {
        debug_assert!(plan.flags.iter().all(|f| f.get() & flag::CLAIMED == 0));
        let mut claim = Claim {
            plan,
            token,
            finished: false,
        };
        for node in also {
            node.saved().claim(node.name(), token).ok()?;
        }
        for i in (0..plan.len()).filter(|&i| plan.flags(i) & flag::SHARED != 0) {
            claim.claim(i).ok()?;
        }
        Some(claim)
    }

    /// [`Claim::begin`] for the traversal `token`, claiming `also` (nodes outside the plan)
    /// in the same order; a failure leaves `also`'s claims to the caller.
    pub(crate) fn begin_as(
        plan: &'p Plan,
        token: TraversalToken,
        also: &[Node],
    ) -> Result<Claim<'p>> {
        debug_assert!(plan.flags.iter().all(|f| f.get() & flag::CLAIMED == 0));
        let claim = Claim {
            plan,
            token,
            finished: false,
        };
        let mut shared: Vec<(NodeId, usize)> = (0..plan.len())
            .filter(|&i| plan.flags(i) & flag::SHARED != 0)
            .map(|i| (plan.nodes[i].id(), i))
            .chain(
                also.iter()
                    .enumerate()
                    .map(|(a, n)| (n.id(), plan.len() + a)),
            )
            .collect();
        shared.sort_unstable();
        for (_, i) in shared {
            let node = plan.nodes.get(i).unwrap_or_else(|| &also[i - plan.len()]);
            node.saved().claim_waiting(node.name(), claim.token)?;
            if i < plan.len() {
                plan.set_flag(i, flag::CLAIMED, true);
            }
        }
        Ok(claim)
    }

    /// This claim's token when step `i`'s node is not claimed yet (its VJP then claims it).
    pub(super) fn unclaimed(&self, i: usize) -> Option<TraversalToken> {
        (!self.claimed(i)).then_some(self.token)
    }

    pub(super) fn claimed(&self, i: usize) -> bool {
        self.plan.flags(i) & flag::CLAIMED != 0
    }

    /// Claims step `i`'s node unless already claimed; fails if another traversal released or
    /// claimed it first.
    pub(super) fn claim(&mut self, i: usize) -> Result<()> {
        if self.claimed(i) {
            return Ok(());
        }
        let node = &self.plan.nodes[i];
        node.saved().claim(node.name(), self.token)?;
        self.plan.set_flag(i, flag::CLAIMED, true);
        Ok(())
    }

    /// Records that step `i`'s node was claimed for this claim when its VJP ran.
    pub(super) fn claimed_by_vjp(&mut self, i: usize) {
        self.plan.set_flag(i, flag::CLAIMED, true);
    }

    /// Claims every step not claimed yet (nodes that received no cotangent or were pruned).
    pub(crate) fn rest(&mut self) -> Result<()> {
        for i in 0..self.plan.len() {
            self.claim(i)?;
        }
        Ok(())
    }

    /// Keeps the graph released: the plan releases the claimed nodes when it is dropped.
    pub(crate) fn finish(mut self) {
        self.finished = true;
        self.plan.release.set(Some(self.token));
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        for i in 0..self.plan.len() {
            if self.claimed(i) {
                self.plan.nodes[i].saved().unclaim(self.token);
                self.plan.set_flag(i, flag::CLAIMED, false);
            }
        }
    }
}

//! Backward through the part of a graph reached from its root through sole edges, run as it
//! is discovered: no separate discovery pass, and no plan, for a chain or a tree.
//!
//! An edge is sole when the tensor it follows has one handle (the consumer's saved one) and
//! is its node's only holder ([`Tensor::saved_producer`]): the producer is then reachable only
//! through that consumer, so it is ready as soon as its consumer ran, it can sit on no cycle,
//! and no other traversal can reach it without going through the consumer first. The nodes
//! such edges reach from the root form a tree; the traversal runs it depth first. The other
//! edges it meets lead to the *frontier*: nodes another path may reach too, which it hands,
//! with their summed cotangents, to a planned traversal ([`Plan::discover_from`]) once the
//! tree is done.
//!
//! A releasing traversal claims the root before anything runs, waiting for a racing traversal
//! to finish or fail; each tree node under the lock its VJP (or visit) takes anyway; and each
//! frontier node, without waiting, as soon as it read the edge (so that a traversal inside a
//! VJP cannot release what the enclosing one reached). Claims it needs later (the next tree's
//! root, the frontier's plan) it takes without waiting when it can; otherwise it gives up
//! every claim and waits for them in node-id order, as a planned traversal does, so that no
//! two traversals ever wait for each other.

// The per-node steps are inlined into the traversal: as calls, W1/W1s backward ran 5-8% more
// instructions (callgrind).
#![allow(clippy::inline_always)]

use std::sync::Arc;

use crate::engine::gradient::Sum;
use crate::engine::profile::BackwardProfile;
use crate::engine::{
    cycle_error, node_key, propagate_to_grad, run_vjp, Claim, IdMap, Pending, Plan, Router, Seeds,
    Staging, Step,
};
use crate::error::{ensure, Result};
use crate::graph::op::{describe_node, Node, Operation, TraversalToken};
use crate::graph::vjp_call::Cotangent;
use crate::tensor::Tensor;

/// Where the gradient of a node's input goes on.
enum Edge {
    /// No producer: a leaf, or a tensor outside the graph.
    Leaf,
    /// A sole edge to a node of one result: a child in the tree.
    Sole(Node),
    /// Result `.1` of a node another path may reach: the frontier.
    Shared(Node, usize),
}

impl Edge {
    /// The edge `input` (a saved handle of the node whose lock the caller holds) leads along.
    ///
    /// # Safety
    /// As [`Tensor::saved_producer`]: the caller holds the lock of the node that saved `input`.
    #[inline(always)]
    unsafe fn of(input: &Tensor) -> Edge {
        // SAFETY: passed on to the caller.
        match unsafe { input.saved_producer() } {
            None => Edge::Leaf,
            Some((node, 0, true)) if node.outputs() == 1 => Edge::Sole(node),
            Some((node, k, _)) => Edge::Shared(node, k),
        }
    }
}

/// The nodes a traversal reached through sole edges, the root first. Dropped after the
/// traversal committed ([`Tree::finish`]), it releases the nodes it claimed; dropped before,
/// it gives its claims up, so a failed traversal releases nothing.
struct Tree {
    nodes: Vec<Node>,
    /// The roots of the trees run (also in `nodes`): nodes another traversal may wait for.
    roots: Vec<Node>,
    /// Frontier nodes claimed as soon as an edge to them was read, before the VJP that
    /// reached them ran: a traversal inside that VJP cannot release them.
    early: Vec<Node>,
    /// A releasing traversal's token.
    claim: Option<TraversalToken>,
    finished: bool,
}

impl Tree {
    /// A tree from `root`, claimed (waiting for a racing traversal) unless `claim` is `None`.
    fn new(root: &Node, claim: Option<TraversalToken>) -> Result<Tree> {
        if let Some(me) = claim {
            root.saved().claim_waiting(root.name(), me)?;
        }
        let mut nodes = crate::runtime::spare_nodes::take();
        nodes.push(root.clone());
        Ok(Tree {
            nodes,
            roots: vec![root.clone()],
            early: Vec::new(),
            claim,
            finished: false,
        })
    }

    /// Makes `node`, the frontier's one node, the root of the next tree, claiming it (see
    /// [`Tree::wait_in_order`] when it cannot be had at once).
    fn enter(&mut self, node: Node) -> Result<()> {
        if self.roots.iter().any(|r| Arc::ptr_eq(r, &node)) {
            return Err(cycle_error(&*node));
        }
        let claimed = self
            .claim
            .is_none_or(|me| node.saved().claim(node.name(), me).is_ok());
        self.nodes.push(node.clone());
        self.roots.push(node);
        match self.claim {
            Some(me) if !claimed => self.wait_in_order(|roots| {
                let mut roots: Vec<&Node> = roots.iter().collect();
                roots.sort_unstable_by_key(|r| r.id());
                roots
                    .into_iter()
                    .try_for_each(|r| r.saved().claim_waiting(r.name(), me))
            }),
            _ => Ok(()),
        }
    }

    /// For a claim that cannot be had at once (a racing traversal holds it, or it was
    /// released): gives up every claim this traversal holds, runs `wait`, which claims the
    /// roots' and the others it needs in node-id order, waiting; then claims the tree's nodes
    /// again without waiting. A traversal waits only so, holding only claims it took in that
    /// order: another may wait for any node it holds, a tree node too (it is shared once a
    /// plan of the other traversal holds it).
    fn wait_in_order<T>(&mut self, wait: impl FnOnce(&[Node]) -> Result<T>) -> Result<T> {
        if let Some(me) = self.claim {
            for n in self.nodes.iter().chain(&self.early) {
                n.saved().unclaim(me);
            }
        }
        self.early.clear();
        let waited = wait(&self.roots)?;
        if let Some(me) = self.claim {
            for n in &self.nodes {
                n.saved().claim(n.name(), me)?;
            }
        }
        Ok(waited)
    }

    /// Keeps the graph released: dropping the tree releases its nodes.
    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let (Some(me), false) = (self.claim, self.finished) {
            for n in &self.early {
                n.saved().unclaim(me);
            }
        }
        let (claim, finished) = (self.claim, self.finished);
        crate::runtime::spare_nodes::give_back(
            std::mem::take(&mut self.nodes),
            |node| match claim {
                Some(me) if finished => drop(node.saved().release_claimed(me)),
                Some(me) => node.saved().unclaim(me),
                None => {}
            },
        );
    }
}

/// The frontier: `(node, result, cotangent)` for every edge the tree left, `None` for an edge
/// whose gradient was not computed (its node must still be reached, to be released).
type Frontier = Vec<(Node, usize, Option<Tensor>)>;

/// Backward from result 0 of `root`, a node of one result, with `cotangent`, accumulating into
/// `staging` and committing it; unless `retain_graph`, the reached graph is released after
/// the commit. On any error nothing is committed or released.
pub(crate) fn accumulate(
    root: &Node,
    cotangent: Tensor,
    mut staging: Staging,
    retain_graph: bool,
    mut profile: Option<&mut BackwardProfile>,
) -> Result<()> {
    let claim = (!retain_graph).then(TraversalToken::fresh);
    let mut tree = Tree::new(root, claim)?;
    let mut g = Some(cotangent);
    let (roots, seeds) = loop {
        let start = tree.nodes.len() - 1;
        let frontier = run(&mut tree, start, g, &mut staging, profile.as_deref_mut())?;
        let (mut roots, seeds) = gather(frontier)?;
        match roots.len() {
            0 => {
                staging.commit()?;
                tree.finish();
                return Ok(());
            }
            1 if roots[0].outputs() == 1 => {
                g = sum(seeds)?;
                tree.enter(roots.remove(0))?;
            }
            _ => break (roots, seeds),
        }
    };
    let plan = Plan::discover_from(roots, Some(&tree.roots))?;
    let mut planned = match claim {
        Some(me) => Some(match Claim::try_begin_as(&plan, me, &tree.roots) {
            Some(claim) => claim,
            None => tree.wait_in_order(|roots| Claim::begin_as(&plan, me, roots))?,
        }),
        None => None,
    };
    let pending = Pending::seeds(&plan, seeds)?;
    propagate_to_grad(&plan, pending, &mut staging, planned.as_mut(), profile)?;
    if let Some(planned) = &mut planned {
        planned.rest()?;
    }
    staging.commit()?;
    if let Some(planned) = planned {
        planned.finish();
    }
    tree.finish();
    Ok(())
}

/// The sum of the cotangents of one result, in the order they came (as a plan's pending
/// slot sums them).
fn sum(seeds: Seeds) -> Result<Option<Tensor>> {
    let mut seeds = seeds.into_iter().map(|(_, _, g)| g);
    let Some(first) = seeds.next() else {
        return Ok(None);
    };
    let mut total = Sum::Shared(first);
    for g in seeds {
        total.add(&g)?;
    }
    total.into_tensor().map(Some)
}

/// The frontier's distinct nodes, and the cotangents for their results as `(index, result,
/// cotangent)`; a result that does not exist is refused, as discovery refuses it.
fn gather(frontier: Frontier) -> Result<(Vec<Node>, Seeds)> {
    let mut index: IdMap<usize> = IdMap::default();
    let mut roots: Vec<Node> = Vec::new();
    let mut seeds = Vec::new();
    for (node, k, g) in frontier {
        let results = node.outputs();
        ensure!(
            k < results,
            Runtime,
            "a tensor claims result {k} of {}, which has {results}",
            describe_node(&*node)
        );
        let i = *index.entry(node_key(&node)).or_insert_with(|| {
            roots.push(node);
            roots.len() - 1
        });
        if let Some(g) = g {
            seeds.push((i, k, g));
        }
    }
    Ok((roots, seeds))
}

/// Runs the tree below step `root` of `tree` from its `cotangent`, depth first, staging leaf
/// gradients; returns the frontier. A node's edges go on in input order once its VJP ran, so
/// the order does not depend on which gradients it returned ([`Plan`] orders steps alike).
fn run(
    tree: &mut Tree,
    root: usize,
    cotangent: Option<Tensor>,
    staging: &mut Staging,
    mut profile: Option<&mut BackwardProfile>,
) -> Result<Frontier> {
    let mut frontier = Frontier::new();
    let mut stack: Vec<(usize, Option<Tensor>)> = vec![(root, cotangent)];
    // Each input's edge, read under the node's lock, and the gradient that goes along it.
    let mut edges: Vec<(Edge, Option<Tensor>)> = Vec::new();
    let mut grads: Vec<Option<Tensor>> = Vec::new();
    while let Some((i, g)) = stack.pop() {
        let node: *const dyn Operation = Arc::as_ptr(&tree.nodes[i]);
        // SAFETY: the tree owns the node until it drops, and an `Arc`'s contents never move
        // when the vector of nodes grows (a reference saves two atomic operations per node).
        let node = unsafe { &*node };
        debug_assert!(edges.is_empty());
        let (claim, early) = (tree.claim, &mut tree.early);
        match g {
            None => {
                visit(node, claim, &mut edges)?;
                claim_early(edges.iter().map(|(e, _)| e), claim, early);
            }
            Some(g) => {
                let started = profile.is_some().then(std::time::Instant::now);
                let step = Step {
                    cotangent: Cotangent::One(g),
                    result: None,
                    claim,
                };
                let mut route = TreeRoute {
                    edges: &mut edges,
                    shared: false,
                    claim,
                    early,
                    staging,
                };
                let bytes = run_vjp(node, step, &mut grads, &mut route)?;
                if let (Some(p), Some(t0)) = (profile.as_deref_mut(), started) {
                    p.record(node, t0.elapsed(), bytes);
                }
            }
        }
        for (edge, g) in edges.drain(..) {
            match edge {
                Edge::Leaf => {}
                Edge::Sole(child) => {
                    stack.push((tree.nodes.len(), g));
                    tree.nodes.push(child);
                }
                Edge::Shared(node, k) => frontier.push((node, k, g)),
            }
        }
    }
    Ok(frontier)
}

/// The routing of one tree node's gradients: each input's edge is read while the node is
/// locked; a leaf's gradient is staged, and any other goes along its edge (staged as well
/// when its tensor retains its gradient).
struct TreeRoute<'r> {
    edges: &'r mut Vec<(Edge, Option<Tensor>)>,
    /// Whether some edge leads to a node another path may reach.
    shared: bool,
    claim: Option<TraversalToken>,
    early: &'r mut Vec<Node>,
    staging: &'r mut Staging,
}

impl Router for TreeRoute<'_> {
    #[inline(always)]
    fn wants(&mut self, j: usize, input: &Tensor) -> bool {
        // SAFETY: `run_vjp` asks under the lock of the node that saved `input`.
        let edge = unsafe { Edge::of(input) };
        self.shared |= matches!(edge, Edge::Shared(..));
        // `run_vjp` asks about every input, in order (a loop, not `resize_with`, whose
        // truncating branch costs a call per node)
        while self.edges.len() < j {
            self.edges.push((Edge::Leaf, None));
        }
        self.edges.push((edge, None));
        true
    }

    fn ready(&mut self) {
        if self.shared {
            claim_early(self.edges.iter().map(|(e, _)| e), self.claim, self.early);
        }
    }
    #[inline(always)]
    fn send(&mut self, j: usize, input: &Tensor, g: Tensor) -> Result<()> {
        let Some((edge, along)) = self.edges.get_mut(j) else {
            return Ok(());
        };
        if matches!(edge, Edge::Leaf) {
            return self.staging.add(input, g);
        }
        if input.retains_grad() {
            self.staging.add(input, g.clone())?;
        }
        *along = Some(g);
        Ok(())
    }
}

/// Claims the frontier nodes `edges` lead to that can be had without waiting, keeping them
/// in `early`.
fn claim_early<'e>(
    edges: impl Iterator<Item = &'e Edge>,
    claim: Option<TraversalToken>,
    early: &mut Vec<Node>,
) {
    let Some(me) = claim else { return };
    for edge in edges {
        if let Edge::Shared(node, _) = edge {
            if node.saved().claim(node.name(), me).is_ok() {
                early.push(node.clone());
            }
        }
    }
}

/// Reads the edges of a node that received no cotangent (it is reached, so it is released
/// with the rest, but its VJP does not run), claiming it under the same lock.
fn visit(
    node: &dyn Operation,
    claim: Option<TraversalToken>,
    edges: &mut Vec<(Edge, Option<Tensor>)>,
) -> Result<()> {
    let (_, claimed) = node.saved().with_then_claim(node.name(), claim, |s| {
        for (t, _) in s.inputs.iter() {
            // SAFETY: `with_then_claim` holds this node's lock, which guards its saved handles.
            edges.push((unsafe { Edge::of(t) }, None));
        }
        None::<()>
    })?;
    match claim.filter(|_| !claimed) {
        Some(me) => Err(node.saved().claim_error(node.name(), me)),
        None => Ok(()),
    }
}

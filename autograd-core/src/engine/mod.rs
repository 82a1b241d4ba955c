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
pub(crate) mod gradient;
pub(crate) mod profile;
pub(crate) mod sole_tree;

use std::cell::Cell;
use std::sync::Arc;

use crate::engine::gradient::Sum;
use crate::engine::profile::BackwardProfile;
use crate::error::{bail, ensure, Result};
use crate::graph::grad_mode::no_grad;
use crate::graph::op::{
    describe_input, describe_node, Modification, Node, NodeId, Operation, Saved, TraversalToken,
};
use crate::layout::Layout;
pub(crate) use crate::runtime::ids::{IdMap, IdSet};
use crate::tensor::Tensor;

pub(crate) fn node_key(node: &Node) -> u64 {
    node.id().get()
}

const NO_PRODUCER: u32 = u32::MAX;

/// Per-step flags, one byte a step.
mod flag {
    /// Propagating through this node can reach a requested tensor.
    pub(super) const USEFUL: u8 = 1;
    /// Another traversal may reach this node other than through this plan's own nodes: the
    /// root, and every node met through an edge that was not its sole way in.
    pub(super) const SHARED: u8 = 1 << 1;
    /// The node has one saved input, produced by the next step and reading its result 0, met
    /// before any node of several results: what discovery finds along a chain of unary ops,
    /// which then needs no [`super::Span`].
    pub(super) const NEXT: u8 = 1 << 2;
    /// The node has one saved input, without a producer (a leaf, or a tensor outside the
    /// graph).
    pub(super) const LEAF: u8 = 1 << 3;
    /// The plan's [`super::Claim`] holds the node.
    pub(super) const CLAIMED: u8 = 1 << 4;
}

/// Where a step's input producers are, for plans in which some step's are not given by its
/// flags ([`flag::NEXT`], [`flag::LEAF`], or no inputs). Indices are `u32` so that a plan for
/// a million-node graph stays small; a graph of four billion nodes would not fit in memory
/// anyway.
#[derive(Clone, Copy, Default)]
struct Span {
    /// Where this node's input producers start in `Plan::producers`; with [`Span::INLINE`],
    /// its one producer itself.
    first: u32,
    /// The number of saved inputs, with [`Span::INLINE`] in its top bit.
    count: u32,
}

impl Span {
    /// The node's one saved input's producer is `first` itself, not kept in
    /// `Plan::producers` (a unary node met before any node of several results, so its edge
    /// reads result 0).
    const INLINE: u32 = 1 << 31;
    const COUNT: u32 = Span::INLINE - 1;

    fn table(first: usize, count: usize) -> Result<Span> {
        let count = u32::try_from(count)
            .ok()
            .filter(|&c| c <= Span::COUNT)
            .ok_or_else(|| {
                crate::Error::NotImplemented(format!(
                    "a node of more than {} saved inputs",
                    Span::COUNT
                ))
            })?;
        Ok(Span {
            first: index_u32(first)?,
            count,
        })
    }

    fn inline_producer(producer: u32) -> Span {
        Span {
            first: producer,
            count: Span::INLINE | 1,
        }
    }

    /// The span a step's flags stand for (its producers are not in the table).
    fn of_flags(i: usize, flags: u8) -> Span {
        if flags & flag::NEXT != 0 {
            Span::inline_producer(i as u32 + 1)
        } else if flags & flag::LEAF != 0 {
            Span::inline_producer(NO_PRODUCER)
        } else {
            Span::default()
        }
    }

    fn inline(self) -> bool {
        self.count & Span::INLINE != 0
    }

    fn producers(self, all: &[u32]) -> Producers<'_> {
        if self.inline() {
            return Producers::One(self.first);
        }
        let first = self.first as usize;
        Producers::Table(&all[first..first + (self.count & Span::COUNT) as usize])
    }
}

/// A step's input producers (`NO_PRODUCER` for an input without one), in input order.
#[derive(Clone, Copy)]
enum Producers<'a> {
    One(u32),
    Table(&'a [u32]),
}

impl Producers<'_> {
    fn as_slice(&self) -> &[u32] {
        match self {
            Producers::One(p) => std::slice::from_ref(p),
            Producers::Table(t) => t,
        }
    }
}

/// The reached graph: steps in discovery order (the roots first) and a topological order of
/// them in which every consumer comes before its producers ([`Plan::topological_order`], the
/// order [`crate::engine::sole_tree`] runs a graph in). `backward` plans only what lies past the tree
/// its root's sole edges reach; `grad`, batched and several-result traversals plan it all.
///
/// A plan keeps 17 bytes per node for a chain of unary ops discovered in order from a
/// single-result root: the node and its flags, and nothing in the spans, the producer table
/// or the order. Any other plan keeps a span (8 bytes) per node as well.
///
/// A plan whose claim finished releases the claimed nodes when it is dropped, each right
/// before the plan's reference to the node goes, so every node is touched once more, not twice.
pub(crate) struct Plan {
    /// The reached nodes, in discovery order.
    nodes: Vec<Node>,
    /// Each step's [`flag`]s.
    flags: Vec<Cell<u8>>,
    /// Each step's span, or empty while every step's producers follow from its flags.
    spans: Vec<Span>,
    /// For every saved input of a step with a table span, the step of its producing node, or
    /// `NO_PRODUCER`.
    producers: Vec<u32>,
    /// Where the plan has nodes with several results: cotangent slots per result.
    outputs: Option<Box<Outputs>>,
    /// The number of roots: steps `0..roots`.
    roots: usize,
    /// The slot of the differentiated result of the root (of [`Plan::discover`]).
    root_slot: usize,
    /// The order steps run in ([`Plan::topological_order`]); `None` when it is discovery
    /// order, as along a chain.
    order: Option<Vec<u32>>,
    /// Set by [`Claim::finish`] to its traversal: dropping the plan releases the nodes that
    /// traversal claimed.
    release: Cell<Option<TraversalToken>>,
}

impl Drop for Plan {
    fn drop(&mut self) {
        let release = self.release.get();
        crate::runtime::spare_nodes::give_back(std::mem::take(&mut self.nodes), |node| {
            if let Some(me) = release {
                drop(node.saved().release_claimed(me));
            }
        });
    }
}

/// A traversal's graph has a cycle through `node`'s graph (one made through `record` or
/// `set_autograd_ctx`): no order runs every consumer before its producers.
pub(crate) fn cycle_error(node: &dyn Operation) -> crate::Error {
    crate::Error::Runtime(format!(
        "the autograd graph of {} has a cycle (a node was assigned as the autograd_ctx of a tensor it depends on)",
        describe_node(node)
    ))
}

fn index_u32(i: usize) -> Result<u32> {
    u32::try_from(i)
        .ok()
        .filter(|&i| i != NO_PRODUCER)
        .ok_or_else(|| {
            crate::Error::NotImplemented(format!(
                "an autograd graph of more than {} nodes or edges",
                u32::MAX - 1
            ))
        })
}

/// Cotangent slots of a plan with multi-result nodes: step `i`'s result `k` has slot
/// `base[i] + k`, and `edge[e]` is the result index that edge `e` (an entry of `producers`)
/// reads. Plans of single-result nodes (nearly all) have none: a step's slot is its index.
struct Outputs {
    base: Vec<u32>,
    counts: Vec<u32>,
    edge: Vec<u32>,
    total: u32,
}

impl Outputs {
    /// Slots for the `steps` single-result steps and `edges` edges seen so far.
    fn new(steps: usize, edges: usize) -> Result<Outputs> {
        Ok(Outputs {
            base: (0..index_u32(steps)?).collect(),
            counts: vec![1; steps],
            edge: vec![0; edges],
            total: index_u32(steps)?,
        })
    }

    fn push_step(&mut self, results: usize) -> Result<()> {
        self.base.push(self.total);
        self.counts.push(index_u32(results)?);
        self.total = index_u32(self.total as usize + results)?;
        Ok(())
    }
}

impl Plan {
    /// Discovers every node reachable from `root` (whose result `root_output` is the one
    /// differentiated), refusing released nodes before anything else runs, and orders them
    /// topologically with explicit stacks.
    pub(crate) fn discover(root: &Node, root_output: usize) -> Result<Plan> {
        let root_results = root.outputs();
        ensure!(
            root_output < root_results,
            Value,
            "result {root_output} of {} does not exist: it has {root_results}",
            describe_node(&**root)
        );
        let mut plan = Plan::discover_from(vec![root.clone()], None)?;
        plan.root_slot = plan.slots_of(0).start + root_output;
        Ok(plan)
    }

    /// [`Plan::discover`] from several roots at once (steps `0..roots.len()`, distinct nodes),
    /// for the part of a graph below a [`crate::engine::sole_tree`] traversal: reaching a node of
    /// `above`, the roots of the trees that traversal ran, means a cycle.
    pub(crate) fn discover_from(roots: Vec<Node>, above: Option<&[Node]>) -> Result<Plan> {
        let mut index: IdMap<u32> = IdMap::default();
        let mut nodes = crate::runtime::spare_nodes::take();
        let mut flags: Vec<Cell<u8>> = Vec::new();
        let mut spans: Vec<Span> = Vec::new();
        let mut producers: Vec<u32> = Vec::new();
        let mut outputs: Option<Box<Outputs>> = None;
        if roots.iter().any(|r| r.outputs() != 1) {
            let mut o = Outputs::new(0, 0)?;
            for r in &roots {
                o.push_step(r.outputs())?;
            }
            outputs = Some(Box::new(o));
        }
        let tree_first = above.is_none() && roots.len() == 1;
        let above: Vec<u64> = above.unwrap_or_default().iter().map(node_key).collect();
        for root in roots {
            let key = node_key(&root);
            if above.contains(&key) {
                return Err(cycle_error(&*root));
            }
            index.insert(key, index_u32(nodes.len())?);
            nodes.push(root);
            flags.push(Cell::new(flag::USEFUL | flag::SHARED));
        }
        let roots = nodes.len();
        let mut stack: Vec<u32> = (0..index_u32(roots)?).rev().collect();
        while let Some(i) = stack.pop() {
            let i = i as usize;
            let node: *const dyn Operation = Arc::as_ptr(&nodes[i]);
            // SAFETY: the plan owns the node until it drops, nodes are only pushed during
            // discovery, and an `Arc`'s contents never move when the vector of nodes grows. A
            // reference instead of a clone saves two atomic operations per node.
            let node = unsafe { &*node };
            let first = producers.len();
            node.saved().with(node.name(), |s| -> Result<()> {
                for (t, _) in s.inputs.iter() {
                    // SAFETY: `with` holds this node's lock, which guards its saved handles.
                    let Some((child, k, sole)) = (unsafe { t.saved_producer() }) else {
                        if let Some(o) = &mut outputs {
                            o.edge.push(0);
                        }
                        producers.push(NO_PRODUCER);
                        continue;
                    };
                    // A node reachable only through this edge needs no duplicate check (the
                    // index is a random access per node; chains rarely need it).
                    let key = node_key(&child);
                    if !sole && above.contains(&key) {
                        return Err(cycle_error(&*child));
                    }
                    let known = if sole { None } else { index.get(&key).copied() };
                    let j = if let Some(j) = known {
                        j
                    } else {
                        let j = index_u32(nodes.len())?;
                        if !sole {
                            index.insert(key, j);
                        }
                        let results = child.outputs();
                        if results != 1 && outputs.is_none() {
                            outputs = Some(Box::new(Outputs::new(nodes.len(), producers.len())?));
                        }
                        if let Some(o) = &mut outputs {
                            o.push_step(results)?;
                        }
                        nodes.push(child);
                        let shared = if sole { 0 } else { flag::SHARED };
                        flags.push(Cell::new(flag::USEFUL | shared));
                        stack.push(j);
                        j
                    };
                    let results = outputs
                        .as_ref()
                        .map_or(1, |o| o.counts[j as usize] as usize);
                    ensure!(
                        k < results,
                        Runtime,
                        "a tensor claims result {k} of {}, which has {results}",
                        describe_node(&*nodes[j as usize])
                    );
                    if k != 0 && outputs.is_none() {
                        outputs = Some(Box::new(Outputs::new(nodes.len(), producers.len())?));
                    }
                    if let Some(o) = &mut outputs {
                        o.edge.push(index_u32(k)?);
                    }
                    producers.push(j);
                }
                Ok(())
            })??;
            let count = producers.len() - first;
            let span = if count == 1 && outputs.is_none() {
                let only = producers.pop().unwrap_or(NO_PRODUCER);
                let by_flags = if only as usize == i + 1 {
                    flag::NEXT
                } else if only == NO_PRODUCER {
                    flag::LEAF
                } else {
                    0
                };
                if by_flags != 0 && spans.is_empty() {
                    flags[i].set(flags[i].get() | by_flags);
                    continue;
                }
                Span::inline_producer(only)
            } else if count == 0 && spans.is_empty() {
                continue;
            } else {
                Span::table(first, count)?
            };
            // The first step whose producers its flags cannot give: spell out every step's.
            if spans.is_empty() {
                spans.extend(
                    flags
                        .iter()
                        .enumerate()
                        .map(|(k, f)| Span::of_flags(k, f.get())),
                );
            }
            spans.resize(nodes.len(), Span::default());
            spans[i] = span;
        }
        drop(index);
        let mut plan = Plan {
            nodes,
            flags,
            spans,
            producers,
            outputs,
            roots,
            root_slot: 0,
            order: None,
            release: Cell::new(None),
        };
        let order = plan.topological_order(tree_first)?;
        // along a chain, discovery order is that order: keep nothing
        if order.iter().enumerate().any(|(k, &i)| i as usize != k) {
            plan.order = Some(order);
        }
        Ok(plan)
    }

    /// The order steps run in, consumers first, and the order [`crate::engine::sole_tree`] runs a
    /// graph in, so that `grad` sums what `backward` sums in the same order (and gets the
    /// very same values). From a single root (`tree_first`): the tree its sole edges reach,
    /// depth first (a node's children pushed in input order), while the other producers it
    /// meets join a frontier in the order met; a frontier of one node of one result is the
    /// root of the next such tree. Then Kahn's algorithm from the frontier (or from the
    /// roots): a node is ready once every reached consumer ran, the last ready first. A node
    /// that is never ready, or an edge back to a tree's root, lies on a cycle.
    fn topological_order(&self, tree_first: bool) -> Result<Vec<u32>> {
        let n = self.nodes.len();
        let mut pending = vec![0u32; n];
        for i in 0..n {
            for &p in self.producers_of(i).as_slice() {
                if p != NO_PRODUCER {
                    pending[p as usize] += 1;
                }
            }
        }
        let mut order = Vec::with_capacity(n);
        let mut frontier: Vec<u32> = Vec::new();
        if tree_first {
            let mut listed = vec![false; n];
            let mut root = 0u32;
            loop {
                if pending[root as usize] != 0 {
                    return Err(cycle_error(&*self.nodes[root as usize]));
                }
                let mut tree = vec![root];
                while let Some(i) = tree.pop() {
                    order.push(i);
                    self.count_edges(i, &mut pending, |p, _| {
                        let q = p as usize;
                        if self.flags(q) & flag::SHARED == 0 && self.slots_of(q).len() == 1 {
                            tree.push(p);
                        } else if !std::mem::replace(&mut listed[q], true) {
                            frontier.push(p);
                        }
                    })?;
                }
                match frontier[..] {
                    [next] if self.slots_of(next as usize).len() == 1 => {
                        root = next;
                        frontier.clear();
                    }
                    _ => break,
                }
            }
        } else {
            frontier = (0..index_u32(self.roots)?).collect();
        }
        let mut ready: Vec<u32> = frontier
            .into_iter()
            .rev()
            .filter(|&i| pending[i as usize] == 0)
            .collect();
        while let Some(i) = ready.pop() {
            order.push(i);
            self.count_edges(i, &mut pending, |p, left| {
                if left == 0 {
                    ready.push(p);
                }
            })?;
        }
        if order.len() != n {
            return Err(cycle_error(&*self.nodes[0]));
        }
        Ok(order)
    }

    /// Counts step `i`'s edges as run: each producer's count of consumers still to run drops
    /// by one, and `each` gets the producer and that count, in input order. An edge into a
    /// step whose count is already 0 (a step already ordered) closes a cycle.
    fn count_edges(
        &self,
        i: u32,
        pending: &mut [u32],
        mut each: impl FnMut(u32, u32),
    ) -> Result<()> {
        for &p in self.producers_of(i as usize).as_slice() {
            if p == NO_PRODUCER {
                continue;
            }
            let left = &mut pending[p as usize];
            if *left == 0 {
                return Err(cycle_error(&*self.nodes[p as usize]));
            }
            *left -= 1;
            each(p, *left);
        }
        Ok(())
    }

    /// The number of steps (reached nodes).
    fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Step `i`'s flags.
    fn flags(&self, i: usize) -> u8 {
        self.flags[i].get()
    }

    fn useful(&self, i: usize) -> bool {
        self.flags(i) & flag::USEFUL != 0
    }

    fn set_flag(&self, i: usize, f: u8, on: bool) {
        let old = self.flags(i);
        self.flags[i].set(if on { old | f } else { old & !f });
    }

    /// Step `i`'s span: its own, or the one its flags stand for.
    fn span(&self, i: usize) -> Span {
        self.spans
            .get(i)
            .copied()
            .unwrap_or_else(|| Span::of_flags(i, self.flags(i)))
    }

    /// The producing steps of step `i`'s inputs.
    fn producers_of(&self, i: usize) -> Producers<'_> {
        self.span(i).producers(&self.producers)
    }

    /// The number of cotangent slots (one per result of every step).
    fn slot_count(&self) -> usize {
        self.outputs
            .as_ref()
            .map_or(self.len(), |o| o.total as usize)
    }

    /// The slots of step `i`'s results.
    fn slots_of(&self, i: usize) -> std::ops::Range<usize> {
        match &self.outputs {
            None => i..i + 1,
            Some(o) => {
                let base = o.base[i] as usize;
                base..base + o.counts[i] as usize
            }
        }
    }

    /// The slot that input `j` of a step of span `span`, produced by step `producer`,
    /// delivers its cotangent to.
    fn edge_slot(&self, span: Span, j: usize, producer: usize) -> usize {
        match &self.outputs {
            None => producer,
            Some(o) if span.inline() => o.base[producer] as usize,
            Some(o) => o.base[producer] as usize + o.edge[span.first as usize + j] as usize,
        }
    }

    /// The steps in topological order, consumers first.
    fn order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).map(|k| self.in_order(k))
    }

    /// The step `k`-th in topological order.
    fn in_order(&self, k: usize) -> usize {
        self.order.as_ref().map_or(k, |o| o[k] as usize)
    }

    /// Marks the steps through which a tensor accepted by `wanted` can be reached.
    pub(crate) fn prune(&mut self, wanted: &dyn Fn(&Tensor) -> bool) -> Result<()> {
        for k in (0..self.len()).rev() {
            let i = self.in_order(k);
            let node = &self.nodes[i];
            let direct = node
                .saved()
                .with(node.name(), |s| s.inputs.iter().any(|(t, _)| wanted(t)))?;
            let useful = direct
                || self
                    .producers_of(i)
                    .as_slice()
                    .iter()
                    .any(|&p| p != NO_PRODUCER && self.useful(p as usize));
            self.set_flag(i, flag::USEFUL, useful);
        }
        Ok(())
    }
}

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
    token: TraversalToken,
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

    fn claimed(&self, i: usize) -> bool {
        self.plan.flags(i) & flag::CLAIMED != 0
    }

    /// Claims step `i`'s node unless already claimed; fails if another traversal released or
    /// claimed it first.
    fn claim(&mut self, i: usize) -> Result<()> {
        if self.claimed(i) {
            return Ok(());
        }
        let node = &self.plan.nodes[i];
        node.saved().claim(node.name(), self.token)?;
        self.plan.set_flag(i, flag::CLAIMED, true);
        Ok(())
    }

    /// Records that step `i`'s node was claimed for this claim when its VJP ran.
    fn claimed_by_vjp(&mut self, i: usize) {
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

/// Where propagated gradients go.
pub(crate) enum Sink<'a> {
    /// `backward`: leaves, and non-leaves that asked to retain their gradient.
    Accumulate,
    /// Functional `grad`: only the requested tensors, by identity.
    Collect(&'a dyn Fn(&Tensor) -> bool),
}

/// Gradients staged per tensor, summed per logical position in the order they arrive.
#[derive(Default)]
pub(crate) struct Staging {
    entries: IdMap<(Tensor, Sum)>,
}

impl Staging {
    pub(crate) fn add(&mut self, target: &Tensor, g: Tensor) -> Result<()> {
        match self.entries.get_mut(&target.id()) {
            Some((_, sum)) => sum.add(&g)?,
            None => {
                self.entries
                    .insert(target.id(), (target.clone(), Sum::Shared(g)));
            }
        }
        Ok(())
    }

    /// The gradient of every staged tensor, keyed by tensor identity: its summed cotangent,
    /// with broadcast aliases folded (per-slot sums at every position of a slot).
    pub(crate) fn finish(self) -> Result<IdMap<(Tensor, Tensor)>> {
        self.entries
            .into_iter()
            .map(|(k, (t, s))| {
                let g = gradient::fold_for(&t, s.into_tensor()?)?;
                Ok((k, (t, g)))
            })
            .collect()
    }

    /// Adds every staged gradient into its tensor's `.grad` as a detached copy in fresh
    /// storage of the tensor's carrier class. All new values are computed before any is set.
    pub(crate) fn commit(self) -> Result<()> {
        let mut entries: Vec<(Tensor, Tensor)> = self.finish()?.into_values().collect();
        entries.sort_by_key(|(t, _)| t.id());
        let (targets, gradients): (Vec<Tensor>, Vec<Tensor>) = entries.into_iter().unzip();
        let mut guards = Vec::with_capacity(targets.len());
        let mut new = Vec::with_capacity(targets.len());
        for (t, g) in targets.iter().zip(gradients) {
            let guard = t.state();
            let class = t.part_carrier(0);
            let value = match &guard.grad {
                Some(old) => gradient::add(&g, old, class)?,
                None => gradient::detached(g, class)?,
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

/// The cotangent a node's VJP runs with: of its one result, or of each of its results
/// (`None` for a result the traversal did not reach).
pub(crate) enum Cotangent<'a> {
    One(Tensor),
    Several(&'a [Option<Tensor>]),
    /// K cotangents of the one result along a leading batch mode of extent `.1`; `.2` is the
    /// result's layout, when known.
    Batched(Tensor, usize, Option<Arc<Layout>>),
}

/// The cotangents a traversal has yet to hand to their nodes: only the slots that received
/// one and whose node has not run yet, so that a million-node chain keeps one at a time, not a
/// table of a million. A slot that receives several keeps their running sum. The slot filled
/// last stays out of the map: along a chain, each cotangent is taken by the very next node.
#[derive(Default)]
struct Pending {
    last: Option<(usize, Sum)>,
    rest: IdMap<Sum>,
}

impl Pending {
    /// Slot `slot`'s cotangent `g`, and no other.
    fn seeded(slot: usize, g: Tensor) -> Pending {
        Pending {
            last: Some((slot, Sum::Shared(g))),
            rest: IdMap::default(),
        }
    }

    /// Adds `g` to slot `slot`'s cotangent; a refused contribution leaves the slot as it was.
    fn add(&mut self, slot: usize, g: Tensor) -> Result<()> {
        match &mut self.last {
            Some((s, sum)) if *s == slot => return sum.add(&g),
            _ => {}
        }
        if let Some(sum) = self.rest.get_mut(&(slot as u64)) {
            return sum.add(&g);
        }
        if let Some((s, sum)) = self.last.replace((slot, Sum::Shared(g))) {
            self.rest.insert(s as u64, sum);
        }
        Ok(())
    }

    /// Slot `slot`'s cotangent, taken out; `None` when it received none.
    fn take(&mut self, slot: usize) -> Result<Option<Tensor>> {
        let sum = match self.last.take() {
            Some((s, sum)) if s == slot => Some(sum),
            last => {
                self.last = last;
                if self.rest.is_empty() {
                    None
                } else {
                    self.rest.remove(&(slot as u64))
                }
            }
        };
        sum.map(Sum::into_tensor).transpose()
    }
}

/// Runs `node`'s VJP for cotangent `g` (of its result, or of each of its results): checks its
/// saved inputs' versions, runs its backward with graph construction disabled, telling it
/// which differentiable inputs' gradients are `needed`, checks the versions again (a write
/// racing with the VJP must not leak into its result), checks the gradient count and
/// validates each gradient against its input (spec: cotangent layouts must address the target
/// exactly), after laying it out for the input when the node asks for that
/// ([`Operation::__lays_out_gradients`]: `#[differentiable]` nodes' `backward_into`). Hands
/// `(input index, input, gradient per logical position)` to `each` for every needed input
/// that received one. `needed` and `each` run while the node's saved state is
/// locked, so they must not touch the node; `ready` runs between the first look and the VJP,
/// unlocked. With a `claim` token, a successful run also claims the node for that traversal's
/// release, under the same lock.
pub(crate) fn run_vjp(
    node: &dyn Operation,
    g: Cotangent<'_>,
    claim: Option<TraversalToken>,
    needed: impl Fn(usize, &Tensor) -> bool,
    ready: impl FnOnce(),
    grads: &mut Vec<Option<Tensor>>,
    mut each: impl FnMut(usize, &Tensor, Tensor) -> Result<()>,
) -> Result<()> {
    // One lock for the version check and the mask; most nodes have at most four inputs. The
    // spec checks versions before the VJP runs (so it never sees modified inputs), and the
    // check after it keeps a write racing with it out of its result.
    let mut small = [false; 4];
    let mut large = Vec::new();
    let (n, modified) = node.saved().with(node.name(), |s| {
        let n = s.inputs.len();
        let mask: &mut [bool] = if n <= small.len() {
            &mut small[..n]
        } else {
            large.resize(n, false);
            &mut large
        };
        for ((j, input), m) in s.inputs().enumerate().zip(mask.iter_mut()) {
            // `needed` sees every input (a traversal that discovers as it goes reads them all)
            *m = needed(j, input) && input.is_differentiable();
        }
        (n, s.modification())
    })?;
    if let Some(m) = modified {
        return Err(modified_error(node, m));
    }
    let mask: &[bool] = if n <= small.len() {
        &small[..n]
    } else {
        &large
    };
    ready();
    let mut batch = None;
    // `backward_into`'s gradients are laid out here, under the lock taken below anyway
    let lay_out = matches!(g, Cotangent::One(_)) && node.__lays_out_gradients();
    {
        let _guard = no_grad();
        match g {
            Cotangent::One(g) => node.backward_into(g, mask, grads),
            Cotangent::Several(gs) => node.backward_outputs(gs, mask).map(|v| *grads = v),
            Cotangent::Batched(g, k, result) => {
                batch = Some(k);
                match node.backward_batched(&g, mask) {
                    Some(v) => v,
                    None => one_by_one(node, &g, (k, result.as_deref()), mask),
                }
                .map(|v| *grads = v)
            }
        }
        .map_err(|e| {
            // a VJP that failed because a write raced with it reports the write
            match node.saved().with(node.name(), Saved::modification) {
                Ok(Some(m)) => modified_error(node, m),
                _ => e.context(format!("backward of {}", describe_node(node))),
            }
        })?;
    }
    // No method of the node runs while its state is locked (one may read its own state):
    // failures are described after the lock is released.
    let returned = grads.len();
    let Ok((failure, claimed)) = node.saved().with_then_claim(node.name(), claim, |s| {
        if let Some(m) = s.modification() {
            return Some(Failure::Modified(m));
        }
        if returned != s.inputs.len() {
            return Some(Failure::Count(s.inputs.len()));
        }
        for (j, (gi, input)) in grads.drain(..).zip(s.inputs()).enumerate() {
            let Some(gi) = gi else { continue };
            if !mask.get(j).copied().unwrap_or(false) {
                continue;
            }
            let checked = match batch {
                Some(k) => gradient::check_batched_cotangent(input, gi, k),
                None if lay_out => {
                    if gradient::addresses_exactly(input, &gi) {
                        Ok(gi)
                    } else {
                        crate::__private::laid_out(input, gi)
                            .and_then(|gi| gradient::check_cotangent(input, gi))
                    }
                }
                None => gradient::check_cotangent(input, gi),
            };
            let gi = match checked {
                Ok(gi) => gi,
                Err(e) => return Some(Failure::Gradient(j, e)),
            };
            if let Err(e) = each(j, input, gi) {
                return Some(Failure::Sink(e));
            }
        }
        None
    }) else {
        bail!(
            Runtime,
            "the saved state of {} was released while its backward ran, by Operation::release or by a concurrent traversal without retain_graph=True",
            describe_node(node)
        );
    };
    match failure {
        None => match claim.filter(|_| !claimed) {
            Some(me) => Err(node.saved().claim_error(node.name(), me)),
            None => Ok(()),
        },
        Some(Failure::Modified(m)) => Err(modified_error(node, m)),
        Some(Failure::Count(expected)) => bail!(
            Value,
            "backward of {} returned {returned} gradients for {expected} saved tensor inputs",
            describe_node(node)
        ),
        Some(Failure::Gradient(j, e)) => Err(e.context(format!(
            "gradient for {} (recorded at {})",
            describe_input(node, j),
            node.saved().location()
        ))),
        Some(Failure::Sink(e)) => Err(e),
    }
}

/// The batched VJP of a node without one: its VJP for each of the `k` cotangents along the
/// leading batch mode of `g`, each input's gradients stacked along a new leading mode (zeros
/// for a batch index without one, `None` when no index has one).
fn one_by_one(
    node: &dyn Operation,
    g: &Tensor,
    (k, result): (usize, Option<&Layout>),
    mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let mut runs = Vec::with_capacity(k);
    for i in 0..k {
        runs.push(node.backward_needed(&batch_index(g, i, result)?, mask)?);
    }
    let count = runs.first().map_or(0, Vec::len);
    ensure!(
        runs.iter().all(|r| r.len() == count),
        Value,
        "backward of {} returned different gradient counts for the cotangents of one batch",
        node.name()
    );
    // Each per-index gradient obeys the rules an unbatched run's would (a count that differs
    // from the saved inputs' is reported by the caller).
    let inputs: Vec<Tensor> = node
        .saved()
        .with(node.name(), |s| s.inputs().cloned().collect())?;
    (0..count)
        .map(|j| {
            let Some(like) = runs.iter().find_map(|r| r[j].clone()) else {
                return Ok(None);
            };
            let input = inputs.get(j).filter(|_| mask.get(j) == Some(&true));
            let mut values = crate::storage::allocation::with_capacity(like.size().saturating_mul(k))?;
            for (i, r) in runs.iter().enumerate() {
                match &r[j] {
                    Some(gj) => {
                        if let Some(input) = input {
                            gradient::check_cotangent(input, gj.clone()).map_err(|e| {
                                e.context(format!(
                                    "gradient for {} at batch index {i}",
                                    describe_input(node, j)
                                ))
                            })?;
                        }
                        ensure!(
                            gj.shape() == like.shape(),
                            Value,
                            "backward of {} returned gradients of shapes {} and {} for input {j} in one batch",
                            node.name(),
                            like.shape(),
                            gj.shape()
                        );
                        values.extend(gj.values::<f32>()?);
                    }
                    None => values.resize(values.len() + like.size(), 0.0),
                }
            }
            let layout =
                Layout::compact_row_major(crate::batch::batched_shape(like.shape(), k)?)?;
            like.f32_with_layout(values, Arc::new(layout)).map(Some)
        })
        .collect()
}

/// Cotangent `i` of the K along `g`'s leading mode, with the shape of `result` (the layout of
/// the result they belong to, when known): selecting the batch index leaves the other modes
/// as a tuple, and a result whose shape is one bare extent (`Shape(n)`) gets it back.
fn batch_index(g: &Tensor, i: usize, result: Option<&Layout>) -> Result<Tensor> {
    let gi = g.raw_select(0, i)?;
    let Some(result) = result else { return Ok(gi) };
    if gi.shape() == result.shape() {
        return Ok(gi);
    }
    match (result.shape().tree(), gi.layout().leaves()) {
        (crate::IntTuple::Int(n), [leaf]) if gi.layout().rank() == 1 => {
            let bare = Layout::new(*n, leaf.stride as i64)?;
            gi.with_layout_detached(bare, gi.offset())
        }
        _ => Ok(gi),
    }
}

/// Why a node's gradients were refused.
enum Failure {
    /// A saved input was modified while the VJP ran.
    Modified(Modification),
    /// The VJP returned a gradient count other than this number of saved inputs.
    Count(usize),
    /// The gradient for input `.0` does not fit it.
    Gradient(usize, crate::Error),
    /// Staging the gradient failed.
    Sink(crate::Error),
}

fn modified_error(node: &dyn Operation, (i, (id, saved, now)): Modification) -> crate::Error {
    crate::Error::Runtime(format!(
        "in-place modification of {} (recorded at {}): {id} is at version {now} but the forward pass saved version {saved}; run backward before mutating saved tensors",
        describe_input(node, i),
        node.saved().location()
    ))
}

#[cfg(test)]
mod tests {
    use super::{flag, Plan, Span, NO_PRODUCER};
    use crate::{ops::mul_scalar, shape, Tensor};

    /// A span keeps its count and its inline marker apart, and refuses a count that would
    /// reach the marker.
    #[test]
    fn a_span_keeps_its_count_and_marker_apart() {
        assert_eq!(std::mem::size_of::<Span>(), 8);
        let s = Span::table(7, Span::COUNT as usize).unwrap();
        assert!(!s.inline());
        assert_eq!((s.first, s.count), (7, Span::COUNT));
        assert!(Span::table(0, Span::COUNT as usize + 1).is_err());
        let table = [9, 8, 7];
        assert_eq!(
            Span::table(1, 2).unwrap().producers(&table).as_slice(),
            [8, 7]
        );
        let s = Span::inline_producer(5);
        assert!(s.inline());
        assert_eq!(s.producers(&table).as_slice(), [5]);
        assert_eq!(Span::of_flags(4, flag::NEXT).producers(&[]).as_slice(), [5]);
        assert_eq!(
            Span::of_flags(4, flag::LEAF | flag::USEFUL)
                .producers(&[])
                .as_slice(),
            [NO_PRODUCER]
        );
        assert!(Span::of_flags(4, flag::USEFUL)
            .producers(&[])
            .as_slice()
            .is_empty());
    }

    /// The slot filled last waits outside the map; every slot keeps its own running sum,
    /// and a refused contribution changes nothing.
    #[test]
    fn pending_cotangents_sum_per_slot() {
        let t = |v: Vec<f32>| {
            let n = v.len();
            Tensor::from_vec(v, shape![n]).unwrap()
        };
        let mut p = super::Pending::default();
        p.add(3, t(vec![1.0, 2.0])).unwrap();
        p.add(5, t(vec![10.0])).unwrap();
        p.add(3, t(vec![0.5, 0.5])).unwrap();
        assert!(p.add(5, t(vec![1.0, 1.0])).is_err(), "another shape");
        p.add(9, t(vec![7.0])).unwrap();
        let values = |g: Option<Tensor>| g.unwrap().values::<f32>().unwrap();
        assert_eq!(values(p.take(5).unwrap()), [10.0]);
        assert_eq!(values(p.take(3).unwrap()), [1.5, 2.5]);
        assert!(p.take(3).unwrap().is_none(), "taken once");
        assert!(p.take(7).unwrap().is_none());
        assert_eq!(values(p.take(9).unwrap()), [7.0]);
        assert!(p.last.is_none() && p.rest.is_empty());
    }

    /// Every step's producers, as the plan describes them, against the graph itself: input
    /// `j` of step `i` is produced by the step holding its producing node (result `k` going
    /// to that step's slot `k`), or by none; and the order puts consumers first.
    fn check_plan(plan: &Plan) {
        use std::sync::Arc;
        let index = |n: &crate::graph::op::Node| plan.nodes.iter().position(|m| Arc::ptr_eq(m, n));
        let order: Vec<usize> = plan.order().collect();
        let at = |i: usize| order.iter().position(|&k| k == i).unwrap();
        for (i, node) in plan.nodes.iter().enumerate() {
            let edges: Vec<Option<(usize, usize)>> = node
                .saved()
                .with(node.name(), |s| {
                    s.inputs()
                        .map(|t| t.producer().map(|(p, k, _)| (index(&p).unwrap(), k)))
                        .collect()
                })
                .unwrap();
            let span = plan.span(i);
            let producers = plan.producers_of(i);
            assert_eq!(producers.as_slice().len(), edges.len(), "step {i}");
            for (j, (&p, edge)) in producers.as_slice().iter().zip(&edges).enumerate() {
                match *edge {
                    None => assert_eq!(p, NO_PRODUCER, "step {i} input {j}"),
                    Some((q, k)) => {
                        assert_eq!(p as usize, q, "step {i} input {j}");
                        let slot = plan.slots_of(q).start + k;
                        assert_eq!(plan.edge_slot(span, j, q), slot, "step {i} input {j}");
                        assert!(at(i) < at(q), "consumers first");
                    }
                }
            }
        }
    }

    /// Plans whose spans appear part way (a chain above a binary node), from the start (a
    /// root of several results), or after a result other than 0 is read, describe every
    /// edge exactly.
    #[test]
    fn plans_describe_every_edge_whatever_their_shape() {
        use crate::ops::{add, unbind};
        let leaf = |v: Vec<f32>| {
            let n = v.len();
            Tensor::from_vec(v, shape![n]).unwrap()
        };
        let (x, x2) = (leaf(vec![1.0, 2.0]), leaf(vec![3.0, 4.0]));
        x.retain_grad(true).unwrap();
        x2.retain_grad(true).unwrap();
        let mut y = add(&mul_scalar(&x, 2.0).unwrap(), &x2).unwrap();
        for _ in 0..3 {
            y = mul_scalar(&y, 0.5).unwrap();
        }
        let plan = Plan::discover(&y.autograd_ctx().unwrap(), 0).unwrap();
        assert_eq!(plan.len(), 5);
        assert!(plan.flags[..3].iter().all(|f| f.get() & flag::NEXT != 0));
        assert_eq!(plan.spans.len(), 5, "the add node needs spans");
        check_plan(&plan);

        let rows = unbind(&mul_scalar(&x, 3.0).unwrap(), 0).unwrap();
        let mut z = mul_scalar(&rows[1], 2.0).unwrap();
        z = add(&z, &rows[0]).unwrap();
        z = mul_scalar(&z, 4.0).unwrap();
        let plan = Plan::discover(&z.autograd_ctx().unwrap(), 0).unwrap();
        assert!(plan.outputs.is_some());
        check_plan(&plan);
        let tail = mul_scalar(&rows[1], 2.0).unwrap();
        let plan = Plan::discover(&tail.autograd_ctx().unwrap(), 0).unwrap();
        assert!(plan.outputs.is_some(), "the edge reads result 1");
        check_plan(&plan);

        let (node, k) = rows[1].autograd_result().unwrap();
        assert_eq!(k, 1);
        let plan = Plan::discover(&node, k).unwrap();
        assert!(plan.outputs.is_some() && plan.spans.len() == plan.len());
        check_plan(&plan);
    }

    /// A chain of unary ops keeps no producer table and no order (discovery order is
    /// topological); a node reached twice needs both.
    #[test]
    fn a_chain_plan_keeps_only_its_steps() {
        let x = Tensor::from_vec(vec![1.0f32], shape![1]).unwrap();
        x.retain_grad(true).unwrap();
        let mut y = x.clone();
        for _ in 0..5 {
            y = mul_scalar(&y, 2.0).unwrap();
        }
        let plan = Plan::discover(&y.autograd_ctx().unwrap(), 0).unwrap();
        assert_eq!(plan.len(), 5);
        assert!(plan.spans.is_empty() && plan.producers.is_empty() && plan.order.is_none());
        let producers: Vec<Vec<u32>> = (0..5)
            .map(|i| plan.producers_of(i).as_slice().to_vec())
            .collect();
        assert_eq!(producers, [[1], [2], [3], [4], [NO_PRODUCER]]);
        assert_eq!(plan.order().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);

        let z = mul_scalar(&y, 3.0).unwrap();
        let diamond = crate::ops::add(&z, &mul_scalar(&z, 0.5).unwrap()).unwrap();
        let plan = Plan::discover(&diamond.autograd_ctx().unwrap(), 0).unwrap();
        assert_eq!(plan.len(), 8);
        assert!(plan.order.is_some(), "z's node is reached twice");
        assert_eq!(plan.spans.len(), 8, "the add node has two inputs");
        let order: Vec<usize> = plan.order().collect();
        let at = |i: usize| order.iter().position(|&k| k == i).unwrap();
        for i in 0..plan.len() {
            for &p in plan.producers_of(i).as_slice() {
                assert!(
                    p == NO_PRODUCER || at(i) < at(p as usize),
                    "consumers first"
                );
            }
        }
    }
}

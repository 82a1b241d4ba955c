//! The plan of a traversal: the reached nodes, their edges and a topological order.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::{ensure, Result};
use crate::graph::op::{describe_node, Node, Operation, TraversalToken};
use crate::runtime::ids::IdMap;
use crate::tensor::Tensor;

pub(crate) fn node_key(node: &Node) -> u64 {
    node.id().get()
}

pub(super) const NO_PRODUCER: u32 = u32::MAX;

/// Per-step flags, one byte a step.
pub(super) mod flag {
    /// Propagating through this node can reach a requested tensor.
    pub(in crate::engine) const USEFUL: u8 = 1;
    /// Another traversal may reach this node other than through this plan's own nodes: the
    /// root, and every node met through an edge that was not its sole way in.
    pub(in crate::engine) const SHARED: u8 = 1 << 1;
    /// The node has one saved input, produced by the next step and reading its result 0, met
    /// before any node of several results: what discovery finds along a chain of unary ops,
    /// which then needs no [`super::Span`].
    pub(in crate::engine) const NEXT: u8 = 1 << 2;
    /// The node has one saved input, without a producer (a leaf, or a tensor outside the
    /// graph).
    pub(in crate::engine) const LEAF: u8 = 1 << 3;
    /// The plan's [`super::Claim`] holds the node.
    pub(in crate::engine) const CLAIMED: u8 = 1 << 4;
}

/// Where a step's input producers are, for plans in which some step's are not given by its
/// flags ([`flag::NEXT`], [`flag::LEAF`], or no inputs). Indices are `u32` so that a plan for
/// a million-node graph stays small; a graph of four billion nodes would not fit in memory
/// anyway.
#[derive(Clone, Copy, Default)]
pub(super) struct Span {
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

    pub(super) fn table(first: usize, count: usize) -> Result<Span> {
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

    pub(super) fn inline_producer(producer: u32) -> Span {
        Span {
            first: producer,
            count: Span::INLINE | 1,
        }
    }

    /// The span a step's flags stand for (its producers are not in the table).
    pub(super) fn of_flags(i: usize, flags: u8) -> Span {
        if flags & flag::NEXT != 0 {
            Span::inline_producer(i as u32 + 1)
        } else if flags & flag::LEAF != 0 {
            Span::inline_producer(NO_PRODUCER)
        } else {
            Span::default()
        }
    }

    pub(super) fn inline(self) -> bool {
        self.count & Span::INLINE != 0
    }

    pub(super) fn producers(self, all: &[u32]) -> Producers<'_> {
        if self.inline() {
            return Producers::One(self.first);
        }
        let first = self.first as usize;
        Producers::Table(&all[first..first + (self.count & Span::COUNT) as usize])
    }
}

/// A step's input producers (`NO_PRODUCER` for an input without one), in input order.
#[derive(Clone, Copy)]
pub(super) enum Producers<'a> {
    One(u32),
    Table(&'a [u32]),
}

impl Producers<'_> {
    pub(super) fn as_slice(&self) -> &[u32] {
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
    pub(super) nodes: Vec<Node>,
    /// Each step's [`flag`]s.
    pub(super) flags: Vec<Cell<u8>>,
    /// Each step's span, or empty while every step's producers follow from its flags.
    pub(super) spans: Vec<Span>,
    /// For every saved input of a step with a table span, the step of its producing node, or
    /// `NO_PRODUCER`.
    pub(super) producers: Vec<u32>,
    /// Where the plan has nodes with several results: cotangent slots per result.
    pub(super) outputs: Option<Box<Outputs>>,
    /// The number of roots: steps `0..roots`.
    pub(super) roots: usize,
    /// The slot of the differentiated result of the root (of [`Plan::discover`]).
    pub(super) root_slot: usize,
    /// The order steps run in ([`Plan::topological_order`]); `None` when it is discovery
    /// order, as along a chain.
    pub(super) order: Option<Vec<u32>>,
    /// Set by [`Claim::finish`] to its traversal: dropping the plan releases the nodes that
    /// traversal claimed.
    pub(super) release: Cell<Option<TraversalToken>>,
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
pub(super) struct Outputs {
    base: Vec<u32>,
    counts: Vec<u32>,
    edge: Vec<u32>,
    total: u32,
}

impl Outputs {
    /// Slots for the `steps` single-result steps and `edges` edges seen so far.
    pub(super) fn new(steps: usize, edges: usize) -> Result<Outputs> {
        Ok(Outputs {
            base: (0..index_u32(steps)?).collect(),
            counts: vec![1; steps],
            edge: vec![0; edges],
            total: index_u32(steps)?,
        })
    }

    pub(super) fn push_step(&mut self, results: usize) -> Result<()> {
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
    pub(super) fn topological_order(&self, tree_first: bool) -> Result<Vec<u32>> {
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
    pub(super) fn count_edges(
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
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Step `i`'s flags.
    pub(super) fn flags(&self, i: usize) -> u8 {
        self.flags[i].get()
    }

    pub(super) fn useful(&self, i: usize) -> bool {
        self.flags(i) & flag::USEFUL != 0
    }

    pub(super) fn set_flag(&self, i: usize, f: u8, on: bool) {
        let old = self.flags(i);
        self.flags[i].set(if on { old | f } else { old & !f });
    }

    /// Step `i`'s span: its own, or the one its flags stand for.
    pub(super) fn span(&self, i: usize) -> Span {
        self.spans
            .get(i)
            .copied()
            .unwrap_or_else(|| Span::of_flags(i, self.flags(i)))
    }

    /// The producing steps of step `i`'s inputs.
    pub(super) fn producers_of(&self, i: usize) -> Producers<'_> {
        self.span(i).producers(&self.producers)
    }

    /// The number of cotangent slots (one per result of every step).
    pub(super) fn slot_count(&self) -> usize {
        self.outputs
            .as_ref()
            .map_or(self.len(), |o| o.total as usize)
    }

    /// The slots of step `i`'s results.
    pub(super) fn slots_of(&self, i: usize) -> std::ops::Range<usize> {
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
    pub(super) fn edge_slot(&self, span: Span, j: usize, producer: usize) -> usize {
        match &self.outputs {
            None => producer,
            Some(o) if span.inline() => o.base[producer] as usize,
            Some(o) => o.base[producer] as usize + o.edge[span.first as usize + j] as usize,
        }
    }

    /// The steps in topological order, consumers first.
    pub(super) fn order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).map(|k| self.in_order(k))
    }

    /// The step `k`-th in topological order.
    pub(super) fn in_order(&self, k: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use super::{flag, Plan, Span, NO_PRODUCER};
    use crate::{ops::mul_scalar, shape, Tensor};

    /// A span keeps its count and its inline marker apart, and refuses a count that would
    /// reach the marker.
    #[test]
    pub(super) fn a_span_keeps_its_count_and_marker_apart() {
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

    /// Every step's producers, as the plan describes them, against the graph itself: input
    /// `j` of step `i` is produced by the step holding its producing node (result `k` going
    /// to that step's slot `k`), or by none; and the order puts consumers first.
    pub(super) fn check_plan(plan: &Plan) {
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
    pub(super) fn plans_describe_every_edge_whatever_their_shape() {
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
    pub(super) fn a_chain_plan_keeps_only_its_steps() {
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

//! Engine properties on random DAGs whose values take several shapes, joined by chained
//! broadcast views.
//!
//! A DAG draws one family of shapes, its *levels*, smallest first, each a broadcast source of
//! the next: `(1) (3) (2,3)`, `(1) (3) (2,3) (4,2,3)`, `(1) (3) ((3,2)) (2,(3,2))` or
//! `(1) (3) (2,3) ((2,2),3)`. Its values are leaves at any level and the results of
//! - `add` and `mul`, the operand at the lower level lifted to the higher one first;
//! - a broadcast mean: `sum`, `mul_scalar`, then lifted from `(1)` along a random path;
//! - a lift: a broadcast view of any earlier value (a leaf, an intermediate, a value that is
//!   already a broadcast view) at its own level or a larger one, along a random path of levels.
//!
//! One lift step is `broadcast_to` where numpy's rules make the target shape, and otherwise the
//! test-local `expand`, a stride-0 view into a nested shape that keeps the strides of the modes
//! it maps (so it may broadcast something already broadcast). Chains such as
//! `broadcast_to(broadcast_to(x, [2,3]), [4,2,3])`, `expand` of a `broadcast_to`, re-broadcasts
//! at the same level and broadcasts of intermediate results all occur, as does a broadcast root.
//! Leaves are row- or column-major, optionally strided with holes, with stride 0 on any set of
//! leaf modes, top-level or nested.
//!
//! Central differences are always taken with respect to *storage slots*: a value is given a
//! private copy of its storage under its own layout, and each slot is perturbed; the folded
//! gradient must carry that slot's derivative at every logical position of the slot.
//!
//! (a) `grad` equals what `backward` accumulates, and equals the central differences of
//!     `<cot, f(x)>` for the very cotangent `cot`, per storage slot of every leaf; the DAG also
//!     passes `gradcheck`.
//! (b) Batched `grad` at index k equals unbatched `grad` with cotangent k, for every value of
//!     the DAG (leaves and intermediates, broadcast views among them).
//! (c) A failure injected at a random node of the DAG (a VJP that fails, returns the wrong
//!     number of gradients or a gradient of the wrong shape; a saved input mutated after the
//!     forward pass; a node released by an earlier traversal), reached after some gradients were
//!     staged, leaves every `.grad` (leaves and retained intermediates) bit-identical and
//!     releases no node that was live.
//! (d) On DAGs whose root is a broadcast view, `backward` and `backwards_traversal` from the
//!     root's node accumulate bit-identical `.grad` on every leaf and retained intermediate
//!     (the root's own `.grad` only by `backward`), and the leaves' gradients match central
//!     differences.
//! (e) Retained intermediates (every broadcast one among them) get the folded sum: their
//!     `.grad` is in their own layout when injective, else in the canonical one, holds the
//!     per-slot central difference of `<cot, f>` with respect to the intermediate's own storage
//!     at every position of the slot, and equals what functional `grad` returns for them; a
//!     second traversal doubles it exactly.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autograd_core::{
    backwards_traversal, grad, gradcheck, no_grad, record, shape, CpuCarrier, Error, GradOptions,
    GradcheckOptions, IntTuple, Layout, Node, Operation, Result, SavedState, Scalar, Shape, Stride,
    Tensor,
};
use autograd_ops::{add, broadcast_to, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, vals};
use proptest::prelude::*;

/// The family of shapes of one DAG.
#[derive(Debug, Clone, Copy)]
enum DagShape {
    /// `(1) (3) (2,3)`: every lift is `broadcast_to`.
    Flat,
    /// `(1) (3) (2,3) (4,2,3)`: every lift is `broadcast_to`, chains up to three deep.
    Stacked,
    /// `(1) (3) ((3,2)) (2,(3,2))`: `(3)` is expanded into the nested mode, which
    /// `broadcast_to` then keeps.
    NestedLast,
    /// `(1) (3) (2,3) ((2,2),3)`: `broadcast_to` up to `(2,3)`, then an `expand` with a stride-0
    /// leaf inside the nested first mode.
    NestedFirst,
}

impl DagShape {
    /// The levels, smallest first, each with one tag per leaf mode (tree order): lifting a
    /// value to a level keeps the strides of the leaf modes whose tags the value's level has,
    /// and gives every other leaf mode stride 0. `_` matches nothing.
    fn levels(self) -> Vec<(Shape, &'static str)> {
        match self {
            DagShape::Flat => vec![(shape![1], "_"), (shape![3], "c"), (shape![2, 3], "bc")],
            DagShape::Stacked => vec![
                (shape![1], "_"),
                (shape![3], "c"),
                (shape![2, 3], "bc"),
                (shape![4, 2, 3], "dbc"),
            ],
            DagShape::NestedLast => vec![
                (shape![1], "_"),
                (shape![3], "b"),
                (shape![[3, 2]], "bc"),
                (shape![2, [3, 2]], "abc"),
            ],
            DagShape::NestedFirst => vec![
                (shape![1], "_"),
                (shape![3], "c"),
                (shape![2, 3], "bc"),
                (shape![[2, 2], 3], "bac"),
            ],
        }
    }

    fn count(self) -> usize {
        self.levels().len()
    }

    fn shape(self, level: usize) -> Shape {
        self.levels().swap_remove(level).0
    }
}

/// Whether `broadcast_to(x, top-level extents of dst)` makes exactly `dst` from a tensor of
/// shape `src`: the leading modes of `dst` are leaves, and each mode of `src` equals its
/// counterpart or is an extent-1 leaf where `dst` has a leaf.
fn numpy_broadcastable(src: &Shape, dst: &Shape) -> bool {
    let (s, d) = (src.0.modes(), dst.0.modes());
    if s.len() > d.len() {
        return false;
    }
    let lead = d.len() - s.len();
    d[..lead].iter().all(|m| matches!(m, IntTuple::Int(_)))
        && s.iter().zip(&d[lead..]).all(|(a, b)| {
            a == b || (matches!(a, IntTuple::Int(1)) && matches!(b, IntTuple::Int(_)))
        })
}

/// One lift step: a broadcast view of `x` (a value at level `from`) at level `to >= from`.
fn lift(shape: DagShape, x: &Tensor, from: usize, to: usize) -> Result<Tensor> {
    let levels = shape.levels();
    let (target, tags) = &levels[to];
    if numpy_broadcastable(x.shape(), target) {
        let dims: Vec<usize> = target
            .0
            .modes()
            .iter()
            .map(|m| m.product().expect("small shape") as usize)
            .collect();
        let out = broadcast_to(x, &dims)?;
        assert_eq!(out.shape(), target, "broadcast_to made another shape");
        return Ok(out);
    }
    let own = levels[from].1;
    let map: Vec<Option<usize>> = tags.chars().map(|t| own.find(t)).collect();
    expand(x, target, &map)
}

/// Lifts `x` (at level `from`) through every level of `path` in turn.
fn lift_along(shape: DagShape, x: Tensor, from: usize, path: &[usize]) -> Result<Tensor> {
    let mut cur = (x, from);
    for &to in path {
        cur = (lift(shape, &cur.0, cur.1, to)?, to);
    }
    Ok(cur.0)
}

/// How a leaf is laid out over its storage; defined for every shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeafKind {
    /// First leaf mode fastest (the canonical order) rather than row-major.
    col_major: bool,
    /// Every stride doubled, at storage offset 1: holes.
    holes: bool,
    /// Leaf modes (bit i: leaf i in tree order, at whatever depth) given stride 0.
    zeros: u8,
}

impl LeafKind {
    const ROW_MAJOR: LeafKind = LeafKind {
        col_major: false,
        holes: false,
        zeros: 0,
    };
}

/// Storage values drawn per leaf: enough for the largest layout (`(4,2,3)` with holes).
const SEED_LEN: usize = 48;

fn leaf_layout(shape: &Shape, kind: LeafKind) -> Layout {
    let extents = shape.0.leaves();
    let mut modes = Vec::new();
    let mut start = 0;
    for m in shape.0.modes() {
        let n = m.leaves().len();
        modes.push(start..start + n);
        start += n;
    }
    // leaf indices (tree order) fastest first
    let order: Vec<usize> = if kind.col_major {
        (0..extents.len()).collect()
    } else {
        modes.into_iter().rev().flatten().collect()
    };
    let mut strides = vec![0i64; extents.len()];
    let mut next = if kind.holes { 2 } else { 1 };
    for i in order {
        if kind.zeros & (1 << i) == 0 {
            strides[i] = next;
            next *= extents[i];
        }
    }
    let mut it = strides.into_iter();
    let stride = Stride(shape.0.map_leaves(&mut |_| it.next().unwrap_or(0)));
    Layout::new(shape.clone(), stride).expect("valid leaf layout")
}

fn leaf(shape: &Shape, kind: LeafKind, seed: &[f32]) -> Tensor {
    let layout = leaf_layout(shape, kind);
    let offset = usize::from(kind.holes);
    let storage = seed[..offset + layout.cosize()].to_vec();
    Tensor::from_parts(CpuCarrier::from_vec(storage), layout, offset).expect("valid leaf")
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// `a + b`, the lower-level operand lifted to the other's level.
    Add(usize, usize),
    /// `a * b`, likewise.
    Mul(usize, usize),
    /// `sum(a) / size(a)`, a `(1)` tensor lifted along the path of levels.
    Mean(usize, Vec<usize>),
    /// `a` lifted along the path of levels (non-decreasing, from `a`'s level).
    Lift(usize, Vec<usize>),
}

impl Op {
    fn operands(&self) -> Vec<usize> {
        match *self {
            Op::Add(a, b) | Op::Mul(a, b) => vec![a, b],
            Op::Mean(a, _) | Op::Lift(a, _) => vec![a],
        }
    }
}

/// A random DAG: leaves, then ops whose operands are earlier values (leaves or op results).
#[derive(Debug, Clone)]
struct Dag {
    shape: DagShape,
    /// Each leaf's level, layout and storage values.
    leaves: Vec<(usize, LeafKind, Vec<f32>)>,
    ops: Vec<Op>,
}

/// A path of levels from `from` to `to`: the levels in `from..to` whose bit is set in `hops`
/// (`from` itself: a re-broadcast at the same level first), `to`, and `to` once more when bit
/// 7 is set.
fn path(from: usize, to: usize, hops: u8) -> Vec<usize> {
    let mut p: Vec<usize> = (from..to).filter(|l| hops & (1 << l) != 0).collect();
    p.push(to);
    if hops & 0x80 != 0 {
        p.push(to);
    }
    p
}

impl Dag {
    /// The level of every value, leaves first.
    fn levels(&self) -> Vec<usize> {
        let mut levels: Vec<usize> = self.leaves.iter().map(|l| l.0).collect();
        for op in &self.ops {
            let l = match op {
                Op::Add(a, b) | Op::Mul(a, b) => levels[*a].max(levels[*b]),
                Op::Mean(_, p) | Op::Lift(_, p) => *p.last().expect("a non-empty path"),
            };
            levels.push(l);
        }
        levels
    }

    /// Appends an op whose result is a genuine broadcast view of the current output: a lift to
    /// a larger level, or, from the largest, a mean broadcast to a level of several elements.
    fn broadcast_root(&mut self, t: u8, hops: u8) {
        let levels = self.levels();
        let last = levels.len() - 1;
        let n = self.shape.count();
        let from = levels[last];
        self.ops.push(if from + 1 < n {
            let to = from + 1 + t as usize % (n - 1 - from);
            Op::Lift(last, path(from, to, hops))
        } else {
            let to = 1 + t as usize % (n - 1);
            Op::Mean(last, path(0, to, hops))
        });
    }
}

fn dag() -> impl Strategy<Value = Dag> {
    let shape = prop_oneof![
        Just(DagShape::Flat),
        Just(DagShape::Stacked),
        Just(DagShape::NestedLast),
        Just(DagShape::NestedFirst),
    ];
    let kind = (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0u8), any::<u8>()],
    )
        .prop_map(|(col_major, holes, zeros)| LeafKind {
            col_major,
            holes,
            zeros,
        });
    let leaf = (
        any::<u8>(),
        kind,
        prop::collection::vec(-1.0f32..1.0, SEED_LEN),
    );
    let op = (0u8..5, any::<u16>(), any::<u16>(), any::<u8>(), any::<u8>());
    (
        shape,
        prop::collection::vec(leaf, 1..4),
        prop::collection::vec(op, 1..9),
    )
        .prop_map(|(shape, raw_leaves, raw_ops)| {
            let n = shape.count();
            let leaves = raw_leaves
                .into_iter()
                .map(|(level, mut kind, seed)| {
                    let level = level as usize % n;
                    kind.zeros &= (1u8 << shape.shape(level).0.leaves().len()) - 1;
                    (level, kind, seed)
                })
                .collect();
            let mut dag = Dag {
                shape,
                leaves,
                ops: Vec::new(),
            };
            for (op, a, b, t, hops) in raw_ops {
                let levels = dag.levels();
                let avail = levels.len();
                let (a, b) = (a as usize % avail, b as usize % avail);
                let from = levels[a];
                dag.ops.push(match op {
                    0 => Op::Add(a, b),
                    1 => Op::Mul(a, b),
                    2 => Op::Mean(a, path(0, t as usize % n, hops)),
                    _ => Op::Lift(a, path(from, from + t as usize % (n - from), hops)),
                });
            }
            dag
        })
}

/// DAGs whose output is a broadcast view (a lift or a broadcast mean of the random DAG's).
fn broadcast_rooted_dag() -> impl Strategy<Value = Dag> {
    (dag(), any::<u8>(), any::<u8>()).prop_map(|(mut dag, t, hops)| {
        dag.broadcast_root(t, hops);
        dag
    })
}

fn make_leaves(dag: &Dag) -> Vec<Tensor> {
    dag.leaves
        .iter()
        .map(|(level, kind, seed)| leaf(&dag.shape.shape(*level), *kind, seed))
        .collect()
}

/// One op of the DAG on `values` (whose levels are `levels`).
fn apply(dag: &Dag, op: &Op, values: &[Tensor], levels: &[usize]) -> Result<Tensor> {
    let s = dag.shape;
    let operand = |a: usize, to: usize| -> Result<Tensor> {
        if levels[a] == to {
            Ok(values[a].clone())
        } else {
            lift(s, &values[a], levels[a], to)
        }
    };
    match *op {
        Op::Add(a, b) | Op::Mul(a, b) => {
            let to = levels[a].max(levels[b]);
            let (x, y) = (operand(a, to)?, operand(b, to)?);
            if matches!(op, Op::Add(..)) {
                add(&x, &y)
            } else {
                mul(&x, &y)
            }
        }
        Op::Mean(a, ref p) => {
            let x = &values[a];
            let mean = mul_scalar(&sum(x)?, 1.0 / x.size() as f32)?;
            lift_along(s, mean, 0, p)
        }
        Op::Lift(a, ref p) => lift_along(s, values[a].clone(), levels[a], p),
    }
}

/// Evaluates the DAG on `leaves`, op `fault.0` replaced by a [`Faulty`] stand-in; returns every
/// value (leaves first) so tests can poke inside.
fn eval(dag: &Dag, leaves: &[Tensor], fault: Option<(usize, BadVjp)>) -> Result<Vec<Tensor>> {
    let levels = dag.levels();
    let mut values: Vec<Tensor> = leaves.to_vec();
    for (i, op) in dag.ops.iter().enumerate() {
        let v = match fault {
            Some((at, bad)) if at == i => faulty(dag, op, &values, &levels, bad)?,
            _ => apply(dag, op, &values, &levels)?,
        };
        values.push(v);
    }
    Ok(values)
}

fn output(dag: &Dag, leaves: &[Tensor]) -> Tensor {
    eval(dag, leaves, None)
        .expect("forward")
        .pop()
        .expect("an op")
}

/// Which values (leaves first) the output depends on, the output included.
fn live_values(dag: &Dag) -> Vec<bool> {
    let n = dag.leaves.len();
    let mut live = vec![false; n + dag.ops.len()];
    if let Some(last) = live.last_mut() {
        *last = true;
    }
    for i in (0..dag.ops.len()).rev() {
        if live[n + i] {
            for j in dag.ops[i].operands() {
                live[j] = true;
            }
        }
    }
    live
}

/// The ops whose results the output depends on (the last op included).
fn ancestors(dag: &Dag) -> Vec<usize> {
    let n = dag.leaves.len();
    let live = live_values(dag);
    (0..dag.ops.len()).filter(|&i| live[n + i]).collect()
}

fn cotangent_for(out: &Tensor, seed: u32) -> Tensor {
    let n = out.size();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i as u32 * 7 + seed) % 11) as f32 / 5.0 - 1.0)
        .collect();
    out.f32_like(values).expect("cotangent")
}

fn bits(t: &Tensor) -> Option<Vec<u32>> {
    t.grad()
        .expect("differentiable")
        .map(|g| vals(&g).iter().map(|x| x.to_bits()).collect())
}

/// The layout a gradient of `t` must have: `t`'s own when injective, else the canonical one.
fn gradient_layout(t: &Tensor) -> Layout {
    if t.layout().is_injective() {
        t.layout().clone()
    } else {
        Layout::canonical(t.shape().clone()).expect("canonical layout")
    }
}

/// Central-difference step on a storage slot, and the tolerances Float32 allows.
const STEP: f32 = 1e-2;
const ATOL: f64 = 2e-2;
const RTOL: f64 = 2e-2;

/// `v` over a private copy of the storage it addresses, same layout and offset: a leaf whose
/// slots can be perturbed without touching anything `v` shares storage with.
fn private_copy(v: &Tensor) -> Tensor {
    let carrier = v.carrier().expect("one subtensor");
    let mut data = vec![0.0f32; v.offset() + v.layout().cosize()];
    for o in v.layout().try_offsets().unwrap() {
        let at = v.offset() + o;
        data[at] = carrier.read(at).expect("in range").to_f64() as f32;
    }
    Tensor::from_parts(CpuCarrier::from_vec(data), v.layout().clone(), v.offset()).expect("copy")
}

/// Central differences of `<cot, f>` with respect to the storage slots of value `k` of the DAG
/// (a leaf or an intermediate), the value taken as an independent tensor with its own layout
/// over a private copy of its storage (see [`private_copy`]); `base` are the DAG's values
/// without a graph. Entry p is the derivative for the slot logical position p addresses, so
/// positions sharing a slot repeat it: the folded gradient, computed independently.
fn slot_derivatives(dag: &Dag, base: &[Tensor], cot: &[f32], k: usize) -> Vec<f64> {
    let _guard = no_grad();
    let n = dag.leaves.len();
    let levels = dag.levels();
    let v = private_copy(&base[k]);
    let mut prefix: Vec<Tensor> = base[..(k + 1).max(n)].to_vec();
    prefix[k] = v.clone();
    let first_op = prefix.len() - n;
    let project = || -> f64 {
        let mut values = prefix.clone();
        for op in &dag.ops[first_op..] {
            let next = apply(dag, op, &values, &levels).expect("forward");
            values.push(next);
        }
        let y = vals(values.last().expect("a value"));
        y.iter()
            .zip(cot)
            .map(|(&y, &c)| f64::from(y) * f64::from(c))
            .sum()
    };
    let carrier = v.carrier().expect("one subtensor");
    let read = |at: usize| carrier.read(at).expect("in range").to_f64();
    let write = |at: usize, x: f64| {
        carrier
            .write(&[(at, Scalar::F32(x as f32))])
            .expect("in range");
    };
    let offsets = v.layout().try_offsets().unwrap();
    let mut per_slot = std::collections::HashMap::new();
    for &slot in &offsets {
        if per_slot.contains_key(&slot) {
            continue;
        }
        let at = v.offset() + slot;
        let orig = read(at);
        write(at, orig + f64::from(STEP));
        let (up, plus) = (read(at), project());
        write(at, orig - f64::from(STEP));
        let (down, minus) = (read(at), project());
        write(at, orig);
        per_slot.insert(slot, (plus - minus) / (up - down));
    }
    offsets.iter().map(|o| per_slot[o]).collect()
}

/// The worst position where `analytic` misses `numeric` beyond the tolerances, described.
fn worst_mismatch(what: &str, analytic: &[f32], numeric: &[f64]) -> Option<(f64, String)> {
    let mut worst: Option<(f64, String)> = None;
    for (p, (&a, &num)) in analytic.iter().zip(numeric).enumerate() {
        let a = f64::from(a);
        let excess = (a - num).abs() - (ATOL + RTOL * num.abs());
        if excess > 0.0 && worst.as_ref().is_none_or(|w| excess > w.0) {
            worst = Some((
                excess,
                format!("{what} at logical position {p}: gradient {a:.6} vs central difference {num:.6}"),
            ));
        }
    }
    worst
}

/// Compares `g` (the gradient of every leaf for `cot`, `None` for unreached leaves) with the
/// per-slot central differences of `<cot, f(x)>`. Returns the worst mismatch.
fn finite_difference_mismatch(dag: &Dag, cot: &[f32], g: &[Option<Tensor>]) -> Option<String> {
    let base = {
        let _guard = no_grad();
        eval(dag, &make_leaves(dag), None).expect("forward")
    };
    let mut worst: Option<(f64, String)> = None;
    for (i, x) in base[..dag.leaves.len()].iter().enumerate() {
        let analytic = g[i].as_ref().map_or_else(|| vec![0.0; x.size()], vals);
        let numeric = slot_derivatives(dag, &base, cot, i);
        let what = format!("leaf {i} ({:?}, layout {})", dag.leaves[i].1, x.layout());
        if let Some(m) = worst_mismatch(&what, &analytic, &numeric) {
            if worst.as_ref().is_none_or(|w| m.0 > w.0) {
                worst = Some(m);
            }
        }
    }
    worst.map(|(_, what)| what)
}

/// A batched-compatible output: the DAG's output, copied when it is a broadcast view (a batch
/// of cotangents for a broadcast output has no injective per-index layout to take).
fn injective(out: Tensor) -> Tensor {
    if out.layout().is_injective() {
        out
    } else {
        mul_scalar(&out, 1.0).expect("copy")
    }
}

/// How a VJP misbehaves.
#[derive(Debug, Clone, Copy)]
enum BadVjp {
    /// Returns `Err`.
    Err,
    /// Returns one gradient too many.
    Count,
    /// Returns a gradient of the wrong shape for its last input.
    Shape,
}

/// What fails at the chosen DAG node.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The op is replaced by a [`Faulty`] stand-in.
    Vjp(BadVjp),
    /// The op's first input is mutated in place after the forward pass.
    Stale,
    /// The op's result is differentiated (without `retain_graph`) before the output is.
    Released,
}

impl Fault {
    /// What the error message must contain.
    fn marker(self) -> &'static str {
        match self {
            Fault::Vjp(BadVjp::Err) => "injected failure",
            Fault::Vjp(BadVjp::Count) => "gradients for",
            Fault::Vjp(BadVjp::Shape) => "gradient for input",
            Fault::Stale => "in-place modification",
            Fault::Released => "retain_graph",
        }
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Vjp(BadVjp::Err)),
        Just(Fault::Vjp(BadVjp::Count)),
        Just(Fault::Vjp(BadVjp::Shape)),
        Just(Fault::Stale),
        Just(Fault::Released),
    ]
}

/// Every node reachable from `roots` through saved inputs, each once.
fn graph_nodes<'a>(roots: impl IntoIterator<Item = &'a Tensor>) -> Vec<Node> {
    let mut seen = HashSet::new();
    let mut nodes = Vec::new();
    let mut stack: Vec<Tensor> = roots.into_iter().cloned().collect();
    while let Some(t) = stack.pop() {
        let Some(node) = t.autograd_ctx() else {
            continue;
        };
        if seen.insert(Arc::as_ptr(&node).cast::<()>() as usize) {
            stack.extend(node.inputs());
            nodes.push(node);
        }
    }
    nodes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn grad_equals_backward_and_finite_differences(dag in dag(), seed in 0u32..100) {
        let leaves = make_leaves(&dag);
        let out = output(&dag, &leaves);
        let cot = cotangent_for(&out, seed);
        let refs: Vec<&Tensor> = leaves.iter().collect();
        let opts = GradOptions { retain_graph: true, ..GradOptions::default() };
        let g = grad(&out, &refs, &cot, opts).unwrap();
        for l in &leaves {
            prop_assert!(l.grad().unwrap().is_none(), "grad must not touch .grad");
        }
        out.backward_with(Some(&cot), false).unwrap();
        for (l, gi) in leaves.iter().zip(&g) {
            match (l.grad().unwrap(), gi) {
                (Some(acc), Some(gi)) => {
                    prop_assert_eq!(acc.layout(), gi.layout());
                    prop_assert_eq!(acc.layout(), &gradient_layout(l));
                    prop_assert_eq!(vals(&acc), vals(gi));
                }
                (None, None) => {}
                (acc, gi) => prop_assert!(false, "backward {:?} vs grad {:?}", acc, gi),
            }
        }
        // central differences of <cot, f(x)> per storage slot, with the very cotangent used
        if let Some(worst) = finite_difference_mismatch(&dag, &vals(&cot), &g) {
            prop_assert!(false, "{}", worst);
        }
        // and gradcheck's own random cotangent, perturbing through logical coordinates
        let f = |xs: &[Tensor]| {
            eval(&dag, xs, None)?.pop().ok_or_else(|| Error::Value("no output".into()))
        };
        let report = gradcheck(f, &make_leaves(&dag), GradcheckOptions::default());
        prop_assert!(report.is_ok(), "{:?}", report);
    }

    #[test]
    fn batched_grad_matches_unbatched(dag in dag(), k in 1usize..4) {
        let leaves = make_leaves(&dag);
        let values = eval(&dag, &leaves, None).unwrap();
        let out = injective(values.last().unwrap().clone());
        // every value of the DAG: leaves, intermediates (broadcast views among them)
        let refs: Vec<&Tensor> = values.iter().collect();
        let singles: Vec<Tensor> = (0..k).map(|i| cotangent_for(&out, i as u32 * 13)).collect();
        // Stack the k cotangents along a prepended batch mode of stride = cosize(output layout).
        let cos = out.layout().cosize();
        let mut data = vec![0.0f32; k * cos];
        for (i, c) in singles.iter().enumerate() {
            let v = vals(c);
            for (j, o) in out.layout().try_offsets().unwrap().into_iter().enumerate() {
                data[i * cos + o] = v[j];
            }
        }
        let batched_layout = out.layout().prepend_mode(k, cos).unwrap();
        let batched = Tensor::from_parts(CpuCarrier::from_vec(data), batched_layout, 0).unwrap();
        let keep = GradOptions { retain_graph: true, ..GradOptions::default() };
        let both = GradOptions { batched: true, retain_graph: true };
        let stacked = grad(&out, &refs, &batched, both).unwrap();
        for (i, c) in singles.iter().enumerate() {
            let one = grad(&out, &refs, c, keep).unwrap();
            for (s, o) in stacked.iter().zip(&one) {
                match (s, o) {
                    (Some(s), Some(o)) => {
                        let cos1 = o.layout().cosize();
                        prop_assert_eq!(s.layout().mode_leaves(0)[0].stride, cos1);
                        let row = s.select(0, i).unwrap();
                        prop_assert_eq!(row.layout(), o.layout());
                        prop_assert_eq!(vals(&row), vals(o));
                    }
                    (None, None) => {}
                    _ => prop_assert!(false, "reachability differs"),
                }
            }
        }
    }

    #[test]
    fn injected_failure_changes_no_grad(
        dag in dag(),
        fault in fault(),
        at in any::<u16>(),
        retain in any::<u16>(),
        seed in 0u32..50,
    ) {
        let n = dag.leaves.len();
        let live_ops = ancestors(&dag);
        let i = live_ops[at as usize % live_ops.len()];
        let leaves = make_leaves(&dag);
        let bad = match fault {
            Fault::Vjp(bad) => Some((i, bad)),
            Fault::Stale | Fault::Released => None,
        };
        let values = eval(&dag, &leaves, bad).unwrap();
        // A counting probe at the root over a copy of the DAG's output plus a side leaf: in
        // any topological order the probe runs first, then the add stages the side leaf's
        // gradient (and those of a retained `summed` or `out`), and only then does the
        // traversal reach the failure in the DAG. (The copy keeps the add from saving a view
        // that shares storage with a mutated value, which would fail before anything staged.)
        let last = mul_scalar(values.last().unwrap(), 1.0).unwrap();
        let side = leaf(last.shape(), LeafKind::ROW_MAJOR, &[0.25; SEED_LEN]);
        let summed = add(&last, &side).unwrap();
        let (out, runs) = probe(&summed);
        let nodes = graph_nodes(values.iter().chain([&summed, &out]));

        // prior gradients on every leaf and on randomly chosen retained intermediates
        let mut tracked: Vec<&Tensor> = leaves.iter().chain([&side]).collect();
        for (j, v) in values[n..].iter().chain([&summed, &out]).enumerate() {
            if retain & (1 << j) != 0 {
                v.retain_grad(true).unwrap();
                tracked.push(v);
            }
        }
        for (j, t) in tracked.iter().enumerate() {
            let prior: Vec<f32> = (0..t.size()).map(|k| (j * 16 + k) as f32 * 0.25).collect();
            let prior = t.f32_like(prior).unwrap();
            t.set_grad(Some(prior)).unwrap();
        }

        match fault {
            Fault::Vjp(_) => {}
            Fault::Stale => {
                let victim = &values[dag.ops[i].operands()[0]];
                let origin = vec![0; victim.layout().rank()];
                let old = victim.get(&origin).unwrap().to_f64() as f32;
                victim.set(&origin, old + 1.0).unwrap();
            }
            Fault::Released => {
                let v = &values[n + i];
                v.backward_with(Some(&cotangent_for(v, seed)), false).unwrap();
            }
        }

        let live_before: Vec<bool> = nodes.iter().map(|node| !node.is_released()).collect();
        let before: Vec<Option<Tensor>> = tracked.iter().map(|t| t.grad().unwrap()).collect();
        let before_bits: Vec<_> = tracked.iter().map(|t| bits(t)).collect();
        let result = out.backward_with(Some(&cotangent_for(&out, seed)), false);
        prop_assert!(result.is_err(), "{:?} at op {} did not fail", fault, i);
        let message = result.unwrap_err().to_string();
        prop_assert!(message.contains(fault.marker()), "{:?} failed with: {}", fault, message);
        if let Fault::Vjp(_) = fault {
            prop_assert!(message.contains("faulty"), "the error names the culprit: {}", message);
        }
        if !matches!(fault, Fault::Released) {
            // (a released node is refused while the graph is discovered, before any VJP)
            prop_assert!(runs.load(Ordering::SeqCst) >= 1, "the failure was reached after staging");
        }

        let after_bits: Vec<_> = tracked.iter().map(|t| bits(t)).collect();
        prop_assert_eq!(before_bits, after_bits);
        for (t, b) in tracked.iter().zip(&before) {
            let same = match (t.grad().unwrap(), b) {
                (Some(a), Some(b)) => a.same_tensor(b),
                (a, b) => a.is_none() && b.is_none(),
            };
            prop_assert!(same, ".grad was replaced");
        }
        if matches!(fault, Fault::Released) {
            prop_assert!(live_before.contains(&false), "the first traversal released nodes");
        } else {
            prop_assert!(live_before.iter().all(|&l| l));
        }
        for (node, &was_live) in nodes.iter().zip(&live_before) {
            if was_live {
                prop_assert!(!node.is_released(), "{:?} was released", node);
                prop_assert!(!node.inputs().is_empty());
            }
        }
    }

    #[test]
    fn backwards_traversal_matches_backward_on_a_broadcast_root(
        dag in broadcast_rooted_dag(),
        retain in any::<u16>(),
        seed in 0u32..100,
    ) {
        let n = dag.leaves.len();
        // Two forward passes of the DAG, the same op results retained in both (the root too,
        // when chosen): one differentiated by `backward`, one by a node-rooted traversal.
        let run = |traverse: bool| -> (Vec<Tensor>, Tensor) {
            let leaves = make_leaves(&dag);
            let values = eval(&dag, &leaves, None).unwrap();
            for (j, v) in values[n..].iter().enumerate() {
                if retain & (1 << j) != 0 {
                    v.retain_grad(true).unwrap();
                }
            }
            let root = values.last().unwrap().clone();
            let cot = cotangent_for(&root, seed);
            if traverse {
                backwards_traversal(&cot, root.autograd_ctx().as_ref(), false).unwrap();
            } else {
                root.backward_with(Some(&cot), false).unwrap();
            }
            (values, cot)
        };
        let (by_backward, cot) = run(false);
        let (by_traversal, _) = run(true);
        let root = by_traversal.last().unwrap();
        prop_assert!(!root.layout().is_injective(), "the root {} is a broadcast view", root.layout());
        let last = by_backward.len() - 1;
        for (k, (b, t)) in by_backward.iter().zip(&by_traversal).enumerate() {
            let (gb, gt) = (b.grad().unwrap(), t.grad().unwrap());
            if k == last {
                // only `backward` names a target tensor; it accumulates the root's cotangent
                // folded, once retained
                prop_assert!(gt.is_none(), "backwards_traversal wrote the root's .grad");
                prop_assert_eq!(gb.is_some(), retain & (1 << (k - n)) != 0);
                continue;
            }
            match (gb, gt) {
                (Some(gb), Some(gt)) => {
                    prop_assert_eq!(gb.layout(), gt.layout(), "value {}", k);
                    prop_assert_eq!(bits(b), bits(t), "value {}", k);
                }
                (None, None) => {}
                (gb, gt) => prop_assert!(false, "value {}: backward {:?} vs traversal {:?}", k, gb, gt),
            }
        }
        for node in graph_nodes([root]) {
            prop_assert!(node.is_released(), "{:?} was not released", node);
        }
        // and both are the derivative, per storage slot of every leaf
        let g: Vec<Option<Tensor>> = by_traversal[..n].iter().map(|l| l.grad().unwrap()).collect();
        if let Some(worst) = finite_difference_mismatch(&dag, &vals(&cot), &g) {
            prop_assert!(false, "{}", worst);
        }
    }

    #[test]
    fn retained_broadcast_intermediates_get_the_folded_sum(
        dag in broadcast_rooted_dag(),
        retain in any::<u16>(),
        seed in 0u32..100,
    ) {
        let n = dag.leaves.len();
        let leaves = make_leaves(&dag);
        let values = eval(&dag, &leaves, None).unwrap();
        // every broadcast op result (the root among them), and others chosen by `retain`
        let retained: Vec<usize> = (n..values.len())
            .filter(|&k| !values[k].layout().is_injective() || retain & (1 << (k - n)) != 0)
            .collect();
        for &k in &retained {
            values[k].retain_grad(true).unwrap();
        }
        let out = values.last().unwrap();
        let cot = cotangent_for(out, seed);
        let refs: Vec<&Tensor> = retained.iter().map(|&k| &values[k]).collect();
        let opts = GradOptions { retain_graph: true, ..GradOptions::default() };
        let functional = grad(out, &refs, &cot, opts).unwrap();
        out.backward_with(Some(&cot), true).unwrap();

        let live = live_values(&dag);
        let base = {
            let _guard = no_grad();
            eval(&dag, &make_leaves(&dag), None).unwrap()
        };
        for (&k, f) in retained.iter().zip(&functional) {
            let v = &values[k];
            let acc = v.grad().unwrap();
            let (Some(acc), Some(f)) = (acc.as_ref(), f) else {
                prop_assert!(!live[k], "value {} is live but got no gradient", k);
                prop_assert!(acc.is_none() && f.is_none(), "value {}: reachability differs", k);
                continue;
            };
            prop_assert_eq!(acc.layout(), &gradient_layout(v), "value {} of layout {}", k, v.layout());
            prop_assert_eq!(acc.layout(), f.layout());
            prop_assert_eq!(vals(acc), vals(f), "value {}: .grad vs functional grad", k);
            // the folded sum sits at every position of a slot, exactly
            let analytic = vals(acc);
            let offsets = v.layout().try_offsets().unwrap();
            for (p, &o) in offsets.iter().enumerate() {
                let first = offsets.iter().position(|&q| q == o).unwrap();
                prop_assert_eq!(analytic[p].to_bits(), analytic[first].to_bits(),
                    "value {} positions {} and {} share slot {}", k, first, p, o);
            }
            let numeric = slot_derivatives(&dag, &base, &vals(&cot), k);
            let what = format!("value {k} (op {:?}, layout {})", dag.ops[k - n], v.layout());
            if let Some((_, worst)) = worst_mismatch(&what, &analytic, &numeric) {
                prop_assert!(false, "{}", worst);
            }
        }
        // a second traversal adds onto the folded `.grad`: exactly twice the first
        let once: Vec<Option<Vec<f32>>> = retained.iter().map(|&k| grad_vals(&values[k])).collect();
        out.backward_with(Some(&cot), false).unwrap();
        for (&k, once) in retained.iter().zip(&once) {
            let doubled = once.as_ref().map(|v| v.iter().map(|x| x + x).collect::<Vec<_>>());
            prop_assert_eq!(grad_vals(&values[k]), doubled, "value {}: the second traversal", k);
        }
    }
}

#[test]
fn leaf_kinds_reach_nested_stride_zero_modes() {
    let kind = |col_major, holes, zeros| LeafKind {
        col_major,
        holes,
        zeros,
    };
    let nested = shape![2, [3, 2]];
    let cases = [
        (kind(false, false, 0), "(2,(3,2)):(6,(1,3))"),
        (kind(true, false, 0), "(2,(3,2)):(1,(2,6))"),
        (kind(false, true, 0), "(2,(3,2)):(12,(2,6))"),
        (kind(false, false, 0b001), "(2,(3,2)):(0,(1,3))"),
        (kind(false, false, 0b010), "(2,(3,2)):(2,(0,1))"),
        (kind(false, false, 0b100), "(2,(3,2)):(3,(1,0))"),
        (kind(false, false, 0b110), "(2,(3,2)):(1,(0,0))"),
        (kind(true, true, 0b011), "(2,(3,2)):(0,(0,2))"),
        (kind(false, false, 0b111), "(2,(3,2)):(0,(0,0))"),
    ];
    for (kind, want) in cases {
        assert_eq!(leaf_layout(&nested, kind).to_string(), want, "{kind:?}");
    }
    assert_eq!(
        leaf_layout(&shape![[2, 2], 3], kind(false, false, 0b010)).to_string(),
        "((2,2),3):((3,0),1)"
    );
    assert_eq!(
        leaf_layout(&shape![2, 3], kind(true, false, 0)),
        Layout::canonical(shape![2, 3]).unwrap()
    );
}

#[test]
fn lifts_chain_broadcast_to_and_expand() {
    // (3) -> (2,3) -> ((2,2),3): broadcast_to, then an expand with a nested stride-0 leaf
    // applied to the broadcast
    let x = leaf(&shape![3], LeafKind::ROW_MAJOR, &[1.0, 2.0, 3.0]);
    let y = lift_along(DagShape::NestedFirst, x.clone(), 1, &[2, 3]).unwrap();
    assert_eq!(y.layout().to_string(), "((2,2),3):((0,0),1)");
    let inner = &y.autograd_ctx().unwrap().inputs()[0];
    assert_eq!(inner.layout().to_string(), "(2,3):(0,1)");
    assert_eq!(y.autograd_ctx().unwrap().name(), "expand");
    assert_eq!(inner.autograd_ctx().unwrap().name(), "broadcast_to");
    // (3) -> ((3,2)) -> (2,(3,2)): expand into the nested mode, then broadcast_to keeps it
    let z = lift_along(DagShape::NestedLast, x.clone(), 1, &[2, 3]).unwrap();
    assert_eq!(z.layout().to_string(), "(2,(3,2)):(0,(1,0))");
    assert_eq!(z.autograd_ctx().unwrap().name(), "broadcast_to");
    // (3) -> (2,3) -> (4,2,3): the broadcast of a broadcast
    let w = lift_along(DagShape::Stacked, x.clone(), 1, &[2, 3]).unwrap();
    assert_eq!(w.layout().to_string(), "(4,2,3):(0,0,1)");
    // each position of x is repeated 8 times
    let g = grad(
        &w,
        &[&x],
        &w.f32_full_like(1.0).unwrap(),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![8.0; 3]);
}

/// An identity op counting how often its VJP runs; its gradient takes the input's layout.
struct Probe {
    saved: SavedState,
    runs: Arc<AtomicUsize>,
}

impl Operation for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let x = &self.saved.inputs()[0];
        Ok(vec![Some(x.f32_like(g.values::<f32>()?)?)])
    }
}

fn probe(x: &Tensor) -> (Tensor, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let out = record(x.contiguous().unwrap(), &[x], Vec::new(), |saved| Probe {
        saved,
        runs: counter,
    });
    (out, runs)
}

/// A stride-0 view of `x` with a (possibly nested) `shape` that `broadcast_to` cannot make:
/// leaf mode j of `shape` keeps the stride of leaf mode `map[j]` of `x` (which may be 0: `x`
/// may be a broadcast itself), every other leaf mode gets stride 0.
struct Expand {
    saved: SavedState,
    map: Vec<Option<usize>>,
}

impl Operation for Expand {
    fn name(&self) -> &'static str {
        "expand"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        // The cotangent is per position of the result: each position of x gets the sum over
        // the positions that repeat it. Map every position of the result to the logical index
        // of its position in x: expand the compact layout whose offsets are those indices.
        let x = &self.saved.inputs()[0];
        let index = Layout::compact_row_major(x.shape().clone())?;
        let to_x = expanded_layout(index.leaves(), g.shape(), &self.map)?;
        let mut out = vec![0.0f32; x.size()];
        for (v, i) in g
            .values::<f32>()?
            .into_iter()
            .zip(to_x.try_offsets().unwrap())
        {
            out[i] += v;
        }
        Ok(vec![Some(x.f32_like(out)?)])
    }
}

/// `shape` with leaf mode j at the stride of `leaves[map[j]]`, or 0.
fn expanded_layout(
    leaves: &[autograd_core::Leaf],
    shape: &Shape,
    map: &[Option<usize>],
) -> Result<Layout> {
    let mut it = map.iter();
    let strides = shape.0.map_leaves(&mut |_| {
        it.next()
            .copied()
            .flatten()
            .map_or(0, |m| leaves[m].stride as i64)
    });
    Layout::new(shape.clone(), Stride(strides))
}

fn expand(x: &Tensor, shape: &Shape, map: &[Option<usize>]) -> Result<Tensor> {
    let layout = expanded_layout(x.layout().leaves(), shape, map)?;
    let view = x.with_layout_detached(layout, x.offset())?;
    Ok(record(view, &[x], Vec::new(), |saved| Expand {
        saved,
        map: map.to_vec(),
    }))
}

/// A stand-in for one DAG op: the op's forward values, a misbehaving VJP.
struct Faulty {
    saved: SavedState,
    bad: BadVjp,
}

impl Operation for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let inputs = self.saved.inputs();
        match self.bad {
            BadVjp::Err => Err(Error::Runtime("injected failure".into())),
            BadVjp::Count => Ok(vec![Some(g.clone()); inputs.len() + 1]),
            BadVjp::Shape => {
                // well-formed gradients for every input but the last, which gets a [5] tensor
                let (_, first) = inputs.split_last().expect("an input");
                let mut grads = first
                    .iter()
                    .map(|x| x.f32_full_like(0.5).map(Some))
                    .collect::<Result<Vec<_>>>()?;
                grads.push(Some(Tensor::from_vec(vec![0.5f32; 5], shape![5])?));
                Ok(grads)
            }
        }
    }
}

fn faulty(dag: &Dag, op: &Op, values: &[Tensor], levels: &[usize], bad: BadVjp) -> Result<Tensor> {
    let result = {
        let _guard = no_grad();
        apply(dag, op, values, levels)?
    };
    let inputs: Vec<&Tensor> = op.operands().into_iter().map(|j| &values[j]).collect();
    Ok(record(result, &inputs, Vec::new(), |saved| Faulty {
        saved,
        bad,
    }))
}

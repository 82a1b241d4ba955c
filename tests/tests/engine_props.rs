//! Engine properties on random DAGs of `add`, `mul` and a broadcast mean (`sum`, `mul_scalar`,
//! then `broadcast_to`, or a stride-0 expand for hierarchical shapes). Every value of one DAG has
//! one shape, drawn among `(2,3)`, `(2,(3,2))` and `((2,2),3)`; leaves are laid out row-major,
//! column-major, strided with holes, or broadcast through a stride-0 leaf mode at the top level
//! or inside a nested mode.
//!
//! (a) `grad` equals what `backward` accumulates, and equals the central differences of
//!     `<cot, f(x)>` for the same cotangent `cot`, perturbing every storage slot of every leaf
//!     (a broadcast slot feeds several positions, each of which must carry the slot's sum); the
//!     DAG also passes `gradcheck`.
//! (b) Batched `grad` at index k equals unbatched `grad` with cotangent k.
//! (c) A failure injected at a random node of the DAG (a VJP that fails, returns the wrong
//!     number of gradients or a gradient of the wrong shape; a saved input mutated after the
//!     forward pass; a node released by an earlier traversal), reached after some gradients were
//!     staged, leaves every `.grad` (leaves and retained intermediates) bit-identical and
//!     releases no node that was live.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autograd_core::{
    grad, gradcheck, no_grad, record, shape, CpuCarrier, Error, GradOptions, GradcheckOptions,
    Layout, Node, Operation, Result, SavedState, Scalar, Shape, Stride, Tensor,
};
use autograd_ops::{add, broadcast_to, mul, mul_scalar, sum};
use autograd_tests::vals;
use proptest::prelude::*;

/// The shape of every value of one DAG.
#[derive(Debug, Clone, Copy)]
enum DagShape {
    /// `(2,3)`.
    Flat,
    /// `(2,(3,2))`: the last top-level mode is nested.
    NestedLast,
    /// `((2,2),3)`: the first top-level mode is nested.
    NestedFirst,
}

impl DagShape {
    fn shape(self) -> Shape {
        match self {
            DagShape::Flat => shape![2, 3],
            DagShape::NestedLast => shape![2, [3, 2]],
            DagShape::NestedFirst => shape![[2, 2], 3],
        }
    }
}

/// How a leaf is laid out over its storage; defined for every [`DagShape`].
#[derive(Debug, Clone, Copy)]
enum LeafKind {
    /// Compact, storage order is logical order.
    RowMajor,
    /// Compact, first leaf mode fastest (the canonical layout; a transpose for `(2,3)`).
    ColMajor,
    /// Row-major with every stride doubled, at storage offset 1: injective with holes.
    Strided,
    /// Stride 0 on the first leaf mode: top-level for `(2,3)` and `(2,(3,2))`, nested for
    /// `((2,2),3)`.
    BroadcastFirst,
    /// Stride 0 on the second leaf mode: nested for both hierarchical shapes.
    BroadcastSecond,
    /// Stride 0 on the last leaf mode: nested for `(2,(3,2))`.
    BroadcastLast,
}

/// Storage values drawn per leaf: enough for the largest layout (`Strided`, 12 elements).
const SEED_LEN: usize = 24;

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
    let order: Vec<usize> = match kind {
        LeafKind::ColMajor => (0..extents.len()).collect(),
        _ => modes.into_iter().rev().flatten().collect(),
    };
    let zero = match kind {
        LeafKind::BroadcastFirst => Some(0),
        LeafKind::BroadcastSecond => Some(1),
        LeafKind::BroadcastLast => Some(extents.len() - 1),
        _ => None,
    };
    let mut strides = vec![0i64; extents.len()];
    let mut next = if matches!(kind, LeafKind::Strided) {
        2
    } else {
        1
    };
    for i in order {
        if zero != Some(i) {
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
    let offset = usize::from(matches!(kind, LeafKind::Strided));
    let storage = seed[..offset + layout.cosize()].to_vec();
    Tensor::from_parts(CpuCarrier::from_vec(storage), layout, offset).expect("valid leaf")
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add(usize, usize),
    Mul(usize, usize),
    /// `sum(a) / size` at every position of the DAG's shape: a stride-0 view.
    Mean(usize),
}

impl Op {
    fn operands(self) -> Vec<usize> {
        match self {
            Op::Add(a, b) | Op::Mul(a, b) => vec![a, b],
            Op::Mean(a) => vec![a],
        }
    }
}

/// A random DAG: leaves, then ops whose operands are earlier values (leaves or op results).
#[derive(Debug, Clone)]
struct Dag {
    shape: DagShape,
    leaves: Vec<(LeafKind, Vec<f32>)>,
    ops: Vec<Op>,
}

fn dag() -> impl Strategy<Value = Dag> {
    let shape = prop_oneof![
        Just(DagShape::Flat),
        Just(DagShape::NestedLast),
        Just(DagShape::NestedFirst),
    ];
    let kind = prop_oneof![
        Just(LeafKind::RowMajor),
        Just(LeafKind::ColMajor),
        Just(LeafKind::Strided),
        Just(LeafKind::BroadcastFirst),
        Just(LeafKind::BroadcastSecond),
        Just(LeafKind::BroadcastLast),
    ];
    let leaf = (kind, prop::collection::vec(-1.0f32..1.0, SEED_LEN));
    (
        shape,
        prop::collection::vec(leaf, 1..4),
        prop::collection::vec((0u8..3, any::<u16>(), any::<u16>()), 1..7),
    )
        .prop_map(|(shape, leaves, raw)| {
            let mut ops = Vec::new();
            for (i, (op, a, b)) in raw.into_iter().enumerate() {
                let avail = leaves.len() + i;
                let (a, b) = (a as usize % avail, b as usize % avail);
                ops.push(match op {
                    0 => Op::Add(a, b),
                    1 => Op::Mul(a, b),
                    _ => Op::Mean(a),
                });
            }
            Dag { shape, leaves, ops }
        })
}

fn make_leaves(dag: &Dag) -> Vec<Tensor> {
    let shape = dag.shape.shape();
    dag.leaves
        .iter()
        .map(|(k, s)| leaf(&shape, *k, s))
        .collect()
}

/// One op of the DAG on `values`.
fn apply(dag: &Dag, op: Op, values: &[Tensor]) -> Result<Tensor> {
    match op {
        Op::Add(a, b) => add(&values[a], &values[b]),
        Op::Mul(a, b) => mul(&values[a], &values[b]),
        Op::Mean(a) => {
            let x = &values[a];
            let mean = mul_scalar(&sum(x)?, 1.0 / x.size() as f32)?;
            match dag.shape {
                DagShape::Flat => broadcast_to(&mean, &x.dims()),
                DagShape::NestedLast | DagShape::NestedFirst => expand(&mean, x.shape()),
            }
        }
    }
}

/// Evaluates the DAG on `leaves`, op `fault.0` replaced by a [`Faulty`] stand-in; returns every
/// value (leaves first) so tests can poke inside.
fn eval(dag: &Dag, leaves: &[Tensor], fault: Option<(usize, BadVjp)>) -> Result<Vec<Tensor>> {
    let mut values: Vec<Tensor> = leaves.to_vec();
    for (i, &op) in dag.ops.iter().enumerate() {
        let v = match fault {
            Some((at, bad)) if at == i => faulty(dag, op, &values, bad)?,
            _ => apply(dag, op, &values)?,
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

/// The ops whose results the output depends on (the last op included).
fn ancestors(dag: &Dag) -> Vec<usize> {
    let n = dag.leaves.len();
    let mut live = vec![false; dag.ops.len()];
    if let Some(last) = live.last_mut() {
        *last = true;
    }
    for i in (0..dag.ops.len()).rev() {
        if live[i] {
            for j in dag.ops[i].operands() {
                if j >= n {
                    live[j - n] = true;
                }
            }
        }
    }
    (0..dag.ops.len()).filter(|&i| live[i]).collect()
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

/// Central-difference step on a storage slot, and the tolerances Float32 allows.
const STEP: f32 = 1e-2;
const ATOL: f64 = 2e-2;
const RTOL: f64 = 2e-2;

/// Compares `g` (the gradients `grad` returned for `cot`) with central differences of
/// `<cot, f(x)>`, perturbing every storage slot of fresh copies of the leaves; every logical
/// position sharing a slot must carry the slot's derivative. Returns the worst mismatch.
fn finite_difference_mismatch(dag: &Dag, cot: &[f32], g: &[Option<Tensor>]) -> Option<String> {
    let xs = make_leaves(dag);
    let _guard = no_grad();
    let project = |xs: &[Tensor]| -> f64 {
        let out = output(dag, xs);
        let y = vals(&out);
        y.iter()
            .zip(cot)
            .map(|(&y, &c)| f64::from(y) * f64::from(c))
            .sum()
    };
    let mut worst: Option<(f64, String)> = None;
    for (i, x) in xs.iter().enumerate() {
        let analytic = g[i].as_ref().map_or_else(|| vec![0.0; x.size()], vals);
        let carrier = x.carrier().expect("one subtensor");
        let read = |at: usize| carrier.read(at).expect("in range").to_f64();
        let write = |at: usize, v: f64| {
            carrier
                .write(&[(at, Scalar::F32(v as f32))])
                .expect("in range");
        };
        let offsets = x.layout().offsets();
        let mut done = HashSet::new();
        for &slot in &offsets {
            if !done.insert(slot) {
                continue;
            }
            let at = x.offset() + slot;
            let orig = read(at);
            write(at, orig + f64::from(STEP));
            let (up, plus) = (read(at), project(&xs));
            write(at, orig - f64::from(STEP));
            let (down, minus) = (read(at), project(&xs));
            write(at, orig);
            let numeric = (plus - minus) / (up - down);
            for (p, _) in offsets.iter().enumerate().filter(|&(_, &o)| o == slot) {
                let a = f64::from(analytic[p]);
                let excess = (a - numeric).abs() - (ATOL + RTOL * numeric.abs());
                if excess > 0.0 && worst.as_ref().is_none_or(|w| excess > w.0) {
                    let what = format!(
                        "leaf {i} ({:?}, layout {}) storage slot {slot} at logical position {p}: \
                         grad {a:.6} vs central difference {numeric:.6}",
                        dag.leaves[i].0,
                        x.layout()
                    );
                    worst = Some((excess, what));
                }
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
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

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
                    prop_assert_eq!(vals(&acc), vals(gi));
                }
                (None, None) => {}
                (acc, gi) => prop_assert!(false, "backward {:?} vs grad {:?}", acc, gi),
            }
        }
        // central differences of <cot, f(x)> with the very cotangent `grad` used
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
        let out = injective(output(&dag, &leaves));
        let refs: Vec<&Tensor> = leaves.iter().collect();
        let singles: Vec<Tensor> = (0..k).map(|i| cotangent_for(&out, i as u32 * 13)).collect();
        // Stack the k cotangents along a prepended batch mode of stride = cosize(output layout).
        let cos = out.layout().cosize();
        let mut data = vec![0.0f32; k * cos];
        for (i, c) in singles.iter().enumerate() {
            let v = vals(c);
            for (j, o) in out.layout().offsets().into_iter().enumerate() {
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
        // The DAG's output is the first input of the final add, a counting probe on a side leaf
        // the second: the traversal runs the probe first, staging the side leaf's gradient (and
        // those of a retained `out` or `probed`), and only then reaches the failure in the DAG.
        let side = leaf(&dag.shape.shape(), LeafKind::RowMajor, &[0.25; SEED_LEN]);
        let (probed, runs) = probe(&side);
        let out = add(values.last().unwrap(), &probed).unwrap();
        let nodes = graph_nodes(values.iter().chain([&probed, &out]));

        // prior gradients on every leaf and on randomly chosen retained intermediates
        let mut tracked: Vec<&Tensor> = leaves.iter().chain([&side]).collect();
        for (j, v) in values[n..].iter().chain([&probed, &out]).enumerate() {
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
                let old = victim.get(&[0, 0]).unwrap().to_f64() as f32;
                victim.set(&[0, 0], old + 1.0).unwrap();
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
}

#[test]
fn leaf_kinds_reach_nested_stride_zero_modes() {
    let nested = shape![2, [3, 2]];
    let cases = [
        (LeafKind::RowMajor, "(2,(3,2)):(6,(1,3))"),
        (LeafKind::ColMajor, "(2,(3,2)):(1,(2,6))"),
        (LeafKind::Strided, "(2,(3,2)):(12,(2,6))"),
        (LeafKind::BroadcastFirst, "(2,(3,2)):(0,(1,3))"),
        (LeafKind::BroadcastSecond, "(2,(3,2)):(2,(0,1))"),
        (LeafKind::BroadcastLast, "(2,(3,2)):(3,(1,0))"),
    ];
    for (kind, want) in cases {
        assert_eq!(leaf_layout(&nested, kind).to_string(), want, "{kind:?}");
    }
    assert_eq!(
        leaf_layout(&shape![[2, 2], 3], LeafKind::BroadcastFirst).to_string(),
        "((2,2),3):((0,3),1)"
    );
    assert_eq!(
        leaf_layout(&shape![2, 3], LeafKind::ColMajor),
        Layout::canonical(shape![2, 3]).unwrap()
    );
}

/// An identity op counting how often its VJP runs.
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
        Ok(vec![Some(g.clone())])
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

/// A stride-0 view of a one-element tensor with a (possibly nested) `shape`: `broadcast_to`
/// for shapes it cannot make.
struct Expand {
    saved: SavedState,
}

impl Operation for Expand {
    fn name(&self) -> &'static str {
        "expand"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        // The cotangent is per position of the stride-0 result: the one element gets the sum.
        let total: f32 = g.values::<f32>()?.iter().sum();
        let x = &self.saved.inputs()[0];
        Ok(vec![Some(x.f32_like(vec![total])?)])
    }
}

fn expand(x: &Tensor, shape: &Shape) -> Result<Tensor> {
    let zeros = Stride(shape.0.map_leaves(&mut |_| 0));
    let view = x
        .detach()
        .with_layout(Layout::new(shape.clone(), zeros)?, x.offset())?;
    Ok(record(view, &[x], Vec::new(), |saved| Expand { saved }))
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
                    .map(|x| x.gradient_like(g.clone()).map(Some))
                    .collect::<Result<Vec<_>>>()?;
                grads.push(Some(Tensor::from_vec(vec![0.5f32; 5], shape![5])?));
                Ok(grads)
            }
        }
    }
}

fn faulty(dag: &Dag, op: Op, values: &[Tensor], bad: BadVjp) -> Result<Tensor> {
    let result = {
        let _guard = no_grad();
        apply(dag, op, values)?
    };
    let inputs: Vec<&Tensor> = op.operands().into_iter().map(|j| &values[j]).collect();
    Ok(record(result, &inputs, Vec::new(), |saved| Faulty {
        saved,
        bad,
    }))
}

//! Engine properties on random graphs: (a) `grad` equals what `backward` accumulates and equals
//! central finite differences, over injective and broadcast leaf layouts; (b) batched `grad` at
//! index k equals unbatched `grad` with cotangent k; (c) a failure injected anywhere leaves every
//! `.grad` bit-identical and releases nothing.

use autograd_core::{
    grad, gradcheck, record, shape, GradOptions, GradcheckOptions, Operation, Result, SavedState,
    Tensor,
};
use autograd_ops::{add, mul, mul_scalar, sum};
use autograd_tests::vals;
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// How a [2, 3] leaf is laid out.
#[derive(Debug, Clone, Copy)]
enum LeafKind {
    /// Compact row-major.
    RowMajor,
    /// A transposed view of [3, 2] storage (column-major, injective).
    Transposed,
    /// A stride-0 view of a [3] vector repeated over 2 rows (broadcast aliasing).
    BroadcastRows,
    /// A stride-0 view of a [2, 1] column repeated over 3 columns.
    BroadcastCols,
}

fn leaf(kind: LeafKind, seed: &[f32]) -> Tensor {
    let v = |n: usize| seed[..n].to_vec();
    let t = match kind {
        LeafKind::RowMajor => Tensor::from_vec(v(6), shape![2, 3]),
        LeafKind::Transposed => {
            Tensor::from_vec(v(6), shape![3, 2]).and_then(|t| t.transpose(0, 1))
        }
        LeafKind::BroadcastRows => {
            Tensor::from_vec(v(3), shape![3]).and_then(|t| t.broadcast_to(&[2, 3]))
        }
        LeafKind::BroadcastCols => {
            Tensor::from_vec(v(2), shape![2, 1]).and_then(|t| t.broadcast_to(&[2, 3]))
        }
    };
    t.expect("valid leaf")
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add(usize, usize),
    Mul(usize, usize),
}

/// A random DAG: leaves, then ops whose operands are earlier values (leaves or op results).
#[derive(Debug, Clone)]
struct Dag {
    leaves: Vec<(LeafKind, Vec<f32>)>,
    ops: Vec<Op>,
}

fn dag() -> impl Strategy<Value = Dag> {
    let kind = prop_oneof![
        Just(LeafKind::RowMajor),
        Just(LeafKind::Transposed),
        Just(LeafKind::BroadcastRows),
        Just(LeafKind::BroadcastCols),
    ];
    let leaf = (kind, prop::collection::vec(-1.0f32..1.0, 6));
    (
        prop::collection::vec(leaf, 1..4),
        prop::collection::vec((any::<bool>(), any::<u16>(), any::<u16>()), 1..7),
    )
        .prop_map(|(leaves, raw)| {
            let mut ops = Vec::new();
            for (i, (is_add, a, b)) in raw.into_iter().enumerate() {
                let avail = leaves.len() + i;
                let (a, b) = (a as usize % avail, b as usize % avail);
                ops.push(if is_add { Op::Add(a, b) } else { Op::Mul(a, b) });
            }
            Dag { leaves, ops }
        })
}

/// Evaluates the DAG on `leaves`; returns every value (leaves first) so tests can poke inside.
fn eval(dag: &Dag, leaves: &[Tensor]) -> Result<Vec<Tensor>> {
    let mut values: Vec<Tensor> = leaves.to_vec();
    for op in &dag.ops {
        let v = match *op {
            Op::Add(a, b) => add(&values[a], &values[b])?,
            Op::Mul(a, b) => mul(&values[a], &values[b])?,
        };
        values.push(v);
    }
    Ok(values)
}

fn make_leaves(dag: &Dag) -> Vec<Tensor> {
    dag.leaves.iter().map(|(k, s)| leaf(*k, s)).collect()
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn grad_equals_backward_and_finite_differences(dag in dag(), seed in 0u32..100) {
        let leaves = make_leaves(&dag);
        let out = eval(&dag, &leaves).unwrap().pop().unwrap();
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
        // finite differences through the same DAG (sum makes a scalar; gradcheck draws its own cotangent)
        let f = |xs: &[Tensor]| eval(&dag, xs).and_then(|mut v| v.pop().ok_or_else(|| autograd_core::Error::Value("empty".into())));
        let report = gradcheck(f, &make_leaves(&dag), GradcheckOptions::default());
        prop_assert!(report.is_ok(), "{:?}", report);
    }

    #[test]
    fn batched_grad_matches_unbatched(dag in dag(), k in 1usize..4) {
        let leaves = make_leaves(&dag);
        let out = eval(&dag, &leaves).unwrap().pop().unwrap();
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
        let batched = Tensor::from_parts(autograd_core::CpuCarrier::from_vec(data), batched_layout, 0).unwrap();
        let keep = GradOptions { retain_graph: true, ..GradOptions::default() };
        let stacked = grad(&out, &refs, &batched, GradOptions { batched: true, retain_graph: true }).unwrap();
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
    fn injected_failure_changes_no_grad(dag in dag(), at in any::<u16>(), how in 0u8..3, seed in 0u32..50) {
        let leaves = make_leaves(&dag);
        // give every leaf a prior gradient so "unchanged" is a real check
        for (i, l) in leaves.iter().enumerate() {
            let prior = l.f32_like((0..l.size()).map(|j| (i * 10 + j) as f32 * 0.25).collect()).unwrap();
            l.set_grad(Some(prior)).unwrap();
        }
        let before: Vec<_> = leaves.iter().map(bits).collect();
        let values = eval(&dag, &leaves).unwrap();
        // a node's result for the failing VJP; for the mutation, any value but the last (which
        // the probe saves, and which must stay valid for the probe to run)
        let victim = if how == 2 {
            &values[at as usize % (values.len() - 1)]
        } else {
            &values[dag.leaves.len() + at as usize % dag.ops.len()]
        };
        // The failing branch is the first input of the final add, the DAG (behind a counting
        // probe) the second: the traversal runs the DAG side first, staging leaf gradients,
        // and only then reaches the failure.
        let (probed, runs) = probe(values.last().unwrap());
        let bad = match how {
            0 => faulty(victim, false),
            1 => faulty(victim, true),
            _ => mul_scalar(victim, 1.0).unwrap(),
        };
        let out = sum(&add(&bad, &probed).unwrap()).unwrap();
        if how == 2 {
            // an in-place mutation of a saved tensor after the forward pass
            let old = victim.get(&[0, 0]).unwrap();
            victim.set(&[0, 0], old.to_f64() as f32 + 1.0).unwrap();
        }
        let cot = Tensor::scalar(seed as f32 / 10.0 + 0.5);
        prop_assert!(out.backward_with(Some(&cot), false).is_err());
        prop_assert!(runs.load(Ordering::SeqCst) >= 1, "the DAG side ran before the failure");
        let after: Vec<_> = leaves.iter().map(bits).collect();
        prop_assert_eq!(before, after);
        // nothing was released: every node still has its saved inputs
        for v in values.iter().chain([&probed, &bad, &out]) {
            if let Some(node) = v.autograd_ctx() {
                prop_assert!(!node.is_released());
                prop_assert!(!node.inputs().is_empty());
            }
        }
    }
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

/// An identity op whose VJP fails (or returns two gradients for one input).
struct Faulty {
    saved: SavedState,
    wrong_count: bool,
}

impl Operation for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        if self.wrong_count {
            Ok(vec![Some(g.clone()), None])
        } else {
            Err(autograd_core::Error::Runtime("injected failure".into()))
        }
    }
}

fn faulty(x: &Tensor, wrong_count: bool) -> Tensor {
    let out = x.contiguous().unwrap();
    record(out, &[x], Vec::new(), |saved| Faulty { saved, wrong_count })
}

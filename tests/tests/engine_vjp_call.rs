//! `Operation::vjp`, the engine's one entry point: every traversal (backward, functional
//! grad, batched grad) reaches a node only through it, a node that implements nothing else
//! works everywhere, and what it answers (`Written`) decides how its gradients are read.

use std::sync::atomic::{AtomicUsize, Ordering};

use autograd_core::{
    grad, record, Cotangent, Error, ErrorKind, GradOptions, Operation, Result, SavedState, Tensor,
    VjpCall, Written,
};
use autograd_tests::{grad_vals, map, strided, t, vals};

const BATCHED: GradOptions = GradOptions {
    batched: true,
    retain_graph: false,
};

/// What a test op does when the engine calls it.
#[derive(Clone, Copy)]
enum Answer {
    /// `3 g`, `Written::Exact`; batched calls served at once.
    Triple,
    /// `3 g` for one cotangent; `Written::Unbatched` for a batch.
    TripleOneAtATime,
    /// `Written::Unbatched` for every call.
    AlwaysUnbatched,
    /// `3 g` stored column-major (another layout of the input's shape), saying `Shaped`.
    ColumnMajorShaped,
    /// The same gradient, claiming `Exact`.
    ColumnMajorExact,
}

/// `y = 3 x`, implementing only `vjp`: its `backward` fails, so a traversal that succeeds went
/// through `vjp`. Counts the calls of each kind.
struct Triple {
    saved: SavedState,
    answer: Answer,
    ones: &'static AtomicUsize,
    batches: &'static AtomicUsize,
}

impl Operation for Triple {
    fn name(&self) -> &'static str {
        "triple"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, _: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Err(Error::Runtime("the engine calls vjp, not backward".into()))
    }
    fn vjp(&self, call: VjpCall<'_>) -> Result<Written> {
        let x = self.saved.inputs()[0].clone();
        match (call.cotangent, self.answer) {
            (_, Answer::AlwaysUnbatched) => Ok(Written::Unbatched),
            (Cotangent::One(g), Answer::ColumnMajorShaped | Answer::ColumnMajorExact) => {
                self.ones.fetch_add(1, Ordering::SeqCst);
                let g3: Vec<f32> = vals(&g).iter().map(|v| 3.0 * v).collect();
                *call.gradients = vec![Some(strided(&g3, &x.dims()))];
                Ok(match self.answer {
                    Answer::ColumnMajorShaped => Written::Shaped,
                    _ => Written::Exact,
                })
            }
            (Cotangent::One(g), _) => {
                self.ones.fetch_add(1, Ordering::SeqCst);
                *call.gradients = vec![Some(map(&g, |v| 3.0 * v)?)];
                Ok(Written::Exact)
            }
            (Cotangent::Batched { gradients, batch }, Answer::Triple) => {
                self.batches.fetch_add(batch, Ordering::SeqCst);
                *call.gradients = vec![Some(map(&gradients, |v| 3.0 * v)?)];
                Ok(Written::Exact)
            }
            (Cotangent::Batched { .. }, _) => Ok(Written::Unbatched),
            (Cotangent::Several(_), _) => Err(Error::Runtime("one result".into())),
        }
    }
}

fn triple(
    x: &Tensor,
    answer: Answer,
    ones: &'static AtomicUsize,
    batches: &'static AtomicUsize,
) -> Result<Tensor> {
    let y = map(x, |v| 3.0 * v)?;
    Ok(record(y, &[x], Vec::new(), |saved| Triple {
        saved,
        answer,
        ones,
        batches,
    }))
}

/// A Float32 leaf (differentiable by its dtype).
fn leaf(values: &[f32], dims: &[usize]) -> Tensor {
    t(values, dims)
}

#[test]
fn backward_and_grad_reach_a_node_only_through_vjp() {
    static ONES: AtomicUsize = AtomicUsize::new(0);
    static BATCHES: AtomicUsize = AtomicUsize::new(0);
    let x = leaf(&[1.0, -2.0], &[2]);
    let y = triple(&x, Answer::Triple, &ONES, &BATCHES).unwrap();
    let g = t(&[1.0, 10.0], &[2]);
    let got = grad(
        &y,
        &[&x],
        &g,
        GradOptions {
            batched: false,
            retain_graph: true,
        },
    )
    .unwrap();
    assert_eq!(vals(got[0].as_ref().unwrap()), [3.0, 30.0]);
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 30.0]));
    assert_eq!(ONES.load(Ordering::SeqCst), 2);
    assert_eq!(BATCHES.load(Ordering::SeqCst), 0);
}

/// Three cotangents of `triple` run as one batched `grad`: the stacked gradients, and how
/// many one-cotangent and batched calls the node got.
fn batched_triple(
    answer: Answer,
    ones: &'static AtomicUsize,
    batches: &'static AtomicUsize,
) -> (Vec<f32>, (usize, usize)) {
    let x = leaf(&[1.0, -2.0], &[2]);
    let y = triple(&x, answer, ones, batches).unwrap();
    let basis = t(&[1.0, 0.0, 0.0, 1.0, 2.0, 5.0], &[3, 2]);
    let got = grad(&y, &[&x], &basis, BATCHED).unwrap();
    let calls = (ones.load(Ordering::SeqCst), batches.load(Ordering::SeqCst));
    (vals(got[0].as_ref().unwrap()), calls)
}

#[test]
fn a_batch_reaches_vjp_at_once_when_the_node_serves_it() {
    static ONES: AtomicUsize = AtomicUsize::new(0);
    static BATCHES: AtomicUsize = AtomicUsize::new(0);
    let (got, calls) = batched_triple(Answer::Triple, &ONES, &BATCHES);
    assert_eq!(got, [3.0, 0.0, 0.0, 3.0, 6.0, 15.0]);
    assert_eq!(calls, (0, 3));
}

#[test]
fn a_node_answering_unbatched_runs_once_per_cotangent() {
    static ONES: AtomicUsize = AtomicUsize::new(0);
    static BATCHES: AtomicUsize = AtomicUsize::new(0);
    let (got, calls) = batched_triple(Answer::TripleOneAtATime, &ONES, &BATCHES);
    assert_eq!(got, [3.0, 0.0, 0.0, 3.0, 6.0, 15.0]);
    assert_eq!(calls, (3, 0));
}

#[test]
fn unbatched_for_one_cotangent_is_a_runtime_error_that_changes_nothing() {
    static ONES: AtomicUsize = AtomicUsize::new(0);
    static BATCHES: AtomicUsize = AtomicUsize::new(0);
    let x = leaf(&[1.0, -2.0], &[2]);
    let y = triple(&x, Answer::AlwaysUnbatched, &ONES, &BATCHES).unwrap();
    let e = y
        .backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.to_string().contains("Written::Unbatched"), "{e}");
    assert_eq!(grad_vals(&x), None);
    assert!(!y.autograd_ctx().unwrap().is_released(), "nothing released");
}

#[test]
fn shaped_gradients_are_laid_out_for_their_input_and_exact_ones_are_checked() {
    static ONES: AtomicUsize = AtomicUsize::new(0);
    static BATCHES: AtomicUsize = AtomicUsize::new(0);
    let values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let x = leaf(&values, &[2, 3]);
    let g = t(&values, &[2, 3]);

    let y = triple(&x, Answer::ColumnMajorShaped, &ONES, &BATCHES).unwrap();
    y.backward_with(Some(&g), false).unwrap();
    let gx = x.grad().unwrap().unwrap();
    assert_eq!(gx.layout(), x.layout());
    assert_eq!(vals(&gx), [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]);

    // claiming `Exact` for a gradient in another layout is refused, and nothing changes
    let x = leaf(&values, &[2, 3]);
    let y = triple(&x, Answer::ColumnMajorExact, &ONES, &BATCHES).unwrap();
    let e = y.backward_with(Some(&g), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    assert_eq!(grad_vals(&x), None);
    assert!(!y.autograd_ctx().unwrap().is_released());
}

/// A hand-written op implementing only `backward` is served by the provided `vjp`, which
/// answers `Exact` for one cotangent and `Unbatched` for a batch.
#[test]
fn the_provided_vjp_serves_a_backward_only_op() {
    struct Double(SavedState);
    impl Operation for Double {
        fn name(&self) -> &'static str {
            "double"
        }
        fn saved(&self) -> &SavedState {
            &self.0
        }
        fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(map(g, |v| 2.0 * v)?)])
        }
    }
    let x = leaf(&[1.0, 4.0], &[2]);
    let y = record(map(&x, |v| 2.0 * v).unwrap(), &[&x], Vec::new(), Double);
    let node = y.autograd_ctx().unwrap();
    let mut out = Vec::new();
    let g = t(&[1.0, 3.0], &[2]);
    let one = node.vjp(VjpCall::new(Cotangent::One(g.clone()), &[true], &mut out));
    assert_eq!(one.unwrap(), Written::Exact);
    assert_eq!(vals(out[0].as_ref().unwrap()), [2.0, 6.0]);
    let batch = Cotangent::Batched {
        gradients: t(&[1.0, 3.0, 5.0, 7.0], &[2, 2]),
        batch: 2,
    };
    assert_eq!(
        node.vjp(VjpCall::new(batch, &[true], &mut out)).unwrap(),
        Written::Unbatched
    );
    let basis = t(&[1.0, 3.0, 5.0, 7.0], &[2, 2]);
    let got = grad(&y, &[&x], &basis, BATCHED).unwrap();
    assert_eq!(vals(got[0].as_ref().unwrap()), [2.0, 6.0, 10.0, 14.0]);
}

//! The generic tape: nodes, `GradValue`/`GradZero` for every value type, and each reverse
//! sweep, including the document's NaN case and refused preconditions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autograd_core::tape::{GradValue, GradZero, Node, SameShape, Tape};
use autograd_core::{DType, ErrorKind, Result, Tensor};
use ndarray::{arr1, ArrayD, IxDyn};

/// `out = c * parent` over f64.
fn scale(tape: &mut Tape<f64>, parent: usize, c: f64) -> usize {
    let v = c * tape.value(parent).copied().unwrap();
    tape.add_node(
        Node::new(v, vec![parent], move |g: &f64| Ok(vec![(parent, g * c)])).named("scale"),
    )
}

/// `out = a * b` over f64.
fn mul(tape: &mut Tape<f64>, a: usize, b: usize) -> usize {
    let (va, vb) = (
        tape.value(a).copied().unwrap(),
        tape.value(b).copied().unwrap(),
    );
    tape.add_node(
        Node::new(va * vb, vec![a, b], move |g: &f64| {
            Ok(vec![(a, g * vb), (b, g * va)])
        })
        .named("mul"),
    )
}

/// `out = ln(x)` over f64: singular at 0 (`g * (1 / 0)`).
fn ln(tape: &mut Tape<f64>, x: usize) -> usize {
    let vx = tape.value(x).copied().unwrap();
    tape.add_node(
        Node::new(vx.ln(), vec![x], move |g: &f64| {
            Ok(vec![(x, g * (1.0 / vx))])
        })
        .named("ln"),
    )
}

fn kind<T: std::fmt::Debug>(r: Result<T>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

fn t(values: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), autograd_core::Shape::from(dims)).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The tape itself

#[test]
fn empty_size_node_value_add_node() {
    let mut tape: Tape<f64> = Tape::empty();
    assert_eq!(tape.size(), 0);
    assert!(tape.is_empty());
    assert!(tape.node(0).is_none());
    assert!(tape.value(0).is_none());
    let before = tape.size();
    let x = tape.add_node(Node::leaf(2.0).named("x"));
    assert_eq!(x, before);
    assert_eq!(tape.size(), before + 1);
    let before = tape.size();
    let y = scale(&mut tape, x, 3.0);
    assert_eq!(y, before);
    assert_eq!(tape.size(), 2);
    assert_eq!(tape.value(y), Some(&6.0));
    let node = tape.node(y).unwrap();
    assert_eq!(node.name.as_deref(), Some("scale"));
    assert_eq!(node.parents, vec![x]);
    assert!(node.owns_value && node.requires_grad && node.cleanup.is_empty());
    assert!(tape.node(2).is_none());
    assert_eq!(tape.nodes().len(), 2);
    assert!(format!("{tape:?}").contains("scale"));
}

#[test]
fn node_builders_and_cleanup() {
    let mut tape = Tape::empty();
    let n = Node::leaf(1.0f64)
        .named("w")
        .with_requires_grad(false)
        .with_owns_value(false)
        .with_cleanup(vec![4.0, 5.0]);
    assert_eq!(n.name.as_deref(), Some("w"));
    assert!(!n.requires_grad && !n.owns_value);
    assert_eq!(n.cleanup, vec![4.0, 5.0]);
    assert_eq!((n.backward)(&1.0).unwrap(), vec![]);
    tape.add_node(n);
    tape.release_cleanup();
    assert!(tape.node(0).unwrap().cleanup.is_empty());
    tape.reset();
    assert_eq!(tape.size(), 0);
    let d: Tape<f32> = Tape::default();
    assert!(d.is_empty());
}

// ---------------------------------------------------------------------------------------------
// GradValue and GradZero

#[test]
fn grad_value_scalars() {
    let _: () = <f64 as GradValue>::shape(&1.0);
    assert_eq!(<f64 as GradValue>::add(1.5, 2.0).unwrap(), 3.5);
    assert_eq!(<f32 as GradValue>::add(1.5, 2.0).unwrap(), 3.5);
    assert!(<f64 as GradValue>::check(&1.0, &2.0).is_ok());
    let agree = SameShape::check(&1.0f64, &7.0, "g").unwrap();
    assert_eq!(<f64 as GradValue>::retag(4.0, &7.0, agree), 4.0);
    assert_eq!(<f64 as GradZero>::zeros_like(&7.0).unwrap(), 0.0);
    assert_eq!(<f32 as GradZero>::zeros_like(&7.0).unwrap(), 0.0);
    <f64 as GradValue>::drop(1.0);
}

#[test]
fn grad_value_ndarray() {
    let a = arr1(&[1.0f64, 2.0]).into_dyn();
    let b = arr1(&[10.0f64, 20.0]).into_dyn();
    assert_eq!(<ArrayD<f64> as GradValue>::shape(&a), vec![2]);
    let s = <ArrayD<f64> as GradValue>::add(a.clone(), b).unwrap();
    assert_eq!(s, arr1(&[11.0, 22.0]).into_dyn());
    let c = ArrayD::<f64>::zeros(IxDyn(&[3]));
    assert_eq!(
        kind(<ArrayD<f64> as GradValue>::add(a.clone(), c.clone())),
        ErrorKind::Value
    );
    let e = SameShape::check(&c, &a, "the gradient").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.message().contains("[3]") && e.message().contains("[2]"),
        "{e}"
    );
    let z = <ArrayD<f32> as GradZero>::zeros_like(&ArrayD::<f32>::ones(IxDyn(&[2, 3]))).unwrap();
    assert_eq!(z, ArrayD::<f32>::zeros(IxDyn(&[2, 3])));
}

#[test]
fn grad_value_tensor() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[10.0, 20.0, 30.0, 40.0], &[2, 2]);
    assert_eq!(<Tensor as GradValue>::shape(&a), a.shape().clone());
    let s = <Tensor as GradValue>::add(a.clone(), b).unwrap();
    assert_eq!(s.values::<f32>().unwrap(), vec![11.0, 22.0, 33.0, 44.0]);
    let flat = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    assert_eq!(
        kind(<Tensor as GradValue>::add(a.clone(), flat.clone())),
        ErrorKind::Value
    );
    assert_eq!(kind(SameShape::check(&flat, &a, "g")), ErrorKind::Value);
    let ints = Tensor::from_vec(
        vec![1i32, 2, 3, 4],
        autograd_core::Shape::from(&[2usize, 2][..]),
    )
    .unwrap();
    assert_eq!(
        kind(<Tensor as GradValue>::check(&ints, &a)),
        ErrorKind::Type
    );
    assert!(<Tensor as GradValue>::check(&a, &a).is_ok());
    let z = <Tensor as GradZero>::zeros_like(&a).unwrap();
    assert_eq!(z.dtype(), &DType::Float32);
    assert_eq!(z.shape(), a.shape());
    assert_eq!(z.values::<f32>().unwrap(), vec![0.0; 4]);
    // A zero gradient for a broadcast value has the value's shape in an injective layout.
    let row = t(&[1.0, 2.0], &[2]).broadcast_to(&[3, 2]).unwrap();
    let zb = <Tensor as GradZero>::zeros_like(&row).unwrap();
    assert_eq!(zb.shape(), row.shape());
    assert!(zb.layout().is_injective());
}

// ---------------------------------------------------------------------------------------------
// Optional-gradient sweep

#[test]
fn add_grad_dense_keeps_first_and_sums_in_order() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(1.0f64));
    let g = tape.add_grad_dense(vec![None], x, -0.0).unwrap();
    // Kept as is: -0.0 + 0.0 would be +0.0.
    assert!(g[x].unwrap().is_sign_negative());
    let g = tape.add_grad_dense(vec![None], x, 1e16).unwrap();
    let g = tape.add_grad_dense(g, x, 1.0).unwrap();
    let g = tape.add_grad_dense(g, x, -1e16).unwrap();
    assert_eq!(g[x], Some((1e16 + 1.0) - 1e16));
    assert_eq!(g[x], Some(0.0));
}

#[test]
fn add_grad_dense_refuses_bad_calls() {
    let mut tape = Tape::empty();
    tape.add_node(Node::leaf(arr1(&[1.0f64, 2.0]).into_dyn()));
    let wrong = ArrayD::<f64>::zeros(IxDyn(&[3]));
    assert_eq!(
        kind(tape.add_grad_dense(vec![None], 0, wrong.clone())),
        ErrorKind::Value
    );
    assert_eq!(
        kind(tape.add_grad_dense(vec![None], 1, wrong.clone())),
        ErrorKind::Value
    );
    // a gradient array of the wrong length, with a well-shaped contribution
    let right = ArrayD::<f64>::zeros(IxDyn(&[2]));
    let err = tape.add_grad_dense(vec![None, None], 0, right).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(
        err.message().contains("length") || err.message().contains("entries"),
        "{err}"
    );
    assert_eq!(
        kind(tape.add_grad_dense(vec![None, None], 0, wrong)),
        ErrorKind::Value
    );
}

#[test]
fn add_grad_skips_nodes_without_requires_grad() {
    let mut tape = Tape::empty();
    let c = tape.add_node(Node::leaf(1.0f64).with_requires_grad(false));
    assert_eq!(tape.add_grad_dense(vec![None], c, 5.0).unwrap(), vec![None]);
    assert_eq!(tape.add_grad_all(vec![0.0], c, 5.0).unwrap(), vec![0.0]);
}

#[test]
fn backward_dense_runs_only_reached_vjps() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = |tape: &mut Tape<f64>, parent: usize, runs: &Arc<AtomicUsize>| {
        let runs = runs.clone();
        let v = *tape.value(parent).unwrap();
        tape.add_node(Node::new(v, vec![parent], move |g: &f64| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(vec![(parent, *g)])
        }))
    };
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(2.0));
    let unused = counted(&mut tape, x, &runs); // never reached from y
    let y = counted(&mut tape, x, &runs);
    let after = counted(&mut tape, y, &runs); // after the output: never reached
    let grads = tape.backward_dense(y, 1.0).unwrap();
    assert_eq!(grads, vec![Some(1.0), None, Some(1.0), None]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let _ = (unused, after);
}

#[test]
fn backward_dense_sums_paths() {
    // y = (3x) * (5x) at x = 2: dy/dx = 30 x = 60.
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(2.0));
    let a = scale(&mut tape, x, 3.0);
    let b = scale(&mut tape, x, 5.0);
    let y = mul(&mut tape, a, b);
    let grads = tape.backward_dense(y, 1.0).unwrap();
    assert_eq!(grads, vec![Some(60.0), Some(10.0), Some(6.0), Some(1.0)]);
    // A seed other than one scales every gradient.
    let grads = tape.backward_dense(y, 0.5).unwrap();
    assert_eq!(grads[x], Some(30.0));
    assert_eq!(kind(tape.backward_dense(4, 1.0)), ErrorKind::Value);
}

#[test]
fn backward_dense_step_skips_unreached() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(2.0));
    let y = scale(&mut tape, x, 3.0);
    assert_eq!(
        tape.backward_dense_step(vec![None, None], y).unwrap(),
        vec![None, None]
    );
    assert_eq!(
        tape.backward_dense_step(vec![None, Some(2.0)], y).unwrap(),
        vec![Some(6.0), Some(2.0)]
    );
    assert_eq!(
        kind(tape.backward_dense_step(vec![None], y)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(tape.backward_dense_step(vec![None, None], 2)),
        ErrorKind::Value
    );
}

#[test]
fn totalize_fills_zeros() {
    let mut tape = Tape::empty();
    tape.add_node(Node::leaf(arr1(&[1.0f32, 2.0]).into_dyn()));
    tape.add_node(Node::leaf(ArrayD::<f32>::ones(IxDyn(&[2, 2]))));
    let g = arr1(&[5.0f32, 6.0]).into_dyn();
    let total = tape.totalize(vec![Some(g.clone()), None]).unwrap();
    assert_eq!(total, vec![g.clone(), ArrayD::zeros(IxDyn(&[2, 2]))]);
    // A short array is padded with zeros, a long one cut to the tape's size.
    let total = tape.totalize(vec![]).unwrap();
    assert_eq!(total[0], ArrayD::<f32>::zeros(IxDyn(&[2])));
    let total = tape.totalize(vec![Some(g.clone()), None, Some(g)]).unwrap();
    assert_eq!(total.len(), 2);
}

#[test]
fn backward_dense_all_is_totalized_backward_dense() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(2.0));
    let z = tape.add_node(Node::leaf(7.0));
    let y = scale(&mut tape, x, 3.0);
    let all = tape.backward_dense_all(y, 1.0).unwrap();
    assert_eq!(all, vec![3.0, 0.0, 1.0]);
    let dense = tape.backward_dense(y, 1.0).unwrap();
    assert_eq!(tape.totalize(dense).unwrap(), all);
    let _ = z;
}

// ---------------------------------------------------------------------------------------------
// Total-gradient sweep

#[test]
fn add_grad_all_sums_and_checks() {
    let mut tape = Tape::empty();
    tape.add_node(Node::leaf(arr1(&[1.0f64, 2.0]).into_dyn()));
    let one = arr1(&[1.0f64, 1.0]).into_dyn();
    let g = tape
        .add_grad_all(vec![one.clone()], 0, one.clone())
        .unwrap();
    assert_eq!(g[0], arr1(&[2.0, 2.0]).into_dyn());
    let wrong = ArrayD::<f64>::zeros(IxDyn(&[3]));
    assert_eq!(
        kind(tape.add_grad_all(vec![one.clone()], 0, wrong.clone())),
        ErrorKind::Value
    );
    // The current entry is checked too.
    assert_eq!(
        kind(tape.add_grad_all(vec![wrong], 0, one.clone())),
        ErrorKind::Value
    );
    assert_eq!(
        kind(tape.add_grad_all(vec![one.clone()], 1, one.clone())),
        ErrorKind::Value
    );
    assert_eq!(kind(tape.add_grad_all(vec![], 0, one)), ErrorKind::Value);
}

#[test]
fn backward_dense_from_step_and_loop() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(2.0));
    let a = scale(&mut tape, x, 3.0);
    let b = scale(&mut tape, a, 5.0);
    let acc = vec![0.0, 0.0, 1.0];
    let acc = tape.backward_dense_from_step(acc, b).unwrap();
    assert_eq!(acc, vec![0.0, 5.0, 1.0]);
    let acc = tape.backward_dense_from_step(acc, a).unwrap();
    assert_eq!(acc, vec![15.0, 5.0, 1.0]);
    // The loop over the first n nodes visits ids n-1 .. 0 only.
    assert_eq!(
        tape.backward_dense_from_loop(2, vec![0.0, 0.0, 1.0])
            .unwrap(),
        vec![0.0, 0.0, 1.0]
    );
    assert_eq!(
        tape.backward_dense_from_loop(3, vec![0.0, 0.0, 1.0])
            .unwrap(),
        vec![15.0, 5.0, 1.0]
    );
    assert_eq!(
        tape.backward_dense_from_loop(0, vec![1.0, 2.0, 3.0])
            .unwrap(),
        vec![1.0, 2.0, 3.0]
    );
    assert_eq!(
        kind(tape.backward_dense_from_loop(4, vec![0.0; 3])),
        ErrorKind::Value
    );
    assert_eq!(
        kind(tape.backward_dense_from_step(vec![0.0; 2], a)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(tape.backward_dense_from_step(vec![0.0; 3], 3)),
        ErrorKind::Value
    );
    // Starting from a total array, every entry is propagated (here both a and b carry some).
    assert_eq!(
        tape.backward_dense_from(vec![0.0, 1.0, 1.0]).unwrap(),
        vec![18.0, 6.0, 1.0]
    );
}

#[test]
fn backward_dense_from_checks_every_entry() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(arr1(&[1.0f64, 2.0]).into_dyn()));
    tape.add_node(Node::new(
        arr1(&[2.0f64, 4.0]).into_dyn(),
        vec![x],
        move |g: &ArrayD<f64>| Ok(vec![(x, g * 2.0)]),
    ));
    let ok = vec![ArrayD::zeros(IxDyn(&[2])), arr1(&[1.0, 1.0]).into_dyn()];
    let out = tape.backward_dense_from(ok).unwrap();
    assert_eq!(out[0], arr1(&[2.0, 2.0]).into_dyn());
    let bad = vec![ArrayD::zeros(IxDyn(&[3])), arr1(&[1.0, 1.0]).into_dyn()];
    let e = tape.backward_dense_from(bad).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("node 0"), "{e}");
    assert_eq!(
        kind(tape.backward_dense_from(vec![ArrayD::zeros(IxDyn(&[2]))])),
        ErrorKind::Value
    );
    // A step reading a badly shaped entry refuses it instead of panicking.
    let bad = vec![ArrayD::zeros(IxDyn(&[2])), ArrayD::zeros(IxDyn(&[5]))];
    assert_eq!(
        kind(tape.backward_dense_from_step(bad, 1)),
        ErrorKind::Value
    );
}

/// The precondition of the `from` sweeps is the whole array: one entry per node, every entry of
/// its node's shape. The step and the loop check all of it, so they refuse exactly what
/// `backward_dense_from` refuses, with the same kind, even for entries they never touch: here
/// the entry of a node that does not require a gradient (no step reads it) and of a node past
/// the first `n` that a partial loop visits.
#[test]
fn the_from_sweeps_check_every_entry_not_only_the_ones_they_touch() {
    let v = |x: &[f64]| arr1(x).into_dyn();
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(v(&[1.0, 2.0])));
    let frozen = tape.add_node(Node::leaf(v(&[5.0])).with_requires_grad(false));
    let y = tape.add_node(Node::new(
        v(&[2.0, 4.0]),
        vec![x],
        move |g: &ArrayD<f64>| Ok(vec![(x, g * 2.0)]),
    ));
    let later = tape.add_node(Node::leaf(v(&[0.0])));
    let good = || vec![v(&[0.0, 0.0]), v(&[0.0]), v(&[1.0, 1.0]), v(&[0.0])];
    assert_eq!(tape.backward_dense_from(good()).unwrap()[x], v(&[2.0, 2.0]));
    assert_eq!(
        tape.backward_dense_from_step(good(), y).unwrap()[x],
        v(&[2.0, 2.0])
    );
    assert_eq!(
        tape.backward_dense_from_loop(3, good()).unwrap()[x],
        v(&[2.0, 2.0])
    );
    for (bad_id, bad) in [(frozen, v(&[0.0, 0.0, 0.0])), (later, v(&[0.0, 0.0]))] {
        let mut acc = good();
        acc[bad_id] = bad;
        let e = tape.backward_dense_from(acc.clone()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value);
        assert!(e.message().contains(&format!("node {bad_id}")), "{e}");
        for (what, r) in [
            ("step at y", tape.backward_dense_from_step(acc.clone(), y)),
            ("step at x", tape.backward_dense_from_step(acc.clone(), x)),
            (
                "step at the frozen node",
                tape.backward_dense_from_step(acc.clone(), frozen),
            ),
            (
                "loop over all",
                tape.backward_dense_from_loop(4, acc.clone()),
            ),
            ("loop over 3", tape.backward_dense_from_loop(3, acc.clone())),
            (
                "loop over none",
                tape.backward_dense_from_loop(0, acc.clone()),
            ),
        ] {
            let e = r.expect_err(what);
            assert_eq!(e.kind(), ErrorKind::Value, "{what}: {e}");
            assert!(
                e.message().contains(&format!("node {bad_id}")),
                "{what}: {e}"
            );
        }
    }
}

/// The device check counts as part of the precondition too: a Float64 tensor as the entry of a
/// node no step reads is refused by all three, with `backward_dense_from`'s kind.
#[test]
fn the_from_sweeps_run_the_device_check_on_every_entry() {
    let mut tape: Tape<Tensor> = Tape::empty();
    let x = tape.add_node(Node::leaf(t(&[1.0, 2.0], &[2])));
    let frozen = tape.add_node(Node::leaf(t(&[3.0], &[1])).with_requires_grad(false));
    let mut acc = vec![t(&[1.0, 1.0], &[2]), t(&[0.0], &[1])];
    let want = tape.backward_dense_from(acc.clone()).unwrap();
    assert_eq!(want[x].values::<f32>().unwrap(), vec![1.0, 1.0]);
    acc[frozen] = Tensor::from_vec(vec![0.0f64], autograd_core::shape![1]).unwrap();
    let want = kind(tape.backward_dense_from(acc.clone()));
    assert_ne!(want, ErrorKind::Runtime);
    assert_eq!(kind(tape.backward_dense_from_step(acc.clone(), x)), want);
    assert_eq!(kind(tape.backward_dense_from_loop(1, acc.clone())), want);
    assert_eq!(kind(tape.backward_dense_from_loop(2, acc)), want);
}

#[test]
fn vjp_contributions_are_checked() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(arr1(&[1.0f64, 2.0]).into_dyn()));
    let other = tape.add_node(Node::leaf(arr1(&[1.0f64, 2.0]).into_dyn()));
    // Sends a contribution to a node that is not its parent.
    let stray = tape.add_node(
        Node::new(
            arr1(&[0.0f64, 0.0]).into_dyn(),
            vec![x],
            move |g: &ArrayD<f64>| Ok(vec![(other, g.clone())]),
        )
        .named("stray"),
    );
    // Sends a contribution of the wrong shape.
    let misshapen = tape.add_node(Node::new(
        arr1(&[0.0f64, 0.0]).into_dyn(),
        vec![x],
        move |_: &ArrayD<f64>| Ok(vec![(x, ArrayD::zeros(IxDyn(&[7])))]),
    ));
    // Fails.
    let failing = tape.add_node(
        Node::new(
            arr1(&[0.0f64, 0.0]).into_dyn(),
            vec![x],
            |_: &ArrayD<f64>| Err(autograd_core::Error::Runtime("boom".into())),
        )
        .named("failing"),
    );
    let seed = || arr1(&[1.0f64, 1.0]).into_dyn();
    let e = tape.backward_dense(stray, seed()).unwrap_err();
    assert!(
        e.message().contains("stray") && e.message().contains("not one of its parents"),
        "{e}"
    );
    assert_eq!(
        kind(tape.backward_dense(misshapen, seed())),
        ErrorKind::Value
    );
    let e = tape.backward_dense(failing, seed()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(
        e.message().contains("failing") && e.message().contains("boom"),
        "{e}"
    );
    assert_eq!(
        kind(tape.backward_dense(x, ArrayD::zeros(IxDyn(&[3])))),
        ErrorKind::Value
    );
}

#[test]
fn contribution_to_a_later_node_is_refused() {
    let mut tape = Tape::empty();
    // Node 0 claims node 1 as a parent: the reverse sweep would have visited it already.
    tape.add_node(Node::new(1.0f64, vec![1], |g: &f64| Ok(vec![(1, *g)])));
    tape.add_node(Node::leaf(1.0));
    assert_eq!(kind(tape.backward_dense(0, 1.0)), ErrorKind::Value);
    assert_eq!(
        kind(tape.backward_dense_from(vec![1.0, 0.0])),
        ErrorKind::Value
    );
}

#[test]
fn requires_grad_false_is_not_visited() {
    // y = 3 * c where c does not require a gradient; its VJP would send 3g to x.
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(2.0));
    let c = tape.add_node(
        Node::new(2.0, vec![x], move |g: &f64| Ok(vec![(x, 3.0 * g)])).with_requires_grad(false),
    );
    let y = scale(&mut tape, c, 3.0);
    assert_eq!(
        tape.backward_dense_all(y, 1.0).unwrap(),
        vec![0.0, 0.0, 1.0]
    );
    assert_eq!(
        tape.backward_dense_from(vec![0.0, 0.0, 1.0]).unwrap(),
        vec![0.0, 0.0, 1.0]
    );
}

// ---------------------------------------------------------------------------------------------
// The document's NaN case

#[test]
fn disconnected_singular_node_zero_vs_nan() {
    // x = 0; z = ln(x) is disconnected from y = 2x. Its VJP on a synthetic zero cotangent
    // computes 0 * (1/0) = NaN.
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(0.0f64).named("x"));
    let z = ln(&mut tape, x);
    let y = scale(&mut tape, x, 2.0);
    let all = tape.backward_dense_all(y, 1.0).unwrap();
    assert_eq!(all, vec![2.0, 0.0, 1.0]);
    let mut one_hot = vec![0.0; tape.size()];
    one_hot[y] = 1.0;
    let from = tape.backward_dense_from(one_hot).unwrap();
    assert!(from[x].is_nan(), "{from:?}");
    assert_eq!(from[z], 0.0);
    assert_eq!(from[y], 1.0);
}

// ---------------------------------------------------------------------------------------------
// Tensor values

#[test]
fn tensor_tape_sweeps() {
    // y = x * w elementwise; dy/dx = w, dy/dw = x; u is an unused leaf of another shape.
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let w = t(&[4.0, 5.0, 6.0], &[3]);
    let mut tape: Tape<Tensor> = Tape::empty();
    let ix = tape.add_node(Node::leaf(x.clone()));
    let iw = tape.add_node(Node::leaf(w.clone()));
    let iu = tape.add_node(Node::leaf(t(&[0.0; 4], &[2, 2])));
    let y = t(&[4.0, 10.0, 18.0], &[3]);
    let (xv, wv) = (x.values::<f32>().unwrap(), w.values::<f32>().unwrap());
    let iy = tape.add_node(Node::new(y, vec![ix, iw], move |g: &Tensor| {
        let gv = g.values::<f32>()?;
        let gx: Vec<f32> = gv.iter().zip(&wv).map(|(a, b)| a * b).collect();
        let gw: Vec<f32> = gv.iter().zip(&xv).map(|(a, b)| a * b).collect();
        Ok(vec![
            (ix, Tensor::from_vec(gx, autograd_core::shape![3])?),
            (iw, Tensor::from_vec(gw, autograd_core::shape![3])?),
        ])
    }));
    let seed = t(&[1.0, 1.0, 1.0], &[3]);
    let all = tape.backward_dense_all(iy, seed.clone()).unwrap();
    assert_eq!(all[ix].values::<f32>().unwrap(), vec![4.0, 5.0, 6.0]);
    assert_eq!(all[iw].values::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(all[iu].values::<f32>().unwrap(), vec![0.0; 4]);
    assert_eq!(all[iu].shape(), tape.value(iu).unwrap().shape());
    let from = tape
        .backward_dense_from(vec![
            t(&[0.0; 3], &[3]),
            t(&[0.0; 3], &[3]),
            t(&[0.0; 4], &[2, 2]),
            seed.clone(),
        ])
        .unwrap();
    for (a, b) in all.iter().zip(&from) {
        assert_eq!(a.values::<f32>().unwrap(), b.values::<f32>().unwrap());
    }
    // A seed of the wrong shape or dtype is refused.
    assert_eq!(
        kind(tape.backward_dense(iy, t(&[1.0; 4], &[4]))),
        ErrorKind::Value
    );
    let int_seed = Tensor::from_vec(vec![1i32, 1, 1], autograd_core::shape![3]).unwrap();
    assert_eq!(kind(tape.backward_dense(iy, int_seed)), ErrorKind::Type);
}

#[test]
fn tensor_gradients_add_into_a_slot_per_position_even_from_a_broadcast_summand() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0], autograd_core::shape![2])
        .unwrap()
        .broadcast_to(&[3, 2])
        .unwrap();
    let b = Tensor::from_vec(
        vec![10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0],
        autograd_core::shape![3, 2],
    )
    .unwrap();
    let sum = <Tensor as GradValue>::add(a, b).unwrap();
    assert!(sum.layout().is_injective());
    assert_eq!(
        sum.values::<f32>().unwrap(),
        vec![11.0, 22.0, 31.0, 42.0, 51.0, 62.0]
    );
}

#[test]
fn a_node_with_many_parents_gets_every_contribution_checked() {
    // 50,000 leaves feeding one sum node (the parent check uses a sorted copy beyond a few
    // parents); a contribution to a non-parent is still refused.
    let n = 50_000;
    let mut tape: Tape<f64> = Tape::empty();
    for i in 0..n {
        tape.add_node(Node::leaf(i as f64));
    }
    let parents: Vec<usize> = (0..n).collect();
    let sum = tape.add_node(Node::new(0.0, parents, move |g: &f64| {
        Ok((0..n).rev().map(|i| (i, *g)).collect())
    }));
    let grads = tape.backward_dense_all(sum, 2.0).unwrap();
    assert!(grads[..n].iter().all(|&g| g == 2.0));
    let bad = tape.add_node(Node::new(0.0, vec![sum], |g: &f64| Ok(vec![(0, *g)])));
    assert_eq!(kind(tape.backward_dense_all(bad, 1.0)), ErrorKind::Value);
}

#[test]
fn backward_dense_step_refuses_an_entry_of_the_wrong_shape_before_the_vjp_sees_it() {
    let mut tape = Tape::empty();
    let x = tape.add_node(Node::leaf(ArrayD::<f64>::zeros(IxDyn(&[3]))));
    let ran = Arc::new(AtomicUsize::new(0));
    let seen = ran.clone();
    let w = ArrayD::<f64>::ones(IxDyn(&[3]));
    let y = tape.add_node(Node::new(
        ArrayD::zeros(IxDyn(&[3])),
        vec![x],
        move |g: &ArrayD<f64>| {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(vec![(x, g * &w)])
        },
    ));
    let err = tape
        .backward_dense_step(vec![None, Some(ArrayD::zeros(IxDyn(&[2])))], y)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value, "{err}");
    assert!(err.message().contains("gradient entry of"), "{err}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the VJP never ran");
    // a well-shaped entry runs it
    let g = tape
        .backward_dense_step(vec![None, Some(ArrayD::ones(IxDyn(&[3])))], y)
        .unwrap();
    assert_eq!(g[x], Some(ArrayD::ones(IxDyn(&[3]))));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn an_operation_inherits_whether_its_parents_require_a_gradient() {
    // y = 4 c with c a constant leaf: y requires no gradient, so z = 3 y sends nothing to it
    let mut tape = Tape::empty();
    let c = tape.add_node(Node::leaf(1.0f64).with_requires_grad(false));
    let y = scale(&mut tape, c, 4.0);
    let z = scale(&mut tape, y, 3.0);
    assert!(!tape.node(y).unwrap().requires_grad);
    assert!(!tape.node(z).unwrap().requires_grad);
    assert_eq!(
        tape.backward_dense_all(z, 1.0).unwrap(),
        vec![0.0, 0.0, 1.0]
    );
    // one differentiable parent is enough
    let x = tape.add_node(Node::leaf(2.0));
    let w = mul(&mut tape, c, x);
    assert!(tape.node(w).unwrap().requires_grad);
    assert_eq!(tape.backward_dense_all(w, 1.0).unwrap()[x], 1.0);
}

#[test]
fn summing_into_a_gradient_entry_checks_the_entry() {
    // a compound-dtype tensor handed in as an existing entry: a Type error, not mixed values
    let x = t(&[1.0, 2.0], &[2]);
    let mut tape = Tape::empty();
    let id = tape.add_node(Node::leaf(x));
    // two records of two Float32 fields over four storage elements
    let storage = Tensor::from_parts(
        autograd_core::CpuCarrier::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]),
        autograd_core::Layout::row_major(&[2]).unwrap(),
        0,
    )
    .unwrap();
    let pair = DType::compound([("re", DType::Float32), ("im", DType::Float32)]).unwrap();
    let records = storage.with_logical_dtype(pair).unwrap();
    let e = tape
        .add_grad_dense(vec![Some(records.clone())], id, t(&[10.0, 20.0], &[2]))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    // a step summing into a parent's entry from the caller checks that entry too
    let y = tape.add_node(Node::new(
        t(&[0.0, 0.0], &[2]),
        vec![id],
        move |g: &Tensor| Ok(vec![(id, g.clone())]),
    ));
    let e = tape
        .backward_dense_step(vec![Some(records.clone()), Some(t(&[1.0, 1.0], &[2]))], y)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert_eq!(
        kind(<Tensor as GradValue>::add(records.clone(), records)),
        ErrorKind::Type
    );
}

//! Requirement: Functional gradients collect vector-Jacobian products without touching `.grad`.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{grad, shape, stride, ErrorKind, GradOptions, Layout, Result, Tensor};
use autograd_ops::{add, mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{
    carrier_id, expect_err, grads_bits, on_test_carrier, probe, tc, v, with_layout,
};

const RETAIN: GradOptions = GradOptions {
    batched: false,
    retain_graph: true,
};

/// x (on a TestCarrier), w, the shared intermediate h = x * w, and y = h * x + 3 h.
fn shared_graph() -> (Tensor, Tensor, Tensor, Tensor) {
    let x = tc(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 4.0], &[2]);
    let h = mul(&x, &w).unwrap();
    let y = add(&mul(&h, &x).unwrap(), &mul_scalar(&h, 3.0).unwrap()).unwrap();
    (x, w, h, y)
}

#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__match_backward_on_a_shared_multi_input_graph(
) {
    let (x, w, h, y) = shared_graph();
    // Values grad must neither read nor change.
    x.set_grad(Some(t(&[100.0, 200.0], &[2]))).unwrap();
    h.retain_grad(true).unwrap();
    y.retain_grad(true).unwrap();
    let before = grads_bits(&[&x, &w, &h, &y]);
    let g = t(&[1.0, 2.0], &[2]);

    let r = grad(&y, &[&x, &w], &g, RETAIN).unwrap();
    assert_eq!(
        grads_bits(&[&x, &w, &h, &y]),
        before,
        "no .grad changed during the grad call"
    );
    assert_eq!(r.len(), 2);
    let (gx, gw) = (r[0].clone().unwrap(), r[1].clone().unwrap());
    // y = x^2 w + 3 x w: dy/dx = 2 x w + 3 w, dy/dw = x^2 + 3 x.
    assert_eq!(v(&gx), vec![15.0, 56.0]);
    assert_eq!(v(&gw), vec![4.0, 20.0]);
    // Detached copies in fresh storage of each input's carrier class.
    assert!(gx.autograd_ctx().is_none() && gw.autograd_ctx().is_none());
    assert!(on_test_carrier(&gx));
    assert!(!on_test_carrier(&gw));
    assert_ne!(carrier_id(&gx), carrier_id(&x));
    assert_ne!(carrier_id(&gw), carrier_id(&w));

    // A later backward with the same cotangent accumulates the same values.
    x.set_grad(None).unwrap();
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(x.grad().unwrap().map(|g| v(&g)), Some(v(&gx)));
    assert_eq!(w.grad().unwrap().map(|g| v(&g)), Some(v(&gw)));
}

#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__return_none_for_an_unreachable_input(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let unrelated = t(&[5.0, 6.0], &[2]);
    let y = mul_scalar(&x, 4.0).unwrap();
    let r = grad(
        &y,
        &[&x, &unrelated],
        &t(&[1.0, 1.0], &[2]),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(v(r[0].as_ref().unwrap()), vec![4.0, 4.0]);
    assert!(r[1].is_none());
    assert_eq!(grad_vals(&x), None);
    assert_eq!(grad_vals(&unrelated), None);

    // In the order given, also with the unreachable input first.
    let y = mul_scalar(&x, 4.0).unwrap();
    let r = grad(
        &y,
        &[&unrelated, &x],
        &t(&[1.0, 1.0], &[2]),
        GradOptions::default(),
    )
    .unwrap();
    assert!(r[0].is_none());
    assert_eq!(v(r[1].as_ref().unwrap()), vec![4.0, 4.0]);
}

/// Rust's types already rule out what Python rejects with TypeError here: `inputs` must be a
/// slice of tensor references (not one Tensor, `None` or an integer), and `output` and
/// `cotangents` must be tensors. This pins that signature; the compile-fail cases live in
/// `tests/ui`.
#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__reject_an_inputs_argument_that_is_not_a_sequence_of_tensors(
) {
    type GradFn = fn(&Tensor, &[&Tensor], &Tensor, GradOptions) -> Result<Vec<Option<Tensor>>>;
    let f: GradFn = grad;
    // An empty sequence is still a sequence: no gradient, nothing changes.
    let x = t(&[1.0], &[1]);
    x.set_grad(Some(t(&[2.0], &[1]))).unwrap();
    let y = mul_scalar(&x, 3.0).unwrap();
    let before = grads_bits(&[&x, &y]);
    let r = f(&y, &[], &t(&[1.0], &[1]), RETAIN).unwrap();
    assert!(r.is_empty());
    assert_eq!(grads_bits(&[&x, &y]), before);
}

#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__argument_errors_come_before_any_traversal(
) {
    let x = t(&[1.0, 2.0], &[2]);
    x.set_grad(Some(t(&[1.0, 1.0], &[2]))).unwrap();
    let (h, hp) = probe(&x);
    let y = mul_scalar(&h, 2.0).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    let before = grads_bits(&[&x, &h, &y]);

    // A non-differentiable input: ValueError.
    let ints = Tensor::from_vec(vec![1i32, 2], &[2usize][..]).unwrap();
    expect_err(
        grad(&y, &[&x, &ints], &g, GradOptions::default()),
        ErrorKind::Value,
        &[],
    );
    // A non-differentiable output: RuntimeError.
    let int_out = Tensor::from_vec(vec![3i32, 4], &[2usize][..]).unwrap();
    expect_err(
        grad(&int_out, &[&x], &g, GradOptions::default()),
        ErrorKind::Runtime,
        &[],
    );

    assert_eq!(hp.calls(), 0, "no traversal ran");
    assert_eq!(grads_bits(&[&x, &h, &y]), before);
    // Nothing was released either.
    let r = grad(&y, &[&x], &g, GradOptions::default()).unwrap();
    assert_eq!(v(r[0].as_ref().unwrap()), vec![2.0, 2.0]);
}

#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__retained_intermediates_are_neither_read_nor_written(
) {
    let (x, w, h, y) = shared_graph();
    h.retain_grad(true).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    let r = grad(&y, &[&h], &g, RETAIN).unwrap();
    // A non-leaf input receives its total cotangent: dy/dh = x + 3.
    assert_eq!(v(r[0].as_ref().unwrap()), vec![4.0, 5.0]);
    assert_eq!(grad_vals(&h), None);
    // With a value already held, it is not read either.
    h.set_grad(Some(t(&[-1.0, -1.0], &[2]))).unwrap();
    let before = grads_bits(&[&x, &w, &h, &y]);
    let r = grad(&y, &[&h, &x], &g, RETAIN).unwrap();
    assert_eq!(v(r[0].as_ref().unwrap()), vec![4.0, 5.0]);
    assert_eq!(v(r[1].as_ref().unwrap()), vec![15.0, 28.0]);
    assert_eq!(grads_bits(&[&x, &w, &h, &y]), before);
}

#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__follows_the_release_and_version_rules_of_backward(
) {
    // Released after a default call.
    let (x, _w, h, y) = shared_graph();
    let g = t(&[1.0, 1.0], &[2]);
    grad(&y, &[&x], &g, GradOptions::default()).unwrap();
    assert!(h.autograd_ctx().unwrap().inputs().is_empty());
    expect_err(
        grad(&y, &[&x], &g, RETAIN),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    expect_err(
        y.backward_with(Some(&g), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );

    // Every node reached during discovery is released, also one that cannot reach a requested
    // input (and so need not run).
    let x = t(&[1.0, 2.0], &[2]);
    let z = t(&[3.0, 4.0], &[2]);
    let (pz, zp) = probe(&z);
    let y = add(&mul_scalar(&x, 2.0).unwrap(), &pz).unwrap();
    let r = grad(&y, &[&x], &g, GradOptions::default()).unwrap();
    assert_eq!(v(r[0].as_ref().unwrap()), vec![2.0, 2.0]);
    assert_eq!(
        zp.calls(),
        0,
        "work that cannot reach a requested input is skipped"
    );
    assert!(pz.autograd_ctx().unwrap().inputs().is_empty());
    assert_eq!(grad_vals(&z), None);

    // Kept with retain_graph; a mutation of a saved input then invalidates it.
    let (x, _w, _h, y) = shared_graph();
    grad(&y, &[&x], &g, RETAIN).unwrap();
    grad(&y, &[&x], &g, RETAIN).unwrap();
    x.set(&[1], 0.0).unwrap();
    expect_err(
        grad(&y, &[&x], &g, RETAIN),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(grad_vals(&x), None);
}

#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__gradient_buffers_follow_the_backward_rules(
) {
    // A broadcast input gets the canonical layout with per-slot sums.
    let x = with_layout(
        &[1.0, 2.0],
        Layout::new(shape![3, 2], stride![0, 1]).unwrap(),
    );
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let y = mul(&x, &w).unwrap();
    let r = grad(
        &y,
        &[&x],
        &y.f32_full_like(1.0).unwrap(),
        GradOptions::default(),
    )
    .unwrap();
    let gx = r[0].as_ref().unwrap();
    assert_eq!(
        gx.layout(),
        &Layout::new(shape![3, 2], stride![1, 3]).unwrap()
    );
    assert_eq!(v(gx), vec![9.0, 12.0, 9.0, 12.0, 9.0, 12.0]);
    assert_eq!(grad_vals(&x), None);

    // The output itself (here a leaf) as a requested input: a detached copy of the cotangent.
    let z = tc(&[1.0, 2.0], &[2]);
    let c = t(&[7.0, 8.0], &[2]);
    let r = grad(&z, &[&z, &x], &c, GradOptions::default()).unwrap();
    c.fill(0.0).unwrap();
    let gz = r[0].as_ref().unwrap();
    assert_eq!(v(gz), vec![7.0, 8.0]);
    assert!(on_test_carrier(gz));
    assert!(r[1].is_none());
    assert_eq!(grad_vals(&z), None);
}

/// Every returned gradient is a detached value with storage of its own, also when one input is
/// requested twice or the gradient is one a VJP made privately (which the call hands out
/// without a copy).
#[test]
fn functional_gradients_collect_vector_jacobian_products_without_touching_grad__each_result_has_its_own_storage(
) {
    let n = 1 << 16;
    let x = autograd_tests::t(&vec![1.5; n], &[n]);
    let y = autograd_ops::mul_scalar(&x, 4.0).unwrap();
    let g = autograd_tests::t(&vec![1.0; n], &[n]);
    let got =
        autograd_core::grad(&y, &[&x, &x], &g, autograd_core::GradOptions::default()).unwrap();
    let (a, b) = (got[0].clone().unwrap(), got[1].clone().unwrap());
    assert!(a.autograd_ctx().is_none() && b.autograd_ctx().is_none());
    a.fill(0.0).unwrap();
    assert!(b.values::<f32>().unwrap().iter().all(|&e| e == 4.0));
    assert!(x.grad().unwrap().is_none());
    g.fill(9.0).unwrap();
    assert!(b.values::<f32>().unwrap().iter().all(|&e| e == 4.0));
}

//! Requirement: Node-rooted traversal propagates a cotangent without a target Tensor.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{backwards_traversal, ErrorKind, Tensor};
use autograd_ops::{add, mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, probe};

/// x, w and y = x * w + 2 x, with y retaining its gradient.
fn graph() -> (Tensor, Tensor, Tensor) {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 4.0], &[2]);
    let y = add(&mul(&x, &w).unwrap(), &mul_scalar(&x, 2.0).unwrap()).unwrap();
    y.retain_grad(true).unwrap();
    (x, w, y)
}

#[test]
fn node_rooted_traversal_propagates_a_cotangent_without_a_target_tensor__propagate_from_an_autograd_node(
) {
    let g = t(&[1.0, -2.0], &[2]);
    let (x1, w1, y1) = graph();
    y1.backward_with(Some(&g), false).unwrap();

    let (x, w, y) = graph();
    let () = backwards_traversal(&g, y.autograd_ctx().as_ref(), false).unwrap();
    assert_eq!(grad_vals(&x), grad_vals(&x1));
    assert_eq!(grad_vals(&w), grad_vals(&w1));
    assert_eq!(grad_vals(&x), Some(vec![5.0, -12.0]));
    // The result's own .grad is unchanged, although it asked to retain its gradient.
    assert_eq!(grad_vals(&y), None);
    assert_eq!(grad_vals(&y1), Some(vec![1.0, -2.0]));

    // Also when the result already holds a gradient.
    let (x, _w, y) = graph();
    y.set_grad(Some(t(&[7.0, 7.0], &[2]))).unwrap();
    let before = grads_bits(&[&y]);
    backwards_traversal(&g, y.autograd_ctx().as_ref(), false).unwrap();
    assert_eq!(grads_bits(&[&y]), before);
    assert_eq!(grad_vals(&x), Some(vec![5.0, -12.0]));
}

#[test]
fn node_rooted_traversal_propagates_a_cotangent_without_a_target_tensor__traverse_no_graph() {
    let (x, w, y) = graph();
    x.set_grad(Some(t(&[1.0, 1.0], &[2]))).unwrap();
    let before = grads_bits(&[&x, &w, &y]);
    let () = backwards_traversal(&t(&[1.0, 1.0], &[2]), None, false).unwrap();
    backwards_traversal(&t(&[1.0, 1.0], &[2]), None, true).unwrap();
    assert_eq!(grads_bits(&[&x, &w, &y]), before);
    // The graph is intact.
    assert_eq!(y.autograd_ctx().unwrap().inputs().len(), 2);
}

#[test]
fn node_rooted_traversal_propagates_a_cotangent_without_a_target_tensor__reject_a_second_node_rooted_traversal(
) {
    let (x, _w, y) = graph();
    let node = y.autograd_ctx().unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    backwards_traversal(&g, Some(&node), false).unwrap();
    let before = grads_bits(&[&x]);
    expect_err(
        backwards_traversal(&g, Some(&node), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert_eq!(grads_bits(&[&x]), before);
}

#[test]
fn node_rooted_traversal_propagates_a_cotangent_without_a_target_tensor__retain_graph_allows_another_traversal(
) {
    let (x, w, y) = graph();
    let node = y.autograd_ctx().unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    backwards_traversal(&g, Some(&node), true).unwrap();
    backwards_traversal(&g, Some(&node), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![10.0, 12.0]));
    assert_eq!(grad_vals(&w), Some(vec![2.0, 4.0]));
    assert!(node.inputs().is_empty());
}

#[test]
fn node_rooted_traversal_propagates_a_cotangent_without_a_target_tensor__the_operations_own_failure_is_reported(
) {
    let (x, w, y) = graph();
    let node = y.autograd_ctx().unwrap();
    let before = grads_bits(&[&x, &w, &y]);
    // A cotangent whose shape differs from the result's: the add node's backward refuses it.
    expect_err(
        backwards_traversal(&t(&[1.0, 1.0, 1.0], &[3]), Some(&node), false),
        ErrorKind::Value,
        &[],
    );
    assert_eq!(grads_bits(&[&x, &w, &y]), before);
    backwards_traversal(&t(&[1.0, 1.0], &[2]), Some(&node), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![5.0, 6.0]));
}

#[test]
fn node_rooted_traversal_propagates_a_cotangent_without_a_target_tensor__saved_versions_and_buffers_follow_backward(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let (h, hp) = probe(&x);
    let y = mul_scalar(&h, 3.0).unwrap();
    h.retain_grad(true).unwrap();
    x.set(&[0], 5.0).unwrap();
    expect_err(
        backwards_traversal(&t(&[1.0, 1.0], &[2]), y.autograd_ctx().as_ref(), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(hp.calls(), 0);
    assert_eq!(grad_vals(&x), None);

    // Retained intermediates inside the graph accumulate as with backward.
    let x = t(&[1.0, 2.0], &[2]);
    let h = mul_scalar(&x, 2.0).unwrap();
    h.retain_grad(true).unwrap();
    let y = mul_scalar(&h, 3.0).unwrap();
    backwards_traversal(&t(&[1.0, 1.0], &[2]), y.autograd_ctx().as_ref(), false).unwrap();
    assert_eq!(grad_vals(&h), Some(vec![3.0, 3.0]));
    assert_eq!(grad_vals(&x), Some(vec![6.0, 6.0]));
}

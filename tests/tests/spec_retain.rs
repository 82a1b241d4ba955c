//! Requirement: Non-leaf tensors retain gradients only on request.
#![allow(non_snake_case)]

mod spec_support;

use autograd_ops::{mul, mul_scalar, sum};
use autograd_tests::{grad_vals, t};
use spec_support::{carrier_id, on_test_carrier, tc};

#[test]
fn non_leaf_tensors_retain_gradients_only_on_request__retain_one_intermediate_gradient() {
    let x = t(&[1.0, 2.0], &[2]);
    let a = mul_scalar(&x, 2.0).unwrap();
    let b = mul_scalar(&a, 3.0).unwrap();
    let c = mul(&b, &b).unwrap();
    let y = sum(&c).unwrap();
    let () = b.retain_grad(true).unwrap();
    y.backward().unwrap();
    // b = 6x, y = sum(b^2): dy/db = 2b.
    assert_eq!(grad_vals(&b), Some(vec![12.0, 24.0]));
    assert!(b.grad().unwrap().unwrap().autograd_ctx().is_none());
    assert_eq!(grad_vals(&a), None);
    assert_eq!(grad_vals(&c), None);
    assert_eq!(grad_vals(&y), None);
    assert_eq!(grad_vals(&x), Some(vec![72.0, 144.0]));
}

#[test]
fn non_leaf_tensors_retain_gradients_only_on_request__leave_intermediates_without_gradients_by_default(
) {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let a = mul(&x, &x).unwrap();
    let y = sum(&a).unwrap();
    y.backward().unwrap();
    assert_eq!(grad_vals(&y), None);
    assert_eq!(grad_vals(&a), None);
    assert_eq!(grad_vals(&x), Some(vec![2.0, 4.0, 6.0]));
}

#[test]
fn non_leaf_tensors_retain_gradients_only_on_request__retention_accumulates_like_a_leaf_until_disabled(
) {
    let x = tc(&[1.0, 2.0], &[2]);
    let a = mul_scalar(&x, 2.0).unwrap();
    let y = mul_scalar(&a, 5.0).unwrap();
    a.retain_grad(true).unwrap();
    y.retain_grad(true).unwrap();
    let g = t(&[1.0, -1.0], &[2]);
    y.backward_with(Some(&g), true).unwrap();
    assert_eq!(grad_vals(&a), Some(vec![5.0, -5.0]));
    // The retained root receives its own cotangent, as a detached copy.
    assert_eq!(grad_vals(&y), Some(vec![1.0, -1.0]));
    g.fill(0.0).unwrap();
    assert_eq!(grad_vals(&y), Some(vec![1.0, -1.0]));
    let ag = a.grad().unwrap().unwrap();
    assert!(on_test_carrier(&ag));
    assert_ne!(carrier_id(&ag), carrier_id(&a));

    // A later traversal accumulates.
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), true).unwrap();
    assert_eq!(grad_vals(&a), Some(vec![10.0, 0.0]));

    // retain_grad(false) disables retention; the value already held stays.
    let () = a.retain_grad(false).unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&a), Some(vec![10.0, 0.0]));
    assert_eq!(grad_vals(&x), Some(vec![30.0, 10.0]));
}

#[test]
fn non_leaf_tensors_retain_gradients_only_on_request__a_retained_tensor_consumed_twice_holds_the_sum(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let a = mul_scalar(&x, 2.0).unwrap();
    a.retain_grad(true).unwrap();
    let y = mul(&a, &a).unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&a), Some(vec![4.0, 8.0]));
    assert_eq!(grad_vals(&x), Some(vec![8.0, 16.0]));
}

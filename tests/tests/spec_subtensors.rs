//! Requirement: Autograd entry points require a one-subtensor Tensor.
#![allow(non_snake_case)]

mod spec_support;

use std::sync::atomic::Ordering;

use autograd_core::{grad, ErrorKind, GradOptions, Tensor};
use autograd_ops::mul_scalar;
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, tc_counted};

#[test]
fn autograd_entry_points_require_a_one_subtensor_tensor__reject_a_multi_subtensor_output() {
    let (a, allocations) = tc_counted(&[1.0, 2.0], &[1, 2]);
    let (b, _) = tc_counted(&[3.0, 4.0, 5.0, 6.0], &[2, 2]);
    let m = Tensor::from_subtensors(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(m.subtensor_count(), 2);
    assert!(m.is_differentiable());
    m.set_grad(Some(t(&[9.0; 6], &[3, 2]))).unwrap();
    a.set_grad(Some(t(&[1.0; 2], &[1, 2]))).unwrap();
    let before = grads_bits(&[&m, &a, &b]);
    let fresh_before = allocations.load(Ordering::SeqCst);

    let (g, g_allocations) = tc_counted(&[1.0; 6], &[3, 2]);
    expect_err(
        m.backward_with(Some(&g), false),
        ErrorKind::NotImplemented,
        &[],
    );
    expect_err(
        m.backward_with(Some(&g), true),
        ErrorKind::NotImplemented,
        &[],
    );
    expect_err(m.backward(), ErrorKind::NotImplemented, &[]);

    assert_eq!(grads_bits(&[&m, &a, &b]), before, "no .grad is modified");
    assert_eq!(
        allocations.load(Ordering::SeqCst),
        fresh_before,
        "no gradient buffer is allocated"
    );
    assert_eq!(g_allocations.load(Ordering::SeqCst), 0);
}

#[test]
fn autograd_entry_points_require_a_one_subtensor_tensor__a_multi_subtensor_non_leaf_is_refused_before_traversal(
) {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let y = mul_scalar(&x, 2.0).unwrap();
    let (a, allocations) = tc_counted(&[1.0, 2.0], &[1, 2]);
    let (b, _) = tc_counted(&[3.0, 4.0, 5.0, 6.0], &[2, 2]);
    let m = Tensor::from_subtensors(&[a, b]).unwrap();
    m.set_autograd_ctx(y.autograd_ctx()).unwrap();
    let (g, _) = tc_counted(&[1.0; 6], &[3, 2]);
    expect_err(
        m.backward_with(Some(&g), false),
        ErrorKind::NotImplemented,
        &[],
    );
    assert_eq!(grad_vals(&x), None);
    assert_eq!(
        y.autograd_ctx().unwrap().inputs().len(),
        1,
        "nothing was released"
    );
    assert_eq!(allocations.load(Ordering::SeqCst), 0);
}

#[test]
fn autograd_entry_points_require_a_one_subtensor_tensor__grad_refuses_a_multi_subtensor_output() {
    let (a, allocations) = tc_counted(&[1.0, 2.0], &[1, 2]);
    let (b, _) = tc_counted(&[3.0, 4.0], &[1, 2]);
    let m = Tensor::from_subtensors(&[a.clone(), b.clone()]).unwrap();
    a.set_grad(Some(t(&[5.0, 5.0], &[1, 2]))).unwrap();
    let before = grads_bits(&[&m, &a, &b]);
    let g = t(&[1.0; 4], &[2, 2]);
    for options in [
        GradOptions::default(),
        GradOptions {
            batched: false,
            retain_graph: true,
        },
    ] {
        expect_err(
            grad(&m, &[&a, &b], &g, options),
            ErrorKind::NotImplemented,
            &[],
        );
        expect_err(grad(&m, &[&m], &g, options), ErrorKind::NotImplemented, &[]);
    }
    let batched = t(&[1.0; 8], &[2, 2, 2]);
    expect_err(
        grad(
            &m,
            &[&a],
            &batched,
            GradOptions {
                batched: true,
                retain_graph: false,
            },
        ),
        ErrorKind::NotImplemented,
        &[],
    );
    assert_eq!(grads_bits(&[&m, &a, &b]), before);
    assert_eq!(allocations.load(Ordering::SeqCst), 0);
}

#[test]
fn autograd_entry_points_require_a_one_subtensor_tensor__only_the_entry_points_require_one_subtensor(
) {
    // Only `backward`'s receiver and `grad`'s output must have one subtensor; a multi-subtensor
    // leaf reached by traversal accumulates like any leaf, and grad may request it.
    let a = t(&[1.0, 2.0], &[1, 2]);
    let b = t(&[3.0, 4.0, 5.0, 6.0], &[2, 2]);
    let m = Tensor::from_subtensors(&[a, b]).unwrap();
    let y = mul_scalar(&m, 2.0).unwrap();
    let g = y.f32_like((1..=6).map(|k| k as f32).collect()).unwrap();
    let r = grad(
        &y,
        &[&m],
        &g,
        GradOptions {
            batched: false,
            retain_graph: true,
        },
    )
    .unwrap();
    assert_eq!(
        r[0].as_ref().map(|g| g.values::<f32>().unwrap()),
        Some(vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0])
    );
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&m), Some(vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]));
}

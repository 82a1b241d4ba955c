//! Milestone: public custom gradients (`custom_gradient`), from "Public custom gradients" of
//! the milestone document: a closure VJP, validated completely, atomic on failure.

mod spec_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use autograd_core::ops::{mul, sum, tanh};
use autograd_core::{
    custom_gradient, grad, gradcheck, is_grad_enabled, no_grad, Error, ErrorKind, GradOptions,
    GradcheckOptions, Result, Tensor,
};
use autograd_tests::{grad_vals, kind, t, vals};
use spec_support::{on_test_carrier, tc};

/// The milestone's product: `x * y` computed outside the graph, with the hand VJP
/// `(g * y, g * x)`; `vjp` may be replaced to make it misbehave.
fn product_with(
    x: &Tensor,
    y: &Tensor,
    vjp: impl Fn(&Tensor, &Tensor, &Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> Result<Tensor> {
    let value = {
        let _g = no_grad();
        mul(x, y)?
    };
    let (xv, yv) = (x.detach(), y.detach());
    custom_gradient(value, &[x, y], move |g| vjp(g, &xv, &yv))
}

fn good_vjp(g: &Tensor, x: &Tensor, y: &Tensor) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![Some(mul(g, y)?), Some(mul(g, x)?)])
}

#[test]
fn the_product_example_gives_y_and_x() {
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    let p = product_with(&x, &y, good_vjp).unwrap();
    assert_eq!(vals(&p), [8.0, 15.0]);
    assert_eq!(p.autograd_ctx().unwrap().name(), "custom_gradient");
    sum(&p).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [4.0, 5.0]);
    assert_eq!(grad_vals(&y).unwrap(), [2.0, 3.0]);
}

#[test]
fn gradients_accumulate_across_traversals_like_any_op() {
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    for _ in 0..2 {
        sum(&product_with(&x, &y, good_vjp).unwrap())
            .unwrap()
            .backward()
            .unwrap();
    }
    assert_eq!(grad_vals(&x).unwrap(), [8.0, 10.0]);
}

#[test]
fn gradcheck_passes_through_custom_gradient() {
    // f(x, y) = tanh(x) * y, with d/dx = g y (1 - tanh² x) and d/dy = g tanh x.
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let (x, y) = (xs[0].detach(), xs[1].detach());
        let value = {
            let _g = no_grad();
            mul(&tanh(&x)?, &y)?
        };
        custom_gradient(value, &[&xs[0], &xs[1]], move |g| {
            let th = tanh(&x)?.values::<f32>()?;
            let yv = y.values::<f32>()?;
            let gv = g.values::<f32>()?;
            let dx: Vec<f32> = (0..gv.len())
                .map(|i| gv[i] * yv[i] * (1.0 - th[i] * th[i]))
                .collect();
            let dy: Vec<f32> = (0..gv.len()).map(|i| gv[i] * th[i]).collect();
            Ok(vec![
                Some(Tensor::from_vec(dx, x.shape().clone())?),
                Some(Tensor::from_vec(dy, y.shape().clone())?),
            ])
        })
    };
    let x = t(&[0.3, -0.7, 1.1, 0.05, -1.4, 0.6], &[2, 3]);
    let y = t(&[1.5, -0.2, 0.8, -1.0, 0.4, 2.0], &[2, 3]);
    let report = gradcheck(f, &[x, y], GradcheckOptions::default()).unwrap();
    assert_eq!(report.slots_checked, 12);
}

/// A graph whose loss reaches `x` through the custom node and also through an ordinary op,
/// with previous gradients on both leaves: a failure must leave both exactly as they were
/// (nothing of the ordinary branch either).
fn assert_failure_changes_nothing(
    vjp: impl Fn(&Tensor, &Tensor, &Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
    expected: ErrorKind,
) -> Error {
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    x.set_grad(Some(t(&[0.5, 0.25], &[2]))).unwrap();
    y.set_grad(Some(t(&[-1.0, 7.0], &[2]))).unwrap();
    let p = product_with(&x, &y, vjp).unwrap();
    let loss = sum(&mul(&p, &x).unwrap()).unwrap();
    let err = loss.backward().expect_err("the custom VJP must fail");
    assert_eq!(err.kind(), expected, "{err}");
    assert_eq!(grad_vals(&x).unwrap(), [0.5, 0.25]);
    assert_eq!(grad_vals(&y).unwrap(), [-1.0, 7.0]);
    // Nothing was released either: a correct traversal of the same kind still fails the same
    // way rather than with "already released".
    assert_eq!(loss.backward().unwrap_err().kind(), expected);
    err
}

#[test]
fn a_count_mismatch_leaves_every_grad_unchanged() {
    let e = assert_failure_changes_nothing(|g, _x, y| Ok(vec![Some(mul(g, y)?)]), ErrorKind::Value);
    assert!(e.message().contains("returned 1 gradients for 2"), "{e}");
}

#[test]
fn a_wrong_shape_leaves_every_grad_unchanged() {
    let e = assert_failure_changes_nothing(
        |g, _x, y| Ok(vec![Some(mul(g, y)?), Some(t(&[1.0, 2.0, 3.0], &[3]))]),
        ErrorKind::Value,
    );
    assert!(e.message().contains("custom_gradient"), "{e}");
}

#[test]
fn a_wrong_dtype_leaves_every_grad_unchanged() {
    assert_failure_changes_nothing(
        |g, _x, y| {
            let as_f64 = Tensor::from_vec(vec![1.0f64, 2.0], autograd_core::shape![2])?;
            Ok(vec![Some(mul(g, y)?), Some(as_f64)])
        },
        ErrorKind::Type,
    );
}

#[test]
fn a_callback_error_leaves_every_grad_unchanged() {
    let e = assert_failure_changes_nothing(
        |_, _, _| Err(Error::NotImplemented("no derivative here".into())),
        ErrorKind::NotImplemented,
    );
    assert!(e.message().contains("no derivative here"), "{e}");
}

#[test]
fn a_panicking_callback_is_a_runtime_error_and_changes_nothing() {
    let e = assert_failure_changes_nothing(
        |_, _, _| panic!("the callback blew up"),
        ErrorKind::Runtime,
    );
    assert!(
        e.message().contains("panicked: the callback blew up"),
        "{e}"
    );
}

#[test]
fn a_contribution_the_traversal_skips_is_still_validated() {
    // grad asks only for x; y's malformed contribution must still be refused.
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    let p = product_with(&x, &y, |g, _x, y| {
        Ok(vec![Some(mul(g, y)?), Some(t(&[1.0], &[1]))])
    })
    .unwrap();
    let r = grad(&p, &[&x], &t(&[1.0, 1.0], &[2]), GradOptions::default());
    assert_eq!(kind(r), ErrorKind::Value);
}

#[test]
fn none_positions_are_allowed_for_inputs_without_gradients() {
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    let p = product_with(&x, &y, |g, _x, y| Ok(vec![Some(mul(g, y)?), None])).unwrap();
    sum(&p).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [4.0, 5.0]);
    assert_eq!(grad_vals(&y), None);
}

#[test]
fn an_output_that_cannot_carry_a_node_is_refused_not_left_constant() {
    let x = t(&[2.0, 3.0], &[2]);
    let value = Tensor::from_vec(vec![4.0f64, 6.0], autograd_core::shape![2]).unwrap();
    let r = custom_gradient(value, &[&x], |g| Ok(vec![Some(g.clone())]));
    assert_eq!(kind(r), ErrorKind::Runtime);
}

#[test]
fn a_mismatched_carrier_class_is_a_value_error() {
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    let value = tc(&[8.0, 15.0], &[2]);
    let r = custom_gradient(value, &[&x, &y], |_| Ok(vec![None, None]));
    assert_eq!(kind(r), ErrorKind::Value);
}

#[test]
fn a_contribution_in_another_carrier_class_is_refused() {
    let x = tc(&[2.0, 3.0], &[2]);
    let value = tc(&[4.0, 9.0], &[2]);
    x.set_grad(Some(tc(&[1.0, 1.0], &[2]))).unwrap();
    // the contribution is on a CPU carrier, x on a TestCarrier
    let p = custom_gradient(value, &[&x], |_| Ok(vec![Some(t(&[4.0, 6.0], &[2]))])).unwrap();
    let e = sum(&p).unwrap().backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    assert!(e.message().contains("carrier"), "{e}");
    assert_eq!(grad_vals(&x).unwrap(), [1.0, 1.0]);
}

#[test]
fn contributions_in_the_inputs_class_accumulate_there() {
    let x = tc(&[2.0, 3.0], &[2]);
    let value = tc(&[4.0, 9.0], &[2]);
    let p = custom_gradient(value, &[&x], |g| Ok(vec![Some(g.clone())])).unwrap();
    p.backward_with(Some(&tc(&[1.0, 2.0], &[2])), false)
        .unwrap();
    let g = x.grad().unwrap().unwrap();
    assert!(on_test_carrier(&g));
    assert_eq!(vals(&g), [1.0, 2.0]);
}

#[test]
fn the_callback_runs_with_graph_construction_disabled() {
    let seen_enabled = Arc::new(AtomicBool::new(true));
    let flag = seen_enabled.clone();
    let x = t(&[2.0, 3.0], &[2]);
    let p = custom_gradient(t(&[4.0, 9.0], &[2]), &[&x], move |g| {
        flag.store(is_grad_enabled(), Ordering::SeqCst);
        // an op inside the VJP records nothing
        let doubled = mul(g, &t(&[2.0, 2.0], &[2]))?;
        assert!(doubled.autograd_ctx().is_none());
        Ok(vec![Some(doubled)])
    })
    .unwrap();
    sum(&p).unwrap().backward().unwrap();
    assert!(!seen_enabled.load(Ordering::SeqCst));
    assert!(is_grad_enabled());
    assert_eq!(grad_vals(&x).unwrap(), [2.0, 2.0]);
}

#[test]
fn an_input_modified_after_recording_is_refused() {
    let x = t(&[2.0, 3.0], &[2]);
    let y = t(&[4.0, 5.0], &[2]);
    let p = product_with(&x, &y, good_vjp).unwrap();
    x.set(&[0], 10.0f32).unwrap();
    let e = sum(&p).unwrap().backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.message().contains("in-place modification"), "{e}");
    assert_eq!(grad_vals(&y), None);
}

#[test]
fn nothing_is_recorded_without_graph_construction() {
    let x = t(&[2.0, 3.0], &[2]);
    let _g = no_grad();
    let p = custom_gradient(t(&[4.0, 9.0], &[2]), &[&x], |g| Ok(vec![Some(g.clone())])).unwrap();
    assert!(p.autograd_ctx().is_none());
}

//! Requirement: Reverse mode is the complete differentiation surface.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{
    backwards_traversal, grad, is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard,
    GradOptions, Node, Result, Tensor,
};
use autograd_ops::{mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{grads_bits, v};

/// The signature of the functional `grad`.
type GradFn = fn(&Tensor, &[&Tensor], &Tensor, GradOptions) -> Result<Vec<Option<Tensor>>>;

/// The surface, pinned to exactly the parameters the spec names. A `create_graph` argument has
/// nowhere to go: passing one is a compile error (see the trybuild cases in `tests/ui`).
#[test]
fn reverse_mode_is_the_complete_differentiation_surface__reject_a_create_graph_argument() {
    let _: fn(&Tensor) -> Result<()> = Tensor::backward;
    let _: fn(&Tensor, Option<&Tensor>, bool) -> Result<()> = Tensor::backward_with;
    let _: fn(&Tensor, Option<&Node>, bool) -> Result<()> = backwards_traversal;
    let _: GradFn = grad;
    // An exhaustive struct pattern: GradOptions has exactly `batched` and `retain_graph`.
    let GradOptions {
        batched,
        retain_graph,
    } = GradOptions::default();
    assert!(!batched && !retain_graph);
    // The rest of the surface.
    let _: fn(&Tensor) -> Result<Option<Tensor>> = Tensor::grad;
    let _: fn(&Tensor, Option<Tensor>) -> Result<()> = Tensor::set_grad;
    let _: fn(&Tensor, bool) -> Result<()> = Tensor::retain_grad;
    let _: fn(&Tensor) -> Option<Node> = Tensor::autograd_ctx;
    let _: fn(&Tensor, Option<Node>) -> Result<()> = Tensor::set_autograd_ctx;
    let _: fn(&Tensor) -> bool = Tensor::is_differentiable;
    let _: fn() -> bool = is_grad_enabled;
    let _: fn(bool) = set_grad_enabled;
    let _: fn() -> GradModeGuard = no_grad;
}

#[test]
fn reverse_mode_is_the_complete_differentiation_surface__produce_detached_gradients() {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 4.0], &[2]);
    let y = mul(&x, &w).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    y.backward_with(Some(&g), true).unwrap();
    let xg = x.grad().unwrap().unwrap();
    assert!(xg.autograd_ctx().is_none());
    // Backward on the gradient propagates to no other tensor.
    let before = grads_bits(&[&x, &w, &y]);
    xg.backward_with(Some(&t(&[10.0, 10.0], &[2])), false)
        .unwrap();
    assert_eq!(grads_bits(&[&x, &w, &y]), before);
    assert_eq!(grad_vals(&xg), Some(vec![10.0, 10.0]));

    // The same for a gradient returned by grad.
    let r = grad(&y, &[&x], &g, GradOptions::default()).unwrap();
    let gx = r[0].clone().unwrap();
    assert!(gx.autograd_ctx().is_none());
    assert_eq!(v(&gx), vec![3.0, 4.0]);
    let before = grads_bits(&[&x, &w, &y, &xg]);
    gx.backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap();
    assert_eq!(grads_bits(&[&x, &w, &y, &xg]), before);

    // Differentiating a function of a gradient reaches nothing upstream of the gradient.
    let z = mul_scalar(&gx, 5.0).unwrap();
    z.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grads_bits(&[&x, &w, &y, &xg]), before);
    assert_eq!(grad_vals(&gx), Some(vec![6.0, 6.0]));
}

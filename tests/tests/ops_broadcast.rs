//! The differentiable `broadcast_to`: its result aliases the input's storage through stride-0
//! modes, so the engine folds the result's cotangent before the op's VJP sees it.

use autograd_core::{gradcheck, GradcheckOptions, Tensor};
use autograd_ops::{broadcast_to, mul, sum};
use autograd_tests::{grad_vals, t};

#[test]
fn broadcast_to_counts_each_contribution_once() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = broadcast_to(&x, &[4, 2]).unwrap();
    y.backward_with(Some(&t(&[1.0; 8], &[4, 2])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![4.0, 4.0]));
}

#[test]
fn broadcast_to_matches_finite_differences() {
    let w = t(&[0.5, -1.0, 2.0, 0.25, 1.5, -0.75], &[3, 2]);
    let f = |xs: &[Tensor]| sum(&mul(&broadcast_to(&xs[0], &[3, 2])?, &w)?);
    let x = t(&[0.3, -0.7], &[2]);
    gradcheck(f, &[x], GradcheckOptions::default()).unwrap();
    // and through a column that repeats: [3, 1] -> [3, 2]
    let f = |xs: &[Tensor]| sum(&mul(&broadcast_to(&xs[0], &[3, 2])?, &w)?);
    gradcheck(
        f,
        &[t(&[0.1, 0.2, 0.3], &[3, 1])],
        GradcheckOptions::default(),
    )
    .unwrap();
}

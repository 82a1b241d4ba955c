//! The broadcast contract (issue 9): a VJP receives its result's cotangent per logical
//! position and returns per-position cotangents; the engine folds broadcast aliases (per-slot
//! sums replicated) only where a gradient leaves the graph, into `.grad` and `grad`'s results.

use autograd_core::{
    backwards_traversal, grad, gradcheck, shape, stride, CpuCarrier, GradOptions, GradcheckOptions,
    Layout, Tensor,
};
use autograd_ops::{broadcast_to, mul, sum};
use autograd_tests::{grad_vals, t, vals};

fn ones(dims: &[usize]) -> Tensor {
    let n = dims.iter().product();
    t(&vec![1.0; n], dims)
}

#[test]
fn a_broadcast_of_a_broadcast_counts_each_position_once() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = sum(&broadcast_to(&broadcast_to(&x, &[2, 3]).unwrap(), &[4, 2, 3]).unwrap()).unwrap();
    y.backward().unwrap();
    // d/dx_j of the sum over 4 * 2 copies of x_j
    assert_eq!(grad_vals(&x).unwrap(), vec![8.0; 3]);
}

#[test]
fn a_broadcast_of_a_broadcast_passes_gradcheck() {
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    let w = t(
        &(0..24).map(|i| i as f32 * 0.1).collect::<Vec<_>>(),
        &[4, 2, 3],
    );
    let f = |xs: &[Tensor]| {
        let b = broadcast_to(&broadcast_to(&xs[0], &[2, 3])?, &[4, 2, 3])?;
        sum(&mul(&b, &w)?)
    };
    let report = gradcheck(f, &[x], GradcheckOptions::default()).unwrap();
    assert!(report.max_abs_error < 1e-2, "{report:?}");
}

#[test]
fn a_broadcast_leaf_broadcast_again_gets_per_slot_sums() {
    // x is (3):(0): three positions over one storage slot
    let x = Tensor::from_parts(
        CpuCarrier::from_vec(vec![2.0f32]),
        Layout::new(shape![3], stride![0]).unwrap(),
        0,
    )
    .unwrap();
    sum(&broadcast_to(&x, &[2, 3]).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let g = x.grad().unwrap().unwrap();
    // each position of x receives 2 (two rows); the slot's sum 6 sits at every position
    assert_eq!(vals(&g), vec![6.0; 3]);
    assert!(g.layout().is_injective());
}

#[test]
fn backwards_traversal_agrees_with_backward_on_a_broadcast_result() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let r = broadcast_to(&x, &[2, 3]).unwrap();
    r.backward_with(Some(&ones(&[2, 3])), true).unwrap();
    let by_backward = grad_vals(&x).unwrap();
    x.set_grad(None).unwrap();
    backwards_traversal(&ones(&[2, 3]), r.autograd_ctx().as_ref(), false).unwrap();
    assert_eq!(grad_vals(&x).unwrap(), by_backward);
    assert_eq!(by_backward, vec![2.0; 3]);
}

#[test]
fn a_retained_broadcast_intermediate_gets_folded_gradient_but_passes_on_per_position() {
    let x = t(&[1.0, 2.0], &[2]);
    let b = broadcast_to(&x, &[3, 2]).unwrap();
    b.retain_grad(true).unwrap();
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    sum(&mul(&b, &w).unwrap()).unwrap().backward().unwrap();
    // b's positions share x's two slots: the folded gradient holds per-slot sums
    assert_eq!(
        grad_vals(&b).unwrap(),
        vec![9.0, 12.0, 9.0, 12.0, 9.0, 12.0]
    );
    // x's gradient counts each contribution once
    assert_eq!(grad_vals(&x).unwrap(), vec![9.0, 12.0]);
}

#[test]
fn functional_grad_of_a_broadcast_intermediate_is_folded_and_its_leaf_exact() {
    let x = t(&[1.0, 2.0], &[2]);
    let b = broadcast_to(&x, &[3, 2]).unwrap();
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let y = sum(&mul(&b, &w).unwrap()).unwrap();
    let g = grad(&y, &[&b, &x], &Tensor::scalar(1.0), GradOptions::default()).unwrap();
    assert_eq!(
        vals(g[0].as_ref().unwrap()),
        vec![9.0, 12.0, 9.0, 12.0, 9.0, 12.0]
    );
    assert_eq!(vals(g[1].as_ref().unwrap()), vec![9.0, 12.0]);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn backward_with_on_a_broadcast_root_passes_the_cotangent_through_unfolded() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let r = broadcast_to(&x, &[2, 3]).unwrap();
    let g = t(&[1.0, 2.0, 3.0, 10.0, 20.0, 30.0], &[2, 3]);
    r.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x).unwrap(), vec![11.0, 22.0, 33.0]);
}

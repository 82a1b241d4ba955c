//! Requirement: Backward traverses each recorded node once in topological order.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::Tensor;
use autograd_ops::{add, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, t};
use spec_support::{probe, v};

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__sum_contributions_of_a_repeated_input(
) {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = add(&x, &x).unwrap();
    let g = t(&[0.5, 1.0, -2.0], &[3]);
    let () = y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![1.0, 2.0, -4.0]));

    // The same through a product: d(x * x) = 2 x g.
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    mul(&x, &x).unwrap().backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![1.0, 4.0, -12.0]));
}

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__accumulate_a_shared_subgraph_before_propagating(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 5.0], &[2]);
    let (h, hp) = probe(&x);
    // out = h * w + 3 h: h is consumed by two operations.
    let out = add(&mul(&h, &w).unwrap(), &mul_scalar(&h, 3.0).unwrap()).unwrap();
    let g = t(&[1.0, 10.0], &[2]);
    out.backward_with(Some(&g), false).unwrap();
    // h's producing node runs once, with the summed cotangent g * w + 3 g.
    assert_eq!(hp.calls(), 1);
    assert_eq!(hp.received(), vec![vec![6.0, 80.0]]);
    // Each leaf gradient is reached exactly once.
    assert_eq!(grad_vals(&x), Some(vec![6.0, 80.0]));
    assert_eq!(grad_vals(&w), Some(vec![1.0, 20.0]));
}

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__a_node_waits_for_every_consumer_on_paths_of_different_length(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let (h, hp) = probe(&x);
    // Short path: h -> out. Long path: h -> a -> b -> c -> out.
    let a = mul_scalar(&h, 2.0).unwrap();
    let (b, bp) = probe(&a);
    let c = mul_scalar(&b, 3.0).unwrap();
    let out = add(&add(&h, &c).unwrap(), &b).unwrap();
    out.backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap();
    assert_eq!(bp.calls(), 1);
    assert_eq!(bp.received(), vec![vec![4.0, 4.0]]);
    assert_eq!(hp.calls(), 1);
    // 1 (direct) + 2 * (3 + 1) through the long path.
    assert_eq!(hp.received(), vec![vec![9.0, 9.0]]);
    assert_eq!(grad_vals(&x), Some(vec![9.0, 9.0]));
}

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__each_reached_node_runs_at_most_once(
) {
    // A diamond of diamonds: every intermediate is consumed twice.
    let x = t(&[1.0], &[1]);
    let (mut cur, first) = probe(&x);
    let mut probes = vec![first];
    for _ in 0..6 {
        let left = mul_scalar(&cur, 1.0).unwrap();
        let right = mul_scalar(&cur, 1.0).unwrap();
        let (next, p) = probe(&add(&left, &right).unwrap());
        probes.push(p);
        cur = next;
    }
    cur.backward().unwrap();
    for (i, p) in probes.iter().enumerate() {
        assert_eq!(p.calls(), 1, "probe {i} ran {} times", p.calls());
    }
    assert_eq!(grad_vals(&x), Some(vec![64.0]));

    // One node attached to two tensors is still one node: it runs once, with their sum.
    let x = t(&[1.0, 2.0], &[2]);
    let (h, hp) = probe(&x);
    let twin = t(&[0.0, 0.0], &[2]);
    twin.set_autograd_ctx(h.autograd_ctx()).unwrap();
    let out = add(
        &mul_scalar(&h, 2.0).unwrap(),
        &mul_scalar(&twin, 5.0).unwrap(),
    )
    .unwrap();
    out.backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap();
    assert_eq!(hp.calls(), 1);
    assert_eq!(hp.received(), vec![vec![7.0, 7.0]]);
    assert_eq!(grad_vals(&x), Some(vec![7.0, 7.0]));
}

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__returns_none_and_defaults_to_releasing(
) {
    let x = t(&[2.0], &[1]);
    let y = sum(&mul(&x, &x).unwrap()).unwrap();
    // `backward()` is `backward_with(None, false)`: implicit cotangent, graph released.
    let () = y.backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![4.0]));
    assert!(y.autograd_ctx().unwrap().inputs().is_empty());
}

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__traversal_is_iterative() {
    // A chain far deeper than a recursive traversal could survive on a 2 MiB stack.
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let x = t(&[1.0], &[1]);
            let mut y: Tensor = x.clone();
            for _ in 0..100_000 {
                y = mul_scalar(&y, 1.0).unwrap();
            }
            y.backward().unwrap();
            let g = grad_vals(&x);
            drop(y);
            g
        })
        .unwrap();
    assert_eq!(handle.join().unwrap(), Some(vec![1.0]));
}

#[test]
fn backward_traverses_each_recorded_node_once_in_topological_order__a_node_outside_the_reached_graph_neither_runs_nor_is_released(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let (h, hp) = probe(&x);
    // h feeds `dead`, which never reaches `out`; and `out` does not consume `dead`.
    let dead = mul_scalar(&h, 2.0).unwrap();
    let out = mul_scalar(&x, 3.0).unwrap();
    out.backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap();
    assert_eq!(hp.calls(), 0);
    assert_eq!(grad_vals(&x), Some(vec![3.0, 3.0]));
    assert_eq!(dead.autograd_ctx().unwrap().inputs().len(), 1);
    assert_eq!(h.autograd_ctx().unwrap().inputs().len(), 1);
    assert_eq!(v(&dead), vec![2.0, 4.0]);
}

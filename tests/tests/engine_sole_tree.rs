//! `backward` runs the part of a graph its root reaches through sole edges as it finds it (a
//! tree, depth first), and plans only what lies past that tree's frontier (issue 9, item 4):
//! the same gradients as the planned traversal `grad` runs, summed in the same order, the same
//! release, and exactly one winner when traversals race.

use std::sync::{Arc, Barrier};
use std::thread;

use autograd_core::{grad, ErrorKind, GradOptions, Tensor};
use autograd_ops::{add, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, noise, t, vals};

const N: usize = 7;

fn leaf(seed: u64) -> Tensor {
    t(&noise(N, seed), &[N])
}

/// `backward` accumulates exactly (bit for bit) what `grad` returns for every leaf.
fn assert_backward_matches_grad(loss: &Tensor, leaves: &[&Tensor]) {
    let keep = GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    };
    let expected = grad(loss, leaves, &Tensor::scalar(1.0), keep).unwrap();
    loss.backward().unwrap();
    for (l, e) in leaves.iter().zip(&expected) {
        let e = e.as_ref().expect("every leaf is reached");
        assert_eq!(grad_vals(l), Some(vals(e)));
    }
}

/// A chain whose every third intermediate the caller keeps: each kept tensor makes a frontier
/// of one node, the root of the next tree.
#[test]
fn a_chain_with_kept_intermediates_runs_as_trees_and_matches_grad() {
    let (x, w) = (leaf(1), leaf(2));
    let mut kept = Vec::new();
    let mut y = x.clone();
    for k in 0..30 {
        y = add(&mul(&y, &w).unwrap(), &mul_scalar(&x, 0.5).unwrap()).unwrap();
        if k % 3 == 0 {
            kept.push(y.clone());
        }
    }
    let loss = sum(&mul(&y, &y).unwrap()).unwrap();
    assert_backward_matches_grad(&loss, &[&x, &w]);
    // the whole graph went, kept intermediates' nodes too
    for k in &kept {
        assert!(k.autograd_ctx().unwrap().is_released());
    }
    let again = loss.backward().unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Runtime);
    assert!(again.message().contains("retain_graph=True"), "{again}");
}

/// Shared intermediates (a diamond, a tensor used twice by one node) make a frontier of
/// several nodes, which a plan runs after the tree; the order of the sums is `grad`'s.
#[test]
fn a_frontier_of_several_nodes_is_planned_and_matches_grad() {
    let (x, w) = (leaf(3), leaf(4));
    let h = mul(&x, &w).unwrap();
    let a = mul_scalar(&h, 3.0).unwrap();
    let b = mul(&h, &h).unwrap();
    let c = add(&mul(&a, &x).unwrap(), &b).unwrap();
    let loss = sum(&add(&c, &mul_scalar(&a, -0.25).unwrap()).unwrap()).unwrap();
    drop((h, a, b, c));
    assert_backward_matches_grad(&loss, &[&x, &w]);
    let expected: Vec<f32> = {
        let (x, w) = (vals(&x), vals(&w));
        // loss = sum(3 x^2 w + x^2 w^2 - 0.75 x w): d/dx = 6 x w + 2 x w^2 - 0.75 w
        x.iter()
            .zip(&w)
            .map(|(x, w)| 6.0 * x * w + 2.0 * x * w * w - 0.75 * w)
            .collect()
    };
    for (g, e) in grad_vals(&x).unwrap().iter().zip(&expected) {
        assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{g} vs {e}");
    }
}

/// A node released by another root's traversal, met past the frontier, fails the traversal
/// naming retain_graph=True; nothing is accumulated and nothing of this graph is released.
#[test]
fn a_released_node_past_the_frontier_fails_and_changes_nothing() {
    let x = leaf(5);
    let h = mul_scalar(&x, 2.0).unwrap();
    let other = sum(&h).unwrap();
    let y = sum(&mul_scalar(&h, 3.0).unwrap()).unwrap();
    drop(h);
    other.backward().unwrap();
    let before = grad_vals(&x);
    let e = y.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.message().contains("retain_graph=True"), "{e}");
    assert_eq!(grad_vals(&x), before);
    assert!(!y.autograd_ctx().unwrap().is_released());
}

/// A releasing `backward` (a tree, then a plan) racing a releasing `grad` (a plan claimed
/// before it runs) over one graph: exactly one commits, and neither waits for the other
/// forever.
#[test]
fn a_backward_racing_a_grad_over_one_graph_commits_exactly_once() {
    for round in 0..300 {
        let x = t(&[1.0; N], &[N]);
        // two shared intermediates: a frontier of two nodes, which a plan runs
        let (h1, h2) = (mul_scalar(&x, 2.0).unwrap(), mul_scalar(&x, 3.0).unwrap());
        let parts: Vec<Tensor> = (1..=4)
            .map(|i| {
                let h = if i <= 2 { &h1 } else { &h2 };
                mul(h, &mul_scalar(&x, i as f32).unwrap()).unwrap()
            })
            .collect();
        let total = parts[1..]
            .iter()
            .fold(parts[0].clone(), |acc, p| add(&acc, p).unwrap());
        // the caller keeps an intermediate: the tree stops there
        let kept = mul_scalar(&total, 0.5).unwrap();
        let loss = sum(&kept).unwrap();
        drop((h1, h2, parts, total));
        let barrier = Arc::new(Barrier::new(2));
        let (b1, l1) = (barrier.clone(), loss.clone());
        let by_backward = thread::spawn(move || {
            b1.wait();
            l1.backward()
        });
        let (b2, l2, x2) = (barrier, loss.clone(), x.clone());
        let by_grad = thread::spawn(move || {
            b2.wait();
            grad(&l2, &[&x2], &Tensor::scalar(1.0), GradOptions::default())
        });
        let (r1, r2) = (by_backward.join().unwrap(), by_grad.join().unwrap());
        assert!(
            r1.is_ok() != r2.is_ok(),
            "round {round}: exactly one must commit, got {r1:?} and {r2:?}"
        );
        // loss = sum(0.5 (2 x (1 + 2) x + 3 x (3 + 4) x)) = sum(13.5 x^2): d/dx = 27 x
        match r2 {
            Ok(g) => {
                assert_eq!(vals(g[0].as_ref().unwrap()), vec![27.0; N]);
                assert_eq!(grad_vals(&x), None);
            }
            Err(e) => {
                assert!(e.message().contains("retain_graph=True"), "{e}");
                assert_eq!(grad_vals(&x).unwrap(), vec![27.0; N]);
            }
        }
        assert!(kept.autograd_ctx().unwrap().is_released());
    }
}

//! Requirement: Backward releases graph state unless the graph is retained.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{record, ErrorKind, Node, Operation, Result, SavedState, Tensor};
use autograd_ops::{add, mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, probe};

/// `x * x` keeping `x * 2` as context (a residual) for its backward.
#[derive(Debug)]
struct SquareWithContext {
    saved: SavedState,
}

impl Operation for SquareWithContext {
    fn name(&self) -> &'static str {
        "square_with_context"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (x, twice) = self.saved.with("square_with_context", |s| {
            (s.input(0).clone(), s.context()[0].clone())
        })?;
        let gv = g.values::<f32>()?;
        let d = twice.values::<f32>()?;
        Ok(vec![Some(x.f32_like(
            gv.iter().zip(&d).map(|(a, b)| a * b).collect(),
        )?)])
    }
}

fn square_with_context(x: &Tensor) -> Tensor {
    let xs = x.values::<f32>().unwrap();
    let out = x.f32_like(xs.iter().map(|a| a * a).collect()).unwrap();
    let twice = x.f32_like(xs.iter().map(|a| 2.0 * a).collect()).unwrap();
    record(out, &[x], vec![twice], |saved| SquareWithContext { saved })
}

#[derive(Debug)]
struct FirstOnly {
    saved: SavedState,
}

impl Operation for FirstOnly {
    fn name(&self) -> &'static str {
        "first_only"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("first_only", |s| s.input(0).clone())?;
        Ok(vec![Some(a.f32_like(g.values()?)?), None])
    }
}

/// `a` (ignoring `b` in its backward), recording both as saved inputs.
fn first_only(a: &Tensor, b: &Tensor) -> Tensor {
    record(a.contiguous().unwrap(), &[a, b], Vec::new(), |saved| {
        FirstOnly { saved }
    })
}

fn is_released(node: &Node) -> bool {
    node.inputs().is_empty() && node.input_versions().is_empty() && node.context().is_empty()
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__release_the_graph_after_the_default_traversal(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 4.0], &[2]);
    let s = square_with_context(&x);
    let h = mul(&s, &w).unwrap();
    let y = add(&h, &x).unwrap();
    let nodes: Vec<Node> = [&s, &h, &y]
        .iter()
        .map(|r| r.autograd_ctx().unwrap())
        .collect();
    assert!(!nodes[0].context().is_empty());
    let g = t(&[1.0, 1.0], &[2]);
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![7.0, 17.0]));
    for n in &nodes {
        assert!(
            is_released(n),
            "{} reports saved state after release",
            n.name()
        );
    }
    let before = grads_bits(&[&x, &w]);
    expect_err(
        y.backward_with(Some(&g), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert_eq!(grads_bits(&[&x, &w]), before);
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__release_a_shared_subgraph_from_the_first_root(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let (h, hp) = probe(&mul_scalar(&x, 2.0).unwrap());
    let y1 = mul_scalar(&h, 3.0).unwrap();
    let y2 = mul_scalar(&h, 4.0).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    y1.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![6.0, 6.0]));
    let before = grads_bits(&[&x]);
    expect_err(
        y2.backward_with(Some(&g), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert_eq!(grads_bits(&[&x]), before);
    assert_eq!(hp.calls(), 1);
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__released_nodes_stay_attached_to_their_results(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let h = mul_scalar(&x, 2.0).unwrap();
    let y = mul_scalar(&h, 3.0).unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    let hn = h.autograd_ctx().expect("the released node stays attached");
    assert!(is_released(&hn));
    assert!(y.autograd_ctx().is_some());
    // A former result is not a leaf: backward on it does not accumulate into its .grad.
    expect_err(
        h.backward_with(Some(&t(&[1.0, 1.0], &[2])), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert_eq!(grad_vals(&h), None);
    // Nor when a new graph consumes it.
    let z = mul_scalar(&h, 5.0).unwrap();
    expect_err(
        z.backward_with(Some(&t(&[1.0, 1.0], &[2])), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert_eq!(grad_vals(&h), None);
    assert_eq!(grad_vals(&x), Some(vec![6.0, 6.0]));
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__nodes_without_a_cotangent_are_released_too(
) {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[5.0, 6.0], &[2]);
    let (pb, bp) = probe(&b);
    let y = first_only(&a, &pb);
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(
        bp.calls(),
        0,
        "the node received no cotangent and did not run"
    );
    assert!(is_released(&pb.autograd_ctx().unwrap()));
    assert!(is_released(&y.autograd_ctx().unwrap()));
    assert_eq!(grad_vals(&b), None);
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__a_released_node_fails_before_version_checks_and_backward(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let (h, hp) = probe(&x);
    let y = mul_scalar(&h, 2.0).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(hp.calls(), 1);
    // Mutating a saved input afterwards: the released node is still what gets reported.
    x.set(&[0], 9.0).unwrap();
    let e = expect_err(
        y.backward_with(Some(&g), false),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert!(!e.to_string().contains("in-place"), "{e}");
    assert_eq!(hp.calls(), 1);
    assert_eq!(grad_vals(&x), Some(vec![2.0, 2.0]));
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__retain_graph_keeps_every_reached_node(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let s = square_with_context(&x);
    let y = mul_scalar(&s, 3.0).unwrap();
    let (sn, yn) = (s.autograd_ctx().unwrap(), y.autograd_ctx().unwrap());
    let saved_versions = (sn.input_versions(), yn.input_versions());
    let g = t(&[1.0, 1.0], &[2]);
    y.backward_with(Some(&g), true).unwrap();
    assert_eq!(sn.inputs().len(), 1);
    assert!(sn.inputs()[0].same_tensor(&x));
    assert_eq!(yn.inputs().len(), 1);
    assert_eq!((sn.input_versions(), yn.input_versions()), saved_versions);
    assert_eq!(sn.context().len(), 1);
    assert_eq!(grad_vals(&x), Some(vec![6.0, 12.0]));
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![12.0, 24.0]));
    assert!(is_released(&sn) && is_released(&yn));
}

#[test]
fn backward_releases_graph_state_unless_the_graph_is_retained__a_leaf_keeps_accumulating() {
    let x = t(&[1.0, 2.0], &[2]);
    let g = t(&[0.5, 0.5], &[2]);
    x.backward_with(Some(&g), false).unwrap();
    x.backward_with(Some(&g), false).unwrap();
    x.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![1.5, 1.5]));
    assert!(x.autograd_ctx().is_none());
    // reached through graphs that each get released, the leaf keeps accumulating
    for _ in 0..2 {
        let y = mul_scalar(&x, 2.0).unwrap();
        y.backward_with(Some(&g), false).unwrap();
        assert!(is_released(&y.autograd_ctx().unwrap()));
    }
    assert_eq!(grad_vals(&x), Some(vec![3.5, 3.5]));
}

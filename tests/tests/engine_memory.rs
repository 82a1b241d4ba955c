//! Memory: no reference cycles, and million-node graphs that neither recurse on drop nor in
//! backward, on small stacks.

use std::sync::Arc;

use autograd_core::{shape, Tensor};
use autograd_ops::{mul, mul_scalar, sum};
use autograd_tests::{grad_vals, t};

fn million_chain() {
    let x = Tensor::from_vec(vec![1.0f32], shape![1]).unwrap();
    let mut y = x.clone();
    for _ in 0..1_000_000 {
        y = mul_scalar(&y, 1.0).unwrap();
    }
    sum(&y).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![1.0]));
    // a second chain dropped without any traversal
    let mut z = x.clone();
    for _ in 0..1_000_000 {
        z = mul_scalar(&z, 1.0).unwrap();
    }
    drop(z);
}

#[test]
fn a_million_node_chain_on_a_2_mib_stack() {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(million_chain)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_node_never_owns_its_result() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[3.0, 4.0], &[2]);
    let c = mul(&a, &b).unwrap();
    let node = c.autograd_ctx().unwrap();
    let weak = Arc::downgrade(&node);
    drop(node);
    assert!(weak.upgrade().is_some(), "the result keeps its node alive");
    drop(c);
    assert!(
        weak.upgrade().is_none(),
        "dropping the result frees the node: no cycle"
    );
    // the inputs survive and are still usable
    assert_eq!(a.values::<f32>().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn a_released_graph_keeps_nodes_attached_but_frees_saved_inputs() {
    let a = t(&[1.0, 2.0], &[2]);
    // `inner` is held only by `mid`'s node as a saved input; its own node tells when it dies.
    let inner = mul_scalar(&a, 3.0).unwrap();
    let inner_node = Arc::downgrade(&inner.autograd_ctx().unwrap());
    let mid = mul_scalar(&inner, 2.0).unwrap();
    drop(inner);
    let out = sum(&mid).unwrap();
    assert!(inner_node.upgrade().is_some(), "a saved input stays alive");
    out.backward().unwrap();
    let node = mid.autograd_ctx().expect("released nodes stay attached");
    assert!(node.is_released() && node.inputs().is_empty());
    assert!(
        inner_node.upgrade().is_none(),
        "releasing freed the saved input and, with it, its node"
    );
    assert_eq!(grad_vals(&a), Some(vec![6.0, 6.0]));
}

/// A chain of `custom_gradient` nodes whose closures each hold a handle to the previous
/// result (a graph tensor, not a detached copy), so that the graph's spine runs through node
/// fields the engine cannot see, not only through saved inputs.
fn closure_chain(x: &Tensor, n: usize) -> Tensor {
    let mut y = x.clone();
    for _ in 0..n {
        let keep = y.clone();
        let value = {
            let _off = autograd_core::no_grad();
            mul_scalar(&y, 1.0).unwrap()
        };
        y = autograd_core::custom_gradient(value, &[&y], move |g| {
            Ok(vec![Some(mul(g, &keep.detach())?)])
        })
        .unwrap();
    }
    y
}

#[test]
fn a_chain_held_by_vjp_closures_drops_without_recursion_on_a_2_mib_stack() {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let x = t(&[1.0], &[1]);
            let y = closure_chain(&x, 100_000);
            sum(&y).unwrap().backward().unwrap();
            assert_eq!(grad_vals(&x), Some(vec![1.0]));
            drop(y);
            // and one dropped without any traversal
            drop(closure_chain(&x, 100_000));
        })
        .unwrap()
        .join()
        .unwrap();
}

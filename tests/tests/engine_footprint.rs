//! `graph_bytes`: the storage a graph's saved state keeps alive between forward and backward.

use autograd_core::{graph_bytes, Tensor};
use autograd_ops::{exp, mul, sum, transpose};
use autograd_tests::t;

fn leaf(n: usize) -> Tensor {
    t(&vec![0.5; n], &[n])
}

#[test]
fn a_leaf_has_no_graph() {
    assert_eq!(graph_bytes(&leaf(10)).unwrap(), 0);
}

#[test]
fn saved_inputs_count_once_per_storage() {
    let x = leaf(100);
    let w = leaf(100);
    let y = mul(&x, &w).unwrap();
    assert_eq!(graph_bytes(&y).unwrap(), 800);
    // x * x saves the same storage twice: one count
    let sq = mul(&x, &x).unwrap();
    assert_eq!(graph_bytes(&sq).unwrap(), 400);
    // a second view of x's storage is the same carrier
    let m = t(&[1.0; 12], &[3, 4]);
    let mt = transpose(&m, 0, 1).unwrap();
    let p = mul(&mt, &mt).unwrap();
    assert_eq!(graph_bytes(&p).unwrap(), 48);
}

#[test]
fn residuals_and_interior_results_count_and_release_frees_them() {
    let x = leaf(50);
    let e = exp(&x).unwrap(); // keeps its output for the VJP
    let y = mul(&e, &x).unwrap(); // keeps e and x
    let s = sum(&y).unwrap(); // keeps y
    assert_eq!(graph_bytes(&s).unwrap(), 3 * 200);
    s.backward().unwrap();
    assert_eq!(
        graph_bytes(&s).unwrap(),
        0,
        "a released graph holds nothing"
    );
}

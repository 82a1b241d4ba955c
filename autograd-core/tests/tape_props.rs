//! Property: on zero-preserving tapes, `backward_dense_all(out, seed)` equals
//! `backward_dense_from` started from the one-hot seed array.
//!
//! Random DAGs of add / mul / sin / scale are zero-preserving while every forward value is
//! finite (a zero cotangent times a finite partial is zero). The two sweeps then sum the same
//! nonzero contributions in the same order, so they agree exactly (up to the sign of zero).

use autograd_core::tape::{Node, Tape};
use ndarray::{Array1, ArrayD};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(usize, usize),
    Mul(usize, usize),
    Sin(usize),
    Scale(usize, f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Add(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Mul(a, b)),
        any::<usize>().prop_map(Op::Sin),
        (any::<usize>(), -2.0f64..2.0).prop_map(|(a, c)| Op::Scale(a, c)),
    ]
}

/// Appends `ops` (parent indices modulo the nodes so far) to a tape holding `inputs` as leaves.
fn scalar_tape(inputs: &[f64], ops: &[Op]) -> Tape<f64> {
    let mut tape = Tape::empty();
    for &x in inputs {
        tape.add_node(Node::leaf(x));
    }
    for op in ops {
        let n = tape.size();
        let val = |tape: &Tape<f64>, i: usize| *tape.value(i).unwrap();
        let node = match *op {
            Op::Add(a, b) => {
                let (a, b) = (a % n, b % n);
                Node::new(val(&tape, a) + val(&tape, b), vec![a, b], move |g: &f64| {
                    Ok(vec![(a, *g), (b, *g)])
                })
            }
            Op::Mul(a, b) => {
                let (a, b) = (a % n, b % n);
                let (va, vb) = (val(&tape, a), val(&tape, b));
                Node::new(va * vb, vec![a, b], move |g: &f64| {
                    Ok(vec![(a, g * vb), (b, g * va)])
                })
            }
            Op::Sin(a) => {
                let a = a % n;
                let va = val(&tape, a);
                Node::new(va.sin(), vec![a], move |g: &f64| {
                    Ok(vec![(a, g * va.cos())])
                })
            }
            Op::Scale(a, c) => {
                let a = a % n;
                Node::new(c * val(&tape, a), vec![a], move |g: &f64| {
                    Ok(vec![(a, g * c)])
                })
            }
        };
        tape.add_node(node);
    }
    tape
}

/// The same DAG over vectors of length 3 (ndarray values, elementwise ops).
fn array_tape(inputs: &[[f64; 3]], ops: &[Op]) -> Tape<ArrayD<f64>> {
    let mut tape = Tape::empty();
    for x in inputs {
        tape.add_node(Node::leaf(Array1::from(x.to_vec()).into_dyn()));
    }
    for op in ops {
        let n = tape.size();
        let val = |tape: &Tape<ArrayD<f64>>, i: usize| tape.value(i).unwrap().clone();
        let node = match *op {
            Op::Add(a, b) => {
                let (a, b) = (a % n, b % n);
                Node::new(
                    &val(&tape, a) + &val(&tape, b),
                    vec![a, b],
                    move |g: &ArrayD<f64>| Ok(vec![(a, g.clone()), (b, g.clone())]),
                )
            }
            Op::Mul(a, b) => {
                let (a, b) = (a % n, b % n);
                let (va, vb) = (val(&tape, a), val(&tape, b));
                Node::new(&va * &vb, vec![a, b], move |g: &ArrayD<f64>| {
                    Ok(vec![(a, g * &vb), (b, g * &va)])
                })
            }
            Op::Sin(a) => {
                let a = a % n;
                let va = val(&tape, a);
                Node::new(va.mapv(f64::sin), vec![a], move |g: &ArrayD<f64>| {
                    Ok(vec![(a, g * &va.mapv(f64::cos))])
                })
            }
            Op::Scale(a, c) => {
                let a = a % n;
                Node::new(val(&tape, a) * c, vec![a], move |g: &ArrayD<f64>| {
                    Ok(vec![(a, g * c)])
                })
            }
        };
        tape.add_node(node);
    }
    tape
}

fn finite(x: f64) -> bool {
    x.is_finite() && x.abs() < 1e100
}

proptest! {
    #[test]
    fn dense_all_equals_dense_from_one_hot_f64(
        inputs in prop::collection::vec(-1.5f64..1.5, 1..5),
        ops in prop::collection::vec(op(), 0..40),
        out in any::<usize>(),
        seed in -2.0f64..2.0,
    ) {
        let tape = scalar_tape(&inputs, &ops);
        prop_assume!(tape.nodes().iter().all(|n| finite(n.value)));
        let out = out % tape.size();
        let all = tape.backward_dense_all(out, seed).unwrap();
        prop_assume!(all.iter().all(|&g| finite(g)));
        let mut one_hot = vec![0.0; tape.size()];
        one_hot[out] = seed;
        let from = tape.backward_dense_from(one_hot).unwrap();
        prop_assert_eq!(all.len(), tape.size());
        prop_assert_eq!(all, from);
    }

    #[test]
    fn dense_all_equals_dense_from_one_hot_ndarray(
        inputs in prop::collection::vec(prop::array::uniform3(-1.5f64..1.5), 1..4),
        ops in prop::collection::vec(op(), 0..25),
        out in any::<usize>(),
        seed in prop::array::uniform3(-2.0f64..2.0),
    ) {
        let tape = array_tape(&inputs, &ops);
        prop_assume!(tape.nodes().iter().all(|n| n.value.iter().all(|&v| finite(v))));
        let out = out % tape.size();
        let seed = Array1::from(seed.to_vec()).into_dyn();
        let all = tape.backward_dense_all(out, seed.clone()).unwrap();
        prop_assume!(all.iter().all(|g| g.iter().all(|&v| finite(v))));
        let mut one_hot: Vec<ArrayD<f64>> = tape.nodes().iter().map(|n| ArrayD::zeros(n.value.raw_dim())).collect();
        one_hot[out] = seed;
        let from = tape.backward_dense_from(one_hot).unwrap();
        prop_assert_eq!(all, from);
    }

    /// Unreached nodes get exact zeros and nodes after the output are never reached.
    #[test]
    fn dense_is_none_exactly_off_the_output_cone(
        inputs in prop::collection::vec(-1.5f64..1.5, 1..5),
        ops in prop::collection::vec(op(), 0..40),
        out in any::<usize>(),
    ) {
        let tape = scalar_tape(&inputs, &ops);
        let out = out % tape.size();
        let dense = tape.backward_dense(out, 1.0).unwrap();
        // Reachability by hand: a node is reached when a reached node lists it as a parent.
        let mut reached = vec![false; tape.size()];
        reached[out] = true;
        for id in (0..tape.size()).rev() {
            if reached[id] {
                for &p in &tape.node(id).unwrap().parents {
                    reached[p] = true;
                }
            }
        }
        for (id, g) in dense.iter().enumerate() {
            prop_assert_eq!(g.is_some(), reached[id], "node {}", id);
        }
    }
}

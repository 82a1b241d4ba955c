//! Traversals and in-place writers racing (issue 9): versions are taken before the forward
//! pass reads its inputs and checked again after each VJP, and of two releasing traversals
//! over shared nodes exactly one commits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use autograd_core::{grad, ErrorKind, GradOptions, Tensor};
use autograd_ops::{add, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, t, vals};

const ROUNDS: i32 = 1500;

#[test]
fn a_concurrent_writer_never_mixes_old_and_new_values_into_a_gradient() {
    // large enough that a forward pass and a VJP each take a while, so writes land inside them
    const N: usize = 4096;
    let w = t(&[1.0; N], &[N]);
    let ones = t(&[1.0; N], &[N]);
    let twos = t(&[2.0; N], &[N]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, stop) = (w.clone(), stop.clone());
        thread::spawn(move || {
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                w.copy_from(if flip { &ones } else { &twos }).unwrap();
                flip = !flip;
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let w = w.clone();
            thread::spawn(move || {
                let (mut ok, mut refused) = (0, 0);
                for _ in 0..ROUNDS {
                    let y = sum(&mul(&w, &w).unwrap()).unwrap();
                    match grad(&y, &[&w], &Tensor::scalar(1.0), GradOptions::default()) {
                        Ok(g) => {
                            // y = N c^2 and dy/dw = 2 c for one value c of w, never a mix
                            let g = vals(g[0].as_ref().unwrap());
                            let c = g[0] / 2.0;
                            assert!(g.iter().all(|&v| v == g[0]), "mixed gradient");
                            let expected = N as f32 * c * c;
                            assert_eq!(vals(&y)[0], expected, "value and gradient disagree");
                            ok += 1;
                        }
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::Runtime);
                            assert!(e.to_string().contains("in-place modification"), "{e}");
                            refused += 1;
                        }
                    }
                }
                (ok, refused)
            })
        })
        .collect();
    let results: Vec<(i32, i32)> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(results.iter().all(|&(ok, refused)| ok + refused == ROUNDS));
}

#[test]
fn of_two_roots_racing_over_shared_nodes_exactly_one_commits() {
    const N: usize = 1 << 14;
    for round in 0..100 {
        let x = t(&vec![1.0; N], &[N]);
        // eight intermediates both roots share, summed in opposite orders, so the two
        // traversals meet them in opposite orders
        let shared: Vec<Tensor> = (1..=8).map(|i| mul_scalar(&x, i as f32).unwrap()).collect();
        let total = |order: &mut dyn Iterator<Item = &Tensor>| {
            let first = order.next().unwrap().clone();
            sum(&order.fold(first, |acc, s| add(&acc, s).unwrap())).unwrap()
        };
        let y1 = total(&mut shared.iter());
        let y2 = total(&mut shared.iter().rev());
        drop(shared);
        let barrier = Arc::new(Barrier::new(2));
        let run = |y: Tensor| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                y.backward()
            })
        };
        let (r1, r2) = (run(y1), run(y2));
        let (r1, r2) = (r1.join().unwrap(), r2.join().unwrap());
        assert!(
            r1.is_ok() != r2.is_ok(),
            "round {round}: exactly one must commit, got {r1:?} and {r2:?}"
        );
        let err = r1.err().or(r2.err()).unwrap();
        assert_eq!(err.kind(), ErrorKind::Runtime);
        assert!(err.to_string().contains("retain_graph=True"), "{err}");
        // one traversal of d/dx sum((1 + 2 + ... + 8) x)
        assert_eq!(grad_vals(&x).unwrap(), vec![36.0; N]);
    }
}

//! Milestone: activation checkpoint replay (`checkpoint`), from "Activation checkpoint replay"
//! of the milestone document: a region replayed in backward inside a nested, isolated
//! gradient context, whose parameter gradients the outer traversal accumulates.
//!
//! The blocks are MLP blocks (linear, gelu, linear, residual); the transformer variant
//! needs layer_norm and attention from the network-ops issue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autograd_core::ops::{add, gelu, linear, matmul, mul, narrow, sum, tanh};
use autograd_core::{
    checkpoint, grad, gradcheck, graph_bytes, no_grad, shape, stride, ErrorKind, GradOptions,
    GradcheckOptions, Layout, Result, Tensor,
};
use autograd_tests::{grad_vals, kind, noise, t, vals};

/// An MLP block `x + W2 gelu(W1 x + b1) + b2` with its own parameters (leaves).
#[derive(Clone)]
struct Block {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Block {
    fn new(d: usize, h: usize, seed: u64) -> Block {
        let scaled = |n, s, k: f32| noise(n, s).into_iter().map(|v| v * k).collect::<Vec<_>>();
        Block {
            w1: t(&scaled(h * d, seed, 0.4), &[h, d]),
            b1: t(&scaled(h, seed + 1, 0.1), &[h]),
            w2: t(&scaled(d * h, seed + 2, 0.3), &[d, h]),
            b2: t(&scaled(d, seed + 3, 0.1), &[d]),
        }
    }

    fn params(&self) -> [&Tensor; 4] {
        [&self.w1, &self.b1, &self.w2, &self.b2]
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let hidden = gelu(&linear(x, &self.w1, Some(&self.b1))?)?;
        add(x, &linear(&hidden, &self.w2, Some(&self.b2))?)
    }

    /// The block as one checkpointed region declaring its parameters.
    fn checkpointed(&self, x: &Tensor) -> Result<Tensor> {
        let block = self.clone();
        checkpoint(&[x], &self.params(), move |a| block.forward(&a[0]))
    }
}

/// The `.grad` values of `leaves`, then clears them.
fn take_grads(leaves: &[&Tensor]) -> Vec<Vec<f32>> {
    leaves
        .iter()
        .map(|l| {
            let g = grad_vals(l).expect("a gradient");
            l.set_grad(None).unwrap();
            g
        })
        .collect()
}

fn assert_close(a: &[Vec<f32>], b: &[Vec<f32>], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.len(), y.len(), "leaf {i}");
        for (p, q) in x.iter().zip(y) {
            assert!(
                (p - q).abs() <= tol * p.abs().max(1.0),
                "leaf {i}: {p} vs {q}"
            );
        }
    }
}

fn input(rows: usize, d: usize, seed: u64) -> Tensor {
    t(&noise(rows * d, seed), &[rows, d])
}

#[test]
fn a_checkpointed_block_has_the_gradients_of_the_plain_one() {
    let x = input(4, 8, 1);
    let block = Block::new(8, 16, 10);
    let mut leaves = vec![&x];
    leaves.extend(block.params());

    sum(&tanh(&block.forward(&x).unwrap()).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let plain = take_grads(&leaves);

    let y = block.checkpointed(&x).unwrap();
    assert_eq!(y.autograd_ctx().unwrap().name(), "checkpoint");
    // the region's interior graph was not kept: the node's inputs are the boundary
    assert_eq!(y.autograd_ctx().unwrap().inputs().len(), 5);
    sum(&tanh(&y).unwrap()).unwrap().backward().unwrap();
    let replayed = take_grads(&leaves);
    assert_close(&plain, &replayed, 1e-5);
}

#[test]
fn blocks_sharing_parameters_accumulate_once_each() {
    // Two applications of one block: its parameters receive a contribution from each. The
    // replays run as functional grads inside the outer traversal, so the second block's replay
    // neither clears nor doubles what the first contributed, and previous .grad values stay.
    let x = input(3, 8, 2);
    let block = Block::new(8, 16, 20);
    let mut leaves = vec![&x];
    leaves.extend(block.params());

    let plain = block.forward(&block.forward(&x).unwrap()).unwrap();
    sum(&tanh(&plain).unwrap()).unwrap().backward().unwrap();
    let reference = take_grads(&leaves);

    let previous: Vec<Vec<f32>> = leaves.iter().map(|l| vec![0.5; l.size()]).collect();
    for (l, p) in leaves.iter().zip(&previous) {
        l.set_grad(Some(t(p, &l.dims()))).unwrap();
    }
    let y = block
        .checkpointed(&block.checkpointed(&x).unwrap())
        .unwrap();
    sum(&tanh(&y).unwrap()).unwrap().backward().unwrap();
    let got = take_grads(&leaves);
    let expected: Vec<Vec<f32>> = reference
        .iter()
        .map(|g| g.iter().map(|v| v + 0.5).collect())
        .collect();
    assert_close(&expected, &got, 1e-5);
}

#[test]
fn a_retained_checkpoint_replays_on_every_traversal() {
    let x = input(2, 8, 3);
    let block = Block::new(8, 8, 30);
    let loss = sum(&block.checkpointed(&x).unwrap()).unwrap();
    loss.backward_with(None, true).unwrap();
    let once = grad_vals(&block.w1).unwrap();
    loss.backward_with(None, false).unwrap();
    let twice = grad_vals(&block.w1).unwrap();
    for (a, b) in once.iter().zip(&twice) {
        assert!((2.0 * a - b).abs() <= 1e-5 * b.abs().max(1.0));
    }
    assert_eq!(
        loss.backward().unwrap_err().kind(),
        ErrorKind::Runtime,
        "released after the traversal without retain_graph"
    );
}

#[test]
fn functional_grad_through_a_checkpoint_touches_no_grad() {
    let x = input(2, 8, 4);
    let block = Block::new(8, 8, 40);
    let y = sum(&block.checkpointed(&x).unwrap()).unwrap();
    let gs = grad(
        &y,
        &[&x, &block.w1],
        &t(&[1.0], &[1]),
        GradOptions::default(),
    )
    .unwrap();
    assert!(gs.iter().all(Option::is_some));
    assert_eq!(grad_vals(&x), None);
    assert_eq!(grad_vals(&block.w1), None);
    assert_eq!(grad_vals(&block.b1), None);
}

#[test]
fn gradcheck_passes_through_checkpoint() {
    // f(x, w) = tanh(x w), the region declaring w as its dependency.
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let w = xs[1].clone();
        checkpoint(&[&xs[0]], &[&xs[1]], move |a| tanh(&matmul(&a[0], &w)?))
    };
    let x = t(&[0.3, -0.7, 1.1, 0.05, -1.4, 0.6], &[2, 3]);
    let w = t(&[0.5, -0.2, 0.8, -1.0, 0.4, 0.9], &[3, 2]);
    let report = gradcheck(f, &[x, w], GradcheckOptions::default()).unwrap();
    assert_eq!(report.slots_checked, 12);
}

#[test]
fn a_broadcast_input_gets_per_position_gradients_folded_once() {
    let row = t(&[1.0, 2.0], &[2]);
    let xb = row
        .with_layout_detached(Layout::new(shape![3, 2], stride![0, 1]).unwrap(), 0)
        .unwrap();
    let plain = sum(&mul(&xb, &xb).unwrap()).unwrap();
    plain.backward().unwrap();
    let reference = take_grads(&[&xb]);
    let y = checkpoint(&[&xb], &[], |a| mul(&a[0], &a[0])).unwrap();
    sum(&y).unwrap().backward().unwrap();
    assert_close(&reference, &take_grads(&[&xb]), 1e-6);
}

#[test]
fn recompute_capturing_outside_graph_state_is_refused() {
    let x = input(2, 3, 5);
    let outside = tanh(&x).unwrap(); // has a graph the region did not make
    x.set_grad(Some(t(&[9.0; 6], &[2, 3]))).unwrap();
    let captured = outside.clone();
    let y = checkpoint(&[&x], &[], move |a| add(&a[0], &captured)).unwrap();
    let e = sum(&y).unwrap().backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert!(e.message().contains("captured graph state"), "{e}");
    assert_eq!(grad_vals(&x).unwrap(), [9.0; 6]);
}

#[test]
fn recompute_reading_the_original_input_is_refused() {
    let x = input(2, 3, 6);
    let original = x.clone();
    let y = checkpoint(&[&x], &[], move |_| tanh(&original)).unwrap();
    let e = sum(&y).unwrap().backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert!(e.message().contains("read input 0 itself"), "{e}");
    assert_eq!(grad_vals(&x), None);
}

#[test]
fn recompute_returning_the_original_input_is_refused_not_left_without_a_gradient() {
    let x = input(2, 3, 6);
    let original = x.clone();
    let y = checkpoint(&[&x], &[], move |_| Ok(original.clone())).unwrap();
    let e = sum(&y).unwrap().backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert!(e.message().contains("returned input 0 itself"), "{e}");
    assert_eq!(grad_vals(&x), None);
}

#[test]
fn a_replay_that_changes_shape_is_refused() {
    let x = input(4, 3, 7);
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let y = checkpoint(&[&x], &[], move |a| {
        let h = tanh(&a[0])?;
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(h)
        } else {
            narrow(&h, 0, 0, 2)
        }
    })
    .unwrap();
    let e = sum(&y).unwrap().backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert!(e.message().contains("deterministic"), "{e}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(grad_vals(&x), None);
}

#[test]
fn a_failing_or_panicking_replay_changes_nothing() {
    for panics in [false, true] {
        let x = input(2, 3, 8);
        x.set_grad(Some(t(&[1.0; 6], &[2, 3]))).unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let y = checkpoint(&[&x], &[], move |a| {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                return tanh(&a[0]);
            }
            assert!(!panics, "replay blew up");
            Err(autograd_core::Error::Value("replay refused".into()))
        })
        .unwrap();
        // a second branch into x: nothing of it may land either
        let loss = add(&sum(&y).unwrap(), &sum(&x).unwrap()).unwrap();
        let e = loss.backward().unwrap_err();
        let expected = if panics {
            ErrorKind::Runtime
        } else {
            ErrorKind::Value
        };
        assert_eq!(e.kind(), expected, "{e}");
        assert_eq!(grad_vals(&x).unwrap(), [1.0; 6]);
    }
}

#[test]
fn dependencies_must_be_unique_differentiable_leaves() {
    let x = input(2, 3, 9);
    let w = t(&noise(6, 90), &[3, 2]);
    let region = |a: &[Tensor]| Ok(a[0].clone());
    let computed = tanh(&w).unwrap();
    assert_eq!(
        kind(checkpoint(&[&x], &[&computed], region)),
        ErrorKind::Value
    );
    assert_eq!(kind(checkpoint(&[&x], &[&w, &w], region)), ErrorKind::Value);
    assert_eq!(kind(checkpoint(&[&x], &[&x], region)), ErrorKind::Value);
    let ints = Tensor::from_vec(vec![1i64, 2], shape![2]).unwrap();
    assert_eq!(kind(checkpoint(&[&x], &[&ints], region)), ErrorKind::Value);
    // the same leaf declared once is fine
    assert!(checkpoint(&[&x], &[&w], region).is_ok());
}

#[test]
fn the_first_run_keeps_no_interior_graph_and_no_grad_records_nothing() {
    let x = input(2, 3, 11);
    let y = checkpoint(&[&x], &[], |a| {
        let inner = tanh(&a[0])?;
        assert!(
            inner.autograd_ctx().is_none(),
            "the first run records nothing"
        );
        Ok(inner)
    })
    .unwrap();
    assert_eq!(vals(&y), vals(&tanh(&x).unwrap()));
    let _g = no_grad();
    let z = checkpoint(&[&x], &[], |a| tanh(&a[0])).unwrap();
    assert!(z.autograd_ctx().is_none());
}

/// A stack of `blocks` MLP blocks on `x`, each checkpointed or not.
fn stack(x: &Tensor, blocks: &[Block], checkpointed: bool) -> Tensor {
    let mut h = x.clone();
    for b in blocks {
        h = if checkpointed {
            b.checkpointed(&h).unwrap()
        } else {
            b.forward(&h).unwrap()
        };
    }
    sum(&tanh(&h).unwrap()).unwrap()
}

#[test]
fn an_eight_block_stack_checkpointed_keeps_a_fraction_of_the_saved_bytes() {
    let (rows, d, h) = (128, 32, 128);
    let x = input(rows, d, 12);
    let blocks: Vec<Block> = (0..8).map(|i| Block::new(d, h, 100 + 10 * i)).collect();
    let mut leaves = vec![&x];
    for b in &blocks {
        leaves.extend(b.params());
    }

    let plain = stack(&x, &blocks, false);
    let plain_bytes = graph_bytes(&plain).unwrap();
    plain.backward().unwrap();
    let reference = take_grads(&leaves);

    let ck = stack(&x, &blocks, true);
    let ck_bytes = graph_bytes(&ck).unwrap();
    ck.backward().unwrap();
    let got = take_grads(&leaves);

    // Both count the parameters (8 × 8,352 floats); the plain stack adds every block's
    // activations, the checkpointed one only each block's input.
    let params: usize = blocks
        .iter()
        .flat_map(|b| b.params().map(Tensor::size))
        .sum::<usize>()
        * 4;
    eprintln!("saved bytes: plain {plain_bytes}, checkpointed {ck_bytes} (parameters {params})");
    assert!(
        ck_bytes * 3 < plain_bytes,
        "checkpointed {ck_bytes} vs plain {plain_bytes}"
    );
    assert!(
        (ck_bytes - params) * 6 < plain_bytes - params,
        "activations: checkpointed {} vs plain {}",
        ck_bytes - params,
        plain_bytes - params
    );
    assert_close(&reference, &got, 1e-5);
}

#[test]
fn a_checkpoint_inside_a_checkpoint_replays_at_both_depths() {
    // The outer replay records the inner checkpoint, whose VJP replays again inside the outer
    // nested traversal: the engine re-enters twice.
    let x = input(3, 8, 13);
    let (inner, outer) = (Block::new(8, 16, 130), Block::new(8, 16, 140));
    let mut leaves = vec![&x];
    leaves.extend(inner.params());
    leaves.extend(outer.params());

    sum(&tanh(&outer.forward(&inner.forward(&x).unwrap()).unwrap()).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let reference = take_grads(&leaves);

    let deps: Vec<&Tensor> = inner.params().into_iter().chain(outer.params()).collect();
    let (i2, o2) = (inner.clone(), outer.clone());
    let y = checkpoint(&[&x], &deps, move |a| o2.forward(&i2.checkpointed(&a[0])?)).unwrap();
    sum(&tanh(&y).unwrap()).unwrap().backward().unwrap();
    assert_close(&reference, &take_grads(&leaves), 1e-5);
}

#[test]
fn checkpointed_traversals_on_several_threads_agree() {
    let block = Block::new(8, 16, 150);
    let expected = {
        let x = input(2, 8, 14);
        let y = grad(
            &sum(&block.forward(&x).unwrap()).unwrap(),
            &[&block.w1],
            &t(&[1.0], &[1]),
            GradOptions::default(),
        )
        .unwrap();
        vals(y[0].as_ref().unwrap())
    };
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let x = input(2, 8, 14);
                let loss = sum(&block.checkpointed(&x).unwrap()).unwrap();
                let g = grad(
                    &loss,
                    &[&block.w1],
                    &t(&[1.0], &[1]),
                    GradOptions::default(),
                )
                .unwrap();
                let got = vals(g[0].as_ref().unwrap());
                assert_close(std::slice::from_ref(&expected), &[got], 1e-6);
            });
        }
    });
}

/// A region may record its ops on another thread (a worker already running, holding identities
/// it took before the replay began): the replay's nodes are still told from outside ones.
#[test]
fn a_region_recording_on_a_worker_thread_replays() {
    let (jobs, work) = std::sync::mpsc::channel::<(Tensor, std::sync::mpsc::Sender<Tensor>)>();
    let worker = std::thread::spawn(move || {
        // identities taken here before any replay starts
        let warm = tanh(&t(&[0.5], &[1])).unwrap();
        drop(warm);
        for (a, reply) in work {
            reply.send(tanh(&mul(&a, &a).unwrap()).unwrap()).unwrap();
        }
    });
    let x = t(&[0.3, -0.7, 1.1], &[3]);
    let on_worker = move |a: &[Tensor]| -> Result<Tensor> {
        let (reply, answer) = std::sync::mpsc::channel();
        jobs.send((a[0].clone(), reply)).unwrap();
        Ok(answer.recv().unwrap())
    };
    let y = checkpoint(&[&x], &[], on_worker).unwrap();
    sum(&y).unwrap().backward().unwrap();
    let expected: Vec<f32> = [0.3f32, -0.7, 1.1]
        .iter()
        .map(|&v| (1.0 - (v * v).tanh().powi(2)) * 2.0 * v)
        .collect();
    let got = grad_vals(&x).unwrap();
    for (g, e) in got.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-5, "{got:?} against {expected:?}");
    }
    drop(y);
    worker.join().unwrap();
}

//! Threads and re-entrancy: concurrent traversals sharing leaves, and a VJP that runs a nested
//! functional `grad` of its own (as activation checkpointing will).

use std::sync::{Arc, Mutex};

use autograd_core::{
    grad, record, GradModeGuard, GradOptions, Operation, Result, SavedState, Tensor,
};
use autograd_ops::{add, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, t};

/// loss_k = sum((w * x_k + b) * (w * x_k + b)) for a per-thread input x_k.
fn loss(w: &Tensor, b: &Tensor, k: usize) -> Tensor {
    let x = t(&[k as f32, 1.0 - k as f32 * 0.5, 0.25 * k as f32], &[3]);
    let h = add(&mul(w, &x).unwrap(), b).unwrap();
    sum(&mul(&h, &h).unwrap()).unwrap()
}

#[test]
fn concurrent_backward_on_independent_graphs_sums_like_sequential() {
    let (w, b) = (t(&[0.5, -1.0, 2.0], &[3]), t(&[0.1, 0.2, 0.3], &[3]));
    let (w2, b2) = (t(&[0.5, -1.0, 2.0], &[3]), t(&[0.1, 0.2, 0.3], &[3]));
    for k in 0..8 {
        loss(&w2, &b2, k).backward().unwrap();
    }
    for _round in 0..4 {
        w.set_grad(None).unwrap();
        b.set_grad(None).unwrap();
        std::thread::scope(|s| {
            for k in 0..8 {
                let (w, b) = (w.clone(), b.clone());
                s.spawn(move || loss(&w, &b, k).backward().unwrap());
            }
        });
        // float addition is not associative: compare within rounding
        for (got, want) in [(&w, &w2), (&b, &b2)] {
            let (g, e) = (grad_vals(got).unwrap(), grad_vals(want).unwrap());
            for (x, y) in g.iter().zip(&e) {
                assert!((x - y).abs() <= 1e-4 * y.abs().max(1.0), "{g:?} vs {e:?}");
            }
        }
    }
}

/// `y = x * x` computed without a graph; the VJP recomputes it with graph construction on and
/// differentiates the recomputation with a nested `grad`, as a checkpoint does.
struct CheckpointedSquare {
    saved: SavedState,
    /// What each run of the VJP saw of `x.grad` while the outer traversal was still running.
    grad_during_vjp: Seen,
}

impl Operation for CheckpointedSquare {
    fn name(&self) -> &'static str {
        "checkpointed_square"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let x = self.saved.with(self.name(), |s| s.input(0).clone())?;
        let seen = x.grad()?.map(|g| g.values::<f32>()).transpose()?;
        self.grad_during_vjp
            .lock()
            .expect("not poisoned")
            .push(seen);
        let _on = GradModeGuard::set(true);
        let replay = x.detach().contiguous()?;
        let y = mul(&replay, &replay)?;
        let dx = grad(&y, &[&replay], g, GradOptions::default())?;
        Ok(vec![Some(
            x.gradient_like(dx[0].clone().expect("reached"))?,
        )])
    }
}

type Seen = Arc<Mutex<Vec<Option<Vec<f32>>>>>;

fn checkpointed_square(x: &Tensor) -> Result<(Tensor, Seen)> {
    let out = {
        let _off = autograd_core::no_grad();
        mul(x, x)?
    };
    let seen = Seen::default();
    let grad_during_vjp = seen.clone();
    let out = record(out, &[x], Vec::new(), |saved| CheckpointedSquare {
        saved,
        grad_during_vjp,
    });
    Ok((out, seen))
}

#[test]
fn a_vjp_may_run_a_nested_grad_without_disturbing_the_outer_traversal() {
    // loss = sum(sq(x) * 3 + x * x): d/dx = 6x + 2x = 8x
    let x = t(&[1.0, -2.0, 0.5], &[3]);
    x.set_grad(Some(t(&[10.0, 10.0, 10.0], &[3]))).unwrap();
    let (sq, seen) = checkpointed_square(&x).unwrap();
    let a = mul_scalar(&sq, 3.0).unwrap();
    let loss = sum(&add(&a, &mul(&x, &x).unwrap()).unwrap()).unwrap();
    loss.backward().unwrap();
    // The nested traversal ran inside the outer one with its own staging: while it ran, x.grad
    // still held only the prior value (the outer traversal commits at its end, the nested grad
    // never commits) ...
    assert_eq!(
        *seen.lock().unwrap(),
        vec![Some(vec![10.0, 10.0, 10.0])],
        "the VJP ran once and saw x.grad untouched"
    );
    // ... and the outer commit added both branches exactly once.
    assert_eq!(grad_vals(&x), Some(vec![18.0, -6.0, 14.0]));
    assert!(loss.autograd_ctx().unwrap().is_released());
    assert!(sq.autograd_ctx().unwrap().is_released());
}

/// An identity op whose VJP takes long enough for a second traversal to start meanwhile.
struct Slow {
    saved: SavedState,
}

impl Operation for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        std::thread::sleep(std::time::Duration::from_millis(200));
        Ok(vec![Some(g.clone())])
    }
}

#[test]
fn two_threads_racing_over_one_graph_commit_once() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = record(x.contiguous().unwrap(), &[&x], Vec::new(), |saved| Slow {
        saved,
    });
    let g = t(&[1.0, 1.0], &[2]);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| s.spawn(|| y.backward_with(Some(&g), false)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "{results:?}");
    let err = results.into_iter().find_map(Result::err).unwrap();
    assert_eq!(err.kind(), autograd_core::ErrorKind::Runtime);
    assert!(err.message().contains("retain_graph=True"), "{err}");
    assert_eq!(
        grad_vals(&x),
        Some(vec![1.0, 1.0]),
        "committed exactly once"
    );
    assert!(y.autograd_ctx().unwrap().is_released());
}

/// An identity op whose VJP runs a releasing `backward` of `inner` and keeps its outcome.
struct Reentrant {
    saved: SavedState,
    inner: Tensor,
    outcome: Arc<Mutex<Option<Result<()>>>>,
}

impl Operation for Reentrant {
    fn name(&self) -> &'static str {
        "reentrant"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let r = self.inner.backward();
        *self.outcome.lock().expect("not poisoned") = Some(r);
        Ok(vec![Some(g.clone())])
    }
}

#[test]
fn a_releasing_backward_inside_a_vjp_cannot_take_the_enclosing_traversals_nodes() {
    let x = t(&[1.0, -3.0], &[2]);
    let h = mul_scalar(&x, 2.0).unwrap();
    // `inner` shares h's node with the outer graph
    let inner = sum(&h).unwrap();
    let outcome = Arc::new(Mutex::new(None));
    let y = record(h.contiguous().unwrap(), &[&h], Vec::new(), |saved| {
        Reentrant {
            saved,
            inner: inner.clone(),
            outcome: outcome.clone(),
        }
    });
    let loss = sum(&y).unwrap();
    loss.backward().unwrap();
    // the inner traversal failed at once, naming the enclosing one, and released nothing ...
    let inner_result = outcome.lock().unwrap().take().expect("the VJP ran");
    let e = inner_result.unwrap_err();
    assert_eq!(e.kind(), autograd_core::ErrorKind::Runtime);
    assert!(e.message().contains("enclosing backward"), "{e}");
    assert!(!inner.autograd_ctx().unwrap().is_released());
    // ... while the outer one committed once and released its whole graph
    assert_eq!(grad_vals(&x), Some(vec![2.0, 2.0]));
    assert!(h.autograd_ctx().unwrap().is_released());
    assert!(loss.autograd_ctx().unwrap().is_released());
    // the inner graph can no longer be traversed through h's released node
    assert!(inner
        .backward()
        .unwrap_err()
        .message()
        .contains("already released"));
}

/// A tensor's identity and retain flag share a word with the lock over its gradient and node:
/// toggling the flag while other threads backpropagate through the tensor (locking its state)
/// loses no update and never changes its identity.
#[test]
fn toggling_retain_grad_while_other_threads_backpropagate_keeps_identity_and_flag() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let h = mul_scalar(&x, 3.0).unwrap();
    let id = h.id();
    let backward_through = |h: &Tensor| {
        sum(&mul_scalar(h, 2.0).unwrap())
            .unwrap()
            .backward_with(None, true)
            .unwrap();
    };
    let running = std::sync::atomic::AtomicUsize::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (h, running) = (h.clone(), &running);
            s.spawn(move || {
                for _ in 0..300 {
                    backward_through(&h);
                    assert_eq!(h.id(), id);
                }
                running.fetch_sub(1, std::sync::atomic::Ordering::Release);
            });
        }
        // toggle for as long as the others run, ending with retention off
        let mut on = false;
        while running.load(std::sync::atomic::Ordering::Acquire) > 0 {
            on = !on;
            h.retain_grad(on).unwrap();
            assert_eq!(h.id(), id);
        }
        h.retain_grad(false).unwrap();
    });
    h.set_grad(None).unwrap();
    backward_through(&h);
    assert!(
        h.grad().unwrap().is_none(),
        "retention off: no gradient kept"
    );
    h.retain_grad(true).unwrap();
    backward_through(&h);
    assert_eq!(grad_vals(&h).unwrap(), [2.0, 2.0, 2.0]);
    assert_eq!(h.id(), id);
}

//! Who owns what in a graph (issue 9): no cycle can be made through `record` or
//! `set_autograd_ctx`, identities are never reused, dropping is iterative everywhere, and the
//! engine tells each VJP which gradients it will use.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use autograd_core::{
    grad, record, ErrorKind, GradOptions, NodeId, Operation, Result, SavedState, Tensor,
};
use autograd_ops::{mul, mul_scalar, sum};
use autograd_tests::{t, vals};

#[test]
fn set_autograd_ctx_refuses_a_node_that_depends_on_the_tensor() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul_scalar(&mul_scalar(&x, 2.0).unwrap(), 3.0).unwrap();
    let err = x.set_autograd_ctx(y.autograd_ctx()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("cycle"), "{err}");
    assert!(
        x.autograd_ctx().is_none(),
        "a refused assignment changes nothing"
    );
    // an unrelated node is fine
    let z = t(&[0.0, 0.0], &[2]);
    z.set_autograd_ctx(y.autograd_ctx()).unwrap();
    assert!(z.autograd_ctx().is_some());
}

/// A node that returns its cotangent for its one input.
struct Identity {
    saved: SavedState,
}

impl Operation for Identity {
    fn name(&self) -> &'static str {
        "identity"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.clone())])
    }
}

#[test]
fn record_never_attaches_a_node_to_its_own_input() {
    let x = t(&[1.0, 2.0], &[2]);
    // a forward that hands its input back
    let r = record(x.clone(), &[&x], Vec::new(), |saved| Identity { saved });
    assert!(x.autograd_ctx().is_none(), "the input stays a leaf");
    assert!(!r.same_tensor(&x));
    assert!(r.autograd_ctx().is_some());
    sum(&r).unwrap().backward().unwrap();
    assert_eq!(vals(&x.grad().unwrap().unwrap()), vec![1.0, 1.0]);
}

#[test]
fn tensor_and_node_ids_are_never_reused() {
    let mut tensor_ids = std::collections::HashSet::new();
    let mut node_ids: std::collections::HashSet<NodeId> = std::collections::HashSet::new();
    let x = t(&[1.0], &[1]);
    for _ in 0..1000 {
        let y = mul_scalar(&x, 2.0).unwrap();
        assert!(tensor_ids.insert(y.id()));
        assert!(node_ids.insert(y.autograd_ctx().unwrap().id()));
        // y and its node are dropped here; their addresses may come back, their ids may not
    }
    let a = t(&[1.0], &[1]);
    assert_eq!(a.id(), a.clone().id(), "clones are the same tensor");
}

thread_local! {
    static KEPT: RefCell<Option<Tensor>> = const { RefCell::new(None) };
}

#[test]
fn a_long_graph_in_a_user_thread_local_drops_at_thread_exit() {
    let done = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let mut y = t(&[1.0], &[1]);
            for _ in 0..100_000 {
                y = mul_scalar(&y, 1.0).unwrap();
            }
            KEPT.with(|k| *k.borrow_mut() = Some(y));
            true
        })
        .unwrap()
        .join();
    assert!(
        done.unwrap(),
        "the thread exited without overflowing its stack"
    );
}

/// `a * b` whose VJP records the mask the engine gave it.
struct Probe {
    saved: SavedState,
    seen: Arc<Mutex<Vec<Vec<bool>>>>,
}

impl Operation for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        self.backward_needed(g, &[true, true])
    }
    fn backward_needed(&self, g: &Tensor, needed: &[bool]) -> Result<Vec<Option<Tensor>>> {
        self.seen.lock().unwrap().push(needed.to_vec());
        let (a, b) = self
            .saved
            .with("probe", |s| (s.input(0).clone(), s.input(1).clone()))?;
        // d(a b)/da = b; a Float64 `b` (not differentiable) stands for a constant 1 here
        let ga = needed[0]
            .then(|| {
                if b.is_differentiable() {
                    mul(g, &b)
                } else {
                    Ok(g.clone())
                }
            })
            .transpose()?;
        let gb = needed[1].then(|| mul(g, &a)).transpose()?;
        Ok(vec![ga, gb])
    }
}

/// Records a probe node on a copy of `a` (the mask, not the value, is under test).
fn probe(a: &Tensor, b: &Tensor, seen: &Arc<Mutex<Vec<Vec<bool>>>>) -> Tensor {
    let value = Tensor::from_vec(vals(a), a.shape().clone()).unwrap();
    let seen = seen.clone();
    record(value, &[a, b], Vec::new(), |saved| Probe { saved, seen })
}

#[test]
fn the_engine_tells_a_vjp_which_gradients_it_will_use() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let w = t(&[1.0, 2.0], &[2]);
    let data = t(&[3.0, 4.0], &[2]);
    let p = mul_scalar(&probe(&data, &w, &seen), 1.0).unwrap();
    let keep = GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    };
    let g = grad(&p, &[&w], &t(&[1.0, 1.0], &[2]), keep).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![3.0, 4.0]);
    // only the parameter's gradient was asked for
    assert_eq!(seen.lock().unwrap().last().unwrap(), &vec![false, true]);
    // backward accumulates into both leaves
    p.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(seen.lock().unwrap().last().unwrap(), &vec![true, true]);
    assert_eq!(vals(&data.grad().unwrap().unwrap()), vec![1.0, 2.0]);
    // a non-differentiable input never needs a gradient
    let idx = Tensor::from_vec(vec![1.0f64, 2.0], autograd_core::shape![2]).unwrap();
    let q = probe(&w, &idx, &seen);
    sum(&q).unwrap().backward().unwrap();
    assert_eq!(seen.lock().unwrap().last().unwrap(), &vec![true, false]);
}

#[test]
fn a_long_chain_of_squares_drops_without_recursing() {
    // each node saves its input twice: the second handle is the last one
    let done = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let mut y = t(&[1.0], &[1]);
            for _ in 0..100_000 {
                y = mul(&y, &y).unwrap();
            }
            drop(y);
            true
        })
        .unwrap()
        .join();
    assert!(done.unwrap());
}

/// A node whose gradient for its input is a tensor it keeps a handle to: a value the sum of a
/// tensor's contributions must not write into.
struct Kept {
    saved: SavedState,
    kept: Tensor,
}

impl Operation for Kept {
    fn name(&self) -> &'static str {
        "kept"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, _: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(self.kept.clone())])
    }
}

#[test]
fn a_tensor_used_twice_sums_in_place_only_into_a_contribution_no_one_else_holds() {
    // x reaches the loss twice: through `kept` (a gradient its node also holds) and through
    // mul_scalar (a fresh gradient only the sum holds), in both orders; large enough (2^16
    // elements) for the sum to take a private first contribution in place, and small
    for n in [1 << 16, 3] {
        for kept_first in [true, false] {
            let x = t(&vec![1.0; n], &[n]);
            let held = t(&vec![10.0; n], &[n]);
            let value = Tensor::from_vec(vals(&x), x.shape().clone()).unwrap();
            let kept = held.clone();
            let k = record(value, &[&x], Vec::new(), |saved| Kept { saved, kept });
            let m = mul_scalar(&x, 2.0).unwrap();
            let y = if kept_first {
                autograd_ops::add(&k, &m).unwrap()
            } else {
                autograd_ops::add(&m, &k).unwrap()
            };
            sum(&y).unwrap().backward().unwrap();
            let what = format!("n {n}, kept_first {kept_first}");
            assert!(vals(&x.grad().unwrap().unwrap()) == vec![12.0; n], "{what}");
            assert!(
                vals(&held) == vec![10.0; n],
                "{what}: the kept gradient changed"
            );
        }
        // three fresh contributions: the first takes the other two (in place when large)
        let x = t(&vec![1.0; n], &[n]);
        let parts = [2.0, 3.0, 4.0].map(|s| mul_scalar(&x, s).unwrap());
        let y = autograd_ops::add(&autograd_ops::add(&parts[0], &parts[1]).unwrap(), &parts[2])
            .unwrap();
        sum(&y).unwrap().backward().unwrap();
        assert!(vals(&x.grad().unwrap().unwrap()) == vec![9.0; n], "n {n}");
    }
}

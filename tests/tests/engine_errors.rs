//! Errors raised for a node name the operation and where its forward call was made.

use std::sync::mpsc;
use std::time::Duration;

use autograd_core::{
    bail, differentiable, record, ErrorKind, Operation, Result, SavedState, Tensor,
};
use autograd_ops::{add, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, map, t};

#[test]
fn an_in_place_modification_error_names_the_op_the_input_and_the_forward_call_site() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[3.0, 4.0], &[2]);
    let line = line!() + 1;
    let c = mul(&a, &b).unwrap();
    let loss = sum(&c).unwrap();
    b.set(&[0], 5.0f32).unwrap();
    let err = loss.backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let msg = err.message();
    assert!(
        msg.contains("in-place modification of input 1 (`b`) of mul"),
        "{msg}"
    );
    assert!(msg.contains(&format!("engine_errors.rs:{line}:")), "{msg}");
    assert!(a.grad().unwrap().is_none() && b.grad().unwrap().is_none());
}

#[test]
fn a_released_graph_error_names_the_op_and_retain_graph() {
    let a = t(&[1.0, 2.0], &[2]);
    let line = line!() + 1;
    let loss = sum(&a).unwrap();
    loss.backward().unwrap();
    let err = loss.backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let msg = err.message();
    assert!(msg.contains("retain_graph=True"), "{msg}");
    assert!(msg.contains("sum"), "{msg}");
    assert!(msg.contains(&format!("engine_errors.rs:{line}:")), "{msg}");
}

#[test]
fn pieces_that_share_storage_are_refused_instead_of_under_counted() {
    let a = t(&[1.0, 2.0], &[1, 2]);
    let m = autograd_core::Tensor::from_subtensors(&[a.clone(), a.clone()]).unwrap();
    let y = autograd_ops::mul_scalar(&m, 2.0).unwrap();
    let err = y
        .backward_with(Some(&t(&[1.0; 4], &[2, 2])), false)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.message().contains("alias"), "{err}");
    assert!(m.grad().unwrap().is_none() && a.grad().unwrap().is_none());
    assert!(!y.autograd_ctx().unwrap().is_released(), "nothing released");
}

#[test]
fn reading_out_a_huge_broadcast_view_is_an_error_not_an_abort() {
    let one = t(&[1.0], &[1]);
    let huge = one.broadcast_to(&[1usize << 50]).unwrap();
    assert_eq!(huge.size(), 1 << 50);
    assert_eq!(huge.get(&[(1 << 50) - 1]).unwrap().to_f64(), 1.0);
    assert_eq!(huge.values::<f32>().unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(huge.contiguous().unwrap_err().kind(), ErrorKind::Value);
}

#[test]
fn a_cycle_through_the_root_cannot_be_made_and_the_graph_stays_usable() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul_scalar(&x, 2.0).unwrap();
    // x claiming to be produced by y's node, which consumes x, would make y -> x -> y
    let err = x.set_autograd_ctx(y.autograd_ctx()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.message().contains("cycle"), "{err}");
    assert!(err.message().contains("mul_scalar"), "{err}");
    // a cycle below the root is refused as well
    let z = mul_scalar(&y, 3.0).unwrap();
    assert!(x.set_autograd_ctx(z.autograd_ctx()).is_err());
    assert!(x.autograd_ctx().is_none());
    let g = t(&[1.0, 1.0], &[2]);
    z.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![6.0, 6.0]));
}

/// Fails in its VJP.
#[differentiable]
fn refuses(a: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        bail!(Value, "refuses has no gradient (cotangent {})", g.shape())
    }
    map(a, |v| v)
}

/// Returns a gradient of the wrong shape.
#[differentiable]
fn misshapes(a: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        let _ = g;
        Ok(Some(t(&[1.0, 2.0, 3.0], &[3])))
    }
    map(a, |v| v)
}

/// A hand-written op whose VJP returns no gradient at all for its one input, and whose
/// `input_name` reads the node's own saved state (so describing an input must not happen
/// while that state is locked).
struct Miscounts {
    saved: SavedState,
    extra: bool,
}

impl Operation for Miscounts {
    fn name(&self) -> &'static str {
        "miscounts"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn input_name(&self, index: usize) -> Option<&str> {
        let n = self.saved.inputs().len();
        (index < n).then_some("reads_own_inputs")
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        if self.extra {
            // the wrong shape for the input: the engine describes the input in its error
            return Ok(vec![Some(t(&[1.0; 3], &[3]))]);
        }
        let _ = g;
        Ok(vec![])
    }
}

#[track_caller]
fn miscounts(a: &Tensor, extra: bool) -> Tensor {
    let out = a.detach().contiguous().unwrap();
    record(out, &[a], vec![], |saved| Miscounts { saved, extra })
}

fn assert_names_op_and_site(err: &autograd_core::Error, op: &str, line: u32) {
    let msg = err.message();
    assert!(msg.contains(op), "{msg}");
    assert!(msg.contains(&format!("engine_errors.rs:{line}:")), "{msg}");
}

#[test]
fn every_error_raised_for_a_node_names_the_op_and_its_call_site() {
    let x = t(&[1.0, 2.0], &[2]);
    let g = t(&[1.0, 1.0], &[2]);

    let line = line!() + 1;
    let y = refuses(&x).unwrap();
    let err = y.backward_with(Some(&g), false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.message().contains("refuses has no gradient"), "{err}");
    assert_names_op_and_site(&err, "backward of refuses", line);

    let line = line!() + 1;
    let y = misshapes(&x).unwrap();
    let err = y.backward_with(Some(&g), false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert_names_op_and_site(&err, "misshapes", line);

    let line = line!() + 1;
    let y = miscounts(&x, false);
    let err = y.backward_with(Some(&g), false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(
        err.message().contains("returned 0 gradients for 1"),
        "{err}"
    );
    assert_names_op_and_site(&err, "miscounts", line);

    assert_eq!(grad_vals(&x), None);
}

#[test]
fn describing_a_refused_gradient_may_read_the_node_itself() {
    // Run on a thread so that a deadlock fails the test instead of hanging the suite.
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let x = t(&[1.0, 2.0], &[2]);
        let line = line!() + 1;
        let y = miscounts(&x, true);
        let err = y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false);
        let _ = done.send((err.map_err(|e| e.message().to_string()), line));
    });
    let (err, line) = result
        .recv_timeout(Duration::from_secs(60))
        .expect("backward finished (no deadlock)");
    let msg = err.unwrap_err();
    assert!(
        msg.contains("input 0 (`reads_own_inputs`) of miscounts"),
        "{msg}"
    );
    assert!(msg.contains(&format!("engine_errors.rs:{line}:")), "{msg}");
}

#[test]
fn contributions_of_another_shape_to_one_node_are_refused() {
    // One node attached to three tensors, one of another shape: the node's summed cotangent
    // cannot be formed. The loss is built so that the odd one arrives after a sum of the two
    // others was started.
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul_scalar(&x, 2.0).unwrap();
    let y2 = y.detach();
    let w = t(&[0.0, 0.0, 0.0], &[3]);
    y2.set_autograd_ctx(y.autograd_ctx()).unwrap();
    w.set_autograd_ctx(y.autograd_ctx()).unwrap();
    let loss = add(
        &sum(&w).unwrap(),
        &add(&sum(&y).unwrap(), &sum(&y2).unwrap()).unwrap(),
    )
    .unwrap();
    let err = loss.backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(
        err.message().contains("cannot add gradients of shapes"),
        "{err}"
    );
    assert_eq!(grad_vals(&x), None);
    assert!(!loss.autograd_ctx().unwrap().is_released());
}

/// An identity op whose VJP releases its own node, as a careless user op might.
struct ReleasesItself {
    saved: SavedState,
}

impl Operation for ReleasesItself {
    fn name(&self) -> &'static str {
        "releases_itself"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        drop(self.saved.take());
        Ok(vec![Some(g.clone())])
    }
}

#[test]
fn a_node_released_while_its_backward_runs_is_reported_as_such() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = record(x.detach().contiguous().unwrap(), &[&x], vec![], |saved| {
        ReleasesItself { saved }
    });
    let err = y
        .backward_with(Some(&t(&[1.0, 1.0], &[2])), true)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(
        err.message()
            .contains("released while its backward ran, by Operation::release"),
        "{err}"
    );
    assert!(err.message().contains("releases_itself"), "{err}");
    assert_eq!(grad_vals(&x), None);
}

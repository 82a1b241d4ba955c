//! Errors raised for a node name the operation and where its forward call was made.

use autograd_core::ErrorKind;
use autograd_ops::{mul, sum};
use autograd_tests::t;

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
    let huge = one.broadcast_to(&[1 << 50]).unwrap();
    assert_eq!(huge.size(), 1 << 50);
    assert_eq!(huge.get(&[(1 << 50) - 1]).unwrap().to_f64(), 1.0);
    assert_eq!(huge.values::<f32>().unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(huge.contiguous().unwrap_err().kind(), ErrorKind::Value);
}

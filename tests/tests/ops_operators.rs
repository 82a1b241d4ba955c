//! The arithmetic operators on tensors: every form (`&a op &b`, by value, with `f32` on either
//! side, `-a`) computes and records what the named op does, broadcasts, and returns errors
//! instead of panicking.

mod elementwise_support;

use autograd_core::{gradcheck, ErrorKind, GradcheckOptions, Result, Tensor};
use autograd_ops::{sum, tanh};
use autograd_tests::t;
use elementwise_support::f32s;

fn x() -> Tensor {
    t(&[1.0, 2.0, 4.0, 8.0], &[2, 2])
}

fn y() -> Tensor {
    t(&[0.5, -1.0], &[2])
}

#[test]
fn tensor_with_tensor_in_every_ownership_form() {
    let (a, b) = (x(), y());
    let want_add = [1.5, 1.0, 4.5, 7.0];
    assert_eq!(f32s(&(&a + &b).unwrap()), want_add);
    assert_eq!(f32s(&(a.clone() + &b).unwrap()), want_add);
    assert_eq!(f32s(&(&a + b.clone()).unwrap()), want_add);
    assert_eq!(f32s(&(a.clone() + b.clone()).unwrap()), want_add);
    assert_eq!(f32s(&(&a - &b).unwrap()), [0.5, 3.0, 3.5, 9.0]);
    assert_eq!(f32s(&(&a * &b).unwrap()), [0.5, -2.0, 2.0, -8.0]);
    assert_eq!(f32s(&(&a / &b).unwrap()), [2.0, -2.0, 8.0, -8.0]);
    assert_eq!(
        f32s(&(a.clone() / b.clone()).unwrap()),
        [2.0, -2.0, 8.0, -8.0]
    );
}

#[test]
fn tensor_with_f32_on_either_side() {
    let a = x();
    assert_eq!(f32s(&(&a + 1.0).unwrap()), [2.0, 3.0, 5.0, 9.0]);
    assert_eq!(f32s(&(1.0 + &a).unwrap()), [2.0, 3.0, 5.0, 9.0]);
    assert_eq!(f32s(&(&a - 1.0).unwrap()), [0.0, 1.0, 3.0, 7.0]);
    assert_eq!(f32s(&(1.0 - &a).unwrap()), [0.0, -1.0, -3.0, -7.0]);
    assert_eq!(f32s(&(&a * 2.0).unwrap()), [2.0, 4.0, 8.0, 16.0]);
    assert_eq!(f32s(&(2.0 * &a).unwrap()), [2.0, 4.0, 8.0, 16.0]);
    assert_eq!(f32s(&(&a / 2.0).unwrap()), [0.5, 1.0, 2.0, 4.0]);
    assert_eq!(f32s(&(8.0 / &a).unwrap()), [8.0, 4.0, 2.0, 1.0]);
    assert_eq!(f32s(&(a.clone() * 2.0).unwrap()), [2.0, 4.0, 8.0, 16.0]);
    assert_eq!(f32s(&(8.0 / a.clone()).unwrap()), [8.0, 4.0, 2.0, 1.0]);
    assert_eq!(f32s(&(-&a).unwrap()), [-1.0, -2.0, -4.0, -8.0]);
    assert_eq!(f32s(&(-a).unwrap()), [-1.0, -2.0, -4.0, -8.0]);
}

#[test]
fn operators_record_the_named_ops() {
    let (a, b) = (x(), y());
    let name = |r: Result<Tensor>| r.unwrap().autograd_ctx().unwrap().name().to_string();
    assert_eq!(name(&a + &b), "add");
    assert_eq!(name(&a - &b), "sub");
    assert_eq!(name(&a * &b), "mul");
    assert_eq!(name(&a / &b), "div");
    assert_eq!(name(&a * 2.0), "mul_scalar");
    assert_eq!(name(2.0 - &a), "rsub_scalar");
    assert_eq!(name(2.0 / &a), "rdiv_scalar");
    assert_eq!(name(-&a), "neg");
}

#[test]
fn an_expression_of_operators_has_the_right_gradient() {
    // z = tanh(x * 0.5 + b) * x - x / 3 + 1, the W7 expression and more
    let f = |v: &[Tensor]| -> Result<Tensor> {
        let (x, b) = (&v[0], &v[1]);
        let inner = ((x * 0.5)? + b)?;
        let z = ((tanh(&inner)? * x)? - (x / 3.0)?)?;
        sum(&(1.0 + z)?)
    };
    gradcheck(f, &[x(), y()], GradcheckOptions::default()).unwrap();
    gradcheck(
        |v: &[Tensor]| &(2.0 / &v[0])? - &(-&v[1])?,
        &[x(), y()],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn operator_errors_are_values_not_panics() {
    let a = x();
    let bad = t(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!((&a + &bad).unwrap_err().kind(), ErrorKind::Value);
    assert_eq!((&a * bad.clone()).unwrap_err().kind(), ErrorKind::Value);
    let i = Tensor::from_vec(vec![1i32], autograd_core::shape![1]).unwrap();
    assert_eq!((&a - &i).unwrap_err().kind(), ErrorKind::Type);
    assert_eq!((&i / 2.0).unwrap_err().kind(), ErrorKind::Type);
    assert!(a.grad().unwrap().is_none());
}

#[test]
fn nodes_made_by_operators_and_methods_record_the_callers_line() {
    for form in 0..3 {
        let (a, b) = (x(), t(&[3.0, 4.0], &[2]));
        let line = line!() + 2 + form;
        let c = match form {
            0 => (&a * &b).unwrap(),
            1 => a.mul(&b).unwrap(),
            _ => autograd_ops::mul(&a, &b).unwrap(),
        };
        let loss = sum(&c).unwrap();
        b.set(&[0], 5.0f32).unwrap();
        let msg = loss.backward().unwrap_err().message().to_string();
        assert!(msg.contains(&format!("ops_operators.rs:{line}:")), "{msg}");
    }
}

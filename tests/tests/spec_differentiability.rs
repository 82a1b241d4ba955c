//! Requirement: Gradient participation follows the logical dtype.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{DType, DTypeCategory, ErrorKind, Layout, Node, Tensor};
use autograd_ops::{mul, mul_scalar};
use autograd_tests::t;
use spec_support::{expect_err, tc, v, TestCarrier};

/// One constructible tensor of every logical dtype other than Float32.
fn non_float32_tensors() -> Vec<(String, Tensor)> {
    let mut out: Vec<(String, Tensor)> = Vec::new();
    for d in [DType::Float64, DType::Int32, DType::Int64, DType::Bool] {
        out.push((format!("{d}"), Tensor::zeros(&[2usize, 2][..], &d).unwrap()));
    }
    let f32_storage = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let i32_storage = Tensor::zeros(&[4usize][..], &DType::Int32).unwrap();
    for c in [
        DTypeCategory::Floating,
        DTypeCategory::Numeric,
        DTypeCategory::Any,
    ] {
        let view = f32_storage.with_logical_dtype(DType::Category(c)).unwrap();
        out.push((format!("{c:?} over Float32 storage"), view));
    }
    out.push((
        "Integer over Int32 storage".into(),
        i32_storage
            .with_logical_dtype(DType::Category(DTypeCategory::Integer))
            .unwrap(),
    ));
    let pair = DType::compound([("re", DType::Float32), ("im", DType::Float32)]).unwrap();
    let records = f32_storage
        .with_layout_detached(Layout::row_major(&[2]).unwrap(), 0)
        .unwrap()
        .with_logical_dtype(pair)
        .unwrap();
    out.push(("compound of Float32 fields".into(), records));
    out
}

#[test]
fn gradient_participation_follows_the_logical_dtype__report_differentiability_from_the_logical_dtype(
) {
    assert!(t(&[1.0, 2.0], &[2]).is_differentiable());
    for (what, x) in non_float32_tensors() {
        assert!(!x.is_differentiable(), "{what} must not be differentiable");
    }
}

#[test]
fn gradient_participation_follows_the_logical_dtype__differentiability_is_identical_across_carriers(
) {
    let cpu = t(&[1.0, 2.0], &[2]);
    let other = tc(&[1.0, 2.0], &[2]);
    assert!(cpu.is_differentiable());
    assert!(other.is_differentiable());
    let (ints, _) = TestCarrier::shared(autograd_core::Buffer::I32(vec![1, 2]));
    let ints = Tensor::from_parts(ints, Layout::row_major(&[2]).unwrap(), 0).unwrap();
    assert!(!ints.is_differentiable());
    let floating = other
        .with_logical_dtype(DType::Category(DTypeCategory::Floating))
        .unwrap();
    assert!(!floating.is_differentiable());
}

#[test]
fn gradient_participation_follows_the_logical_dtype__reject_gradient_apis_on_a_non_differentiable_tensor(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let node: Node = mul_scalar(&x, 2.0).unwrap().autograd_ctx().unwrap();
    let holders = std::sync::Arc::strong_count(&node);
    for d in [DType::Int32, DType::Bool] {
        let n = Tensor::zeros(&[2usize][..], &d).unwrap();
        expect_err(n.grad(), ErrorKind::Runtime, &[]);
        expect_err(n.retain_grad(true), ErrorKind::Runtime, &[]);
        expect_err(n.retain_grad(false), ErrorKind::Runtime, &[]);
        expect_err(n.backward(), ErrorKind::Runtime, &[]);
        expect_err(
            n.backward_with(Some(&t(&[1.0, 1.0], &[2])), false),
            ErrorKind::Runtime,
            &[],
        );
        expect_err(
            n.set_autograd_ctx(Some(node.clone())),
            ErrorKind::Runtime,
            &[],
        );
        expect_err(
            n.set_grad(Some(t(&[1.0, 1.0], &[2]))),
            ErrorKind::Runtime,
            &[],
        );
        // No gradient and no node got recorded for it.
        assert!(n.autograd_ctx().is_none());
        expect_err(n.grad(), ErrorKind::Runtime, &[]);
    }
    // The node offered to the refused assignment was not kept or disturbed either.
    assert_eq!(std::sync::Arc::strong_count(&node), holders);
    assert!(!node.is_released() && node.inputs().len() == 1);
}

#[test]
fn gradient_participation_follows_the_logical_dtype__every_non_float32_dtype_rejects_gradient_apis()
{
    for (what, n) in non_float32_tensors() {
        assert_eq!(
            n.grad().map(|_| ()).unwrap_err().kind(),
            ErrorKind::Runtime,
            "{what}"
        );
        assert_eq!(
            n.retain_grad(true).unwrap_err().kind(),
            ErrorKind::Runtime,
            "{what}"
        );
        assert_eq!(
            n.backward().unwrap_err().kind(),
            ErrorKind::Runtime,
            "{what}"
        );
    }
}

#[test]
fn gradient_participation_follows_the_logical_dtype__assigning_none_succeeds_on_every_tensor() {
    let mut all = non_float32_tensors();
    all.push(("Float32 leaf".into(), t(&[1.0], &[1])));
    let x = t(&[1.0, 2.0], &[2]);
    all.push(("Float32 non-leaf".into(), mul(&x, &x).unwrap()));
    let pieces = [t(&[1.0, 2.0], &[1, 2]), t(&[3.0, 4.0], &[1, 2])];
    all.push((
        "multi-subtensor Float32".into(),
        Tensor::from_subtensors(&pieces).unwrap(),
    ));
    for (what, n) in all {
        n.set_grad(None).unwrap_or_else(|e| panic!("{what}: {e}"));
        n.set_autograd_ctx(None)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(n.autograd_ctx().is_none(), "{what}");
        if n.is_differentiable() {
            assert!(n.grad().unwrap().is_none(), "{what}");
        }
    }
}

#[test]
fn gradient_participation_follows_the_logical_dtype__grad_and_autograd_ctx_start_as_none() {
    let x = t(&[1.0, 2.0], &[2]);
    assert!(x.grad().unwrap().is_none());
    assert!(x.autograd_ctx().is_none());
    // .grad stays None until something is accumulated or assigned.
    let y = mul_scalar(&x, 3.0).unwrap();
    assert!(x.grad().unwrap().is_none());
    assert!(y.grad().unwrap().is_none());
    // autograd_ctx is set once a forward call records a node.
    assert_eq!(y.autograd_ctx().unwrap().name(), "mul_scalar");
    x.set_grad(Some(t(&[5.0, 6.0], &[2]))).unwrap();
    assert_eq!(v(&x.grad().unwrap().unwrap()), vec![5.0, 6.0]);
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(v(&x.grad().unwrap().unwrap()), vec![8.0, 9.0]);
}

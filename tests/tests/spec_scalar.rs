//! Requirement: A scalar result supplies its own unit cotangent.
#![allow(non_snake_case)]

mod spec_support;

use std::any::TypeId;

use autograd_core::{
    record, shape, stride, ErrorKind, Layout, Operation, Result, SavedState, Shape, Stride, Tensor,
};
use autograd_ops::{mul, mul_scalar, sum};
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, on_test_carrier, probe, tc, with_layout, TestCarrier};

#[derive(Debug)]
struct SumToLeaf {
    saved: SavedState,
}

impl Operation for SumToLeaf {
    fn name(&self) -> &'static str {
        "sum_to_leaf"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let x = self.saved.with("sum_to_leaf", |s| s.input(0).clone())?;
        Ok(vec![Some(x.f32_full_like(g.values::<f32>()?[0])?)])
    }
}

/// The sum of `x` as a tensor of layout `Layout(Shape(1), Stride(1))` (a leaf shape, not a
/// one-mode tuple) in fresh storage of `x`'s carrier class.
fn sum_to_leaf(x: &Tensor) -> Tensor {
    let total: f32 = x.values::<f32>().unwrap().iter().sum();
    let carrier = x
        .carrier()
        .unwrap()
        .fresh(autograd_core::Buffer::F32(vec![total]))
        .unwrap();
    let layout = Layout::new(Shape::from(1usize), Stride::from(1usize)).unwrap();
    let out = Tensor::from_parts(carrier, layout, 0).unwrap();
    record(out, &[x], Vec::new(), |saved| SumToLeaf { saved })
}

#[test]
fn a_scalar_result_supplies_its_own_unit_cotangent__differentiate_a_scalar_without_an_explicit_cotangent(
) {
    // On a carrier class other than the CPU one, so "the same carrier class" is observable.
    let x = tc(&[1.0, 2.0, 3.0], &[3]);
    let (sq, _) = probe(&mul(&x, &x).unwrap());
    let (y, yp) = probe(&sum_to_leaf(&sq));
    assert_eq!(
        y.layout(),
        &Layout::new(Shape::from(1usize), Stride::from(1usize)).unwrap()
    );
    assert!(on_test_carrier(&y));
    let () = y.backward().unwrap();
    // The unit cotangent has y's layout and lives in a TestCarrier.
    assert_eq!(yp.received(), vec![vec![1.0]]);
    assert_eq!(yp.classes(), vec![TypeId::of::<TestCarrier>()]);
    assert_eq!(yp.layouts(), vec![y.layout().clone()]);
    // d(sum x^2)/dx = 2x.
    assert_eq!(grad_vals(&x), Some(vec![2.0, 4.0, 6.0]));
    assert!(on_test_carrier(&x.grad().unwrap().unwrap()));
}

#[test]
fn a_scalar_result_supplies_its_own_unit_cotangent__a_one_mode_tuple_of_extent_one_is_a_scalar() {
    let x = t(&[1.0, -2.0], &[2]);
    let y = sum(&mul_scalar(&x, 3.0).unwrap()).unwrap();
    assert_eq!(y.layout(), &Layout::new(shape![1], stride![1]).unwrap());
    y.backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 3.0]));

    // A scalar leaf receives the unit cotangent itself.
    let s = with_layout(
        &[5.0],
        Layout::new(Shape::from(1usize), Stride::from(1usize)).unwrap(),
    );
    s.backward().unwrap();
    assert_eq!(grad_vals(&s), Some(vec![1.0]));
    assert_eq!(s.grad().unwrap().unwrap().layout(), s.layout());
}

#[test]
fn a_scalar_result_supplies_its_own_unit_cotangent__reject_an_implicit_cotangent_for_a_non_scalar_tensor(
) {
    let layouts = [
        Layout::new(shape![1, 1], stride![1, 1]).unwrap(),
        Layout::new(Shape::from(2usize), Stride::from(1usize)).unwrap(),
        Layout::new(shape![[1]], stride![[1]]).unwrap(),
    ];
    for layout in layouts {
        let n = layout.size();
        // A leaf with an existing gradient.
        let leaf = with_layout(&vec![1.0; n], layout.clone());
        leaf.set_grad(Some(leaf.f32_full_like(7.0).unwrap()))
            .unwrap();
        // A non-leaf result of the same layout.
        let x = with_layout(&vec![2.0; n], layout.clone());
        x.set_grad(Some(x.f32_full_like(-1.5).unwrap())).unwrap();
        let (y, yp) = probe(&x);
        assert_eq!(y.layout(), &layout);
        let before = grads_bits(&[&leaf, &x, &y]);

        expect_err(leaf.backward(), ErrorKind::Value, &[]);
        expect_err(y.backward(), ErrorKind::Value, &[]);
        assert_eq!(
            grads_bits(&[&leaf, &x, &y]),
            before,
            "layout {layout}: no .grad is modified"
        );
        assert_eq!(yp.calls(), 0);
        // The graph was not consumed: an explicit cotangent still works.
        y.backward_with(Some(&y.f32_full_like(1.0).unwrap()), false)
            .unwrap();
        assert_eq!(grad_vals(&x), Some(vec![-0.5; n]));
    }
}

#[test]
fn a_scalar_result_supplies_its_own_unit_cotangent__a_supplied_gradient_replaces_the_unit_cotangent(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let (y, yp) = probe(&sum(&mul(&x, &x).unwrap()).unwrap());
    y.backward_with(Some(&t(&[3.0], &[1])), false).unwrap();
    assert_eq!(yp.received(), vec![vec![3.0]]);
    assert_eq!(grad_vals(&x), Some(vec![6.0, 12.0]));
}

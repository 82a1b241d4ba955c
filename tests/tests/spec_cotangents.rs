//! Requirement: Cotangent layouts must address the target tensor exactly.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{
    grad, record, shape, stride, CpuCarrier, ErrorKind, GradOptions, Layout, Operation, Result,
    SavedState, Tensor,
};
use autograd_ops::{mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, probe, with_layout};

/// The same 2x3 values as `t(values, [2, 3])`, stored column-major: layout (2,3):(1,2).
fn column_major_2x3(values: &[f32]) -> Tensor {
    let mut storage = vec![0.0; 6];
    for i in 0..2 {
        for j in 0..3 {
            storage[i + 2 * j] = values[3 * i + j];
        }
    }
    with_layout(&storage, Layout::new(shape![2, 3], stride![1, 2]).unwrap())
}

#[derive(Debug)]
struct BadLayoutGrad {
    saved: SavedState,
}

impl Operation for BadLayoutGrad {
    fn name(&self) -> &'static str {
        "bad_layout_grad"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    /// Returns the right values in a column-major layout for a row-major input.
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(column_major_2x3(&g.values::<f32>()?))])
    }
}

#[test]
fn cotangent_layouts_must_address_the_target_tensor_exactly__reject_a_mismatched_cotangent_layout()
{
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = mul_scalar(&x, 2.0).unwrap();
    assert_eq!(
        y.layout(),
        &Layout::new(shape![2, 3], stride![3, 1]).unwrap()
    );
    let bad = column_major_2x3(&[1.0; 6]);

    // On a non-leaf target, with and without a previous gradient on the leaf.
    expect_err(y.backward_with(Some(&bad), true), ErrorKind::Value, &[]);
    assert_eq!(grad_vals(&x), None);
    assert!(y.grad().unwrap().is_none());
    x.set_grad(Some(t(&[0.5; 6], &[2, 3]))).unwrap();
    let before = grads_bits(&[&x, &y]);
    expect_err(y.backward_with(Some(&bad), false), ErrorKind::Value, &[]);
    assert_eq!(grads_bits(&[&x, &y]), before);

    // On a leaf target: its own .grad is unchanged.
    let before = grads_bits(&[&x]);
    expect_err(x.backward_with(Some(&bad), false), ErrorKind::Value, &[]);
    assert_eq!(grads_bits(&[&x]), before);

    // A different shape with the same size is refused too.
    expect_err(
        y.backward_with(Some(&t(&[1.0; 6], &[3, 2])), false),
        ErrorKind::Value,
        &[],
    );
    expect_err(
        y.backward_with(Some(&t(&[1.0; 6], &[6])), false),
        ErrorKind::Value,
        &[],
    );
    assert_eq!(grads_bits(&[&x]), before);

    // Functional differentiation applies the same rule.
    let before = grads_bits(&[&x, &y]);
    expect_err(
        grad(&y, &[&x], &bad, GradOptions::default()),
        ErrorKind::Value,
        &[],
    );
    assert_eq!(grads_bits(&[&x, &y]), before);

    // The exactly matching layout is accepted (the graph was not consumed by the failures).
    y.backward_with(Some(&t(&[1.0; 6], &[2, 3])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.5; 6]));
}

#[test]
fn cotangent_layouts_must_address_the_target_tensor_exactly__an_injective_target_needs_its_own_layout_even_when_not_row_major(
) {
    let x = column_major_2x3(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // A row-major cotangent of the same shape does not match the column-major leaf.
    expect_err(
        x.backward_with(Some(&t(&[1.0; 6], &[2, 3])), false),
        ErrorKind::Value,
        &[],
    );
    assert!(x.grad().unwrap().is_none());
    x.backward_with(
        Some(&column_major_2x3(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
        false,
    )
    .unwrap();
    let g = x.grad().unwrap().unwrap();
    assert_eq!(g.layout(), x.layout());
    assert_eq!(
        g.values::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}

#[test]
fn cotangent_layouts_must_address_the_target_tensor_exactly__a_cotangent_produced_by_a_node_is_validated(
) {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    x.set_grad(Some(t(&[9.0; 6], &[2, 3]))).unwrap();
    let y = record(x.contiguous().unwrap(), &[&x], Vec::new(), |saved| {
        BadLayoutGrad { saved }
    });
    let before = grads_bits(&[&x]);
    let e = expect_err(
        y.backward_with(Some(&t(&[1.0; 6], &[2, 3])), false),
        ErrorKind::Value,
        &[],
    );
    assert!(e.to_string().contains("bad_layout_grad"), "{e}");
    assert_eq!(grads_bits(&[&x]), before);
}

#[test]
fn cotangent_layouts_must_address_the_target_tensor_exactly__refuse_aliasing_that_broadcast_modes_do_not_explain(
) {
    // (4,2):(1,1) maps 8 coordinates onto 5 slots, and no stride is zero.
    let layout = Layout::new(shape![4, 2], stride![1, 1]).unwrap();
    let x = with_layout(&[1.0, 2.0, 3.0, 4.0, 5.0], layout);
    let g = t(&[1.0; 8], &[4, 2]);

    // Reached as the input of an operation.
    let y = mul_scalar(&x, 2.0).unwrap();
    expect_err(y.backward_with(Some(&g), false), ErrorKind::Value, &[]);
    assert!(
        x.grad().unwrap().is_none(),
        "no under-counted gradient is produced"
    );
    // Reached as the target of backward itself.
    expect_err(x.backward_with(Some(&g), false), ErrorKind::Value, &[]);
    assert!(x.grad().unwrap().is_none());
    // Stride-zero modes that do not explain all of the aliasing, at the top and at depth.
    for layout in [
        Layout::new(shape![3, 4, 2], stride![0, 1, 1]).unwrap(),
        Layout::new(shape![2, [2, 2]], stride![0, [1, 1]]).unwrap(),
    ] {
        let n = layout.size();
        let z = with_layout(&[1.0; 8], layout.clone());
        let cot = Tensor::from_vec(vec![1.0f32; n], layout.shape().clone()).unwrap();
        expect_err(z.backward_with(Some(&cot), false), ErrorKind::Value, &[]);
        let y = mul_scalar(&z, 2.0).unwrap();
        expect_err(
            y.backward_with(Some(&y.f32_full_like(1.0).unwrap()), false),
            ErrorKind::Value,
            &[],
        );
        assert!(z.grad().unwrap().is_none(), "{layout}");
    }
    // Reached by functional differentiation.
    let y = mul_scalar(&x, 2.0).unwrap();
    expect_err(
        grad(&y, &[&x], &g, GradOptions::default()),
        ErrorKind::Value,
        &[],
    );
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn cotangent_layouts_must_address_the_target_tensor_exactly__a_broadcast_target_takes_its_shape_in_an_injective_layout(
) {
    // (4,2):(0,1): four copies of two slots.
    let broadcast = Layout::new(shape![4, 2], stride![0, 1]).unwrap();
    let x = with_layout(&[1.0, 2.0], broadcast.clone());
    x.set_grad(Some(t(&[0.0; 8], &[4, 2]))).unwrap();
    let before = grads_bits(&[&x]);

    // Another shape.
    for wrong in [t(&[1.0; 8], &[8]), t(&[1.0; 8], &[2, 4])] {
        expect_err(x.backward_with(Some(&wrong), false), ErrorKind::Value, &[]);
    }
    // The right shape in a non-injective layout.
    let aliased =
        Tensor::from_parts(CpuCarrier::from_vec(vec![1.0f32, 1.0]), broadcast, 0).unwrap();
    expect_err(
        x.backward_with(Some(&aliased), false),
        ErrorKind::Value,
        &[],
    );
    assert_eq!(grads_bits(&[&x]), before);

    // The target's shape in any injective layout is accepted: row-major here.
    x.set_grad(None).unwrap();
    x.backward_with(
        Some(&t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[4, 2])),
        false,
    )
    .unwrap();
    assert_eq!(
        grad_vals(&x),
        Some(vec![16.0, 20.0, 16.0, 20.0, 16.0, 20.0, 16.0, 20.0])
    );

    // Also when it is an operation's input rather than the backward target.
    let w = t(&[1.0; 8], &[4, 2]);
    let x2 = with_layout(
        &[1.0, 2.0],
        Layout::new(shape![4, 2], stride![0, 1]).unwrap(),
    );
    let (y, _) = probe(&mul(&x2, &w).unwrap());
    let bad = Tensor::from_parts(
        CpuCarrier::from_vec(vec![1.0f32, 1.0]),
        Layout::new(shape![4, 2], stride![0, 1]).unwrap(),
        0,
    )
    .unwrap();
    expect_err(y.backward_with(Some(&bad), true), ErrorKind::Value, &[]);
    assert!(x2.grad().unwrap().is_none());
}

//! Requirement: Operation backward returns one gradient per saved tensor input.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{
    backwards_traversal, grad, record, ErrorKind, GradOptions, Operation, Result, SavedState,
    Tensor,
};
use autograd_ops::{add, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, probe};

/// What a [`Custom`] node returns from backward.
#[derive(Debug, Clone, Copy)]
enum Returns {
    /// The cotangent for input 0, `None` for input 1.
    FirstOnly,
    /// One value fewer than the saved inputs.
    TooFew,
    /// One value more than the saved inputs.
    TooMany,
    /// A (wrongly shaped) value for every input, including a non-differentiable one.
    ForEveryInput,
}

#[derive(Debug)]
struct Custom {
    saved: SavedState,
    returns: Returns,
}

impl Operation for Custom {
    fn name(&self) -> &'static str {
        "custom"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("custom", |s| s.input(0).clone())?;
        let ga = a.f32_like(g.values()?)?;
        let n = self.saved.inputs().len();
        Ok(match self.returns {
            Returns::FirstOnly => vec![Some(ga), None],
            Returns::TooFew => vec![Some(ga); n - 1],
            Returns::TooMany => vec![Some(ga); n + 1],
            Returns::ForEveryInput => {
                let mut out = vec![Some(ga)];
                out.extend((1..n).map(|_| Some(t(&[1.0, 2.0, 3.0], &[3]))));
                out
            }
        })
    }
}

/// A copy of `inputs[0]` recorded with every input saved, returning `returns` in backward.
fn custom(inputs: &[&Tensor], returns: Returns) -> Tensor {
    record(
        inputs[0].contiguous().unwrap(),
        inputs,
        Vec::new(),
        |saved| Custom { saved, returns },
    )
}

#[test]
fn operation_backward_returns_one_gradient_per_saved_tensor_input__propagate_only_to_the_inputs_an_operation_differentiates(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let z = t(&[3.0, 4.0], &[2]);
    let first = mul_scalar(&x, 2.0).unwrap();
    let (second, sp) = probe(&z);
    second.retain_grad(true).unwrap();
    second.set_grad(Some(t(&[0.25, -8.0], &[2]))).unwrap();
    let before = grads_bits(&[&second]);
    let y = custom(&[&first, &second], Returns::FirstOnly);
    y.backward_with(Some(&t(&[1.0, 3.0], &[2])), false).unwrap();
    // Only the first input receives a contribution, and traversal continues through its node.
    assert_eq!(grad_vals(&x), Some(vec![2.0, 6.0]));
    // The second input keeps its .grad; its producer never ran, yet it was released.
    assert_eq!(grads_bits(&[&second]), before);
    assert_eq!(sp.calls(), 0);
    assert_eq!(grad_vals(&z), None);
    let sn = second.autograd_ctx().unwrap();
    assert!(sn.inputs().is_empty() && sn.input_versions().is_empty());
}

#[test]
fn operation_backward_returns_one_gradient_per_saved_tensor_input__reject_a_mismatched_gradient_count(
) {
    for returns in [Returns::TooFew, Returns::TooMany] {
        let x = t(&[1.0, 2.0], &[2]);
        let w = t(&[3.0, 4.0], &[2]);
        x.set_grad(Some(t(&[5.0, 5.0], &[2]))).unwrap();
        let (a, ap) = probe(&x);
        let y = custom(&[&a, &w], returns);
        let out = add(&y, &mul_scalar(&w, 2.0).unwrap()).unwrap();
        let before = grads_bits(&[&x, &w, &a, &y]);
        let g = t(&[1.0, 1.0], &[2]);
        expect_err(out.backward_with(Some(&g), false), ErrorKind::Value, &[]);
        assert_eq!(grads_bits(&[&x, &w, &a, &y]), before, "{returns:?}");
        assert_eq!(ap.calls(), 0);
        // The same through the functional and node-rooted entry points.
        expect_err(
            grad(
                &out,
                &[&x, &w],
                &g,
                GradOptions {
                    batched: false,
                    retain_graph: true,
                },
            ),
            ErrorKind::Value,
            &[],
        );
        expect_err(
            backwards_traversal(&g, out.autograd_ctx().as_ref(), false),
            ErrorKind::Value,
            &[],
        );
        assert_eq!(grads_bits(&[&x, &w, &a, &y]), before, "{returns:?}");
    }
}

#[test]
fn operation_backward_returns_one_gradient_per_saved_tensor_input__entries_for_non_differentiable_inputs_contribute_nothing(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let idx = Tensor::from_vec(vec![0i32, 1], &[2usize][..]).unwrap();
    let y = custom(&[&x, &idx], Returns::ForEveryInput);
    assert_eq!(y.autograd_ctx().unwrap().inputs().len(), 2);
    y.backward_with(Some(&t(&[4.0, 5.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![4.0, 5.0]));
    assert_eq!(idx.values::<i32>().unwrap(), vec![0, 1]);
}

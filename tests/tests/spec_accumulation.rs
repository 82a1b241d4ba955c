//! Requirement: Leaf tensors accumulate detached gradients.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{grad, record, GradOptions, Operation, Result, SavedState, Tensor};
use autograd_ops::{add, mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{carrier_id, on_cpu, on_test_carrier, tc, v};

#[test]
fn leaf_tensors_accumulate_detached_gradients__detach_the_accumulated_gradient() {
    let x = tc(&[1.0, 2.0, 3.0], &[3]);
    let g = t(&[0.5, -1.0, 4.0], &[3]);
    x.backward_with(Some(&g), false).unwrap();
    g.set(&[0], 100.0).unwrap();
    g.fill(-7.0).unwrap();
    let xg = x.grad().unwrap().unwrap();
    assert_eq!(
        v(&xg),
        vec![0.5, -1.0, 4.0],
        "the values captured at the call"
    );
    assert!(
        on_test_carrier(&xg),
        "same exact implementation class as the leaf's carrier"
    );
    assert_ne!(carrier_id(&xg), carrier_id(&x));
    assert_ne!(carrier_id(&xg), carrier_id(&g));
    assert!(xg.autograd_ctx().is_none());

    // Through a graph: the gradient is still a detached copy in the leaf's carrier class.
    let w = tc(&[2.0, 2.0, 2.0], &[3]);
    let c = t(&[1.0, 1.0, 1.0], &[3]);
    let y = mul(&w, &t(&[3.0, 4.0, 5.0], &[3])).unwrap();
    y.backward_with(Some(&c), false).unwrap();
    c.fill(0.0).unwrap();
    let wg = w.grad().unwrap().unwrap();
    assert_eq!(v(&wg), vec![3.0, 4.0, 5.0]);
    assert!(on_test_carrier(&wg));
    assert!(wg.autograd_ctx().is_none());

    // A CPU leaf gets a CPU gradient even from a cotangent in another carrier class.
    let z = t(&[1.0, 2.0], &[2]);
    let cz = tc(&[1.0, 1.0], &[2]);
    z.backward_with(Some(&cz), false).unwrap();
    assert!(on_cpu(&z.grad().unwrap().unwrap()));

    // Accumulating onto a gradient that a caller assigned from another class keeps the leaf's.
    let u = tc(&[1.0, 2.0], &[2]);
    u.set_grad(Some(t(&[1.0, 1.0], &[2]))).unwrap();
    u.backward_with(Some(&t(&[2.0, 3.0], &[2])), false).unwrap();
    let ug = u.grad().unwrap().unwrap();
    assert_eq!(v(&ug), vec![3.0, 4.0]);
    assert!(on_test_carrier(&ug));
}

#[test]
fn leaf_tensors_accumulate_detached_gradients__accumulate_across_two_traversals() {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, -1.0], &[2]);
    let y = add(&mul(&x, &w).unwrap(), &x).unwrap();
    let g = t(&[1.0, 2.0], &[2]);
    y.backward_with(Some(&g), true).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![4.0, 0.0]));
    assert_eq!(grad_vals(&w), Some(vec![1.0, 4.0]));
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![8.0, 0.0]));
    assert_eq!(grad_vals(&w), Some(vec![2.0, 8.0]));
}

#[test]
fn leaf_tensors_accumulate_detached_gradients__accumulation_continues_across_distinct_graphs_until_none_is_assigned(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let g = t(&[1.0, 1.0], &[2]);
    mul_scalar(&x, 2.0)
        .unwrap()
        .backward_with(Some(&g), false)
        .unwrap();
    mul_scalar(&x, 3.0)
        .unwrap()
        .backward_with(Some(&g), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![5.0, 5.0]));
    x.set_grad(None).unwrap();
    mul_scalar(&x, 4.0)
        .unwrap()
        .backward_with(Some(&g), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![4.0, 4.0]));
}

#[test]
fn leaf_tensors_accumulate_detached_gradients__an_existing_gradient_is_added_to_elementwise() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    x.set_grad(Some(t(&[10.0, 20.0, 30.0], &[3]))).unwrap();
    mul_scalar(&x, 2.0)
        .unwrap()
        .backward_with(Some(&t(&[1.0, 2.0, 3.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![12.0, 24.0, 36.0]));
    assert!(x.grad().unwrap().unwrap().autograd_ctx().is_none());
}

#[test]
fn leaf_tensors_accumulate_detached_gradients__backward_on_a_tensor_without_a_node_propagates_no_further(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul_scalar(&x, 2.0).unwrap();
    let node = y.autograd_ctx().unwrap();
    y.set_autograd_ctx(None).unwrap();
    y.backward_with(Some(&t(&[3.0, 4.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&y), Some(vec![3.0, 4.0]));
    assert_eq!(grad_vals(&x), None);
    // The detached node was neither run nor released.
    assert_eq!(node.inputs().len(), 1);

    // A plain leaf: backward accumulates its own cotangent, twice.
    let z = t(&[1.0], &[1]);
    z.backward().unwrap();
    z.backward_with(Some(&t(&[2.5], &[1])), false).unwrap();
    assert_eq!(grad_vals(&z), Some(vec![3.5]));
}

#[derive(Debug)]
struct PassThrough {
    saved: SavedState,
}

impl Operation for PassThrough {
    fn name(&self) -> &'static str {
        "pass_through"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    /// Hands the incoming cotangent itself to every input.
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.clone()); self.saved.inputs().len()])
    }
}

/// `a + b + ...` of same-layout inputs whose backward passes its cotangent through unchanged.
fn pass_through(inputs: &[&Tensor]) -> Tensor {
    let n = inputs[0].size();
    let mut sum = vec![0.0f32; n];
    for i in inputs {
        for (s, x) in sum.iter_mut().zip(v(i)) {
            *s += x;
        }
    }
    record(
        inputs[0].f32_like(sum).unwrap(),
        inputs,
        Vec::new(),
        |saved| PassThrough { saved },
    )
}

#[test]
fn leaf_tensors_accumulate_detached_gradients__a_cotangent_shared_by_several_contributions_is_never_modified(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 4.0], &[2]);
    let h = pass_through(&[&x, &x, &w]);
    h.retain_grad(true).unwrap();
    let y = pass_through(&[&h, &h]);
    y.retain_grad(true).unwrap();
    let g = t(&[1.0, 10.0], &[2]);
    y.backward_with(Some(&g), true).unwrap();
    assert_eq!(v(&g), vec![1.0, 10.0]);
    assert_eq!(grad_vals(&y), Some(vec![1.0, 10.0]));
    assert_eq!(grad_vals(&h), Some(vec![2.0, 20.0]));
    assert_eq!(grad_vals(&x), Some(vec![4.0, 40.0]));
    assert_eq!(grad_vals(&w), Some(vec![2.0, 20.0]));
    // The gradients are distinct detached buffers: a second traversal changes each once.
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(v(&g), vec![1.0, 10.0]);
    assert_eq!(grad_vals(&y), Some(vec![2.0, 20.0]));
    assert_eq!(grad_vals(&h), Some(vec![4.0, 40.0]));
    assert_eq!(grad_vals(&x), Some(vec![8.0, 80.0]));
    assert_eq!(grad_vals(&w), Some(vec![4.0, 40.0]));

    // Functional grad: the same, with nothing written.
    let x = t(&[1.0, 2.0], &[2]);
    let h = pass_through(&[&x, &x]);
    let y = pass_through(&[&h, &h, &x]);
    let r = grad(&y, &[&x, &h, &y], &g, GradOptions::default()).unwrap();
    assert_eq!(v(&g), vec![1.0, 10.0]);
    assert_eq!(v(r[0].as_ref().unwrap()), vec![5.0, 50.0]);
    assert_eq!(v(r[1].as_ref().unwrap()), vec![2.0, 20.0]);
    assert_eq!(v(r[2].as_ref().unwrap()), vec![1.0, 10.0]);
    assert_ne!(carrier_id(r[2].as_ref().unwrap()), carrier_id(&g));
}

/// The commit skips the copy only for a gradient nothing else can see: a VJP that keeps a
/// handle to the tensor it returns (or hands one tensor to two inputs) still leaves each
/// `.grad` a detached copy that later writes to the kept handle do not reach.
#[test]
fn leaf_tensors_accumulate_detached_gradients__a_gradient_a_vjp_keeps_is_copied() {
    use std::sync::{Arc, Mutex};
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let kept: Arc<Mutex<Option<Tensor>>> = Arc::default();
    let stash = kept.clone();
    let y =
        autograd_core::custom_gradient(mul_scalar(&x, 1.0).unwrap().detach(), &[&x], move |g| {
            let out = mul_scalar(g, 2.0)?;
            *stash.lock().unwrap() = Some(out.clone());
            Ok(vec![Some(out)])
        })
        .unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0, 1.0], &[3])), false)
        .unwrap();
    let kept = kept.lock().unwrap().take().unwrap();
    kept.fill(-9.0).unwrap();
    assert_eq!(v(&x.grad().unwrap().unwrap()), vec![2.0, 2.0, 2.0]);
    assert_ne!(carrier_id(&x.grad().unwrap().unwrap()), carrier_id(&kept));

    // one cotangent handed to both inputs of `add`: two gradients, two storages
    let (a, b) = (t(&[1.0; 4], &[4]), t(&[2.0; 4], &[4]));
    let s = add(&a, &b).unwrap();
    s.backward_with(Some(&t(&[0.5; 4], &[4])), false).unwrap();
    let (ga, gb) = (a.grad().unwrap().unwrap(), b.grad().unwrap().unwrap());
    assert_ne!(carrier_id(&ga), carrier_id(&gb));
    ga.fill(7.0).unwrap();
    assert_eq!(v(&gb), vec![0.5; 4]);
}

/// A large gradient (above the inline storage and the kernels' parallel threshold) that the
/// traversal made privately is committed as it is, and is still a detached value of the leaf's
/// carrier class that the next traversal accumulates into.
#[test]
fn leaf_tensors_accumulate_detached_gradients__large_private_gradients_accumulate() {
    let n = 1 << 16;
    let x = tc(&vec![1.0; n], &[n]);
    let y = mul_scalar(&mul_scalar(&x, 3.0).unwrap(), 2.0).unwrap();
    let g = t(&vec![1.0; n], &[n]);
    y.backward_with(Some(&g), true).unwrap();
    let first = x.grad().unwrap().unwrap();
    assert!(on_test_carrier(&first));
    assert!(first.autograd_ctx().is_none());
    assert!(v(&first).iter().all(|&e| e == 6.0));
    y.backward_with(Some(&g), false).unwrap();
    assert!(v(&x.grad().unwrap().unwrap()).iter().all(|&e| e == 12.0));
    assert!(
        v(&first).iter().all(|&e| e == 6.0),
        "the first .grad value is unchanged"
    );
}

//! Requirement: Batched functional gradients return one stacked gradient per reachable input.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{
    grad, record, shape, stride, ErrorKind, GradOptions, Layout, Operation, Result, SavedState,
    Shape, Stride, Tensor,
};
use autograd_ops::{broadcast_to, mul_scalar};
use autograd_tests::t;
use spec_support::{expect_err, grads_bits, on_test_carrier, probe, tc, v, with_layout};

const A: [[f32; 3]; 2] = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];

const BATCHED: GradOptions = GradOptions {
    batched: true,
    retain_graph: false,
};
const BATCHED_RETAIN: GradOptions = GradOptions {
    batched: true,
    retain_graph: true,
};

#[derive(Debug)]
struct MatVec {
    saved: SavedState,
}

impl Operation for MatVec {
    fn name(&self) -> &'static str {
        "matvec"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(A x) = A^T g
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let x = self.saved.with("matvec", |s| s.input(0).clone())?;
        let g = g.values::<f32>()?;
        let gx = (0..3)
            .map(|j| (0..2).map(|i| g[i] * A[i][j]).sum())
            .collect();
        Ok(vec![Some(x.f32_like(gx)?)])
    }
}

/// `A x` for the constant 2x3 matrix `A` and a 3-element `x`: a 2-element output.
fn matvec(x: &Tensor) -> Tensor {
    let xs = x.values::<f32>().unwrap();
    let y: Vec<f32> = A
        .iter()
        .map(|row| row.iter().zip(&xs).map(|(a, b)| a * b).sum())
        .collect();
    record(t(&y, &[2]), &[x], Vec::new(), |saved| MatVec { saved })
}

#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__reconstruct_a_jacobian_from_basis_cotangents(
) {
    let x = tc(&[1.0, 1.0, 1.0], &[3]);
    let y = matvec(&mul_scalar(&x, 2.0).unwrap());
    assert_eq!(y.layout(), &Layout::new(shape![2], stride![1]).unwrap());
    let basis = t(&[1.0, 0.0, 0.0, 1.0], &[2, 2]);
    let r = grad(&y, &[&x], &basis, BATCHED).unwrap();
    let j = r[0].as_ref().unwrap();
    // One Jacobian row (of 2 A) per batch index.
    assert_eq!(
        j.layout(),
        &Layout::new(shape![2, 3], stride![3, 1]).unwrap()
    );
    for (k, row) in A.iter().enumerate() {
        for (c, a) in row.iter().enumerate() {
            assert_eq!(j.get(&[k, c]).unwrap().to_f64(), f64::from(2.0 * a));
        }
    }
    assert!(x.grad().unwrap().is_none());
    assert!(j.autograd_ctx().is_none());
    assert!(on_test_carrier(j));
}

#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__keep_batch_indices_disjoint_across_storage_holes(
) {
    let with_holes = [
        Layout::new(shape![3], stride![2]).unwrap(),
        Layout::new(Shape::from(3usize), Stride::from(2usize)).unwrap(),
    ];
    for layout in with_holes {
        let x = with_layout(&[1.0; 6], layout.clone());
        assert!(layout.cosize() > layout.size());
        let y = matvec(&x);
        let cot = t(&[1.0, 0.0, 0.0, 1.0], &[2, 2]);
        let r = grad(&y, &[&x], &cot, BATCHED_RETAIN).unwrap();
        let s = r[0].as_ref().unwrap();
        // The single-gradient layout is x's own (3):(2), of cosize 5.
        let single = grad(&y, &[&x], &t(&[1.0, 0.0], &[2]), BATCHED_RETAIN_SINGLE).unwrap();
        let single_layout = single[0].as_ref().unwrap().layout().clone();
        assert_eq!(single_layout, layout);
        assert_eq!(
            s.layout(),
            &Layout::new(shape![2, 3], stride![5, 2]).unwrap()
        );
        assert_eq!(s.layout().mode_leaves(0)[0].stride, single_layout.cosize());
        // Each batch index holds the gradient for its own cotangent.
        for (k, e) in [[1.0, 0.0], [0.0, 1.0]].iter().enumerate() {
            let alone = grad(&y, &[&x], &t(e, &[2]), BATCHED_RETAIN_SINGLE).unwrap();
            let alone = v(alone[0].as_ref().unwrap());
            let row: Vec<f32> = (0..3)
                .map(|c| s.get(&[k, c]).unwrap().to_f64() as f32)
                .collect();
            assert_eq!(row, alone);
            assert_eq!(row, A[k].to_vec());
        }
    }
}

const BATCHED_RETAIN_SINGLE: GradOptions = GradOptions {
    batched: false,
    retain_graph: true,
};

#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__reject_a_batched_cotangent_with_a_different_trailing_layout(
) {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    x.set_grad(Some(t(&[1.0; 3], &[3]))).unwrap();
    let (h, hp) = probe(&x);
    let y = matvec(&h);
    let out_layout = y.layout().to_string();
    let before = grads_bits(&[&x, &h, &y]);
    let wrong = [
        // Column-major: the trailing mode is (2):(2), not the output's (2):(1).
        with_layout(
            &[1.0, 0.0, 0.0, 1.0],
            Layout::new(shape![2, 2], stride![1, 2]).unwrap(),
        ),
        // No batch mode at all.
        t(&[1.0, 0.0], &[2]),
        // A trailing mode too many.
        t(&[1.0, 0.0, 0.0, 1.0], &[2, 2, 1]),
        // A nested batch mode.
        with_layout(
            &[1.0, 0.0, 0.0, 1.0],
            Layout::new(shape![[2, 1], 2], stride![[2, 4], 1]).unwrap(),
        ),
    ];
    for c in &wrong {
        let e = expect_err(grad(&y, &[&x], c, BATCHED_RETAIN), ErrorKind::Value, &[]);
        let m = e.to_string();
        assert!(m.contains("batch mode"), "{m}");
        assert!(m.contains("leaf"), "{m}");
        assert!(m.contains("followed by"), "{m}");
        assert!(m.contains(&out_layout), "{m}");
    }
    assert_eq!(hp.calls(), 0);
    assert_eq!(grads_bits(&[&x, &h, &y]), before);
}

#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__release_the_graph_after_the_final_cotangent(
) {
    let x = t(&[1.0, 1.0, 1.0], &[3]);
    let (h, hp) = probe(&x);
    let y = matvec(&h);
    let cot = t(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
    let first = grad(&y, &[&x], &cot, BATCHED_RETAIN).unwrap();
    assert_eq!(hp.calls(), 3);
    let second = grad(&y, &[&x], &cot, BATCHED).unwrap();
    // Every one of the K cotangents ran before the release.
    assert_eq!(hp.calls(), 6);
    assert_eq!(
        v(first[0].as_ref().unwrap()),
        v(second[0].as_ref().unwrap())
    );
    assert_eq!(
        v(second[0].as_ref().unwrap()),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 5.0, 7.0, 9.0]
    );
    assert!(h.autograd_ctx().unwrap().inputs().is_empty());
    expect_err(
        grad(&y, &[&x], &cot, BATCHED),
        ErrorKind::Runtime,
        &["retain_graph=True"],
    );
    assert_eq!(hp.calls(), 6);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__unreached_inputs_get_none_and_batch_strides_are_honoured(
) {
    let x = t(&[1.0, 1.0, 1.0], &[3]);
    let other = t(&[1.0], &[1]);
    let y = matvec(&x);
    // Batch index k lives at storage offset 4 k: (2,2):(4,1) over 6 slots.
    let cot = with_layout(
        &[1.0, 0.0, 9.0, 9.0, 0.0, 1.0],
        Layout::new(shape![2, 2], stride![4, 1]).unwrap(),
    );
    let r = grad(&y, &[&other, &x], &cot, BATCHED).unwrap();
    assert!(r[0].is_none());
    assert_eq!(
        v(r[1].as_ref().unwrap()),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}

#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__a_broadcast_input_stacks_canonical_gradients(
) {
    let x = with_layout(&[1.0], Layout::new(shape![3], stride![0]).unwrap());
    let y = matvec(&x);
    let r = grad(&y, &[&x], &t(&[1.0, 0.0, 0.0, 1.0], &[2, 2]), BATCHED).unwrap();
    let s = r[0].as_ref().unwrap();
    // Single-gradient layout: canonical (3):(1), cosize 3; each row holds the per-slot sum.
    assert_eq!(
        s.layout(),
        &Layout::new(shape![2, 3], stride![3, 1]).unwrap()
    );
    assert_eq!(v(s), vec![6.0, 6.0, 6.0, 15.0, 15.0, 15.0]);
}

/// spec: "each [cotangent at batch index k] SHALL satisfy the cotangent rules for output". A
/// broadcast output needs a cotangent of its shape in an injective layout, but a batched
/// cotangent must repeat the output's own (stride-0) modes, so every batch index fails the rule.
#[test]
fn batched_functional_gradients_return_one_stacked_gradient_per_reachable_input__each_batch_index_follows_the_cotangent_rules(
) {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    x.set_grad(Some(t(&[1.0; 3], &[3]))).unwrap();
    let y = broadcast_to(&mul_scalar(&x, 2.0).unwrap(), &[2, 3]).unwrap();
    assert_eq!(y.layout().to_string(), "(2,3):(0,1)");
    let before = grads_bits(&[&x, &y]);
    let batched = with_layout(
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        Layout::new(shape![2, 2, 3], stride![3, 0, 1]).unwrap(),
    );
    let e = expect_err(grad(&y, &[&x], &batched, BATCHED), ErrorKind::Value, &[]);
    let m = e.to_string();
    assert!(m.contains("batch index 0"), "{m}");
    assert!(m.contains("injective"), "{m}");
    assert_eq!(grads_bits(&[&x, &y]), before);
    assert!(!y.autograd_ctx().unwrap().is_released(), "nothing released");
    // the same values as one unbatched cotangent in an injective layout are accepted
    let one = t(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0], &[2, 3]);
    let g = grad(&y, &[&x], &one, GradOptions::default()).unwrap();
    assert_eq!(v(g[0].as_ref().unwrap()), vec![2.0, 2.0, 0.0]);
}

#[test]
fn batched_cotangents_reach_a_node_without_a_batched_vjp_with_its_result_s_exact_shape() {
    // `x` and its narrowed view have bare-extent shapes (`3`, `2`, not `(3)`, `(2)`); `narrow`
    // has no batched VJP, so it runs once per cotangent, each of the view's own shape
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], Shape::from(3usize)).unwrap();
    let y = x.narrow(0, 0, 2).unwrap();
    assert_eq!(y.shape(), &Shape::from(2usize));
    let basis = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], shape![2, 2]).unwrap();
    let j = grad(&y, &[&x], &basis, BATCHED).unwrap();
    let j = j[0].as_ref().unwrap();
    assert_eq!(
        j.values::<f32>().unwrap(),
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    );
}

#[test]
fn a_checkpoint_with_a_permuted_output_takes_batched_cotangents() {
    // the region returns a transposed view: z = 2 xᵀ, layout (3,2):(1,3)
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
    let z =
        autograd_core::checkpoint(&[&x], &[], |a| mul_scalar(&a[0], 2.0)?.transpose(0, 1)).unwrap();
    assert_eq!(z.layout().to_string(), "(3,2):(1,3)");
    // the identity as six cotangents of z's own layout after a batch mode of stride 6:
    // cotangent k = (i, j) is 1 at z's position (i, j), the slot 6k + i + 3j
    let mut data = vec![0.0f32; 36];
    for k in 0..6 {
        data[6 * k + k / 2 + 3 * (k % 2)] = 1.0;
    }
    let cot = Tensor::from_vec(data, shape![36])
        .unwrap()
        .with_layout_detached(Layout::new(shape![6, 3, 2], stride![6, 1, 3]).unwrap(), 0)
        .unwrap();
    let got = grad(&z, &[&x], &cot, BATCHED).unwrap();
    let got = got[0].as_ref().unwrap().values::<f32>().unwrap();
    for k in 0..6 {
        let (i, j) = (k / 2, k % 2);
        // d z[i, j] / dx = 2 at x's position (j, i)
        let want: Vec<f32> = (0..6)
            .map(|p| if p == j * 3 + i { 2.0 } else { 0.0 })
            .collect();
        assert_eq!(&got[k * 6..(k + 1) * 6], &want[..], "cotangent ({i}, {j})");
    }
}

/// Hands back its cotangent compacted, whatever its input's layout.
#[derive(Debug)]
struct Compacting {
    saved: SavedState,
}

impl Operation for Compacting {
    fn name(&self) -> &'static str {
        "compacting"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.contiguous()?)])
    }
}

#[test]
fn each_batch_index_of_a_node_run_per_cotangent_obeys_the_layout_rule_of_one_run() {
    // an injective but transposed input: a compact gradient for it breaks the exact-layout rule
    let xt = Tensor::from_vec(vec![1.0f32; 6], shape![6])
        .unwrap()
        .with_layout_detached(Layout::new(shape![3, 2], stride![1, 3]).unwrap(), 0)
        .unwrap();
    let y = record(xt.contiguous().unwrap(), &[&xt], vec![], |saved| {
        Compacting { saved }
    });
    let one = Tensor::from_vec(vec![1.0f32; 6], shape![3, 2]).unwrap();
    let retain = GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    };
    expect_err(
        grad(&y, &[&xt], &one, retain),
        ErrorKind::Value,
        &["layout"],
    );
    let two = Tensor::from_vec(vec![1.0f32; 12], shape![2, 3, 2]).unwrap();
    expect_err(
        grad(&y, &[&xt], &two, BATCHED),
        ErrorKind::Value,
        &["layout", "batch index 0"],
    );
}

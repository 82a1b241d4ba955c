//! Requirement: Operations record a reverse-mode node for differentiable results.
#![allow(non_snake_case)]

mod spec_support;

use std::cell::Cell;

use autograd_core::{record, DType, Operation, Result, SavedState, Tensor, VersionSnapshot};
use autograd_ops::{add, mul_scalar};
use autograd_tests::t;
use spec_support::{carrier_id, v};

/// Execution options: a keyword argument that is neither saved nor captured as an input.
#[derive(Debug, Clone, Copy, Default)]
struct ExecOptions {
    #[allow(dead_code)]
    threads: usize,
}

#[derive(Debug)]
struct ScaledAdd {
    saved: SavedState,
    c: f32,
}

impl Operation for ScaledAdd {
    fn name(&self) -> &'static str {
        "scaled_add"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = self
            .saved
            .with("scaled_add", |s| (s.input(0).clone(), s.input(1).clone()))?;
        let gv = g.values::<f32>()?;
        let ga = gv.iter().map(|x| x * self.c).collect();
        Ok(vec![Some(a.f32_like(ga)?), Some(b.f32_like(gv)?)])
    }
}

/// `a * c + b`: positional tensors `a` and `b`, a positional non-tensor `c` between them, and
/// an `options` keyword.
#[track_caller]
fn scaled_add(a: &Tensor, c: f32, b: &Tensor, options: ExecOptions) -> Tensor {
    let _ = options;
    let values: Vec<f32> = v(a).iter().zip(v(b)).map(|(x, y)| x * c + y).collect();
    let out = Tensor::from_vec(values, a.shape().clone()).unwrap();
    record(out, &[a, b], Vec::new(), |saved| ScaledAdd { saved, c })
}

#[derive(Debug)]
struct Opaque {
    saved: SavedState,
}

impl Operation for Opaque {
    fn name(&self) -> &'static str {
        "opaque"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, _g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![None; self.saved.inputs().len()])
    }
}

/// Runs `record` for `result` with `inputs`, reporting whether a node (with its saved inputs)
/// was built at all.
fn record_opaque(result: Tensor, inputs: &[&Tensor]) -> (Tensor, bool) {
    let built = Cell::new(false);
    let r = record(result, inputs, Vec::new(), |saved| {
        built.set(true);
        Opaque { saved }
    });
    (r, built.get())
}

#[test]
fn operations_record_a_reverse_mode_node_for_differentiable_results__record_a_node_for_a_differentiable_result(
) {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[10.0, 20.0], &[2]);
    // Give the two inputs distinct versions so the snapshot is visibly theirs.
    b.set(&[0], 10.0).unwrap();
    let y = scaled_add(&a, 3.0, &b, ExecOptions { threads: 2 });
    assert_eq!(v(&y), vec![13.0, 26.0]);
    assert!(y.is_differentiable());

    let node = y.autograd_ctx().expect("a node is recorded");
    assert_eq!(node.name(), "scaled_add");
    let inputs = node.inputs();
    assert_eq!(inputs.len(), 2, "only the positional tensors are saved");
    assert!(inputs[0].same_tensor(&a));
    assert!(inputs[1].same_tensor(&b));
    let versions = node.input_versions();
    assert_eq!(versions.len(), 2);
    for (snap, input) in versions.iter().zip([&a, &b]) {
        let entries: Vec<_> = snap.entries().collect();
        let c = input.carrier().unwrap();
        assert_eq!(entries, vec![(c.id(), c.version())]);
        assert_eq!(snap, &VersionSnapshot::of(input));
    }
    assert_eq!(versions[1].entries().next().unwrap().1, 1);

    // The node really is the operation: its backward is the one that runs.
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(v(&a.grad().unwrap().unwrap()), vec![3.0, 3.0]);
    assert_eq!(v(&b.grad().unwrap().unwrap()), vec![1.0, 1.0]);
}

#[test]
fn operations_record_a_reverse_mode_node_for_differentiable_results__a_repeated_tensor_is_saved_once_per_occurrence(
) {
    let a = t(&[1.0, 2.0], &[2]);
    let y = add(&a, &a).unwrap();
    let node = y.autograd_ctx().unwrap();
    let inputs = node.inputs();
    assert_eq!(inputs.len(), 2);
    assert!(inputs.iter().all(|i| i.same_tensor(&a)));
    assert_eq!(node.input_versions().len(), 2);
    assert_eq!(node.input_versions()[0], VersionSnapshot::of(&a));
    assert_eq!(node.input_versions()[1], VersionSnapshot::of(&a));
    // each occurrence keeps the version it was saved at, not the tensor's current one
    a.set(&[0], 5.0f32).unwrap();
    assert_ne!(node.input_versions()[0], VersionSnapshot::of(&a));
    assert!(node
        .input_versions()
        .iter()
        .all(|s| s.entries().all(|(_, v)| v == 0)));

    // A non-tensor positional argument stays outside the saved inputs.
    let z = mul_scalar(&a, 4.0).unwrap();
    let zn = z.autograd_ctx().unwrap();
    assert_eq!(zn.inputs().len(), 1);
    assert!(zn.inputs()[0].same_tensor(&a));
}

#[test]
fn operations_record_a_reverse_mode_node_for_differentiable_results__one_differentiable_input_saves_every_positional_tensor(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let idx = Tensor::from_vec(vec![1i32, 0], &[2usize][..]).unwrap();
    let out = t(&[2.0, 1.0], &[2]);
    let (y, built) = record_opaque(out, &[&x, &idx]);
    assert!(built);
    let node = y.autograd_ctx().unwrap();
    assert_eq!(node.inputs().len(), 2);
    assert!(node.inputs()[0].same_tensor(&x));
    assert!(node.inputs()[1].same_tensor(&idx));
    assert_eq!(node.input_versions().len(), 2);
    assert_eq!(node.input_versions()[1], VersionSnapshot::of(&idx));
    assert_eq!(
        node.input_versions()[1].entries().next().unwrap().0,
        carrier_id(&idx)
    );
}

#[test]
fn operations_record_a_reverse_mode_node_for_differentiable_results__record_no_node_for_a_non_differentiable_result(
) {
    let a = Tensor::from_vec(vec![1i32, 2], &[2usize][..]).unwrap();
    let b = Tensor::from_vec(vec![true, false], &[2usize][..]).unwrap();
    let out = Tensor::from_vec(vec![2i32, 2], &[2usize][..]).unwrap();
    let (y, built) = record_opaque(out, &[&a, &b]);
    assert!(!y.is_differentiable());
    assert!(y.autograd_ctx().is_none());
    assert!(!built, "no saved inputs may be retained");

    let mask = Tensor::from_vec(vec![true, true], &[2usize][..]).unwrap();
    let (m, built) = record_opaque(mask, &[&b]);
    assert!(m.autograd_ctx().is_none());
    assert!(!built);
}

#[test]
fn operations_record_a_reverse_mode_node_for_differentiable_results__a_non_differentiable_result_of_float32_inputs_records_nothing(
) {
    let x = t(&[1.0, -2.0], &[2]);
    let positive = Tensor::from_vec(vec![true, false], &[2usize][..]).unwrap();
    let (y, built) = record_opaque(positive, &[&x]);
    assert_eq!(y.dtype(), &DType::Bool);
    assert!(y.autograd_ctx().is_none());
    assert!(!built);
}

#[test]
fn operations_record_a_reverse_mode_node_for_differentiable_results__no_differentiable_input_records_nothing(
) {
    let idx = Tensor::from_vec(vec![1i32, 2], &[2usize][..]).unwrap();
    let as_float = t(&[1.0, 2.0], &[2]);
    let (y, built) = record_opaque(as_float, &[&idx]);
    assert!(y.is_differentiable());
    assert!(y.autograd_ctx().is_none());
    assert!(!built);
    // A call with no tensor argument at all records nothing either.
    let (z, built) = record_opaque(t(&[1.0], &[1]), &[]);
    assert!(z.autograd_ctx().is_none());
    assert!(!built);
}

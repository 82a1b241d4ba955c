//! Requirement: Backward rejects storage modified after the forward pass.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{ErrorKind, IntTuple, Tensor, VersionSnapshot};
use autograd_ops::{add, mul, mul_scalar};
use autograd_tests::{grad_vals, t};
use spec_support::{expect_err, grads_bits, probe};

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__reject_a_traversal_after_an_in_place_mutation(
) {
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let w = t(&[5.0, 6.0, 7.0, 8.0], &[2, 2]);
    w.set_grad(Some(t(&[1.0; 4], &[2, 2]))).unwrap();
    let (y, yp) = probe(&mul(&x, &w).unwrap());
    x.set(&[0, 1], 10.0).unwrap();
    let before = grads_bits(&[&x, &w, &y]);
    expect_err(
        y.backward_with(Some(&t(&[1.0; 4], &[2, 2])), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(grads_bits(&[&x, &w, &y]), before, "no .grad is modified");
    // The probe (the root, whose own input was not mutated) ran, then mul's check failed and
    // nothing was committed.
    assert_eq!(yp.calls(), 1);
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__reject_a_traversal_after_a_mutation_through_the_source(
) {
    let source = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let view = source.narrow(1, 1, 2).unwrap();
    let y = mul_scalar(&view, 2.0).unwrap();
    // A coordinate the view does not even cover.
    source.set(&[1, 0], 40.0).unwrap();
    expect_err(
        y.backward_with(Some(&t(&[1.0; 4], &[2, 2])), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(grad_vals(&view), None);
    assert_eq!(grad_vals(&source), None);
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__complete_a_traversal_before_mutating_parameters(
) {
    let p = t(&[1.0, 2.0], &[2]);
    let x = t(&[3.0, 4.0], &[2]);
    let loss = mul(&p, &x).unwrap();
    let kept = add(&mul(&p, &p).unwrap(), &x).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    loss.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&p), Some(vec![3.0, 4.0]));
    // An SGD-like update of the parameters in place.
    let step = p.grad().unwrap().unwrap();
    p.add_(&mul_scalar(&step, -0.5).unwrap().contiguous().unwrap())
        .unwrap();
    assert_eq!(p.values::<f32>().unwrap(), vec![-0.5, 0.0]);
    // The graph `kept` was built before the mutation.
    let before = grads_bits(&[&p, &x]);
    expect_err(
        kept.backward_with(Some(&g), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(grads_bits(&[&p, &x]), before);
    // A fresh forward pass after the mutation is traversable.
    let again = mul(&p, &x).unwrap();
    again.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&p), Some(vec![6.0, 8.0]));
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__a_retained_graph_is_invalidated_by_a_later_mutation(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul(&x, &x).unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    y.backward_with(Some(&g), true).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 4.0]));
    x.fill(0.0).unwrap();
    expect_err(
        y.backward_with(Some(&g), true),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(grad_vals(&x), Some(vec![2.0, 4.0]));
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__every_public_mutation_changes_the_version_every_sharer_sees(
) {
    type Mutation = fn(&Tensor);
    let mutations: [(&str, Mutation); 6] = [
        ("set", |s| s.set(&[0, 0], 9.0).unwrap()),
        ("set_coord", |s| {
            s.set_coord(&IntTuple::from(vec![1, 1]), 9.0).unwrap();
        }),
        ("fill", |s| s.fill(2.0).unwrap()),
        ("copy_from", |s| {
            s.copy_from(&t(&[1.0; 6], &[2, 3])).unwrap();
        }),
        ("add_", |s| s.add_(&t(&[1.0; 6], &[2, 3])).unwrap()),
        ("scale_", |s| s.scale_(0.5).unwrap()),
    ];
    for (what, mutate) in mutations {
        let source = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let alias = source.detach();
        let view = source.select(0, 1).unwrap();
        let permuted = source.transpose(0, 1).unwrap();
        let sharers = [&source, &alias, &view, &permuted];
        let before: Vec<VersionSnapshot> = sharers.iter().map(|s| VersionSnapshot::of(s)).collect();
        // Graphs built from each sharer before the mutation.
        let graphs: Vec<Tensor> = sharers
            .iter()
            .map(|s| mul_scalar(s, 2.0).unwrap())
            .collect();
        // Mutate through the alias (a different tensor sharing the carrier).
        mutate(&alias);
        for (s, b) in sharers.iter().zip(&before) {
            assert_ne!(
                &VersionSnapshot::of(s),
                b,
                "{what}: a sharer did not see the new version"
            );
        }
        for (y, s) in graphs.iter().zip(sharers) {
            let ones = y.f32_full_like(1.0).unwrap();
            expect_err(
                y.backward_with(Some(&ones), false),
                ErrorKind::Runtime,
                &["in-place modification"],
            );
            assert_eq!(grad_vals(s), None, "{what}");
        }
    }
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__a_mutation_of_any_constituent_carrier_invalidates_the_graph(
) {
    let a = t(&[1.0, 2.0], &[1, 2]);
    let b = t(&[3.0, 4.0], &[1, 2]);
    let m = Tensor::from_subtensors(&[a.clone(), b.clone(), a.clone()]).unwrap();
    let y = mul_scalar(&m, 2.0).unwrap();
    // One saved input version with every unique carrier, in order of first appearance.
    let snap = &y.autograd_ctx().unwrap().input_versions()[0];
    let ids: Vec<_> = snap.entries().map(|(id, _)| id).collect();
    assert_eq!(
        ids,
        vec![a.carrier().unwrap().id(), b.carrier().unwrap().id()]
    );
    b.set(&[0, 1], 0.0).unwrap();
    expect_err(
        y.backward_with(Some(&y.f32_full_like(1.0).unwrap()), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert_eq!(grad_vals(&a), None);
    assert_eq!(grad_vals(&b), None);
}

/// Identity whose VJP refuses a saved input holding a non-finite value, counting its runs.
struct Picky {
    saved: autograd_core::SavedState,
    runs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl autograd_core::Operation for Picky {
    fn name(&self) -> &'static str {
        "picky"
    }
    fn saved(&self) -> &autograd_core::SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> autograd_core::Result<Vec<Option<Tensor>>> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let x = self.saved.with(self.name(), |s| s.input(0).clone())?;
        autograd_core::ensure!(
            x.values::<f32>()?.iter().all(|v| v.is_finite()),
            Value,
            "picky: a saved value is not finite"
        );
        Ok(vec![Some(g.clone())])
    }
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__the_check_runs_before_the_vjp() {
    let x = t(&[1.0, 2.0], &[2]);
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let y = autograd_core::record(x.contiguous().unwrap(), &[&x], Vec::new(), |saved| Picky {
        saved,
        runs: runs.clone(),
    });
    x.set(&[0], f32::NAN).unwrap();
    expect_err(
        y.backward_with(Some(&t(&[1.0; 2], &[2])), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert!(x.grad().unwrap().is_none());
    assert!(!y.autograd_ctx().unwrap().is_released());
    // the VJP never saw the modified input
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// Identity whose VJP overwrites its own saved input and then fails.
struct Clobbering {
    saved: autograd_core::SavedState,
}

impl autograd_core::Operation for Clobbering {
    fn name(&self) -> &'static str {
        "clobbering"
    }
    fn saved(&self) -> &autograd_core::SavedState {
        &self.saved
    }
    fn backward(&self, _: &Tensor) -> autograd_core::Result<Vec<Option<Tensor>>> {
        let x = self.saved.with(self.name(), |s| s.input(0).clone())?;
        x.set(&[0], 9.0f32)?;
        autograd_core::bail!(Value, "clobbering: gave up")
    }
}

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__a_write_racing_with_a_failing_vjp_is_reported(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let y = autograd_core::record(x.contiguous().unwrap(), &[&x], Vec::new(), |saved| {
        Clobbering { saved }
    });
    expect_err(
        y.backward_with(Some(&t(&[1.0; 2], &[2])), false),
        ErrorKind::Runtime,
        &["in-place modification"],
    );
    assert!(x.grad().unwrap().is_none());
}

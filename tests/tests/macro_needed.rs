//! The wanted-gradient mask: a VJP that declares `needs: &NeedsGrad` learns which gradients
//! the traversal will use (`Operation::backward_needed`), indexed like the gradients it
//! returns; `backward` wants every gradient; an unwanted gradient the VJP returns anyway is
//! dropped.

use std::cell::RefCell;

use autograd_core::{differentiable, gradcheck, GradcheckOptions, Result, Tensor};
use autograd_tests::{t, zip};

thread_local! {
    /// What the VJPs below were asked for, per call.
    static ASKED: RefCell<Vec<Vec<bool>>> = const { RefCell::new(Vec::new()) };
}

fn asked() -> Vec<Vec<bool>> {
    ASKED.with(|a| std::mem::take(&mut *a.borrow_mut()))
}

/// `a * b` elementwise; computes only the gradients it is asked for (as matmul will for a data
/// batch), and records what it was asked.
#[differentiable]
fn product(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        b: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        ASKED.with(|x| x.borrow_mut().push(vec![needs.input(0), needs.input(1)]));
        let da = needs
            .input(0)
            .then(|| zip(g, b, |g, b| g * b))
            .transpose()?;
        let db = needs
            .input(1)
            .then(|| zip(g, a, |g, a| g * a))
            .transpose()?;
        Ok((da, db))
    }
    zip(a, b, |a, b| a * b)
}

/// `a + b`; ignores the mask and answers for both inputs.
#[differentiable]
fn sum2(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> (Option<Tensor>, Option<Tensor>) {
        (Some(g.clone()), Some(g.clone()))
    }
    zip(a, b, |a, b| a + b)
}

/// `x + bias + sum(xs)`: the mask of an optional input and of a slice.
#[differentiable]
fn gather(x: &Tensor, bias: Option<&Tensor>, xs: &[Tensor]) -> Result<Tensor> {
    fn vjp(
        g: &Tensor,
        xs: &[Tensor],
        needs: &NeedsGrad,
    ) -> (Option<Tensor>, Option<Tensor>, Vec<Option<Tensor>>) {
        let mut seen = vec![needs.input(0), needs.input(1)];
        seen.extend_from_slice(needs.slice(2));
        ASKED.with(|x| x.borrow_mut().push(seen));
        (
            Some(g.clone()),
            Some(g.clone()),
            xs.iter().map(|_| Some(g.clone())).collect(),
        )
    }
    let mut out = x.f32_like(x.values::<f32>()?)?;
    for t in bias.into_iter().chain(xs) {
        out = zip(&out, t, |a, b| a + b)?;
    }
    Ok(out)
}

#[test]
fn the_vjp_sees_the_mask_it_is_given() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let y = product(&a, &b).unwrap();
    let node = y.autograd_ctx().unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    asked();

    let grads = node.backward_needed(&g, &[true, false]).unwrap();
    assert_eq!(asked(), [vec![true, false]]);
    assert!(grads[0].is_some() && grads[1].is_none());

    let grads = node.backward_needed(&g, &[false, true]).unwrap();
    assert_eq!(asked(), [vec![false, true]]);
    assert!(grads[0].is_none() && grads[1].is_some());
}

#[test]
fn backward_wants_every_gradient() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let y = product(&a, &b).unwrap();
    asked();
    let grads = y
        .autograd_ctx()
        .unwrap()
        .backward(&t(&[1.0, 1.0], &[2]))
        .unwrap();
    assert_eq!(asked(), [vec![true, true]]);
    assert!(grads.iter().all(Option::is_some));
    gradcheck(
        |v| product(&v[0], &v[1]),
        &[a, b],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn an_unwanted_gradient_is_dropped() {
    let (a, b) = (t(&[1.0], &[1]), t(&[2.0], &[1]));
    let y = sum2(&a, &b).unwrap();
    let grads = y
        .autograd_ctx()
        .unwrap()
        .backward_needed(&t(&[1.0], &[1]), &[false, true])
        .unwrap();
    assert!(grads[0].is_none() && grads[1].is_some());
}

#[test]
fn the_mask_follows_optional_and_slice_inputs() {
    let x = t(&[1.0], &[1]);
    let b = t(&[2.0], &[1]);
    let xs = [t(&[3.0], &[1]), t(&[4.0], &[1])];
    let g = t(&[1.0], &[1]);
    asked();

    let node = gather(&x, Some(&b), &xs).unwrap().autograd_ctx().unwrap();
    let grads = node
        .backward_needed(&g, &[true, false, false, true])
        .unwrap();
    assert_eq!(asked(), [vec![true, false, false, true]]);
    let present: Vec<bool> = grads.iter().map(Option::is_some).collect();
    assert_eq!(present, [true, false, false, true]);

    // absent bias: saved inputs x, xs[0], xs[1]; the mask still answers per parameter
    let node = gather(&x, None, &xs).unwrap().autograd_ctx().unwrap();
    let grads = node.backward_needed(&g, &[false, true, false]).unwrap();
    assert_eq!(asked(), [vec![false, false, true, false]]);
    assert_eq!(grads.len(), 3);

    node.backward(&g).unwrap();
    assert_eq!(asked(), [vec![true, false, true, true]]);
    gradcheck(
        |v| gather(&v[0], Some(&v[1]), &v[2..]),
        &[x, b, xs[0].clone(), xs[1].clone()],
        GradcheckOptions::default(),
    )
    .unwrap();
}

/// The engine's entry point writes into a vector it reuses: whatever the vector held is
/// replaced by one entry per saved input, the same gradients `backward_needed` returns.
#[test]
fn backward_into_replaces_what_the_vector_held() {
    let (a, b) = (t(&[2.0, 3.0], &[2]), t(&[5.0, 7.0], &[2]));
    let g = t(&[1.0, 10.0], &[2]);
    let node = product(&a, &b).unwrap().autograd_ctx().unwrap();
    let mut out = vec![Some(g.clone()); 5];
    node.backward_into(g.clone(), &[false, true], &mut out)
        .unwrap();
    assert_eq!(asked(), [vec![false, true]]);
    assert_eq!(out.len(), 2);
    assert!(out[0].is_none());
    let db = out[1].as_ref().unwrap().values::<f32>().unwrap();
    assert_eq!(db, [2.0, 30.0]);
    let again = node.backward_needed(&g, &[false, true]).unwrap();
    assert_eq!(again[1].as_ref().unwrap().values::<f32>().unwrap(), db);
    asked();
}

//! Several outputs (`-> Result<(Tensor, Tensor)>`): one node per call, attached to every
//! differentiable result; the VJP takes one cotangent per output as a tuple of
//! `Option<&Tensor>`, `None` for an output the traversal did not reach, and runs only when some
//! output was reached. The generated code is lint-clean here too (pedantic denied below).
#![deny(warnings, clippy::all, clippy::pedantic)]
// test names: x, a, b, ... as in the formulas
#![allow(clippy::many_single_char_names)]

use std::cell::RefCell;
use std::sync::Arc;

use autograd_core::{
    differentiable, grad, gradcheck, no_grad, DType, ErrorKind, GradOptions, GradcheckOptions,
    Result, Tensor,
};
use autograd_ops::{add, sum};
use autograd_tests::{grad_vals, map, t, vals, zip};

thread_local! {
    /// Per VJP call of the ops below: which cotangents were present (and, for `products`,
    /// which gradients were wanted).
    static CALLS: RefCell<Vec<Vec<bool>>> = const { RefCell::new(Vec::new()) };
}

/// The calls recorded since the last look.
fn calls() -> Vec<Vec<bool>> {
    CALLS.with(|c| std::mem::take(&mut *c.borrow_mut()))
}

fn note(call: Vec<bool>) {
    CALLS.with(|c| c.borrow_mut().push(call));
}

/// `(2 x[..h], 3 x[h..])` with `h = n / 2`: a split whose halves are scaled so that each
/// output's gradient is recognisable.
#[differentiable]
fn split_halves(x: &Tensor) -> Result<(Tensor, Tensor)> {
    // d a = 2 ga on the first half, d b = 3 gb on the second; an unreached half gets zeros.
    fn vjp((ga, gb): (Option<&Tensor>, Option<&Tensor>), x: &Tensor) -> Result<Option<Tensor>> {
        note(vec![ga.is_some(), gb.is_some()]);
        let mut dx = Vec::with_capacity(x.size());
        match ga {
            Some(g) => dx.extend(vals(g).iter().map(|g| 2.0 * g)),
            None => dx.resize(x.size() / 2, 0.0),
        }
        match gb {
            Some(g) => dx.extend(vals(g).iter().map(|g| 3.0 * g)),
            None => dx.resize(x.size(), 0.0),
        }
        Ok(Some(x.f32_like(dx)?))
    }
    let v = vals(x);
    let h = v.len() / 2;
    let a = v[..h].iter().map(|x| 2.0 * x).collect::<Vec<_>>();
    let b = v[h..].iter().map(|x| 3.0 * x).collect::<Vec<_>>();
    Ok((t(&a, &[h]), t(&b, &[v.len() - h])))
}

/// The maximum of each row of `width` values and its index: values Float32, indices Int32 (not
/// differentiable, so its cotangent is always `None`). The VJP reads the indices from `output`.
#[differentiable]
fn max_with_index(x: &Tensor, width: usize) -> Result<(Tensor, Tensor)> {
    // d max = g at the argmax of each row, zero elsewhere
    fn vjp(
        g: (Option<&Tensor>, Option<&Tensor>),
        x: &Tensor,
        width: usize,
        output: (&Tensor, &Tensor),
    ) -> Result<Option<Tensor>> {
        note(vec![g.0.is_some(), g.1.is_some()]);
        assert!(g.1.is_none(), "an Int32 output has no cotangent");
        let mut dx = vec![0.0f32; x.size()];
        if let Some(g) = g.0 {
            let indices = output.1.values::<i32>()?;
            for (row, (g, i)) in vals(g).into_iter().zip(indices).enumerate() {
                dx[row * width + usize::try_from(i).expect("an index")] = g;
            }
        }
        Ok(Some(x.f32_like(dx)?))
    }
    let v = vals(x);
    let (mut values, mut indices) = (Vec::new(), Vec::new());
    for row in v.chunks(width) {
        let (i, m) = row
            .iter()
            .enumerate()
            .max_by(|p, q| p.1.total_cmp(q.1))
            .expect("a non-empty row");
        values.push(*m);
        indices.push(i32::try_from(i).expect("a small index"));
    }
    let rows = values.len();
    Ok((
        t(&values, &[rows]),
        Tensor::from_vec(indices, autograd_core::shape![rows])?,
    ))
}

/// `(sin x, cos x)`, infallible, with the outputs read back by value in the VJP (`d sin = cos`,
/// `d cos = -sin`).
#[differentiable]
fn sin_cos(x: &Tensor) -> (Tensor, Tensor) {
    fn vjp(
        g: (Option<&Tensor>, Option<&Tensor>),
        output: (Tensor, Tensor),
    ) -> Result<Option<Tensor>> {
        let (sin, cos) = output;
        let mut dx = vec![0.0f32; sin.size()];
        if let Some(g) = g.0 {
            for (d, (g, c)) in dx.iter_mut().zip(vals(g).into_iter().zip(vals(&cos))) {
                *d += g * c;
            }
        }
        if let Some(g) = g.1 {
            for (d, (g, s)) in dx.iter_mut().zip(vals(g).into_iter().zip(vals(&sin))) {
                *d -= g * s;
            }
        }
        Ok(Some(sin.f32_like(dx)?))
    }
    (
        map(x, f32::sin).expect("Float32"),
        map(x, f32::cos).expect("Float32"),
    )
}

/// `(a * b, a + b)`: two inputs, two outputs, the wanted-gradient mask and a residual.
#[differentiable]
fn products(a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
    #[residual]
    let ab = zip(a, b, |a, b| a * b)?;
    // d(ab) = gp b da + gp a db; d(a + b) = gs da + gs db
    fn vjp(
        (gp, gs): (Option<&Tensor>, Option<&Tensor>),
        a: &Tensor,
        b: &Tensor,
        needs: &NeedsGrad,
        ab: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        note(vec![needs.input(0), needs.input(1)]);
        assert_eq!(ab.size(), a.size());
        let one = |x: &Tensor, other: &Tensor| -> Result<Tensor> {
            let mut d = vec![0.0f32; x.size()];
            if let Some(g) = gp {
                for (d, p) in d.iter_mut().zip(vals(&zip(g, other, |g, o| g * o)?)) {
                    *d += p;
                }
            }
            if let Some(g) = gs {
                for (d, s) in d.iter_mut().zip(vals(g)) {
                    *d += s;
                }
            }
            x.f32_like(d)
        };
        let da = needs.input(0).then(|| one(a, b)).transpose()?;
        let db = needs.input(1).then(|| one(b, a)).transpose()?;
        Ok((da, db))
    }
    Ok((ab.detach(), zip(a, b, |a, b| a + b)?))
}

/// The input handed back as both results, plus a third result: each gets a handle of its own.
#[differentiable]
fn echo3(x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    fn vjp(
        g: (Option<&Tensor>, Option<&Tensor>, Option<&Tensor>),
        x: &Tensor,
    ) -> Result<Option<Tensor>> {
        let mut dx = vec![0.0f32; x.size()];
        for g in [g.0, g.1, g.2].into_iter().flatten() {
            for (d, g) in dx.iter_mut().zip(vals(g)) {
                *d += g;
            }
        }
        Ok(Some(x.f32_like(dx)?))
    }
    Ok((x.clone(), x.clone(), map(x, |v| v)?))
}

/// `(sum(xs) + bias, factor * sum(xs))`: several outputs with a slice, an optional input and a
/// generic captured value (run-time saved positions, a generic node).
#[differentiable]
fn sums<F>(xs: &[Tensor], bias: Option<&Tensor>, factor: F) -> Result<(Tensor, Tensor)>
where
    F: Into<f32> + Copy + Send + Sync + 'static,
{
    // d(sum + bias) = g0 per x and for bias; d(f sum) = f g1 per x
    fn vjp(
        (g0, g1): (Option<&Tensor>, Option<&Tensor>),
        xs: &[Tensor],
        bias: Option<&Tensor>,
        factor: F,
    ) -> Result<(Vec<Option<Tensor>>, Option<Tensor>)> {
        let n = xs.first().map_or(0, Tensor::size);
        let mut d = vec![0.0f32; n];
        if let Some(g) = g0 {
            for (d, g) in d.iter_mut().zip(vals(g)) {
                *d += g;
            }
        }
        if let Some(g) = g1 {
            for (d, g) in d.iter_mut().zip(vals(g)) {
                *d += factor.into() * g;
            }
        }
        let dx = xs.iter().map(|x| x.f32_like(d.clone()).map(Some));
        let db = match (bias, g0) {
            (Some(b), Some(g)) => Some(b.f32_like(vals(g))?),
            (Some(b), None) => Some(b.f32_like(vec![0.0; b.size()])?),
            (None, _) => None,
        };
        Ok((dx.collect::<Result<_>>()?, db))
    }
    let mut total = xs[0].f32_like(vec![0.0; xs[0].size()])?;
    for x in xs {
        total = zip(&total, x, |a, b| a + b)?;
    }
    let first = match bias {
        Some(b) => zip(&total, b, |a, b| a + b)?,
        None => total.detach(),
    };
    let c = factor.into();
    Ok((first, map(&total, |v| c * v)?))
}

fn x4() -> Tensor {
    t(&[1.0, 2.0, 3.0, 4.0], &[4])
}

#[test]
fn each_output_reached_alone_gets_its_cotangent_and_none_for_the_other() {
    let x = x4();
    let (a, b) = split_halves(&x).unwrap();
    calls();
    sum(&a).unwrap().backward().unwrap();
    drop(a);
    assert_eq!(grad_vals(&x).unwrap(), [2.0, 2.0, 0.0, 0.0]);
    assert_eq!(calls(), [vec![true, false]]);

    // that traversal released the node; a new call, whose first result is dropped at once
    // (the second still holds the node)
    x.set_grad(None).unwrap();
    drop(b);
    let (_, b) = split_halves(&x).unwrap();
    sum(&b).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [0.0, 0.0, 3.0, 3.0]);
    assert_eq!(calls(), [vec![false, true]]);
}

#[test]
fn both_outputs_reached_run_the_vjp_once_with_both_cotangents() {
    let x = x4();
    let (a, b) = split_halves(&x).unwrap();
    calls();
    add(&sum(&a).unwrap(), &sum(&b).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [2.0, 2.0, 3.0, 3.0]);
    assert_eq!(calls(), [vec![true, true]]);
}

#[test]
fn a_traversal_reaching_neither_output_never_runs_the_vjp() {
    let x = x4();
    let (_a, _b) = split_halves(&x).unwrap();
    let other = t(&[1.0], &[1]);
    calls();
    let g = grad(
        &sum(&other).unwrap(),
        &[&x, &other],
        &Tensor::scalar(1.0),
        GradOptions::default(),
    )
    .unwrap();
    assert!(g[0].is_none() && g[1].is_some());
    assert!(calls().is_empty());
}

#[test]
fn called_directly_with_no_cotangent_the_node_returns_no_gradient_without_the_vjp() {
    let (a, _b) = split_halves(&x4()).unwrap();
    calls();
    let grads = a
        .autograd_ctx()
        .unwrap()
        .backward_outputs(&[None, None], &[true])
        .unwrap();
    assert_eq!(grads.len(), 1);
    assert!(grads[0].is_none());
    assert!(calls().is_empty());
}

#[test]
fn every_differentiable_output_has_the_one_node() {
    let x = x4();
    let (a, b) = split_halves(&x).unwrap();
    let (na, nb) = (a.autograd_ctx().unwrap(), b.autograd_ctx().unwrap());
    assert!(Arc::ptr_eq(&na, &nb));
    assert_eq!(na.name(), "split_halves");
    assert_eq!(na.outputs(), 2);
    assert_eq!(na.inputs().len(), 1);
    assert!(na.inputs()[0].same_tensor(&x));
    assert_eq!(na.input_name(0), Some("x"));
}

#[test]
fn an_input_handed_back_as_several_outputs_gives_each_a_handle_of_its_own() {
    let x = x4();
    let (a, b, c) = echo3(&x).unwrap();
    assert!(x.autograd_ctx().is_none(), "the input keeps no node");
    assert!(!a.same_tensor(&x) && !b.same_tensor(&x) && !a.same_tensor(&b));
    let n = a.autograd_ctx().unwrap();
    assert!(Arc::ptr_eq(&n, &b.autograd_ctx().unwrap()));
    assert!(Arc::ptr_eq(&n, &c.autograd_ctx().unwrap()));
    assert_eq!(n.outputs(), 3);
    let y = add(
        &add(&sum(&a).unwrap(), &sum(&c).unwrap()).unwrap(),
        &sum(&b).unwrap(),
    )
    .unwrap();
    y.backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [3.0; 4]);
}

#[test]
fn an_int32_second_output_has_no_node_and_no_cotangent() {
    let x = t(&[1.0, 5.0, 2.0, 7.0, 3.0, 0.0], &[6]);
    let (values, indices) = max_with_index(&x, 3).unwrap();
    assert_eq!(vals(&values), [5.0, 7.0]);
    assert_eq!(indices.dtype(), &DType::Int32);
    assert_eq!(indices.values::<i32>().unwrap(), [1, 0]);
    assert!(
        indices.autograd_ctx().is_none(),
        "an Int32 result gets no node"
    );
    let node = values.autograd_ctx().unwrap();
    assert_eq!(node.outputs(), 2);
    // the node keeps detached copies of its outputs for the VJP: never its own results
    assert_eq!(node.context().len(), 2);
    assert!(node.context().iter().all(|c| c.autograd_ctx().is_none()));
    assert!(!node.context()[0].same_tensor(&values));
    calls();
    sum(&values).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(calls(), [vec![true, false]]);
}

#[test]
fn the_second_output_as_the_root_of_a_traversal() {
    let x = x4();
    let (_a, b) = split_halves(&x).unwrap();
    calls();
    b.backward_with(Some(&t(&[1.0, -1.0], &[2])), false)
        .unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [0.0, 0.0, 3.0, -3.0]);
    assert_eq!(calls(), [vec![false, true]]);
}

#[test]
fn functional_grad_through_the_second_output() {
    let x = x4();
    let (_a, b) = split_halves(&x).unwrap();
    calls();
    let g = grad(
        &sum(&b).unwrap(),
        &[&x],
        &Tensor::scalar(1.0),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [0.0, 0.0, 3.0, 3.0]);
    assert!(
        x.grad().unwrap().is_none(),
        "functional grad leaves .grad alone"
    );
    assert_eq!(calls(), [vec![false, true]]);
}

#[test]
fn functions_of_both_outputs_pass_gradcheck() {
    let w = t(&[0.5, -1.0], &[2]);
    gradcheck(
        |xs| {
            let (a, b) = split_halves(&xs[0])?;
            add(&sum(&autograd_ops::mul(&a, &w)?)?, &sum(&b)?)
        },
        &[x4()],
        GradcheckOptions::default(),
    )
    .unwrap();
    let v = t(&[0.3, -1.2, 2.0], &[3]);
    gradcheck(
        |xs| {
            let (s, c) = sin_cos(&xs[0])?;
            add(&sum(&autograd_ops::mul(&s, &v)?)?, &sum(&c)?)
        },
        &[t(&[0.1, 0.7, -2.0], &[3])],
        GradcheckOptions::default(),
    )
    .unwrap();
    gradcheck(
        |xs| {
            let (p, s) = products(&xs[0], &xs[1])?;
            add(&sum(&autograd_ops::mul(&p, &s)?)?, &sum(&s)?)
        },
        &[t(&[1.0, -2.0], &[2]), t(&[0.5, 3.0], &[2])],
        GradcheckOptions::default(),
    )
    .unwrap();
    gradcheck(
        |xs| sum(&max_with_index(&xs[0], 2)?.0),
        &[t(&[1.0, 5.0, 2.0, -7.0], &[4])],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn slices_optional_inputs_and_generics_with_several_outputs() {
    let xs = [t(&[1.0, 2.0], &[2]), t(&[3.0, -1.0], &[2])];
    let bias = t(&[0.5, 0.5], &[2]);
    let (first, second) = sums(&xs, Some(&bias), 2.0f32).unwrap();
    assert_eq!(vals(&first), [4.5, 1.5]);
    assert_eq!(vals(&second), [8.0, 2.0]);
    let node = second.autograd_ctx().unwrap();
    assert_eq!(node.inputs().len(), 3);
    assert_eq!(node.input_name(2), Some("bias"));
    sum(&second).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&xs[1]).unwrap(), [2.0, 2.0]);
    assert_eq!(grad_vals(&bias).unwrap(), [0.0, 0.0]);
    gradcheck(
        |v| {
            let (a, b) = sums(&v[..2], Some(&v[2]), 3.0f32)?;
            add(&sum(&autograd_ops::mul(&a, &a)?)?, &sum(&b)?)
        },
        &[t(&[1.0, 2.0], &[2]), t(&[3.0, -1.0], &[2]), bias.detach()],
        GradcheckOptions::default(),
    )
    .unwrap();
    gradcheck(
        |v| {
            let (a, b) = sums(v, None, 0.5f32)?;
            add(&sum(&autograd_ops::mul(&a, &b)?)?, &sum(&b)?)
        },
        &[t(&[1.0, 2.0], &[2]), t(&[3.0, -1.0], &[2])],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn the_wanted_mask_with_several_outputs() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let (p, s) = products(&a, &b).unwrap();
    calls();
    // functional grad asking for `a` only: `b`'s gradient is not wanted
    let y = add(&sum(&p).unwrap(), &sum(&s).unwrap()).unwrap();
    let g = grad(
        &y,
        &[&a],
        &Tensor::scalar(1.0),
        GradOptions {
            retain_graph: true,
            ..GradOptions::default()
        },
    )
    .unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [4.0, 5.0]);
    assert_eq!(calls(), [vec![true, false]]);

    // the engine's mask given directly: an unwanted gradient is dropped
    let node = p.autograd_ctx().unwrap();
    let one = t(&[1.0, 1.0], &[2]);
    let grads = node
        .backward_outputs(&[None, Some(one.clone())], &[false, true])
        .unwrap();
    assert_eq!(calls(), [vec![false, true]]);
    assert!(grads[0].is_none());
    assert_eq!(vals(grads[1].as_ref().unwrap()), [1.0, 1.0]);
}

#[test]
fn backward_with_one_cotangent_is_refused() {
    let (a, _b) = split_halves(&x4()).unwrap();
    let err = a
        .autograd_ctx()
        .unwrap()
        .backward(&t(&[1.0, 1.0], &[2]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("backward_outputs"), "{err}");
}

#[test]
fn direct_cotangents_are_checked_per_output() {
    let x = t(&[1.0, 5.0, 2.0, 7.0, 3.0, 0.0], &[6]);
    let (values, _indices) = max_with_index(&x, 3).unwrap();
    let node = values.autograd_ctx().unwrap();
    let two = t(&[1.0, 1.0], &[2]);

    let err = node
        .backward_outputs(&[Some(two.clone())], &[true])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().contains("2 results"), "{err}");

    let err = node
        .backward_outputs(&[Some(t(&[1.0; 3], &[3])), None], &[true])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(
        err.to_string().contains("result 0 of max_with_index"),
        "{err}"
    );

    let err = node
        .backward_outputs(&[None, Some(two.clone())], &[true])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().contains("not differentiable"), "{err}");

    let grads = node.backward_outputs(&[Some(two), None], &[true]).unwrap();
    assert_eq!(
        vals(grads[0].as_ref().unwrap()),
        [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    );
}

#[test]
fn an_output_changed_in_place_before_backward_is_refused() {
    let x = t(&[0.1, 0.2], &[2]);
    let (s, c) = sin_cos(&x).unwrap();
    c.set(&[0], 0.0f32).unwrap();
    let err = sum(&s).unwrap().backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("`output.1`"), "{err}");
    assert!(x.grad().unwrap().is_none(), "nothing was committed");
}

#[test]
fn nothing_is_recorded_without_graph_construction() {
    let x = x4();
    let _guard = no_grad();
    let (a, b) = split_halves(&x).unwrap();
    assert!(a.autograd_ctx().is_none() && b.autograd_ctx().is_none());
}

//! Batched functional `grad` through batched VJPs (`#[differentiable(batched)]`): the K
//! cotangents run through the graph at once when every node reached has a batched VJP, and
//! one by one otherwise; either way the stacked gradients, their layouts, the graph release
//! and the errors are those of K separate calls.

use autograd_core::{
    batch, differentiable, grad, shape, ErrorKind, GradOptions, Result, Rng, Tensor,
};
use autograd_ops::{exp, matmul, mul_scalar, squeeze, tanh, unsqueeze};
use autograd_tests::{kind, noise, t, vals};
use proptest::prelude::*;
use std::cell::Cell;

const BATCHED: GradOptions = GradOptions {
    batched: true,
    retain_graph: false,
};
const RETAIN: GradOptions = GradOptions {
    batched: false,
    retain_graph: true,
};

/// The K rows of `basis` one `grad` call at a time: the reference for a batched call.
fn one_by_one(y: &Tensor, x: &Tensor, basis: &[Vec<f32>]) -> Vec<f32> {
    let mut out = Vec::new();
    for row in basis {
        let g = grad(y, &[x], &t(row, &y.dims()), RETAIN).unwrap();
        out.extend(vals(g[0].as_ref().unwrap()));
    }
    out
}

fn rows(k: usize, n: usize, seed: u64) -> Vec<Vec<f32>> {
    let v = noise(k * n, seed);
    v.chunks(n).map(<[f32]>::to_vec).collect()
}

fn stacked(rows: &[Vec<f32>]) -> Tensor {
    let n = rows[0].len();
    t(&rows.concat(), &[rows.len(), n])
}

thread_local! {
    /// How the probe's VJP was called on this thread (traversals run on the caller's thread).
    static BATCHED_RUNS: Cell<usize> = const { Cell::new(0) };
    static SINGLE_RUNS: Cell<usize> = const { Cell::new(0) };
}

fn count(c: &'static std::thread::LocalKey<Cell<usize>>) -> usize {
    c.with(Cell::get)
}

#[differentiable(batched)]
fn probe(a: &Tensor) -> Result<Tensor> {
    // the identity, counting how its VJP is called
    #[allow(clippy::unnecessary_wraps)]
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        match batch::extent(g, a.layout().rank()) {
            Some(_) => BATCHED_RUNS.with(|c| c.set(c.get() + 1)),
            None => SINGLE_RUNS.with(|c| c.set(c.get() + 1)),
        }
        Ok(Some(g.clone()))
    }
    Ok(a.detach())
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}

#[test]
fn a_batched_jacobian_of_tanh_of_a_matrix_vector_product_runs_the_graph_once() {
    let mut rng = Rng::new(3);
    let w = Tensor::randn(shape![5, 4], &mut rng).unwrap();
    let x = Tensor::randn(shape![4], &mut rng).unwrap();
    let y = mul_scalar(
        &tanh(&matmul(&w, &probe(&x).unwrap()).unwrap()).unwrap(),
        2.0,
    )
    .unwrap();
    let basis = rows(7, 5, 11);
    let (want_x, want_w) = (one_by_one(&y, &x, &basis), one_by_one(&y, &w, &basis));
    let (batched, single) = (count(&BATCHED_RUNS), count(&SINGLE_RUNS));
    let got = grad(&y, &[&x, &w], &stacked(&basis), BATCHED).unwrap();
    assert_eq!(
        count(&BATCHED_RUNS),
        batched + 1,
        "one batched run reached the probe"
    );
    assert_eq!(count(&SINGLE_RUNS), single, "and no single run did");
    let gx = got[0].as_ref().unwrap();
    assert_eq!(gx.dims(), [7, 4]);
    assert_eq!(*gx.layout(), x.layout().prepend_mode(7, 4).unwrap());
    close(&vals(gx), &want_x);
    let gw = got[1].as_ref().unwrap();
    assert_eq!(gw.dims(), [7, 5, 4]);
    close(&vals(gw), &want_w);
    // the graph was released once, after all K cotangents
    let again = grad(&y, &[&x], &stacked(&basis), BATCHED);
    assert_eq!(kind(again), ErrorKind::Runtime);
}

thread_local! {
    static PLAIN_RUNS: Cell<usize> = const { Cell::new(0) };
}

#[differentiable]
fn plain(a: &Tensor) -> Result<Tensor> {
    // the identity without a batched VJP, counting its VJP's runs
    #[allow(clippy::unnecessary_wraps)]
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        PLAIN_RUNS.with(|c| c.set(c.get() + 1));
        Ok(Some(g.clone()))
    }
    Ok(a.detach())
}

#[test]
fn an_op_without_a_batched_vjp_runs_its_vjp_once_per_cotangent_inside_a_batched_traversal() {
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    let scaled = mul_scalar(&plain(&probe(&x).unwrap()).unwrap(), 0.5).unwrap();
    let y = tanh(&exp(&autograd_ops::broadcast_to(&scaled, &[2, 3]).unwrap()).unwrap()).unwrap();
    let basis = rows(4, 6, 5);
    let want = one_by_one(&y, &x, &basis);
    let (batched, single, plain_runs) = (
        count(&BATCHED_RUNS),
        count(&SINGLE_RUNS),
        count(&PLAIN_RUNS),
    );
    let cot = t(&basis.concat(), &[4, 2, 3]);
    let got = grad(&y, &[&x], &cot, BATCHED).unwrap();
    assert_eq!(
        count(&BATCHED_RUNS),
        batched + 1,
        "the probe below `plain` ran batched"
    );
    assert_eq!(count(&SINGLE_RUNS), single);
    assert_eq!(
        count(&PLAIN_RUNS),
        plain_runs + 4,
        "`plain` ran once per cotangent"
    );
    close(&vals(got[0].as_ref().unwrap()), &want);
}

#[test]
fn a_vjp_run_per_cotangent_that_skips_some_indices_gives_zeros_there() {
    let x = t(&[1.0, 2.0], &[2]);
    // a custom VJP: 3 g, but no gradient at all for a cotangent whose first entry is zero
    let y = autograd_core::custom_gradient(mul_scalar(&x, 3.0).unwrap().detach(), &[&x], |g| {
        if g.values::<f32>()?[0] == 0.0 {
            return Ok(vec![None]);
        }
        Ok(vec![Some(mul_scalar(g, 3.0)?)])
    })
    .unwrap();
    let cot = t(&[1.0, 2.0, 0.0, 5.0, -1.0, 0.5], &[3, 2]);
    let got = grad(&y, &[&x], &cot, RETAIN_BATCHED).unwrap();
    assert_eq!(
        vals(got[0].as_ref().unwrap()),
        [3.0, 6.0, 0.0, 0.0, -3.0, 1.5]
    );
    // and none at all when no index has one
    let none = t(&[0.0, 1.0, 0.0, 2.0], &[2, 2]);
    assert!(grad(&y, &[&x], &none, BATCHED).unwrap()[0].is_none());
}

#[test]
fn views_pass_batched_cotangents_through_with_the_batch_mode_first() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = squeeze(&unsqueeze(&mul_scalar(&x, 3.0).unwrap(), 1).unwrap(), 1).unwrap();
    let basis = rows(3, 6, 9);
    let cot = t(&basis.concat(), &[3, 2, 3]);
    let got = grad(&y, &[&x], &cot, BATCHED).unwrap();
    let g = got[0].as_ref().unwrap();
    assert_eq!(g.dims(), [3, 2, 3]);
    let want: Vec<f32> = basis.concat().iter().map(|v| 3.0 * v).collect();
    assert_eq!(vals(g), want);
}

#[differentiable]
fn bad_batch(a: &Tensor) -> Result<Tensor> {
    // a batched VJP that drops the batch mode: the engine refuses its gradient
    #[allow(clippy::unnecessary_wraps)]
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let k = batch::extent(g, a.layout().rank());
        match k {
            Some(_) => Ok(Some(a.f32_like(vec![1.0; a.size()])?)),
            None => Ok(Some(g.clone())),
        }
    }
    Ok(a.detach())
}

#[differentiable(batched)]
fn bad_batched(a: &Tensor) -> Result<Tensor> {
    // declares a batched VJP but returns one gradient for all K cotangents
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        match batch::extent(g, a.layout().rank()) {
            Some(_) => Ok(Some(a.f32_like(vec![1.0; a.size()])?)),
            None => Ok(Some(g.clone())),
        }
    }
    Ok(a.detach())
}

#[test]
fn a_batched_vjp_that_drops_the_batch_mode_is_refused_and_releases_nothing() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = bad_batched(&x).unwrap();
    let cot = t(&[1.0, 0.0, 0.0, 1.0], &[2, 2]);
    let err = grad(&y, &[&x], &cot, BATCHED).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().contains("batched gradient"), "{err}");
    // nothing was released: a retained single call still runs
    let g = grad(&y, &[&x], &t(&[1.0, 1.0], &[2]), RETAIN).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [1.0, 1.0]);
    // an op without `batched` is never handed batched cotangents
    let z = bad_batch(&x).unwrap();
    let node = z.autograd_ctx().unwrap();
    assert!(node.backward_batched(&cot, &[true]).is_none());
    let g = grad(&z, &[&x], &cot, BATCHED).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [1.0, 0.0, 0.0, 1.0]);
}

#[test]
fn a_batched_vjp_called_directly_checks_the_batched_cotangent_shape() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = tanh(&x).unwrap();
    let node = y.autograd_ctx().unwrap();
    let wrong = t(&[1.0; 8], &[2, 4]);
    let r = node.backward_batched(&wrong, &[true]).unwrap();
    assert_eq!(kind(r), ErrorKind::Value);
    // and the plain VJP still refuses a batched cotangent
    let batched = t(&[1.0; 6], &[2, 3]);
    assert_eq!(kind(node.backward(&batched)), ErrorKind::Value);
    let ok = node.backward_batched(&batched, &[true]).unwrap().unwrap();
    let g = ok[0].as_ref().unwrap();
    assert_eq!(g.dims(), [2, 3]);
    let y2: Vec<f32> = vals(&y).iter().map(|v| 1.0 - v * v).collect();
    close(&vals(g), &[y2.clone(), y2].concat());
}

/// One step of a random chain over a value of shape `[r, c]`.
#[derive(Debug, Clone, Copy)]
enum Step {
    Tanh,
    Scale(f32),
    Shift(f32),
    /// `unsqueeze(·, 0)` then `squeeze(·, 0)`: two views.
    Views,
    /// `w · value` with a fresh `[r, r]` leaf `w` (requested too).
    Left(u64),
    /// `exp` (batched like every unary op).
    Exp,
    Sigmoid,
    /// `value * w` elementwise with a fresh `[r, c]` leaf `w` (requested too).
    MulLeaf(u64),
    /// `value + bias` with a fresh `[c]` leaf broadcast over the rows (`broadcast_to`'s batched
    /// VJP sums each batch index on its own).
    AddRow(u64),
    /// An op without a batched VJP: the engine runs it once per cotangent inside the batched
    /// traversal.
    Plain,
    /// `linear(value, w, bias)` with fresh `[c, c]` and `[c]` leaves (requested too).
    Linear(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Tanh),
        (-2.0f32..2.0).prop_map(Step::Scale),
        (-1.0f32..1.0).prop_map(Step::Shift),
        Just(Step::Views),
        (0u64..1000).prop_map(Step::Left),
        Just(Step::Exp),
        Just(Step::Sigmoid),
        (0u64..1000).prop_map(Step::MulLeaf),
        (0u64..1000).prop_map(Step::AddRow),
        (0u64..1000).prop_map(Step::Linear),
        Just(Step::Plain),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Batched `grad` through a random chain equals one `grad` per cotangent, for a leaf laid
    /// out column-major at an offset and for every leaf the chain combines it with, and runs
    /// the graph once, also through an op without a batched VJP.
    #[test]
    fn batched_grad_through_random_chains_matches_one_call_per_cotangent(
        r in 1usize..4,
        c in 1usize..4,
        k in 1usize..5,
        steps in prop::collection::vec(step(), 1..6),
        seed in 0u64..1000,
    ) {
        let x = autograd_tests::strided(&noise(r * c, seed), &[r, c]);
        let mut value = probe(&x).unwrap();
        let mut leaves = vec![x.clone()];
        for s in &steps {
            value = match *s {
                Step::Tanh => tanh(&value).unwrap(),
                Step::Scale(a) => mul_scalar(&value, a).unwrap(),
                Step::Shift(a) => autograd_ops::add_scalar(&value, a).unwrap(),
                Step::Views => squeeze(&unsqueeze(&value, 0).unwrap(), 0).unwrap(),
                Step::Left(s) => {
                    let w = t(&noise(r * r, s), &[r, r]);
                    leaves.push(w.clone());
                    matmul(&w, &value).unwrap()
                }
                Step::Exp => exp(&value).unwrap(),
                Step::Sigmoid => autograd_ops::sigmoid(&value).unwrap(),
                Step::MulLeaf(s) => {
                    let w = t(&noise(r * c, s), &[r, c]);
                    leaves.push(w.clone());
                    autograd_ops::mul(&value, &w).unwrap()
                }
                Step::Plain => plain(&value).unwrap(),
                Step::Linear(s) => {
                    let w = t(&noise(c * c, s), &[c, c]);
                    let b = t(&noise(c, s + 7), &[c]);
                    leaves.push(w.clone());
                    leaves.push(b.clone());
                    autograd_ops::linear(&value, &w, Some(&b)).unwrap()
                }
                Step::AddRow(s) => {
                    let b = t(&noise(c, s), &[c]);
                    leaves.push(b.clone());
                    autograd_ops::add(&value, &b).unwrap()
                }
            };
        }
        let basis = rows(k, r * c, seed + 1);
        // cotangents in the output's own layout (a chain of views keeps the leaf's), the batch
        // mode first, as the spec requires
        let l = value.layout();
        let batched = std::sync::Arc::new(l.prepend_mode(k, l.cosize()).unwrap());
        let cot = value.f32_with_layout(basis.concat(), batched).unwrap();
        let wanted: Vec<&Tensor> = leaves.iter().collect();
        let (batched, single) = (count(&BATCHED_RUNS), count(&SINGLE_RUNS));
        let got = grad(&value, &wanted, &cot, RETAIN_BATCHED).unwrap();
        // all at once, also through exp (which runs its own VJP once per cotangent)
        prop_assert_eq!((count(&BATCHED_RUNS) - batched, count(&SINGLE_RUNS) - single), (1, 0));
        for (leaf, g) in leaves.iter().zip(&got) {
            let mut want = Vec::new();
            for row in &basis {
                let one = grad(&value, &[leaf], &value.f32_like(row.clone()).unwrap(), RETAIN).unwrap();
                want.extend(vals(one[0].as_ref().unwrap()));
            }
            let g = g.as_ref().unwrap();
            prop_assert_eq!(
                g.layout().clone(),
                leaf.layout().prepend_mode(k, leaf.layout().cosize()).unwrap()
            );
            let got = vals(g);
            for (a, b) in got.iter().zip(&want) {
                // a chain of exps may overflow: equal infinities (or both NaN) agree
                let same = a == b || (a.is_nan() && b.is_nan());
                prop_assert!(same || (a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{} vs {}", a, b);
            }
        }
    }
}

const RETAIN_BATCHED: GradOptions = GradOptions {
    batched: true,
    retain_graph: true,
};

#[test]
fn linear_has_a_batched_vjp_that_agrees_with_its_vjp_per_cotangent() {
    let x = t(&noise(6, 1), &[2, 3]);
    let w = t(&noise(12, 2), &[4, 3]);
    let b = t(&noise(4, 3), &[4]);
    let y = autograd_ops::linear(&x, &w, Some(&b)).unwrap();
    let node = y.autograd_ctx().unwrap();
    let cots = rows(3, 8, 4);
    let batched = node
        .backward_batched(&t(&cots.concat(), &[3, 2, 4]), &[true, true, true])
        .expect("linear is batched")
        .unwrap();
    let dims = [vec![3, 2, 3], vec![3, 4, 3], vec![3, 4]];
    for (j, g) in batched.iter().enumerate() {
        let g = g.as_ref().unwrap();
        assert_eq!(g.dims(), dims[j]);
        let want: Vec<f32> = cots
            .iter()
            .flat_map(|c| vals(node.backward(&t(c, &[2, 4])).unwrap()[j].as_ref().unwrap()))
            .collect();
        close(&vals(g), &want);
    }
}

#[test]
fn broadcast_to_sums_each_batch_index_over_new_and_stretched_modes() {
    // [2, 1] -> [3, 2, 4]: a new leading mode and a stretched trailing one
    let x = t(&[0.25, -0.5], &[2, 1]);
    let y = tanh(&autograd_ops::broadcast_to(&probe(&x).unwrap(), &[3, 2, 4]).unwrap()).unwrap();
    let basis = rows(5, 24, 8);
    let want = one_by_one(&y, &x, &basis);
    let batched = count(&BATCHED_RUNS);
    let got = grad(&y, &[&x], &t(&basis.concat(), &[5, 3, 2, 4]), BATCHED).unwrap();
    assert_eq!(count(&BATCHED_RUNS), batched + 1);
    let g = got[0].as_ref().unwrap();
    assert_eq!(g.dims(), [5, 2, 1]);
    close(&vals(g), &want);
}

//! Nodes with several results (issue 10's engine side): one node per call, every
//! differentiable result's `autograd_ctx` is that node, and its VJP receives one cotangent per
//! result, `None` for results the traversal did not reach.

use std::sync::{Arc, Mutex};

use autograd_core::{
    grad, gradcheck, ErrorKind, GradOptions, GradcheckOptions, Operation, Recording, Result,
    SavedState, Tensor,
};
use autograd_ops::{add, sum};
use autograd_tests::{grad_vals, t, vals};

/// `(2 x[..h], 3 x[h..])` and, optionally, an Int32 third result (the argmax of x).
struct Split {
    saved: SavedState,
    h: usize,
    n: usize,
    results: usize,
    seen: Arc<Mutex<Vec<Vec<bool>>>>,
}

impl Operation for Split {
    fn name(&self) -> &'static str {
        "split"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, _: &Tensor) -> Result<Vec<Option<Tensor>>> {
        autograd_core::bail!(Runtime, "split has several results")
    }
    fn outputs(&self) -> usize {
        self.results
    }
    fn backward_outputs(
        &self,
        gradients: &[Option<Tensor>],
        _needed: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        self.seen
            .lock()
            .unwrap()
            .push(gradients.iter().map(Option::is_some).collect());
        let mut dx = vec![0.0f32; self.n];
        if let Some(g) = &gradients[0] {
            for (d, v) in dx[..self.h].iter_mut().zip(vals(g)) {
                *d += 2.0 * v;
            }
        }
        if let Some(g) = &gradients[1] {
            for (d, v) in dx[self.h..].iter_mut().zip(vals(g)) {
                *d += 3.0 * v;
            }
        }
        assert!(
            gradients.get(2).is_none_or(Option::is_none),
            "no cotangent for Int32"
        );
        let x = self.saved.with("split", |s| s.input(0).clone())?;
        Ok(vec![Some(x.f32_like(dx)?)])
    }
}

type Seen = Arc<Mutex<Vec<Vec<bool>>>>;

fn split(x: &Tensor, with_index: bool, seen: &Seen) -> Result<Vec<Tensor>> {
    let v = vals(x);
    let h = v.len() / 2;
    let a = t(&v[..h].iter().map(|x| 2.0 * x).collect::<Vec<_>>(), &[h]);
    let b = t(
        &v[h..].iter().map(|x| 3.0 * x).collect::<Vec<_>>(),
        &[v.len() - h],
    );
    let mut results = vec![a, b];
    if with_index {
        let arg = v
            .iter()
            .enumerate()
            .max_by(|p, q| p.1.total_cmp(q.1))
            .map_or(0, |(i, _)| i as i32);
        results.push(Tensor::from_vec(vec![arg], autograd_core::shape![1])?);
    }
    let Some(recording) = Recording::begin(&[x]) else {
        return Ok(results);
    };
    let (n, count, seen) = (v.len(), results.len(), seen.clone());
    recording.finish_several(results, Vec::new(), |saved| Split {
        saved,
        h,
        n,
        results: count,
        seen,
    })
}

fn setup(with_index: bool) -> (Tensor, Vec<Tensor>, Seen) {
    let seen = Seen::default();
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let r = split(&x, with_index, &seen).unwrap();
    (x, r, seen)
}

#[test]
fn every_differentiable_result_has_the_one_node() {
    let (_, r, _) = setup(true);
    let a = r[0].autograd_ctx().unwrap();
    let b = r[1].autograd_ctx().unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.id(), b.id());
    assert_eq!(a.outputs(), 3);
    assert!(
        r[2].autograd_ctx().is_none(),
        "an Int32 result records no node"
    );
    assert_eq!(a.inputs().len(), 1);
}

#[test]
fn each_result_reached_alone_gets_its_own_cotangent_only() {
    let (x, r, seen) = setup(false);
    sum(&r[0]).unwrap().backward_with(None, true).unwrap();
    assert_eq!(grad_vals(&x).unwrap(), vec![2.0, 2.0, 0.0, 0.0]);
    assert_eq!(seen.lock().unwrap().last().unwrap(), &vec![true, false]);
    x.set_grad(None).unwrap();
    sum(&r[1]).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), vec![0.0, 0.0, 3.0, 3.0]);
    assert_eq!(seen.lock().unwrap().last().unwrap(), &vec![false, true]);
}

#[test]
fn both_results_reached_run_the_node_once_with_both_cotangents() {
    let (x, r, seen) = setup(false);
    let y = add(&sum(&r[0]).unwrap(), &sum(&r[1]).unwrap()).unwrap();
    y.backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), vec![2.0, 2.0, 3.0, 3.0]);
    assert_eq!(seen.lock().unwrap().as_slice(), &[vec![true, true]]);
}

#[test]
fn a_traversal_reaching_neither_result_never_runs_the_node() {
    let (x, _r, seen) = setup(false);
    let other = t(&[1.0], &[1]);
    let y = sum(&other).unwrap();
    let g = grad(
        &y,
        &[&x, &other],
        &Tensor::scalar(1.0),
        GradOptions::default(),
    )
    .unwrap();
    assert!(g[0].is_none());
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn functional_grad_through_the_second_result() {
    let (x, r, _) = setup(false);
    let y = sum(&r[1]).unwrap();
    let g = grad(&y, &[&x], &Tensor::scalar(1.0), GradOptions::default()).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![0.0, 0.0, 3.0, 3.0]);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn releasing_through_one_result_releases_the_node_for_the_other() {
    let (_, r, _) = setup(false);
    sum(&r[0]).unwrap().backward().unwrap();
    let err = sum(&r[1]).unwrap().backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("retain_graph=True"), "{err}");
}

#[test]
fn a_retained_second_result_gets_its_gradient() {
    let (x, r, _) = setup(false);
    r[1].retain_grad(true).unwrap();
    sum(&r[1]).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&r[1]).unwrap(), vec![1.0, 1.0]);
    assert_eq!(grad_vals(&x).unwrap(), vec![0.0, 0.0, 3.0, 3.0]);
}

#[test]
fn several_results_pass_gradcheck() {
    let seen = Seen::default();
    let w = t(&[0.5, -1.0], &[2]);
    let f = |xs: &[Tensor]| {
        let r = split(&xs[0], false, &seen)?;
        add(&sum(&autograd_ops::mul(&r[0], &w)?)?, &sum(&r[1])?)
    };
    gradcheck(
        f,
        &[t(&[1.0, 2.0, 3.0, 4.0], &[4])],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn a_node_reporting_the_wrong_result_count_is_refused() {
    struct Liar(SavedState);
    impl Operation for Liar {
        fn name(&self) -> &'static str {
            "liar"
        }
        fn saved(&self) -> &SavedState {
            &self.0
        }
        fn backward(&self, _: &Tensor) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![None])
        }
    }
    let x = t(&[1.0], &[1]);
    let rec = Recording::begin(&[&x]).unwrap();
    let err = rec
        .finish_several(vec![t(&[1.0], &[1]), t(&[2.0], &[1])], Vec::new(), Liar)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
}

#[test]
fn a_long_chain_of_multi_result_nodes_drops_without_recursing() {
    let seen = Seen::default();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut y = t(&[1.0, 1.0], &[2]);
            for _ in 0..50_000 {
                let r = split(&add(&y, &y).unwrap(), false, &seen).unwrap();
                // keep the second result: its stand-in holds the node
                y = add(&r[1], &r[1]).unwrap();
                y = autograd_ops::broadcast_to(&y, &[2]).unwrap();
            }
            drop(y);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn backwards_traversal_from_a_node_with_several_results_is_refused_not_misrouted() {
    // the node alone cannot say which result a cotangent belongs to: the second result's
    // cotangent must not reach x through the first
    let (x, r, seen) = setup(false);
    let node = r[1].autograd_ctx();
    let g = t(&[1.0, 1.0], &[2]);
    let e = autograd_core::backwards_traversal(&g, node.as_ref(), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert!(e.to_string().contains("backward_with"), "{e}");
    assert_eq!(grad_vals(&x), None);
    assert!(seen.lock().unwrap().is_empty(), "the node never ran");
    // nothing was released: the result's own backward still works
    r[1].backward_with(Some(&g), false).unwrap();
    assert_eq!(grad_vals(&x).unwrap(), vec![0.0, 0.0, 3.0, 3.0]);
}

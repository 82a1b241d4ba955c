//! `unbind`: the slices along one mode as views recorded on one node with a result per slice.
//! Values and shared storage, gradients against `select` and central differences (strided
//! inputs, slices not reached), and bad input that changes nothing.

use autograd_core::ops::{add, mul, permute, reshape, select, sum, unbind};
use autograd_core::{
    grad, gradcheck, shape, ErrorKind, GradOptions, GradcheckOptions, Result, Tensor,
};
use autograd_tests::{grad_vals, kind, noise, strided, t, vals};

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// `Σ_i Σ c_i · slices[i]` over the slices `pick` keeps, with fixed weights `c_i`.
fn weighted(slices: &[Tensor], pick: &[usize]) -> Result<Tensor> {
    let mut total: Option<Tensor> = None;
    for &i in pick {
        let s = &slices[i];
        let c = t(&noise(s.size(), 10 + i as u64), &s.dims());
        let term = sum(&mul(s, &c)?)?;
        total = Some(match total {
            Some(acc) => add(&acc, &term)?,
            None => term,
        });
    }
    Ok(total.expect("at least one slice is picked"))
}

#[test]
fn unbind_returns_views_of_every_slice_on_one_node() {
    let x = t(&iota(24), &[2, 3, 4]);
    let parts = unbind(&x, 1).unwrap();
    assert_eq!(parts.len(), 3);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(p.dims(), vec![2, 4]);
        assert_eq!(vals(p), vals(&x.select(1, i).unwrap()));
        assert_eq!(p.carrier().unwrap().id(), x.carrier().unwrap().id());
        let node = p.autograd_ctx().expect("a node");
        assert_eq!(node.name(), "unbind");
        assert_eq!(node.outputs(), 3);
        assert!(node.inputs()[0].same_tensor(&x));
    }
    assert_eq!(
        parts[0].autograd_ctx().unwrap().saved().id(),
        parts[2].autograd_ctx().unwrap().saved().id()
    );
    // the method form is the same op
    assert_eq!(
        vals(&x.unbind(2).unwrap()[3]),
        vec![3.0, 7.0, 11.0, 15.0, 19.0, 23.0]
    );
}

#[test]
fn unbind_gradients_equal_those_through_select() {
    let dims = [3, 4, 5];
    for dim in 0..3 {
        for pick in [vec![0, 1, 2], vec![2], vec![0, 2]] {
            let pick: Vec<usize> = pick.into_iter().filter(|&i| i < dims[dim]).collect();
            let (a, b) = (t(&noise(60, 1), &dims), t(&noise(60, 1), &dims));
            weighted(&unbind(&a, dim).unwrap(), &pick)
                .unwrap()
                .backward()
                .unwrap();
            let slices: Vec<Tensor> = (0..dims[dim])
                .map(|i| select(&b, dim, i).unwrap())
                .collect();
            weighted(&slices, &pick).unwrap().backward().unwrap();
            assert_eq!(grad_vals(&a), grad_vals(&b), "dim {dim}, slices {pick:?}");
        }
    }
}

#[test]
fn an_unreached_slice_gets_zero_gradient() {
    let x = t(&iota(6), &[3, 2]);
    let parts = unbind(&x, 0).unwrap();
    sum(&parts[1]).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0]));
}

#[test]
fn unbind_passes_gradcheck_on_strided_inputs() {
    let dims = [3, 4, 2];
    let x = strided(&noise(24, 3), &dims);
    for (dim, &extent) in dims.iter().enumerate() {
        let all: Vec<usize> = (0..extent).collect();
        let report = gradcheck(
            |v| weighted(&unbind(&v[0], dim)?, &all),
            std::slice::from_ref(&x),
            GradcheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("dim {dim}: {e}"));
        assert_eq!(report.slots_checked, 24);
        let first = gradcheck(
            |v| weighted(&unbind(&v[0], dim)?, &[0]),
            std::slice::from_ref(&x),
            GradcheckOptions::default(),
        );
        assert!(first.is_ok(), "dim {dim}: {first:?}");
    }
}

/// The attention pattern: `[B, T, 3C]` viewed as `[B, T, 3, H, D]`, permuted to
/// `[3, B, H, T, D]` and unbound into q, k and v.
#[test]
fn unbinding_a_permuted_projection_matches_select() {
    let (b, tt, h, d) = (2, 3, 2, 2);
    let values = noise(b * tt * 3 * h * d, 5);
    let run = |split: &dyn Fn(&Tensor) -> Vec<Tensor>| {
        let x = t(&values, &[b, tt, 3 * h * d]);
        let qkv = permute(&reshape(&x, &[b, tt, 3, h, d]).unwrap(), &[2, 0, 3, 1, 4]).unwrap();
        let parts = split(&qkv);
        let qk = mul(&parts[0], &parts[1]).unwrap();
        let loss = sum(&mul(&qk, &parts[2]).unwrap()).unwrap();
        grad(&loss, &[&x], &t(&[1.0], &[1]), GradOptions::default())
            .unwrap()
            .remove(0)
            .map(|g| vals(&g))
    };
    let by_unbind = run(&|qkv| unbind(qkv, 0).unwrap());
    let by_select = run(&|qkv| (0..3).map(|i| select(qkv, 0, i).unwrap()).collect());
    assert!(by_unbind.is_some());
    assert_eq!(by_unbind, by_select);
}

#[test]
fn a_one_slice_unbind_backpropagates_through_its_single_result() {
    let x = t(&[1.0, 2.0, 3.0], &[1, 3]);
    let parts = unbind(&x, 0).unwrap();
    assert_eq!(parts.len(), 1);
    sum(&mul(&parts[0], &parts[0]).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 4.0, 6.0]));
}

#[test]
fn bad_unbind_input_is_an_error_that_changes_nothing() {
    let x = t(&iota(6), &[2, 3]);
    assert_eq!(kind(unbind(&x, 2)), ErrorKind::Value);
    assert!(x.autograd_ctx().is_none() && x.grad().unwrap().is_none());
    // an empty mode has no slices and records nothing
    let empty = t(&[], &[0, 3]);
    assert!(unbind(&empty, 0).unwrap().is_empty());
    // integer slices are not differentiable: no node
    let ints = Tensor::from_vec(vec![1i32, 2, 3, 4], shape![2, 2]).unwrap();
    assert!(unbind(&ints, 1)
        .unwrap()
        .iter()
        .all(|p| p.autograd_ctx().is_none()));
}

#[test]
fn a_several_result_unbind_node_refuses_a_single_cotangent() {
    let x = t(&iota(4), &[2, 2]);
    let parts = unbind(&x, 0).unwrap();
    let node = parts[0].autograd_ctx().unwrap();
    let g = t(&[1.0, 1.0], &[2]);
    assert_eq!(kind(node.backward(&g)), ErrorKind::Runtime);
    // a cotangent of the wrong shape for its result
    let bad = node.backward_outputs(&[Some(t(&[1.0; 3], &[3])), None], &[true]);
    assert_eq!(kind(bad), ErrorKind::Value);
    // a mutated input refuses the traversal
    let loss = sum(&parts[1]).unwrap();
    x.fill(0.0f32).unwrap();
    assert_eq!(kind(loss.backward()), ErrorKind::Runtime);
    assert!(x.grad().unwrap().is_none());
}

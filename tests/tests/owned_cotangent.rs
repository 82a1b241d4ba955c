//! A VJP that takes its cotangent by value (`fn vjp(g: Tensor, ..)`) gets the engine's own and
//! may compute its gradient in that storage (`kernel::map_owned`, `kernel::zip_owned`), but only
//! when nothing else reaches it: a user's cotangent, a retained `.grad`, a leaf's first
//! gradient, a clone, a view or a detached copy keep their values.

use std::cell::RefCell;

use autograd_core::kernel::{map_owned, zip_owned};
use autograd_core::{differentiable, gradcheck, CarrierId, GradcheckOptions, Result, Tensor};
use autograd_ops::{add, mul, mul_scalar, sum, tanh};
use autograd_tests::{grad_vals, t, vals};

fn carrier_id(x: &Tensor) -> CarrierId {
    x.carrier().unwrap().id()
}

thread_local! {
    /// The carriers each call of `triple`'s VJP received and returned.
    static SEEN: RefCell<Vec<(CarrierId, CarrierId)>> = const { RefCell::new(Vec::new()) };
}

/// `3 x`, its VJP taking the cotangent by value and reporting whether it computed in place.
#[differentiable]
fn triple(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: Tensor) -> Result<Option<Tensor>> {
        let received = carrier_id(&g);
        let out = map_owned(g, |v: f32| 3.0 * v)?;
        SEEN.with(|s| s.borrow_mut().push((received, carrier_id(&out))));
        Ok(Some(out))
    }
    map_owned(x.detach().f32_like(vals(x))?, |v: f32| 3.0 * v)
}

fn seen() -> Vec<(CarrierId, CarrierId)> {
    SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

#[test]
fn map_owned_writes_in_place_when_nothing_else_reaches_the_storage() {
    let a = t(&[1.0, -2.0, 3.0], &[3]);
    let id = carrier_id(&a);
    let version = a.carrier().unwrap().version();
    let r = map_owned(a, |v: f32| v * 10.0).unwrap();
    assert_eq!(carrier_id(&r), id, "the storage was reused");
    assert_eq!(vals(&r), [10.0, -20.0, 30.0]);
    // the unlocked write still counts as one mutation of the carrier
    assert_eq!(r.carrier().unwrap().version(), version + 1);
    let r = zip_owned(r, &t(&[1.0, 2.0, 3.0], &[3]), |v: f32, w: f32| v + w).unwrap();
    assert_eq!(carrier_id(&r), id);
    assert_eq!(vals(&r), [11.0, -18.0, 33.0]);
    assert_eq!(r.carrier().unwrap().version(), version + 2);
}

#[test]
fn map_owned_copies_what_a_clone_view_or_detached_copy_still_reaches() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let clone = a.clone();
    let r = map_owned(a, |v: f32| -v).unwrap();
    assert_ne!(carrier_id(&r), carrier_id(&clone));
    assert_eq!(vals(&clone), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(vals(&r), [-1.0, -2.0, -3.0, -4.0]);

    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let view = a.transpose(0, 1).unwrap();
    let r = map_owned(a, |v: f32| -v).unwrap();
    assert_eq!(vals(&view), [1.0, 3.0, 2.0, 4.0]);
    assert_eq!(vals(&r), [-1.0, -2.0, -3.0, -4.0]);

    let a = t(&[1.0, 2.0], &[2]);
    let detached = a.detach();
    let r = map_owned(a, |v: f32| v + 1.0).unwrap();
    assert_eq!(vals(&detached), [1.0, 2.0]);
    assert_eq!(vals(&r), [2.0, 3.0]);
}

/// A transposed (not row-major) tensor is mapped into fresh compact storage, in logical order.
#[test]
fn map_owned_of_a_transposed_tensor_is_compact_and_logical() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .transpose(0, 1)
        .unwrap()
        .detach();
    let r = map_owned(a, |v: f32| v * 2.0).unwrap();
    assert_eq!(r.dims(), [3, 2]);
    assert_eq!(vals(&r), [2.0, 8.0, 4.0, 10.0, 6.0, 12.0]);
}

#[test]
fn map_owned_of_the_wrong_dtype_is_the_same_error_as_map() {
    let ints = || Tensor::from_vec(vec![1i32, 2], autograd_core::shape![2]).unwrap();
    let like = autograd_core::kernel::map(&ints(), |v: f32| v).unwrap_err();
    // handed over alone (the in-place path refuses it) and beside a clone (it never tries)
    let err = map_owned(ints(), |v: f32| v).unwrap_err();
    assert_eq!(err.kind(), like.kind());
    let a = ints();
    let err = map_owned(a.clone(), |v: f32| v).unwrap_err();
    assert_eq!(err.kind(), like.kind());
    assert_eq!(a.values::<i32>().unwrap(), [1, 2]);
}

/// A tensor with a node or a `.grad` is not overwritten: the result is `map`'s, a fresh tensor
/// outside the graph, and the node still differentiates what it recorded.
#[test]
fn map_owned_leaves_a_tensor_in_a_graph_alone() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul_scalar(&x, 2.0).unwrap();
    let node = y.autograd_ctx().unwrap();
    let y_id = carrier_id(&y);
    let squared = map_owned(y, |v: f32| v * v).unwrap();
    assert!(squared.autograd_ctx().is_none());
    assert_ne!(carrier_id(&squared), y_id);
    assert_eq!(vals(&squared), [4.0, 16.0]);
    let gs = node.backward(&t(&[1.0, 1.0], &[2])).unwrap();
    assert_eq!(vals(gs[0].as_ref().unwrap()), [2.0, 2.0]);

    let leaf = t(&[3.0], &[1]);
    sum(&mul_scalar(&leaf, 5.0).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let r = map_owned(leaf, |v: f32| v + 1.0).unwrap();
    assert_eq!(grad_vals(&r), None, "the result carries no gradient");
    assert_eq!(vals(&r), [4.0]);
}

/// Records of a compound dtype are not elements a map can reach: refused as `map` refuses
/// them, storage untouched.
#[test]
fn map_owned_refuses_a_compound_dtype_as_map_does() {
    let pair = autograd_core::DType::compound([
        ("re", autograd_core::DType::Float32),
        ("im", autograd_core::DType::Float32),
    ])
    .unwrap();
    let storage = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let carrier = storage.carrier().unwrap().clone();
    let records = storage
        .with_layout_detached(autograd_core::Layout::row_major(&[2]).unwrap(), 0)
        .unwrap()
        .with_logical_dtype(pair)
        .unwrap();
    drop(storage);
    drop(carrier);
    let err = map_owned(records.clone(), |v: f32| v * 10.0).unwrap_err();
    assert_eq!(err.kind(), autograd_core::ErrorKind::NotImplemented);
    let err = map_owned(records, |v: f32| v * 10.0).unwrap_err();
    assert_eq!(err.kind(), autograd_core::ErrorKind::NotImplemented);
}

#[test]
fn zip_owned_reads_a_broadcast_operand_beside_the_one_it_overwrites() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let row = t(&[10.0, 20.0, 30.0], &[3]).broadcast_to(&[2, 3]).unwrap();
    let id = carrier_id(&a);
    let r = zip_owned(a, &row, |x: f32, y: f32| x * y).unwrap();
    assert_eq!(carrier_id(&r), id);
    assert_eq!(vals(&r), [10.0, 40.0, 90.0, 40.0, 100.0, 180.0]);

    // a strided operand, walked with stride 3
    let a = t(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], &[3, 2]);
    let strided = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .transpose(0, 1)
        .unwrap();
    let r = zip_owned(a, &strided, |x: f32, y: f32| x + y).unwrap();
    assert_eq!(vals(&r), [2.0, 5.0, 3.0, 6.0, 4.0, 7.0]);

    let a = t(&[1.0, 2.0], &[2]);
    let err = zip_owned(a, &t(&[1.0, 2.0, 3.0], &[3]), |x: f32, y: f32| x + y).unwrap_err();
    assert_eq!(err.kind(), autograd_core::ErrorKind::Value);
}

/// The engine hands each node its cotangent: the inner `triple` gets the outer one's fresh
/// gradient, which nothing else holds, and computes in it.
#[test]
fn a_chain_of_owning_vjps_reuses_one_gradient_buffer() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = triple(&triple(&x).unwrap()).unwrap();
    seen();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    let calls = seen();
    assert_eq!(calls.len(), 2);
    // the outer VJP's cotangent is the user's, so it wrote elsewhere; the inner one reused
    // what the outer one returned
    assert_ne!(calls[0].0, calls[0].1);
    assert_eq!(calls[1].0, calls[0].1);
    assert_eq!(calls[1].1, calls[1].0);
    assert_eq!(grad_vals(&x).unwrap(), [9.0, 9.0]);
}

#[test]
fn the_users_cotangent_keeps_its_values() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul_scalar(&mul_scalar(&x, 2.0).unwrap(), 3.0).unwrap();
    let g = t(&[1.0, 10.0], &[2]);
    let version = g.carrier().unwrap().version();
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(vals(&g), [1.0, 10.0]);
    assert_eq!(g.carrier().unwrap().version(), version);
    assert_eq!(grad_vals(&x).unwrap(), [6.0, 60.0]);
}

/// `t.grad` is the cotangent that also flows on into `t`'s producer: that VJP must not write
/// into it.
#[test]
fn a_retained_gradient_keeps_its_values() {
    let x = t(&[1.0, 2.0], &[2]);
    let mid = mul_scalar(&x, 2.0).unwrap();
    mid.retain_grad(true).unwrap();
    let y = mul_scalar(&mid, 3.0).unwrap();
    sum(&y).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&mid).unwrap(), [3.0, 3.0]);
    assert_eq!(grad_vals(&x).unwrap(), [6.0, 6.0]);
}

/// `add` hands one cotangent to both operands: the leaf keeps it as its first contribution
/// while `mul_scalar`'s VJP gets the same tensor, which it must copy, not overwrite.
#[test]
fn a_leafs_first_gradient_keeps_its_values() {
    let x = t(&[1.0, 2.0], &[2]);
    let u = add(&mul_scalar(&x, 3.0).unwrap(), &x).unwrap();
    sum(&u).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [4.0, 4.0]);

    let w = t(&[0.5, -1.0], &[2]);
    let v = add(&w, &tanh(&mul(&w, &w).unwrap()).unwrap()).unwrap();
    sum(&v).unwrap().backward().unwrap();
    let expected: Vec<f32> = [0.5f32, -1.0]
        .iter()
        .map(|&w| 1.0 + (1.0 - (w * w).tanh().powi(2)) * 2.0 * w)
        .collect();
    for (got, want) in grad_vals(&w).unwrap().iter().zip(&expected) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
}

/// Direct calls lend their cotangent: the node works on a clone of the handle, so the caller's
/// tensor keeps its values.
#[test]
fn direct_backward_calls_lend_their_cotangent() {
    let x = t(&[1.0, 2.0], &[2]);
    let node = triple(&x).unwrap().autograd_ctx().unwrap();
    let g = t(&[1.0, 5.0], &[2]);
    let gs = node.backward(&g).unwrap();
    assert_eq!(vals(gs[0].as_ref().unwrap()), [3.0, 15.0]);
    let gs = node.backward_needed(&g, &[true]).unwrap();
    assert_eq!(vals(gs[0].as_ref().unwrap()), [3.0, 15.0]);
    let mut out = Vec::new();
    node.backward_into(g.clone(), &[true], &mut out).unwrap();
    assert_eq!(vals(out[0].as_ref().unwrap()), [3.0, 15.0]);
    assert_eq!(vals(&g), [1.0, 5.0]);
    seen();
}

#[test]
fn owning_vjps_agree_with_central_differences() {
    let x = t(&[0.3, -0.7, 1.1], &[3]);
    gradcheck(
        |xs| {
            let y = tanh(&triple(&xs[0])?)?;
            mul(&y, &xs[0])
        },
        &[x],
        GradcheckOptions::default(),
    )
    .unwrap();
}

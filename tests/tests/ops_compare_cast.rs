//! Comparisons to Bool, `where_cond`, logical ops and casts: values against plain loops with
//! broadcasting, no node for non-Float32 results, `where_cond`'s VJP against central
//! differences, and bad input.

mod elementwise_support;

use autograd_core::{
    gradcheck, shape, DType, DTypeCategory, ErrorKind, GradcheckOptions, Result, Tensor,
};
use autograd_ops::{
    eq, ge, gt, le, logical_and, logical_not, logical_or, lt, ne, to_dtype, where_cond,
};
use autograd_tests::{kind, t};
use elementwise_support::{f32s, leaf, uniform, KINDS};
use proptest::prelude::*;

fn bools(t: &Tensor) -> Vec<bool> {
    t.values::<bool>().expect("Bool tensor")
}

fn mask(v: &[bool], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), autograd_core::Shape::from(dims)).unwrap()
}

type Compare = fn(&Tensor, &Tensor) -> Result<Tensor>;

type Case = (&'static str, Compare, fn(f32, f32) -> bool);

const COMPARISONS: &[Case] = &[
    ("eq", eq, |x, y| x == y),
    ("ne", ne, |x, y| x != y),
    ("lt", lt, |x, y| x < y),
    ("le", le, |x, y| x <= y),
    ("gt", gt, |x, y| x > y),
    ("ge", ge, |x, y| x >= y),
];

#[test]
fn comparisons_match_a_loop_and_broadcast() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, f32::NAN], &[2, 3]);
    let b = t(&[2.0, 2.0, 6.0], &[3]);
    let (va, vb) = (f32s(&a), f32s(&b));
    for &(name, op, f) in COMPARISONS {
        let y = op(&a, &b).unwrap();
        assert_eq!(y.dtype(), &DType::Bool, "{name}");
        assert!(y.autograd_ctx().is_none(), "{name}: Bool records no node");
        let want: Vec<bool> = (0..6).map(|i| f(va[i], vb[i % 3])).collect();
        assert_eq!(bools(&y), want, "{name}");
        // the other way round, and on a transposed and a broadcast left operand
        let y = op(&b, &a).unwrap();
        let want: Vec<bool> = (0..6).map(|i| f(vb[i % 3], va[i])).collect();
        assert_eq!(bools(&y), want, "{name} swapped");
        for k in KINDS {
            let v = uniform(6, 3, -1.0, 1.0);
            let l = leaf(&v, 2, 3, k);
            let lv = f32s(&l);
            let want: Vec<bool> = (0..6).map(|i| f(lv[i], vb[i % 3] - 2.0)).collect();
            let shifted = autograd_ops::sub_scalar(&b, 2.0).unwrap();
            assert_eq!(bools(&op(&l, &shifted).unwrap()), want, "{name} {k:?}");
        }
    }
    // integers and Bool
    let i = Tensor::from_vec(vec![1i32, 5], shape![2]).unwrap();
    let j = Tensor::from_vec(vec![3i32], shape![1]).unwrap();
    assert_eq!(bools(&lt(&i, &j).unwrap()), [true, false]);
    let p = mask(&[true, false], &[2]);
    assert_eq!(bools(&eq(&p, &mask(&[true], &[1])).unwrap()), [true, false]);
    assert_eq!(kind(lt(&p, &p)), ErrorKind::Type, "Bool has no order");
}

#[test]
fn comparisons_refuse_mismatched_shapes_and_dtypes() {
    let a = t(&[1.0, 2.0, 3.0], &[3]);
    let err = gt(&a, &t(&[1.0, 2.0], &[2])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(
        err.message().contains("gt") && err.message().contains("[3]"),
        "{err}"
    );
    let d = Tensor::from_vec(vec![1.0f64], shape![1]).unwrap();
    assert_eq!(kind(eq(&a, &d)), ErrorKind::Type);
}

#[test]
fn logical_ops_on_bool() {
    let p = mask(&[true, true, false, false], &[2, 2]);
    let q = mask(&[true, false], &[2]);
    assert_eq!(
        bools(&logical_and(&p, &q).unwrap()),
        [true, false, false, false]
    );
    assert_eq!(
        bools(&logical_or(&p, &q).unwrap()),
        [true, true, true, false]
    );
    assert_eq!(bools(&logical_not(&p).unwrap()), [false, false, true, true]);
    assert_eq!(bools(&p.logical_not().unwrap()), [false, false, true, true]);
    assert_eq!(kind(logical_and(&p, &t(&[1.0], &[1]))), ErrorKind::Type);
    assert_eq!(kind(logical_not(&t(&[1.0], &[1]))), ErrorKind::Type);
    assert_eq!(
        kind(logical_or(&p, &mask(&[true; 3], &[3]))),
        ErrorKind::Value
    );
}

#[test]
fn where_cond_selects_and_broadcasts() {
    let m = mask(&[true, false, true], &[3]);
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[-1.0], &[1]);
    let y = where_cond(&m, &a, &b).unwrap();
    assert_eq!(f32s(&y), [1.0, -1.0, 3.0, 4.0, -1.0, 6.0]);
    assert_eq!(y.autograd_ctx().unwrap().name(), "where_cond");
    y.backward_with(Some(&t(&[1.0; 6], &[2, 3])), false)
        .unwrap();
    assert_eq!(
        f32s(&a.grad().unwrap().unwrap()),
        [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    );
    assert_eq!(f32s(&b.grad().unwrap().unwrap()), [2.0]);
    // method form with the mask as receiver; integer values select too
    let i = Tensor::from_vec(vec![7i32, 8, 9], shape![3]).unwrap();
    let z = Tensor::from_vec(vec![0i32], shape![1]).unwrap();
    assert_eq!(
        m.where_cond(&i, &z).unwrap().values::<i32>().unwrap(),
        [7, 0, 9]
    );
}

#[test]
fn where_cond_refuses_bad_input_and_changes_nothing() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[3.0, 4.0], &[2]);
    assert_eq!(
        kind(where_cond(&a, &a, &b)),
        ErrorKind::Type,
        "mask must be Bool"
    );
    let m = mask(&[true, false], &[2]);
    let d = Tensor::from_vec(vec![1.0f64, 2.0], shape![2]).unwrap();
    assert_eq!(kind(where_cond(&m, &a, &d)), ErrorKind::Type);
    assert_eq!(
        kind(where_cond(&mask(&[true; 3], &[3]), &a, &b)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(where_cond(&m, &a, &t(&[1.0; 3], &[3]))),
        ErrorKind::Value
    );
    assert!(a.grad().unwrap().is_none() && b.grad().unwrap().is_none());
    assert_eq!(f32s(&a), [1.0, 2.0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn where_cond_vjp_matches_central_differences(
        r in 1usize..4,
        c in 1usize..5,
        k in 0usize..4,
        seed in 0u64..1000,
    ) {
        let bits: Vec<bool> = uniform(c, seed, 0.0, 1.0).iter().map(|&u| u < 0.5).collect();
        let m = mask(&bits, &[c]);
        let a = leaf(&uniform(r * c, seed + 1, -1.0, 1.0), r, c, KINDS[k]);
        let b = t(&uniform(r, seed + 2, -1.0, 1.0), &[r, 1]);
        let res = gradcheck(
            |v: &[Tensor]| where_cond(&m, &v[0], &v[1]),
            &[a, b],
            GradcheckOptions::default(),
        );
        prop_assert!(res.is_ok(), "{res:?}");
    }
}

#[test]
fn casts_among_float32_float64_and_int32() {
    let x = t(&[1.5, -2.7, 3.0], &[3]);
    let d = to_dtype(&x, &DType::Float64).unwrap();
    assert_eq!(d.dtype(), &DType::Float64);
    assert!(
        d.autograd_ctx().is_none(),
        "a Float64 result records no node"
    );
    assert_eq!(d.values::<f64>().unwrap(), [1.5, f64::from(-2.7f32), 3.0]);
    let i = x.to_dtype(&DType::Int32).unwrap();
    assert_eq!(
        i.values::<i32>().unwrap(),
        [1, -2, 3],
        "truncation toward zero"
    );
    let back = to_dtype(&d, &DType::Float32).unwrap();
    assert_eq!(f32s(&back), f32s(&x));
    assert!(
        back.autograd_ctx().is_none(),
        "a Float64 input is not differentiable"
    );
    assert_eq!(
        to_dtype(&i, &DType::Float64)
            .unwrap()
            .values::<f64>()
            .unwrap(),
        [1.0, -2.0, 3.0]
    );
    assert_eq!(
        f32s(&to_dtype(&i, &DType::Float32).unwrap()),
        [1.0, -2.0, 3.0]
    );
    let m = mask(&[true, false], &[2]);
    assert_eq!(
        to_dtype(&m, &DType::Int32)
            .unwrap()
            .values::<i32>()
            .unwrap(),
        [1, 0]
    );
    assert_eq!(f32s(&to_dtype(&m, &DType::Float32).unwrap()), [1.0, 0.0]);
    // saturation and NaN
    let odd = t(&[f32::NAN, 1e20, -1e20], &[3]);
    assert_eq!(
        to_dtype(&odd, &DType::Int32)
            .unwrap()
            .values::<i32>()
            .unwrap(),
        [0, i32::MAX, i32::MIN]
    );
    // strided input
    let tr = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3, KINDS[1]);
    assert_eq!(
        to_dtype(&tr, &DType::Float64)
            .unwrap()
            .values::<f64>()
            .unwrap(),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}

#[test]
fn a_float32_to_float32_cast_is_a_differentiable_identity() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = to_dtype(&x, &DType::Float32).unwrap();
    assert!(!y.same_tensor(&x), "a handle of its own");
    assert_eq!(y.autograd_ctx().unwrap().name(), "to_dtype");
    y.backward_with(Some(&t(&[3.0, 4.0], &[2])), false).unwrap();
    assert_eq!(f32s(&x.grad().unwrap().unwrap()), [3.0, 4.0]);
    gradcheck(
        |v: &[Tensor]| to_dtype(&v[0], &DType::Float32),
        &[t(&[0.5, -1.0], &[2])],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn casts_to_int64_and_bool_follow_pytorch() {
    let x = t(&[1.5, -2.7, 0.0, f32::NAN, 3e9], &[5]);
    assert_eq!(
        to_dtype(&x, &DType::Int64)
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [1, -2, 0, 0, 3_000_000_000],
        "truncation toward zero, NaN to 0, beyond the Int32 range"
    );
    let b = to_dtype(&x, &DType::Bool).unwrap();
    assert_eq!(b.dtype(), &DType::Bool);
    assert!(b.autograd_ctx().is_none(), "a Bool result records no node");
    assert_eq!(
        b.values::<bool>().unwrap(),
        [true, true, false, true, true],
        "x != 0; NaN is true"
    );
    let big = Tensor::from_vec(vec![5_000_000_000i64, -7, 1 << 40], shape![3]).unwrap();
    assert_eq!(
        to_dtype(&big, &DType::Int32)
            .unwrap()
            .values::<i32>()
            .unwrap(),
        [5_000_000_000i64 as i32, -7, 0],
        "Int64 to Int32 wraps"
    );
    assert_eq!(
        f32s(&to_dtype(&big, &DType::Float32).unwrap()),
        [5e9, -7.0, (1u64 << 40) as f32]
    );
    let i = Tensor::from_vec(vec![0i32, 4, -1], shape![3]).unwrap();
    assert_eq!(
        to_dtype(&i, &DType::Bool)
            .unwrap()
            .values::<bool>()
            .unwrap(),
        [false, true, true]
    );
    let m = mask(&[true, false], &[2]);
    assert_eq!(
        to_dtype(&m, &DType::Int64)
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [1, 0]
    );
}

#[test]
fn unsupported_casts_are_type_errors() {
    let x = t(&[1.0], &[1]);
    assert_eq!(
        kind(to_dtype(&x, &DType::Category(DTypeCategory::Floating))),
        ErrorKind::Type
    );
}

#[test]
fn comparisons_and_where_accept_equal_extents_under_different_shape_trees() {
    let bare = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], 3usize).unwrap();
    let tuple = Tensor::from_vec(vec![1.0f32, 0.0, 3.0], autograd_core::shape![3]).unwrap();
    assert_eq!(
        eq(&bare, &tuple).unwrap().values::<bool>().unwrap(),
        [true, false, true]
    );
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], 3usize).unwrap();
    let b = Tensor::from_vec(vec![4.0f32, 5.0, 6.0], autograd_core::shape![3]).unwrap();
    let m = Tensor::from_vec(vec![true, false, true], autograd_core::shape![3]).unwrap();
    let y = where_cond(&m, &a, &b).unwrap();
    assert_eq!(f32s(&y), [1.0, 5.0, 3.0]);
    autograd_ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(f32s(&a.grad().unwrap().unwrap()), [1.0, 0.0, 1.0]);
    assert_eq!(f32s(&b.grad().unwrap().unwrap()), [0.0, 1.0, 0.0]);
}

//! The binary elementwise ops and their constant forms: numpy broadcasting (ranks may differ)
//! against plain loops, every VJP against central differences (proptest over shapes) with
//! transposed, sliced and broadcast-aliased operands, dtypes, and bad input that changes nothing.

mod elementwise_support;

use autograd_core::{gradcheck, DType, ErrorKind, GradcheckOptions, Result, Tensor};
use autograd_ops::{
    add, add_scalar, broadcast_pair, broadcast_shapes, div, div_scalar, maximum, minimum, mul,
    mul_scalar, rdiv_scalar, rsub_scalar, sub, sub_scalar, sum,
};
use autograd_tests::{kind, t};
use elementwise_support::{assert_close, f32s, leaf, uniform, KINDS};
use proptest::prelude::*;

type Binary = fn(&Tensor, &Tensor) -> Result<Tensor>;

type Case = (&'static str, Binary, fn(f64, f64) -> f64);
type ScalarForm = fn(&Tensor, f32) -> Result<Tensor>;

const BINARY: &[Case] = &[
    ("add", add, |x, y| x + y),
    ("sub", sub, |x, y| x - y),
    ("mul", mul, |x, y| x * y),
    ("div", div, |x, y| x / y),
    ("maximum", maximum, f64::max),
    ("minimum", minimum, f64::min),
];

/// Values on two interleaved grids (`a` near 0.2k + 0.05, `b` near 0.2k + 0.15) so that no
/// pair is closer than 0.1 (max/min kinks) and no divisor is near 0.
fn grid(n: usize, seed: u64, shift: f32) -> Vec<f32> {
    uniform(n, seed, 0.0, 1.0)
        .into_iter()
        .map(|u| {
            let k = (u * 10.0).floor() - 5.0;
            let v = 0.2 * k + shift;
            if v.abs() < 0.05 {
                v + 0.4
            } else {
                v
            }
        })
        .collect()
}

/// The numpy broadcast of `a` (dims `da`) and `b` (dims `db`) under `f`, by plain loops.
fn reference(a: &[f32], da: &[usize], b: &[f32], db: &[usize], f: fn(f64, f64) -> f64) -> Vec<f64> {
    let dims = broadcast_shapes(da, db).unwrap();
    let n: usize = dims.iter().product();
    let index = |own: &[usize], coord: &[usize]| {
        let lead = coord.len() - own.len();
        own.iter().enumerate().fold(0, |i, (j, &e)| {
            i * e + if e == 1 { 0 } else { coord[lead + j] }
        })
    };
    (0..n)
        .map(|mut lin| {
            let mut coord = vec![0; dims.len()];
            for (c, &d) in coord.iter_mut().zip(&dims).rev() {
                *c = lin % d;
                lin /= d;
            }
            f(
                f64::from(a[index(da, &coord)]),
                f64::from(b[index(db, &coord)]),
            )
        })
        .collect()
}

#[test]
fn broadcast_shapes_follows_numpy() {
    assert_eq!(broadcast_shapes(&[2, 3], &[2, 3]).unwrap(), [2, 3]);
    assert_eq!(broadcast_shapes(&[2, 3], &[3]).unwrap(), [2, 3]);
    assert_eq!(broadcast_shapes(&[4, 1, 3], &[2, 1]).unwrap(), [4, 2, 3]);
    assert_eq!(broadcast_shapes(&[1], &[5, 4]).unwrap(), [5, 4]);
    assert_eq!(broadcast_shapes(&[], &[2]).unwrap(), [2]);
    assert_eq!(broadcast_shapes(&[0, 1], &[3]).unwrap(), [0, 3]);
    let err = broadcast_shapes(&[2, 3], &[4]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(
        err.message().contains("[2, 3]") && err.message().contains("[4]"),
        "{err}"
    );
}

#[test]
fn broadcast_pair_views_both_operands_at_the_common_shape() {
    let (a, b) = broadcast_pair(&t(&[1.0, 2.0], &[2, 1]), &t(&[3.0, 4.0, 5.0], &[3])).unwrap();
    assert_eq!(a.dims(), [2, 3]);
    assert_eq!(b.dims(), [2, 3]);
    assert_eq!(f32s(&a), [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    assert_eq!(f32s(&b), [3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);
}

#[test]
fn every_binary_op_broadcasts_like_numpy_across_ranks() {
    let pairs: &[(&[usize], &[usize])] = &[
        (&[2, 3], &[2, 3]),
        (&[2, 3], &[3]),
        (&[3], &[2, 3]),
        (&[4, 1, 3], &[2, 1]),
        (&[1], &[2, 2]),
        (&[2, 1], &[1, 5]),
    ];
    for &(name, op, f) in BINARY {
        for &(da, db) in pairs {
            let na: usize = da.iter().product();
            let nb: usize = db.iter().product();
            let (va, vb) = (grid(na, 1, 0.05), grid(nb, 2, 0.15));
            let y = op(&t(&va, da), &t(&vb, db)).unwrap();
            assert_eq!(y.dims(), broadcast_shapes(da, db).unwrap(), "{name}");
            assert_close(&f32s(&y), &reference(&va, da, &vb, db, f), 1e-6, name);
        }
    }
}

#[test]
fn operands_of_every_layout_read_their_own_elements() {
    for &(name, op, f) in BINARY {
        for ka in KINDS {
            for kb in KINDS {
                let (va, vb) = (grid(12, 3, 0.05), grid(12, 4, 0.15));
                let (a, b) = (leaf(&va, 3, 4, ka), leaf(&vb, 3, 4, kb));
                let y = op(&a, &b).unwrap();
                let (la, lb) = (f32s(&a), f32s(&b));
                let want = reference(&la, &[3, 4], &lb, &[3, 4], f);
                assert_close(&f32s(&y), &want, 1e-6, &format!("{name} {ka:?} {kb:?}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// a [r, c] of any layout against b of shape [c], [r, 1], [1, c] or [r, c] (dense).
    #[test]
    fn every_binary_vjp_matches_central_differences(
        r in 1usize..4,
        c in 1usize..5,
        ka in 0usize..4,
        shape_b in 0usize..4,
        seed in 0u64..1000,
    ) {
        let db: Vec<usize> = match shape_b {
            0 => vec![c],
            1 => vec![r, 1],
            2 => vec![1, c],
            _ => vec![r, c],
        };
        let nb: usize = db.iter().product();
        for &(name, op, _) in BINARY {
            let a = leaf(&grid(r * c, seed, 0.05), r, c, KINDS[ka]);
            let b = t(&grid(nb, seed + 1, 0.15), &db);
            let res = gradcheck(|v: &[Tensor]| op(&v[0], &v[1]), &[a, b], GradcheckOptions::default());
            prop_assert!(res.is_ok(), "{name} a {:?} [{r}, {c}] b {db:?}: {res:?}", KINDS[ka]);
            // and with the operands swapped (the lower rank on the left)
            let a = leaf(&grid(r * c, seed, 0.05), r, c, KINDS[ka]);
            let b = t(&grid(nb, seed + 1, 0.15), &db);
            let res = gradcheck(|v: &[Tensor]| op(&v[1], &v[0]), &[a, b], GradcheckOptions::default());
            prop_assert!(res.is_ok(), "{name} swapped: {res:?}");
        }
    }

    #[test]
    fn every_scalar_form_vjp_matches_central_differences(
        r in 1usize..4,
        c in 1usize..5,
        k in 0usize..4,
        seed in 0u64..1000,
    ) {
        let forms: &[(&str, ScalarForm)] = &[
            ("add_scalar", add_scalar),
            ("sub_scalar", sub_scalar),
            ("rsub_scalar", rsub_scalar),
            ("mul_scalar", mul_scalar),
            ("div_scalar", div_scalar),
            ("rdiv_scalar", rdiv_scalar),
        ];
        for &(name, op) in forms {
            let x = leaf(&grid(r * c, seed, 0.05), r, c, KINDS[k]);
            let res = gradcheck(|v: &[Tensor]| op(&v[0], -1.5), &[x], GradcheckOptions::default());
            prop_assert!(res.is_ok(), "{name}: {res:?}");
        }
    }
}

#[test]
fn scalar_forms_compute_what_they_say() {
    let x = t(&[1.0, 2.0, 4.0], &[3]);
    assert_eq!(f32s(&add_scalar(&x, 1.0).unwrap()), [2.0, 3.0, 5.0]);
    assert_eq!(f32s(&sub_scalar(&x, 1.0).unwrap()), [0.0, 1.0, 3.0]);
    assert_eq!(f32s(&rsub_scalar(&x, 1.0).unwrap()), [0.0, -1.0, -3.0]);
    assert_eq!(f32s(&mul_scalar(&x, 2.0).unwrap()), [2.0, 4.0, 8.0]);
    assert_eq!(f32s(&div_scalar(&x, 2.0).unwrap()), [0.5, 1.0, 2.0]);
    assert_eq!(f32s(&rdiv_scalar(&x, 2.0).unwrap()), [2.0, 1.0, 0.5]);
    // IEEE: division by zero is an infinity, 0/0 NaN
    let z = f32s(&div(&t(&[1.0, 0.0], &[2]), &t(&[0.0, 0.0], &[2])).unwrap());
    assert_eq!(z[0], f32::INFINITY);
    assert!(z[1].is_nan());
}

#[test]
fn max_and_min_split_a_tie_and_propagate_nan() {
    let (a, b) = (t(&[1.0, 2.0, 3.0], &[3]), t(&[1.0, 5.0, 0.0], &[3]));
    let y = maximum(&a, &b).unwrap();
    assert_eq!(f32s(&y), [1.0, 5.0, 3.0]);
    y.backward_with(Some(&t(&[1.0; 3], &[3])), false).unwrap();
    assert_eq!(f32s(&a.grad().unwrap().unwrap()), [0.5, 0.0, 1.0]);
    assert_eq!(f32s(&b.grad().unwrap().unwrap()), [0.5, 1.0, 0.0]);
    let m = minimum(&t(&[f32::NAN, 1.0], &[2]), &t(&[0.0, f32::NAN], &[2])).unwrap();
    assert!(f32s(&m).iter().all(|v| v.is_nan()));
}

#[test]
fn a_broadcast_operand_gets_its_gradient_summed_over_the_repeats() {
    // b [3] broadcast over 2 rows of a [2, 3]
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[10.0, 20.0, 30.0], &[3]);
    sum(&mul(&a, &b).unwrap()).unwrap().backward().unwrap();
    assert_eq!(f32s(&b.grad().unwrap().unwrap()), [5.0, 7.0, 9.0]);
    assert_eq!(
        f32s(&a.grad().unwrap().unwrap()),
        [10.0, 20.0, 30.0, 10.0, 20.0, 30.0]
    );
    // and a column [2, 1] (not a leading-mode broadcast)
    let col = t(&[1.0, -1.0], &[2, 1]);
    sum(&mul(&a, &col).unwrap()).unwrap().backward().unwrap();
    assert_eq!(f32s(&col.grad().unwrap().unwrap()), [6.0, 15.0]);
}

#[test]
fn float64_and_int32_operands_compute_without_a_node() {
    let a = Tensor::from_vec(vec![1.5f64, 2.0], autograd_core::shape![2]).unwrap();
    let b = Tensor::from_vec(vec![0.5f64], autograd_core::shape![1]).unwrap();
    let y = add(&a, &b).unwrap();
    assert_eq!(y.dtype(), &DType::Float64);
    assert!(y.autograd_ctx().is_none());
    assert_eq!(y.values::<f64>().unwrap(), [2.0, 2.5]);
    assert_eq!(div(&a, &b).unwrap().values::<f64>().unwrap(), [3.0, 4.0]);
    assert_eq!(
        mul_scalar(&a, 2.0).unwrap().values::<f64>().unwrap(),
        [3.0, 4.0]
    );
    let i = Tensor::from_vec(vec![i32::MAX, -4], autograd_core::shape![2]).unwrap();
    let one = Tensor::from_vec(vec![1i32], autograd_core::shape![1]).unwrap();
    assert_eq!(
        add(&i, &one).unwrap().values::<i32>().unwrap(),
        [i32::MIN, -3],
        "wraps"
    );
    assert_eq!(mul(&i, &i).unwrap().values::<i32>().unwrap(), [1, 16]);
    assert_eq!(
        maximum(&i, &one).unwrap().values::<i32>().unwrap(),
        [i32::MAX, 1]
    );
    // integer division and float-only constant forms are type errors
    assert_eq!(kind(div(&i, &one)), ErrorKind::Type);
    assert_eq!(kind(add_scalar(&i, 1.0)), ErrorKind::Type);
}

#[test]
fn bad_operands_are_errors_of_the_right_kind_that_change_nothing() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[1.0, 2.0], &[2]);
    let versions = (
        a.single().unwrap().carrier.version(),
        b.single().unwrap().carrier.version(),
    );
    for &(name, op, _) in BINARY {
        let err = op(&a, &b).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Value, "{name}");
        assert!(err.message().contains(name), "{err}");
        assert!(
            err.message().contains("[2, 3]") && err.message().contains("[2]"),
            "{err}"
        );
    }
    let d = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], autograd_core::shape![3]).unwrap();
    for &(name, op, _) in BINARY {
        let err = op(&a, &d).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Type, "{name}");
        assert!(err.message().contains("Float64"), "{err}");
    }
    assert_eq!(f32s(&a), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert!(a.grad().unwrap().is_none() && b.grad().unwrap().is_none());
    assert_eq!(
        versions,
        (
            a.single().unwrap().carrier.version(),
            b.single().unwrap().carrier.version()
        )
    );
}

#[test]
fn method_forms_match_the_functions() {
    let (a, b) = (t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]), t(&[0.5, 4.0], &[2]));
    let same = |x: Tensor, y: Tensor| assert_eq!(f32s(&x), f32s(&y));
    same(a.add(&b).unwrap(), add(&a, &b).unwrap());
    same(a.sub(&b).unwrap(), sub(&a, &b).unwrap());
    same(a.mul(&b).unwrap(), mul(&a, &b).unwrap());
    same(a.div(&b).unwrap(), div(&a, &b).unwrap());
    same(a.maximum(&b).unwrap(), maximum(&a, &b).unwrap());
    same(a.minimum(&b).unwrap(), minimum(&a, &b).unwrap());
    same(a.div_scalar(2.0).unwrap(), div_scalar(&a, 2.0).unwrap());
    same(a.rsub_scalar(2.0).unwrap(), rsub_scalar(&a, 2.0).unwrap());
}

#[test]
fn large_broadcast_operands_take_the_parallel_path() {
    let (r, c) = (300, 256);
    let va = uniform(r * c, 1, -1.0, 1.0);
    let vb = uniform(c, 2, -1.0, 1.0);
    let y = add(&t(&va, &[r, c]), &t(&vb, &[c])).unwrap();
    let want = reference(&va, &[r, c], &vb, &[c], |x, y| x + y);
    assert_close(&f32s(&y), &want, 1e-6, "add");
}

#[test]
fn operands_of_equal_extents_and_different_shape_trees_combine() {
    // a bare extent `3` and a one-mode tuple `(3)`; a flat (4,3) and a nested ((2,2),3)
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], 3usize).unwrap();
    let b = Tensor::from_vec(vec![4.0f32, 5.0, 6.0], autograd_core::shape![3]).unwrap();
    let y = mul(&a, &b).unwrap();
    assert_eq!(y.shape(), a.shape(), "the first operand's tree");
    assert_eq!(f32s(&y), [4.0, 10.0, 18.0]);
    sum(&y).unwrap().backward().unwrap();
    assert_eq!(f32s(&a.grad().unwrap().unwrap()), [4.0, 5.0, 6.0]);
    assert_eq!(f32s(&b.grad().unwrap().unwrap()), [1.0, 2.0, 3.0]);
    assert_eq!(b.grad().unwrap().unwrap().shape(), b.shape());
    let flat = Tensor::from_vec(
        (0..12).map(|i| i as f32).collect(),
        autograd_core::shape![4, 3],
    )
    .unwrap();
    let nested = Tensor::from_vec(vec![1.0f32; 12], autograd_core::shape![[2, 2], 3]).unwrap();
    let s = add(&nested, &flat).unwrap();
    assert_eq!(s.shape(), nested.shape());
    assert_eq!(f32s(&s), (1..13).map(|i| i as f32).collect::<Vec<_>>());
    sum(&s).unwrap().backward().unwrap();
    assert_eq!(flat.grad().unwrap().unwrap().shape(), flat.shape());
    assert_eq!(f32s(&nested.grad().unwrap().unwrap()), [1.0; 12]);
}

#[test]
fn a_nested_first_operand_meets_a_strided_second_one_at_the_right_positions() {
    // ((2,2),3) + a broadcast row: the row's view under the nested tree must keep each leaf's
    // stride (the nested mode's two leaves were given the strides of two different modes)
    let x = Tensor::from_vec(
        (0..12).map(|i| i as f32).collect(),
        autograd_core::shape![[2, 2], 3],
    )
    .unwrap();
    let b = t(&[100.0, 200.0, 300.0], &[3]);
    let want: Vec<f32> = (0..12)
        .map(|i| i as f32 + 100.0 * (1 + i % 3) as f32)
        .collect();
    assert_eq!(f32s(&add(&x, &b).unwrap()), want);
    // a column (4,1) and a transposed (4,3)
    let col = t(&[1.0, 2.0, 3.0, 4.0], &[4, 1]);
    let want: Vec<f32> = (0..12).map(|i| i as f32 * (1 + i / 3) as f32).collect();
    assert_eq!(f32s(&mul(&x, &col).unwrap()), want);
    let yt = t(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), &[3, 4])
        .transpose(0, 1)
        .unwrap();
    let want: Vec<f32> = (0..12).map(|i| (i + (i % 3) * 4 + i / 3) as f32).collect();
    assert_eq!(f32s(&add(&x, &yt).unwrap()), want);
    // and the gradient of the broadcast operand
    let xn = Tensor::from_vec(
        (0..12).map(|i| i as f32).collect(),
        autograd_core::shape![[2, 2], 3],
    )
    .unwrap();
    let bl = t(&[1.0, 2.0, 3.0], &[3]);
    sum(&mul(&xn, &bl).unwrap()).unwrap().backward().unwrap();
    // d/db_j = sum over rows of x[r, j]
    assert_eq!(f32s(&bl.grad().unwrap().unwrap()), [18.0, 22.0, 26.0]);
}

#[test]
fn a_nested_mode_of_one_element_broadcasts() {
    let one = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], autograd_core::shape![[1, 1], 3]).unwrap();
    let x = t(&[0.0; 12], &[4, 3]);
    let y = add(&one, &x).unwrap();
    assert_eq!(y.dims(), [4, 3]);
    assert_eq!(f32s(&y), [1.0, 2.0, 3.0].repeat(4));
    sum(&y).unwrap().backward().unwrap();
    let g = one.grad().unwrap().unwrap();
    assert_eq!(g.shape(), one.shape());
    assert_eq!(f32s(&g), [4.0, 4.0, 4.0]);
}

//! The reductions and scans of issue 38 item 3 (`logsumexp`, `prod`/`prod_axis`, `cumsum`,
//! `cumprod`, `std_axes`, `norm`, `max_axis`/`min_axis`, `topk`, `sort`/`argsort`,
//! `all`/`any`, `count_nonzero`): forward values and gradients against the numbers PyTorch
//! 2.15 prints (`tests/fixtures/scan/scan.txt`, written by `gen_scan.py` beside it),
//! plain-loop references on contiguous, strided and broadcast inputs, gradcheck, the edge
//! cases PyTorch's docs call out, errors that change nothing, and properties.

use autograd_core::{
    grad, gradcheck, shape, DType, ErrorKind, GradOptions, GradcheckOptions, Tensor,
};
use autograd_ops::{
    all, all_axes, any, any_axes, argsort, count_nonzero, cumprod, cumsum, logsumexp, max_axis,
    min_axis, norm, prod, prod_axis, sort, std_axes, topk, NormOrd,
};
use autograd_tests::fixture::{mismatches, numbers, Tolerance};
use autograd_tests::{broadcast_rows, coords, kind, noise, strided, t, vals};
use proptest::prelude::*;

const SCAN: &str = include_str!("../fixtures/scan/scan.txt");

/// How close Float32 values must be to PyTorch's.
const TOL: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-5,
};

/// Runs fixture op `op` with its `params` on `x`: the values and, for the ordering ops, the
/// Int64 indices.
fn run(op: &str, params: &[String], x: &Tensor) -> (Tensor, Option<Tensor>) {
    let int = |i: usize| params[i].parse::<i64>().unwrap();
    let flag = |i: usize| int(i) != 0;
    let ints_from = |i: usize| {
        params[i..]
            .iter()
            .map(|p| p.parse::<i64>().unwrap())
            .collect::<Vec<_>>()
    };
    let one = |r: autograd_core::Result<Tensor>| (r.unwrap(), None);
    let two = |r: autograd_core::Result<(Tensor, Tensor)>| {
        let (v, i) = r.unwrap();
        (v, Some(i))
    };
    match op {
        "logsumexp" => one(logsumexp(x, &ints_from(1), flag(0))),
        "prod" => one(prod(x)),
        "prod_axis" => one(prod_axis(x, int(0), flag(1))),
        "cumsum" => one(cumsum(x, int(0))),
        "cumprod" => one(cumprod(x, int(0))),
        "std" => one(std_axes(
            x,
            &ints_from(2),
            flag(0),
            usize::try_from(int(1)).unwrap(),
        )),
        "norm" => {
            let ord = match params[0].as_str() {
                "fro" => NormOrd::Frobenius,
                p => NormOrd::from(p.parse::<f64>().unwrap()),
            };
            one(norm(x, ord, &ints_from(2), flag(1)))
        }
        "max" => two(max_axis(x, int(0), flag(1))),
        "min" => two(min_axis(x, int(0), flag(1))),
        "topk" => two(topk(
            x,
            usize::try_from(int(0)).unwrap(),
            int(1),
            flag(2),
            flag(3),
        )),
        "sort" => two(sort(x, int(0), flag(1))),
        other => panic!("unknown fixture op {other}"),
    }
}

#[test]
fn forward_values_indices_and_gradients_match_pytorch() {
    let mut cases = 0;
    let mut bad = Vec::new();
    for line in SCAN.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [label, op, params, dims, input, out_dims, output, indices, cotangent, want_grad] =
            f[..]
        else {
            panic!("a fixture line has ten fields: {line}");
        };
        let params: Vec<String> = params
            .split(' ')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        let x = t(&numbers::<f32>(input), &numbers::<usize>(dims));
        let (y, idx) = run(op, &params, &x);
        // PyTorch's whole-tensor prod is 0-dim, ours [1] like `sum`
        if op != "prod" {
            assert_eq!(
                y.dims(),
                numbers::<usize>(out_dims),
                "{label}: output shape"
            );
        }
        bad.extend(mismatches(
            label,
            "output",
            &vals(&y),
            &numbers::<f32>(output),
            TOL,
        ));
        if let Some(idx) = idx {
            assert_eq!(idx.dtype(), &DType::Int64, "{label}");
            assert_eq!(
                idx.values::<i64>().unwrap(),
                numbers::<i64>(indices),
                "{label}: indices"
            );
        }
        let g = t(&numbers::<f32>(cotangent), &y.dims());
        let dx = grad(&y, &[&x], &g, GradOptions::default()).unwrap()[0]
            .clone()
            .expect("a gradient");
        bad.extend(mismatches(
            label,
            "gradient",
            &vals(&dx),
            &numbers::<f32>(want_grad),
            TOL,
        ));
        cases += 1;
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(cases, 46);
}

/// The rows of a row-major `[.., n, ..]` tensor along `axis`: for every row (outer-major,
/// then inner), the logical positions of its `n` elements.
fn rows_along(dims: &[usize], axis: usize) -> Vec<Vec<usize>> {
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let outer: usize = dims[..axis].iter().product();
    let mut rows = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            rows.push((0..n).map(|j| (o * n + j) * inner + i).collect());
        }
    }
    rows
}

/// Two ways the tests lay out `values` of `dims`: compact, and column-major at an offset
/// (broadcast inputs have their own test).
fn layouts(values: &[f32], dims: &[usize]) -> Vec<(&'static str, Tensor)> {
    vec![
        ("contiguous", t(values, dims)),
        ("strided", strided(values, dims)),
    ]
}

#[test]
fn plain_loop_references_on_contiguous_and_strided_inputs() {
    let dims = [3, 4, 5];
    let values = noise(60, 7);
    for (name, x) in layouts(&values, &dims) {
        for axis in 0..3 {
            let rows = rows_along(&dims, axis);
            let at = |p: usize| f64::from(values[p]);
            // cumsum and cumprod: running folds along every row, placed back
            let (mut sums, mut prods) = (vec![0.0f32; 60], vec![0.0f32; 60]);
            for r in &rows {
                let (mut s, mut q) = (0.0f64, 1.0f64);
                for &p in r {
                    s += at(p);
                    q *= at(p);
                    sums[p] = s as f32;
                    prods[p] = q as f32;
                }
            }
            assert_eq!(
                vals(&cumsum(&x, axis).unwrap()),
                sums,
                "{name} cumsum {axis}"
            );
            assert_eq!(
                vals(&cumprod(&x, axis).unwrap()),
                prods,
                "{name} cumprod {axis}"
            );
            // the per-row reductions, in the order of the kept axes
            let lse: Vec<f32> = rows
                .iter()
                .map(|r| r.iter().map(|&p| at(p).exp()).sum::<f64>().ln() as f32)
                .collect();
            let got = vals(&logsumexp(&x, axis, false).unwrap());
            assert!(
                mismatches(name, "logsumexp", &got, &lse, TOL).is_empty(),
                "{got:?} {lse:?}"
            );
            let products: Vec<f32> = rows
                .iter()
                .map(|r| r.iter().map(|&p| at(p)).product::<f64>() as f32)
                .collect();
            assert_eq!(
                vals(&prod_axis(&x, axis, false).unwrap()),
                products,
                "{name} prod"
            );
            let l2: Vec<f32> = rows
                .iter()
                .map(|r| r.iter().map(|&p| at(p) * at(p)).sum::<f64>().sqrt() as f32)
                .collect();
            assert_eq!(
                vals(&norm(&x, 2.0, axis, false).unwrap()),
                l2,
                "{name} norm"
            );
            let stds: Vec<f32> = rows
                .iter()
                .map(|r| {
                    let m = r.iter().map(|&p| at(p)).sum::<f64>() / r.len() as f64;
                    let ss: f64 = r.iter().map(|&p| (at(p) - m).powi(2)).sum();
                    (ss / (r.len() - 1) as f64).sqrt() as f32
                })
                .collect();
            let got = vals(&std_axes(&x, axis, false, 1).unwrap());
            assert!(
                mismatches(name, "std", &got, &stds, TOL).is_empty(),
                "{got:?} {stds:?}"
            );
            // max and its first index; sort as a stable sort of each row
            let (mv, mi) = max_axis(&x, axis, false).unwrap();
            for (k, r) in rows.iter().enumerate() {
                let best =
                    r.iter().enumerate().fold(
                        0,
                        |b, (j, &p)| {
                            if values[p] > values[r[b]] {
                                j
                            } else {
                                b
                            }
                        },
                    );
                assert_eq!(vals(&mv)[k], values[r[best]], "{name} max {axis}");
                assert_eq!(
                    mi.values::<i64>().unwrap()[k],
                    best as i64,
                    "{name} argmax {axis}"
                );
            }
            let (sv, si) = sort(&x, axis, false).unwrap();
            let (sv, si) = (vals(&sv), si.values::<i64>().unwrap());
            for r in &rows {
                let mut order: Vec<usize> = (0..r.len()).collect();
                order.sort_by(|&a, &b| values[r[a]].total_cmp(&values[r[b]]));
                for (j, &p) in r.iter().enumerate() {
                    assert_eq!(si[p], order[j] as i64, "{name} sort {axis}");
                    assert_eq!(sv[p], values[r[order[j]]], "{name} sort {axis}");
                }
            }
        }
        // logsumexp over two axes and over every axis
        let all_lse = values.iter().map(|&v| f64::from(v).exp()).sum::<f64>().ln() as f32;
        let got = vals(&logsumexp(&x, &[0, 1, 2], false).unwrap());
        assert!((got[0] - all_lse).abs() < 1e-5, "{name}");
        let two = vals(&logsumexp(&x, &[0, -1], true).unwrap());
        for (j, g) in two.iter().enumerate() {
            let want = (0..60)
                .filter(|&p| coords(p, &dims)[1] == j)
                .map(|p| f64::from(values[p]).exp())
                .sum::<f64>()
                .ln() as f32;
            assert!((g - want).abs() < 1e-5, "{name} lse over 0 and 2");
        }
    }
}

#[test]
fn broadcast_inputs_reduce_their_repeated_rows() {
    let row = [0.5f32, -1.5, 2.0, 0.25];
    let x = broadcast_rows(&row, 3);
    let lse = (row.iter().map(|&v| f64::from(v).exp()).sum::<f64>().ln()) as f32;
    for v in vals(&logsumexp(&x, -1, false).unwrap()) {
        assert!((v - lse).abs() < 1e-6);
    }
    // down the broadcast axis every column holds one value three times
    assert_eq!(vals(&cumsum(&x, 0).unwrap())[8..], [1.5, -4.5, 6.0, 0.75]);
    assert_eq!(
        vals(&prod_axis(&x, 0, false).unwrap()),
        [0.125, -3.375, 8.0, 0.015_625]
    );
    let (v, i) = topk(&x, 2, -1, true, true).unwrap();
    assert_eq!(vals(&v), [2.0, 0.5, 2.0, 0.5, 2.0, 0.5]);
    assert_eq!(i.values::<i64>().unwrap(), [2, 0, 2, 0, 2, 0]);
    // ties down the broadcast axis: the first index, stably
    let (_, i) = max_axis(&x, 0, false).unwrap();
    assert_eq!(i.values::<i64>().unwrap(), [0; 4]);
    assert_eq!(
        argsort(&x, 0, true).unwrap().values::<i64>().unwrap()[..4],
        [0; 4]
    );
}

/// A one-input op under gradcheck.
type Op = Box<dyn Fn(&Tensor) -> autograd_core::Result<Tensor>>;

/// The differentiable ops of this file, each as a function of one input of shape `[r, n]`.
fn ops() -> Vec<(&'static str, Op)> {
    vec![
        ("logsumexp", Box::new(|x| logsumexp(x, -1, false))),
        ("logsumexp all", Box::new(|x| logsumexp(x, &[0, 1], true))),
        ("prod", Box::new(prod)),
        ("prod_axis", Box::new(|x| prod_axis(x, -1, false))),
        ("prod_axis 0", Box::new(|x| prod_axis(x, 0, true))),
        ("cumsum", Box::new(|x| cumsum(x, -1))),
        ("cumsum 0", Box::new(|x| cumsum(x, 0))),
        ("cumprod", Box::new(|x| cumprod(x, -1))),
        ("cumprod 0", Box::new(|x| cumprod(x, 0))),
        ("std", Box::new(|x| std_axes(x, -1, false, 1))),
        ("std all", Box::new(|x| std_axes(x, &[0, 1], true, 0))),
        ("norm 2", Box::new(|x| norm(x, 2.0, -1, false))),
        ("norm 1", Box::new(|x| norm(x, 1.0, &[0, 1], false))),
        ("norm 3", Box::new(|x| norm(x, 3.0, -1, false))),
        ("norm 0.5", Box::new(|x| norm(x, 0.5, -1, false))),
        ("norm inf", Box::new(|x| norm(x, NormOrd::Inf, -1, false))),
        (
            "norm -inf",
            Box::new(|x| norm(x, NormOrd::NegInf, -1, true)),
        ),
        (
            "norm fro",
            Box::new(|x| norm(x, NormOrd::Frobenius, &[0, 1], false)),
        ),
        ("max_axis", Box::new(|x| Ok(max_axis(x, -1, false)?.0))),
        ("min_axis", Box::new(|x| Ok(min_axis(x, -1, true)?.0))),
        ("topk", Box::new(|x| Ok(topk(x, 2, -1, true, true)?.0))),
        (
            "topk smallest unsorted",
            Box::new(|x| Ok(topk(x, 3, -1, false, false)?.0)),
        ),
        ("sort", Box::new(|x| Ok(sort(x, -1, false)?.0))),
        ("sort descending", Box::new(|x| Ok(sort(x, -1, true)?.0))),
    ]
}

#[test]
fn gradcheck_on_contiguous_strided_and_broadcast_inputs() {
    // values away from zero and from each other, so every op is smooth around them
    let values: Vec<f32> = noise(12, 11)
        .iter()
        .enumerate()
        .map(|(i, v)| (0.6 + 0.04 * i as f32 + 0.01 * v) * if i % 3 == 0 { -1.0 } else { 1.0 })
        .collect();
    let row: Vec<f32> = values[..4].to_vec();
    let inputs = [
        ("contiguous", t(&values, &[3, 4])),
        ("strided", strided(&values, &[3, 4])),
        ("broadcast", broadcast_rows(&row, 3)),
    ];
    for (layout, x) in &inputs {
        for (name, op) in ops() {
            let report = gradcheck(
                |v: &[Tensor]| op(&v[0]),
                std::slice::from_ref(x),
                GradcheckOptions::default(),
            );
            assert!(report.is_ok(), "{name} on a {layout} input: {report:?}");
        }
    }
}

/// `d op(x) / dx` with a cotangent of ones.
fn grad_of(y: &Tensor, x: &Tensor) -> Vec<f32> {
    let ones = t(&vec![1.0; y.size()], &y.dims());
    vals(
        grad(y, &[x], &ones, GradOptions::default()).unwrap()[0]
            .as_ref()
            .unwrap(),
    )
}

#[test]
fn prod_and_cumprod_gradients_with_zeros_never_divide() {
    let one = t(&[2.0, 0.0, 3.0, 4.0], &[4]);
    assert_eq!(grad_of(&prod(&one).unwrap(), &one), [0.0, 24.0, 0.0, 0.0]);
    let two = t(&[2.0, 0.0, 3.0, 0.0], &[4]);
    assert_eq!(grad_of(&prod(&two).unwrap(), &two), [0.0; 4]);
    let rows = t(&[0.0, 5.0, 0.0, 0.0, 7.0, 2.0], &[2, 3]);
    assert_eq!(
        grad_of(&prod_axis(&rows, 1, false).unwrap(), &rows),
        [0.0, 0.0, 0.0, 14.0, 0.0, 0.0]
    );
    // cumprod: P(k-1) S(k), as PyTorch's [1, 32, 0, 0] for [2, 0, 3, 4]
    let x = t(&[2.0, 0.0, 3.0, 4.0, 1.0, 2.0, 3.0, 0.0], &[2, 4]);
    assert_eq!(
        grad_of(&cumprod(&x, 1).unwrap(), &x),
        [1.0, 32.0, 0.0, 0.0, 9.0, 4.0, 2.0, 6.0]
    );
}

#[test]
fn logsumexp_is_stable_and_handles_infinities() {
    let x = t(&[1000.0, 1000.0, -1000.0, -1000.0], &[2, 2]);
    let y = vals(&logsumexp(&x, 1, false).unwrap());
    assert!((y[0] - (1000.0 + std::f32::consts::LN_2)).abs() < 1e-3);
    assert!((y[1] + 1000.0 - std::f32::consts::LN_2).abs() < 1e-3);
    let inf = f32::INFINITY;
    let x = t(&[-inf, -inf, inf, 0.0, f32::NAN, 0.0], &[3, 2]);
    let y = vals(&logsumexp(&x, 1, false).unwrap());
    assert_eq!(y[..2], [-inf, inf]);
    assert!(y[2].is_nan());
    // an empty group is -inf (the log of an empty sum), as PyTorch's
    let empty = Tensor::from_vec(Vec::<f32>::new(), shape![2, 0]).unwrap();
    assert_eq!(vals(&logsumexp(&empty, 1, false).unwrap()), [-inf, -inf]);
    let d = Tensor::from_vec(vec![0.0f64, 0.0], shape![2]).unwrap();
    let y = logsumexp(&d, 0, false).unwrap();
    assert_eq!(y.dtype(), &DType::Float64);
    assert!((y.values::<f64>().unwrap()[0] - std::f64::consts::LN_2).abs() < 1e-15);
}

#[test]
fn topk_ties_sort_stability_and_nan() {
    // ties go to the lower index, sorted or in index order
    let x = t(&[1.0, 3.0, 3.0, 2.0, 3.0, 3.0], &[6]);
    let (v, i) = topk(&x, 3, 0, true, true).unwrap();
    assert_eq!(
        (vals(&v), i.values::<i64>().unwrap()),
        (vec![3.0; 3], vec![1, 2, 4])
    );
    let (_, i) = topk(&x, 3, 0, false, false).unwrap();
    assert_eq!(i.values::<i64>().unwrap(), [0, 1, 3]);
    // more than the small-buffer path holds: the same rule through selection
    let long: Vec<f32> = (0..300).map(|j| (j % 7) as f32).collect();
    let (v, i) = topk(&t(&long, &[300]), 100, 0, true, true).unwrap();
    let mut sorted_want: Vec<i64> = (0..300).collect();
    sorted_want.sort_by_key(|&j| (-(j % 7), j));
    sorted_want.truncate(100);
    assert_eq!(i.values::<i64>().unwrap(), sorted_want);
    assert!(vals(&v).windows(2).all(|w| w[0] >= w[1]));
    // stable sort with equal keys, both directions; NaN last ascending, first descending
    let nan = f32::NAN;
    let x = t(&[2.0, 1.0, nan, 2.0, 1.0, nan], &[6]);
    let (_, i) = sort(&x, 0, false).unwrap();
    assert_eq!(i.values::<i64>().unwrap(), [1, 4, 0, 3, 2, 5]);
    let (_, i) = sort(&x, 0, true).unwrap();
    assert_eq!(i.values::<i64>().unwrap(), [2, 5, 0, 3, 1, 4]);
    // max and min return the first NaN and its index
    let (v, i) = max_axis(&x, 0, false).unwrap();
    assert!(vals(&v)[0].is_nan());
    assert_eq!(i.values::<i64>().unwrap(), [2]);
    let (v, i) = min_axis(&x, 0, true).unwrap();
    assert!(vals(&v)[0].is_nan() && v.dims() == [1]);
    assert_eq!(i.values::<i64>().unwrap(), [2]);
    // the gradient of max goes to the returned index only
    let x = t(&[1.0, 5.0, 5.0], &[3]);
    assert_eq!(
        grad_of(&max_axis(&x, 0, false).unwrap().0, &x),
        [0.0, 1.0, 0.0]
    );
}

#[test]
fn integer_and_double_inputs_without_gradients() {
    let i = Tensor::from_vec(vec![3i32, -1, 2, 2, 0, 5], shape![2, 3]).unwrap();
    let c = cumsum(&i, 1).unwrap();
    assert_eq!(c.dtype(), &DType::Int64);
    assert_eq!(c.values::<i64>().unwrap(), [3, 2, 4, 2, 2, 7]);
    assert_eq!(
        cumprod(&i, 0).unwrap().values::<i64>().unwrap(),
        [3, -1, 2, 6, 0, 10]
    );
    assert_eq!(prod(&i).unwrap().values::<i64>().unwrap(), [0]);
    assert_eq!(
        prod_axis(&i, 1, false).unwrap().values::<i64>().unwrap(),
        [-6, 0]
    );
    let (v, at) = sort(&i, 1, true).unwrap();
    assert_eq!(v.values::<i32>().unwrap(), [3, 2, -1, 5, 2, 0]);
    assert_eq!(at.values::<i64>().unwrap(), [0, 2, 1, 2, 0, 1]);
    let (v, at) = topk(&i, 1, 0, false, true).unwrap();
    assert_eq!(
        (v.values::<i32>().unwrap(), at.values::<i64>().unwrap()),
        (vec![2, -1, 2], vec![1, 0, 0])
    );
    let (v, at) = max_axis(&i, -1, false).unwrap();
    assert_eq!(
        (v.values::<i32>().unwrap(), at.values::<i64>().unwrap()),
        (vec![3, 5], vec![0, 2])
    );
    let l = Tensor::from_vec(vec![4i64, 9], shape![2]).unwrap();
    assert_eq!(cumsum(&l, 0).unwrap().values::<i64>().unwrap(), [4, 13]);
    let d = Tensor::from_vec(vec![3.0f64, -4.0, 1.0, 1.0], shape![2, 2]).unwrap();
    assert_eq!(
        norm(&d, 2.0, 1, false).unwrap().values::<f64>().unwrap()[0],
        5.0
    );
    assert_eq!(std_axes(&d, 0, false, 1).unwrap().dtype(), &DType::Float64);
    assert_eq!(
        cumprod(&d, 1).unwrap().values::<f64>().unwrap(),
        [3.0, -12.0, 1.0, 1.0]
    );
    // no node for inputs that are not Float32
    assert!(cumsum(&d, 0).unwrap().autograd_ctx().is_none());
}

#[test]
fn truth_reductions_take_every_dtype() {
    let f = t(&[0.0, f32::NAN, -0.0, 2.0], &[2, 2]);
    assert_eq!(all(&f).unwrap().values::<bool>().unwrap(), [false]);
    assert_eq!(any(&f).unwrap().values::<bool>().unwrap(), [true]);
    let by_row = any_axes(&f, 1, false).unwrap();
    assert_eq!(by_row.dtype(), &DType::Bool);
    assert_eq!(by_row.values::<bool>().unwrap(), [true, true]);
    assert_eq!(all_axes(&f, -1, true).unwrap().dims(), [2, 1]);
    assert_eq!(
        all_axes(&f, 0, false).unwrap().values::<bool>().unwrap(),
        [false, true]
    );
    let n = count_nonzero(&f, 0).unwrap();
    assert_eq!(n.dtype(), &DType::Int64);
    assert_eq!(n.values::<i64>().unwrap(), [0, 2]);
    let b = Tensor::from_vec(vec![true, false, true], shape![3]).unwrap();
    assert_eq!(count_nonzero(&b, 0).unwrap().values::<i64>().unwrap(), [2]);
    assert_eq!(b.all().unwrap().values::<bool>().unwrap(), [false]);
    let i = Tensor::from_vec(vec![1i64, 2, 3], shape![3]).unwrap();
    assert_eq!(i.all().unwrap().values::<bool>().unwrap(), [true]);
    let empty = Tensor::from_vec(Vec::<i32>::new(), shape![0]).unwrap();
    assert_eq!(all(&empty).unwrap().values::<bool>().unwrap(), [true]);
    assert_eq!(any(&empty).unwrap().values::<bool>().unwrap(), [false]);
    // an empty axes list reduces nothing
    assert_eq!(
        count_nonzero(&f, &[] as &[i64])
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [0, 1, 0, 1]
    );
}

#[test]
fn empty_axes_and_empty_extents() {
    let x = t(&[1.0, -2.0, 3.0, -4.0], &[2, 2]);
    let none: &[i64] = &[];
    // reducing no axes is the identity of the group function
    assert_eq!(vals(&logsumexp(&x, none, false).unwrap()), vals(&x));
    assert_eq!(
        vals(&norm(&x, 1.0, none, false).unwrap()),
        [1.0, 2.0, 3.0, 4.0]
    );
    let empty = Tensor::from_vec(Vec::<f32>::new(), shape![2, 0]).unwrap();
    assert_eq!(vals(&prod_axis(&empty, 1, false).unwrap()), [1.0, 1.0]);
    assert_eq!(vals(&prod(&empty).unwrap()), [1.0]);
    assert_eq!(cumsum(&empty, 1).unwrap().dims(), [2, 0]);
    let (v, i) = sort(&empty, 1, false).unwrap();
    assert_eq!((v.dims(), i.dims()), (vec![2, 0], vec![2, 0]));
    assert_eq!(vals(&norm(&empty, 2.0, 1, false).unwrap()), [0.0, 0.0]);
    assert_eq!(kind(max_axis(&empty, 1, false)), ErrorKind::Value);
    let (v, _) = topk(&empty, 0, 1, true, true).unwrap();
    assert_eq!(v.dims(), [2, 0]);
}

#[test]
fn bad_inputs_are_errors_that_change_nothing() {
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let before = vals(&x);
    assert_eq!(kind(topk(&x, 3, 1, true, true)), ErrorKind::Value);
    assert_eq!(kind(cumsum(&x, 2)), ErrorKind::Value);
    assert_eq!(kind(cumprod(&x, -3)), ErrorKind::Value);
    assert_eq!(kind(logsumexp(&x, &[0, 0], false)), ErrorKind::Value);
    assert_eq!(kind(logsumexp(&x, 5, false)), ErrorKind::Value);
    assert_eq!(kind(prod_axis(&x, 2, false)), ErrorKind::Value);
    assert_eq!(kind(std_axes(&x, -3, false, 1)), ErrorKind::Value);
    assert_eq!(kind(norm(&x, 0.0, 1, false)), ErrorKind::Value);
    assert_eq!(kind(norm(&x, -1.0, 1, false)), ErrorKind::Value);
    assert_eq!(kind(norm(&x, f64::NAN, 1, false)), ErrorKind::Value);
    assert_eq!(kind(sort(&x, 2, false)), ErrorKind::Value);
    assert_eq!(kind(max_axis(&x, 2, false)), ErrorKind::Value);
    assert_eq!(kind(count_nonzero(&x, 2)), ErrorKind::Value);
    // dtypes
    let b = Tensor::from_vec(vec![true, false], shape![2]).unwrap();
    let i = Tensor::from_vec(vec![1i32, 2], shape![2]).unwrap();
    assert_eq!(kind(sort(&b, 0, false)), ErrorKind::Type);
    assert_eq!(kind(cumsum(&b, 0)), ErrorKind::Type);
    assert_eq!(kind(prod(&b)), ErrorKind::Type);
    assert_eq!(kind(logsumexp(&i, 0, false)), ErrorKind::Type);
    assert_eq!(kind(norm(&i, 2.0, 0, false)), ErrorKind::Type);
    assert_eq!(kind(std_axes(&i, 0, false, 1)), ErrorKind::Type);
    assert_eq!(kind(topk(&b, 1, 0, true, true)), ErrorKind::Type);
    assert_eq!(vals(&x), before);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn method_forms_match_the_functions() {
    let x = t(&noise(12, 3), &[3, 4]);
    assert_eq!(
        vals(&x.logsumexp(-1, true).unwrap()),
        vals(&logsumexp(&x, -1, true).unwrap())
    );
    assert_eq!(vals(&x.cumsum(0).unwrap()), vals(&cumsum(&x, 0).unwrap()));
    assert_eq!(vals(&x.cumprod(1).unwrap()), vals(&cumprod(&x, 1).unwrap()));
    assert_eq!(vals(&x.prod().unwrap()), vals(&prod(&x).unwrap()));
    assert_eq!(
        vals(&x.prod_axis(1, true).unwrap()),
        vals(&prod_axis(&x, 1, true).unwrap())
    );
    assert_eq!(
        vals(&x.std_axes(1, false, 0).unwrap()),
        vals(&std_axes(&x, 1, false, 0).unwrap())
    );
    assert_eq!(
        vals(&x.norm(3.0, 0, false).unwrap()),
        vals(&norm(&x, 3.0, 0, false).unwrap())
    );
    assert_eq!(
        vals(&x.max_axis(1, false).unwrap().0),
        vals(&max_axis(&x, 1, false).unwrap().0)
    );
    assert_eq!(
        vals(&x.min_axis(1, false).unwrap().0),
        vals(&min_axis(&x, 1, false).unwrap().0)
    );
    assert_eq!(
        vals(&x.topk(2, 0, true, true).unwrap().0),
        vals(&topk(&x, 2, 0, true, true).unwrap().0)
    );
    assert_eq!(
        vals(&x.sort(0, true).unwrap().0),
        vals(&sort(&x, 0, true).unwrap().0)
    );
    assert_eq!(
        x.argsort(1, false).unwrap().values::<i64>().unwrap(),
        sort(&x, 1, false).unwrap().1.values::<i64>().unwrap()
    );
    assert_eq!(x.any().unwrap().values::<bool>().unwrap(), [true]);
    assert_eq!(
        x.count_nonzero(&[0, 1]).unwrap().values::<i64>().unwrap(),
        [12]
    );
    assert_eq!(x.all_axes(0, false).unwrap().dims(), [4]);
    assert_eq!(x.any_axes(1, true).unwrap().dims(), [3, 1]);
    assert_eq!(x.all().unwrap().values::<bool>().unwrap(), [true]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sort_is_an_ordered_permutation(
        values in prop::collection::vec(prop_oneof![-4i32..4, Just(100)], 1..40),
        descending in prop::bool::ANY,
    ) {
        // small integers as floats, so equal keys are frequent; 100 stands for NaN
        let xs: Vec<f32> = values.iter().map(|&v| if v == 100 { f32::NAN } else { v as f32 }).collect();
        let n = xs.len();
        let (v, i) = sort(&t(&xs, &[n]), 0, descending).unwrap();
        let (v, i) = (vals(&v), i.values::<i64>().unwrap());
        let mut seen = vec![false; n];
        for (j, &at) in i.iter().enumerate() {
            let at = usize::try_from(at).unwrap();
            prop_assert!(!seen[at]);
            seen[at] = true;
            prop_assert!(v[j].to_bits() == xs[at].to_bits());
        }
        for w in 0..n.saturating_sub(1) {
            let (a, b) = (v[w], v[w + 1]);
            let key = |x: f32| if x.is_nan() { f32::INFINITY } else { x };
            let ordered = if descending { key(a) >= key(b) } else { key(a) <= key(b) };
            prop_assert!(ordered, "{v:?}");
            // equal keys keep their order (NaN equal to NaN)
            if a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) {
                prop_assert!(i[w] < i[w + 1]);
            }
        }
    }

    #[test]
    fn cumsum_ends_at_the_sum(values in prop::collection::vec(-100i32..100, 1..50)) {
        let xs: Vec<f32> = values.iter().map(|&v| v as f32 / 8.0).collect();
        let n = xs.len();
        let c = vals(&cumsum(&t(&xs, &[n]), 0).unwrap());
        let s: f32 = xs.iter().sum();
        prop_assert_eq!(c[n - 1], s);
        let (v, _) = topk(&t(&xs, &[n]), 1, 0, true, true).unwrap();
        prop_assert_eq!(vals(&v)[0], xs.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    }
}

//! The indexing ops of issue 38 item 4 (`masked_select`, `repeat_interleave`, `index_add`,
//! `index_put`, `scatter`, `scatter_value`, `take_along_dim`, `diagonal`, `diag_embed`, `diag`
//! and `where_cond` with a scalar): forward values and gradients against the numbers PyTorch
//! 2.15 prints (`tests/fixtures/index/index.txt`, written by `gen_index.py` beside it),
//! plain-loop references, gradcheck on contiguous, strided and broadcast inputs, other dtypes,
//! the documented choices (last write wins), every error (which changes nothing), and
//! properties (the diagonal of `diag_embed` is its input).

use autograd_core::ops::{
    diag, diag_embed, diagonal, index_add, index_put, masked_select, repeat_interleave, scatter,
    scatter_value, take_along_dim, where_cond,
};
use autograd_core::{
    grad, gradcheck, shape, ErrorKind, GradOptions, GradcheckOptions, Shape, Tensor,
};
use autograd_tests::fixture::{floats, mismatches, numbers, operand, Tolerance};
use autograd_tests::{broadcast_rows, coords, kind, noise, strided, t, vals};
use proptest::prelude::*;

const INDEX: &str = include_str!("../fixtures/index/index.txt");

const EXACT: Tolerance = Tolerance {
    abs: 1e-6,
    rel: 1e-6,
};

/// An Int64 tensor from a fixture operand `dims:values`.
fn ints(field: &str) -> Tensor {
    let (dims, values) = field.split_once(':').expect("dims:values");
    Tensor::from_vec(
        numbers::<i64>(values),
        Shape::from(numbers::<usize>(dims).as_slice()),
    )
    .unwrap()
}

/// A Bool tensor from a fixture operand of 0/1 values.
fn mask(field: &str) -> Tensor {
    let i = ints(field);
    let v: Vec<bool> = i
        .values::<i64>()
        .unwrap()
        .into_iter()
        .map(|b| b == 1)
        .collect();
    Tensor::from_vec(v, i.shape().clone()).unwrap()
}

/// An Int64 tensor of `values` and `dims`.
fn long(values: &[i64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), Shape::from(dims)).unwrap()
}

/// A Bool tensor of `values` and `dims`.
fn bools(values: &[bool], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), Shape::from(dims)).unwrap()
}

#[test]
fn the_indexing_ops_give_pytorchs_values_and_gradients() {
    let mut cases = 0;
    let mut wrong = Vec::new();
    for line in INDEX.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [label, op, args, x, int_ops, other, cotangent, output, grad_x, grad_other] = f[..]
        else {
            panic!("a fixture line has ten fields: {line}");
        };
        let args: Vec<f64> = numbers(args);
        let arg = |k: usize| args[k] as i64;
        let (dims, xv) = operand(x).unwrap();
        let x = t(&xv, &dims);
        let int_ops: Vec<&str> = int_ops.split(';').filter(|s| !s.is_empty()).collect();
        let other = operand(other).map(|(d, v)| t(&v, &d));
        let y = match op {
            "masked_select" => masked_select(&x, &mask(int_ops[0])),
            "repeat_interleave" => match (int_ops.first(), args.len()) {
                (Some(counts), _) => repeat_interleave(&x, &ints(counts), arg(0)),
                (None, 2) => repeat_interleave(&x, arg(0), arg(1)),
                (None, _) => repeat_interleave(&x, arg(0), None),
            },
            "index_add" => index_add(
                &x,
                arg(0),
                &ints(int_ops[0]),
                other.as_ref().unwrap(),
                args[1],
            ),
            "index_put" => {
                let idx: Vec<Tensor> = int_ops.iter().map(|s| ints(s)).collect();
                index_put(&x, &idx, other.as_ref().unwrap(), arg(0) == 1)
            }
            "scatter" => scatter(&x, arg(0), &ints(int_ops[0]), other.as_ref().unwrap()),
            "scatter_value" => scatter_value(&x, arg(0), &ints(int_ops[0]), args[1] as f32),
            "take_along_dim" => match args.first() {
                Some(_) => take_along_dim(&x, &ints(int_ops[0]), arg(0)),
                None => take_along_dim(&x, &ints(int_ops[0]), None),
            },
            "diagonal" => diagonal(&x, arg(0), arg(1), arg(2)),
            "diag_embed" => diag_embed(&x, arg(0), arg(1), arg(2)),
            "diag" => diag(&x, arg(0)),
            "where_scalar_b" => where_cond(&mask(int_ops[0]), &x, args[0] as f32),
            "where_scalar_a" => where_cond(&mask(int_ops[0]), args[0] as f32, &x),
            other => panic!("unknown op {other}"),
        }
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        let (out_dims, want) = operand(output).unwrap();
        assert_eq!(y.dims(), out_dims, "{label}: shape");
        wrong.extend(mismatches(label, "forward", &vals(&y), &want, EXACT));
        let (_, g) = operand(cotangent).unwrap();
        let inputs: Vec<&Tensor> = std::iter::once(&x).chain(other.as_ref()).collect();
        // a view's cotangent comes in the view's layout
        let grads = grad(&y, &inputs, &y.f32_like(g).unwrap(), GradOptions::default()).unwrap();
        let dx = grads[0].as_ref().map(vals).unwrap_or_default();
        wrong.extend(mismatches(label, "gradient", &dx, &floats(grad_x), EXACT));
        if !grad_other.is_empty() {
            let d = grads[1].as_ref().map(vals).unwrap_or_default();
            wrong.extend(mismatches(
                label,
                "other's gradient",
                &d,
                &floats(grad_other),
                EXACT,
            ));
        }
        cases += 1;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(cases, 30);
}

/// The row-major position of coordinate `c` in extents `dims`.
fn position(c: &[usize], dims: &[usize]) -> usize {
    c.iter().zip(dims).fold(0, |p, (&c, &d)| p * d + c)
}

#[test]
fn scatter_index_add_and_index_put_agree_with_plain_loops() {
    let (dims, idims) = ([3, 5], [3, 4]);
    let a = noise(15, 1);
    let src = noise(12, 2);
    let index: Vec<i64> = (0..12).map(|k| (k * 7 % 5) as i64).collect();
    // scatter along axis 1: y[i][index[i][j]] = src[i][j], later j winning
    let mut want = a.clone();
    for p in 0..12 {
        let c = coords(p, &idims);
        want[position(&[c[0], index[p] as usize], &dims)] = src[p];
    }
    let y = scatter(&t(&a, &dims), 1, &long(&index, &idims), &t(&src, &idims)).unwrap();
    assert_eq!(vals(&y), want);
    // index_add along axis 0 with repeated rows
    let rows = [2i64, 0, 2];
    let source = noise(15, 3);
    let mut want = a.clone();
    for (j, &r) in rows.iter().enumerate() {
        for k in 0..5 {
            want[r as usize * 5 + k] += 0.25 * source[j * 5 + k];
        }
    }
    let y = index_add(
        &t(&a, &dims),
        0,
        &long(&rows, &[3]),
        &t(&source, &[3, 5]),
        0.25,
    )
    .unwrap();
    for (got, want) in vals(&y).iter().zip(&want) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
    // index_put on both axes with accumulation
    let (r, c) = ([0i64, 2, 2, -1], [4i64, 1, 1, 0]);
    let v = noise(4, 4);
    let mut want = a.clone();
    for k in 0..4 {
        let row = r[k].rem_euclid(3) as usize;
        want[row * 5 + c[k] as usize] += v[k];
    }
    let y = index_put(
        &t(&a, &dims),
        &[long(&r, &[4]), long(&c, &[4])],
        &t(&v, &[4]),
        true,
    )
    .unwrap();
    for (got, want) in vals(&y).iter().zip(&want) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
}

#[test]
fn masked_select_take_along_dim_and_repeat_interleave_agree_with_plain_loops() {
    let dims = [2, 3, 4];
    let x = noise(24, 5);
    let m: Vec<bool> = (0..12).map(|k| k % 5 != 1).collect();
    // the mask [3, 4] broadcast over the leading axis
    let want: Vec<f32> = (0..24).filter(|p| m[p % 12]).map(|p| x[p]).collect();
    let y = masked_select(&strided(&x, &dims), &bools(&m, &[3, 4])).unwrap();
    assert_eq!(vals(&y), want);
    // take_along_dim on the middle axis with indices [2, 2, 4]
    let idx: Vec<i64> = (0..16).map(|k| (k * 5 % 3) as i64).collect();
    let mut want = Vec::new();
    for p in 0..16 {
        let c = coords(p, &[2, 2, 4]);
        want.push(x[position(&[c[0], idx[p] as usize, c[2]], &dims)]);
    }
    let y = take_along_dim(&t(&x, &dims), &long(&idx, &[2, 2, 4]), 1).unwrap();
    assert_eq!(vals(&y), want);
    // repeat_interleave with counts on the last axis
    let counts = [0i64, 3, 1, 2];
    let mut want = Vec::new();
    for row in x.chunks(4) {
        for (k, &n) in counts.iter().enumerate() {
            want.extend(std::iter::repeat_n(row[k], n as usize));
        }
    }
    let y = repeat_interleave(&strided(&x, &dims), &long(&counts, &[4]), -1).unwrap();
    assert_eq!(y.dims(), [2, 3, 6]);
    assert_eq!(vals(&y), want);
    // and one count for every element, on the method form
    let y = t(&x, &dims).repeat_interleave(2usize, 0).unwrap();
    let want: Vec<f32> = [&x[..12], &x[..12], &x[12..], &x[12..]].concat();
    assert_eq!(vals(&y), want);
}

#[test]
fn diagonal_is_a_view_and_diag_embed_puts_it_back() {
    let x = t(&(0..24).map(|v| v as f32).collect::<Vec<_>>(), &[2, 3, 4]);
    let d = diagonal(&x, 1, 1, 2).unwrap();
    assert_eq!(d.carrier().unwrap().id(), x.carrier().unwrap().id());
    assert_eq!(d.dims(), [2, 3]);
    assert_eq!(vals(&d), [1.0, 6.0, 11.0, 13.0, 18.0, 23.0]);
    // on a strided input it is still a view, reading the same elements
    let s = strided(&vals(&x), &[2, 3, 4]);
    let ds = s.diagonal(1, -2, -1).unwrap();
    assert_eq!(ds.carrier().unwrap().id(), s.carrier().unwrap().id());
    assert_eq!(vals(&ds), vals(&d));
    // the axes reversed read (i + offset, i)
    assert_eq!(
        vals(&diagonal(&x, 1, 2, 1).unwrap()),
        [4.0, 9.0, 16.0, 21.0]
    );
    let e = diag_embed(&d, 1, 1, 2).unwrap();
    assert_eq!(e.dims(), [2, 4, 4]);
    assert_eq!(vals(&diagonal(&e, 1, 1, 2).unwrap()), vals(&d));
    assert_eq!(vals(&e).iter().filter(|&&v| v != 0.0).count(), 6);
    assert_eq!(
        vals(&t(&[1.0, 2.0], &[2]).diag(0).unwrap()),
        [1.0, 0.0, 0.0, 2.0]
    );
    assert_eq!(
        vals(
            &t(&[1.0, 2.0, 3.0, 4.0], &[2, 2])
                .diag_embed(0, 0, 1)
                .unwrap()
        )
        .len(),
        8
    );
}

/// An op under gradcheck, of its inputs.
type Op<'a> = Box<dyn Fn(&[Tensor]) -> autograd_core::Result<Tensor> + 'a>;

#[test]
fn gradcheck_on_contiguous_strided_and_broadcast_inputs() {
    let values = noise(12, 9);
    let row = noise(4, 10);
    let inputs = [
        t(&values, &[3, 4]),
        strided(&values, &[3, 4]),
        broadcast_rows(&row, 3),
    ];
    let src = t(&noise(6, 12), &[3, 2]);
    let idx = long(&[3, 0, 1, 2, 0, 3], &[3, 2]);
    let m = bools(&[true, false, true, true], &[4]);
    for x in &inputs {
        let unary: Vec<(&str, Op<'_>)> = vec![
            ("masked_select", Box::new(|v| masked_select(&v[0], &m))),
            (
                "repeat_interleave",
                Box::new(|v| repeat_interleave(&v[0], &long(&[2, 0, 1, 3], &[4]), 1)),
            ),
            (
                "repeat_interleave flat",
                Box::new(|v| repeat_interleave(&v[0], 2, None)),
            ),
            (
                "take_along_dim",
                Box::new(|v| take_along_dim(&v[0], &long(&[3, 1, 1], &[1, 3]), -1)),
            ),
            ("diagonal", Box::new(|v| diagonal(&v[0], -1, 0, 1))),
            ("diag_embed", Box::new(|v| diag_embed(&v[0], 1, 0, -1))),
            ("diag", Box::new(|v| diag(&v[0], 2))),
            (
                "scatter_value",
                Box::new(|v| scatter_value(&v[0], 1, &idx, 0.5f32)),
            ),
            ("where scalar", Box::new(|v| where_cond(&m, &v[0], 2.0f32))),
        ];
        for (name, op) in unary {
            let report = gradcheck(op, std::slice::from_ref(x), GradcheckOptions::default());
            assert!(report.is_ok(), "{name} {:?}: {report:?}", x.dims());
        }
        let binary: Vec<(&str, Tensor, Op<'_>)> = vec![
            (
                "scatter",
                src.clone(),
                Box::new(|v| scatter(&v[0], 1, &idx, &v[1])),
            ),
            (
                "index_add",
                t(&noise(8, 13), &[2, 4]),
                Box::new(|v| index_add(&v[0], 0, &long(&[2, 2], &[2]), &v[1], -1.5)),
            ),
            (
                "index_put",
                t(&noise(2, 14), &[2]),
                Box::new(|v| {
                    index_put(
                        &v[0],
                        &[long(&[2, 0], &[2]), long(&[1, 3], &[2])],
                        &v[1],
                        false,
                    )
                }),
            ),
            (
                "index_put accumulate, values broadcast",
                t(&noise(4, 15), &[4]),
                Box::new(|v| index_put(&v[0], &[long(&[1, 1, 2], &[3])], &v[1], true)),
            ),
        ];
        for (name, other, op) in binary {
            let report = gradcheck(op, &[x.clone(), other], GradcheckOptions::default());
            assert!(report.is_ok(), "{name} {:?}: {report:?}", x.dims());
        }
    }
}

#[test]
fn overwriting_duplicates_keeps_the_last_write_and_its_gradient_follows_pytorch() {
    let a = t(&[0.0; 3], &[3]);
    let v = t(&[1.0, 2.0, 3.0], &[3]);
    let y = index_put(&a, &[long(&[1, 1, 1], &[3])], &v, false).unwrap();
    assert_eq!(vals(&y), [0.0, 3.0, 0.0]);
    // PyTorch's rule: every value gets the cotangent at its target, the input none there
    let g = grad(
        &y,
        &[&a, &v],
        &t(&[1.0, 2.0, 3.0], &[3]),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [1.0, 0.0, 3.0]);
    assert_eq!(vals(g[1].as_ref().unwrap()), [2.0, 2.0, 2.0]);
    let s = scatter(&a, 0, &long(&[2, 0, 2], &[3]), &v).unwrap();
    assert_eq!(vals(&s), [2.0, 0.0, 3.0]);
}

#[test]
fn where_cond_takes_scalars_on_either_side() {
    let x = t(&[1.0, -2.0, 3.0], &[3]);
    let m = bools(&[true, false, false], &[3]);
    assert_eq!(vals(&where_cond(&m, &x, 0.0).unwrap()), [1.0, 0.0, 0.0]);
    assert_eq!(vals(&where_cond(&m, 1.0, &x).unwrap()), [1.0, -2.0, 3.0]);
    assert_eq!(vals(&m.where_cond(&x, 5.0f32).unwrap()), [1.0, 5.0, 5.0]);
    // two scalars: the first one's dtype
    let both = where_cond(&m, 1.0f32, 0.0f32).unwrap();
    assert_eq!(vals(&both), [1.0, 0.0, 0.0]);
    let i = Tensor::from_vec(vec![4i32, 5, 6], shape![3]).unwrap();
    assert_eq!(
        where_cond(&m, &i, 0i32).unwrap().values::<i32>().unwrap(),
        [4, 0, 0]
    );
    // the gradient reaches the tensor where it was chosen
    let y = where_cond(&m, 7.0, &x).unwrap();
    let g = grad(
        &y,
        &[&x],
        &t(&[1.0, 1.0, 1.0], &[3]),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [0.0, 1.0, 1.0]);
    // a scalar the tensor's dtype cannot hold
    assert_eq!(kind(where_cond(&m, &i, 0.5)), ErrorKind::Type);
}

#[test]
fn integer_and_bool_inputs_work_without_gradients() {
    let a = long(&[1, 2, 3, 4], &[2, 2]);
    let idx = long(&[1, 0], &[2, 1]);
    assert_eq!(
        scatter(&a, 1, &idx, &long(&[9, 8], &[2, 1]))
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [1, 9, 8, 4]
    );
    assert_eq!(
        index_add(&a, 0, &long(&[1], &[1]), &long(&[10, 20], &[1, 2]), 2.0)
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [1, 2, 23, 44]
    );
    let b = bools(&[true, false, true, false], &[2, 2]);
    let put = index_put(&b, &[long(&[1], &[1])], &bools(&[true], &[1]), false).unwrap();
    assert_eq!(put.values::<bool>().unwrap(), [true, false, true, true]);
    assert_eq!(
        masked_select(&a, &b).unwrap().values::<i64>().unwrap(),
        [1, 3]
    );
    assert_eq!(
        diagonal(&b, 0, 0, 1).unwrap().values::<bool>().unwrap(),
        [true, false]
    );
    let i32s = Tensor::from_vec(vec![5i32, 6], shape![2]).unwrap();
    assert_eq!(
        repeat_interleave(&i32s, 2, 0)
            .unwrap()
            .values::<i32>()
            .unwrap(),
        [5, 5, 6, 6]
    );
    let d = Tensor::from_vec(vec![0.5f64, 1.5], shape![2]).unwrap();
    assert_eq!(
        diag_embed(&d, -1, 0, 1).unwrap().values::<f64>().unwrap(),
        [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.5, 0.0]
    );
}

#[test]
fn empty_selections_and_empty_inputs_give_empty_results() {
    let x = t(&noise(6, 30), &[2, 3]);
    // nothing selected: a [0] result whose gradient is all zeros
    let none = masked_select(&x, &bools(&[false; 3], &[3])).unwrap();
    assert_eq!(none.dims(), [0]);
    let g = grad(&none, &[&x], &t(&[], &[0]), GradOptions::default()).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [0.0; 6]);
    // empty indices write and read nothing
    let empty = long(&[], &[2, 0]);
    assert_eq!(
        vals(&scatter(&x, 1, &empty, &t(&[], &[2, 0])).unwrap()),
        vals(&x)
    );
    assert_eq!(take_along_dim(&x, &empty, 1).unwrap().dims(), [2, 0]);
    let put = index_put(&x, &[long(&[], &[0])], &t(&[], &[0, 3]), true).unwrap();
    assert_eq!(vals(&put), vals(&x));
    assert_eq!(repeat_interleave(&x, 0, 1).unwrap().dims(), [2, 0]);
    // an empty input
    let e = t(&[], &[0, 3]);
    assert_eq!(diagonal(&e, 0, 0, 1).unwrap().dims(), [0]);
    assert_eq!(diag_embed(&t(&[], &[0]), 0, 0, 1).unwrap().dims(), [0, 0]);
    assert_eq!(
        masked_select(&e, &bools(&[true; 3], &[3])).unwrap().dims(),
        [0]
    );
}

#[test]
fn bad_inputs_are_errors_that_name_the_sizes_and_change_nothing() {
    let x = t(&noise(12, 20), &[3, 4]);
    let before = vals(&x);
    let msg = |r: autograd_core::Result<Tensor>| r.unwrap_err().to_string();
    let src = t(&noise(6, 21), &[3, 2]);
    // scatter: an index out of range, a negative index, a shape too large, dtypes, an axis
    let e = msg(scatter(&x, 1, &long(&[0, 4, 0, 0, 0, 0], &[3, 2]), &src));
    assert!(e.contains("index 4") && e.contains("extent 4"), "{e}");
    assert_eq!(
        kind(scatter(&x, 1, &long(&[0, -1, 0, 0, 0, 0], &[3, 2]), &src)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(scatter(&x, 1, &long(&[0; 9], &[3, 3]), &src)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(scatter(&x, 1, &long(&[0; 6], &[6]), &src)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(scatter(&x, 2, &long(&[0; 6], &[3, 2]), &src)),
        ErrorKind::Value
    );
    assert_eq!(kind(scatter(&x, 1, &src, &src)), ErrorKind::Type);
    let d = Tensor::from_vec(vec![0.0f64; 6], shape![3, 2]).unwrap();
    assert_eq!(
        kind(scatter(&x, 1, &long(&[0; 6], &[3, 2]), &d)),
        ErrorKind::Type
    );
    assert_eq!(
        kind(scatter_value(&long(&[1], &[1]), 0, &long(&[0], &[1]), 0.5)),
        ErrorKind::Type
    );
    // index_add: source shape, index rank, range, alpha for integers
    let e = msg(index_add(&x, 0, &long(&[0, 1], &[2]), &src, 1.0));
    assert!(e.contains("[3, 2]") && e.contains("[2, 4]"), "{e}");
    assert_eq!(
        kind(index_add(&x, 0, &long(&[0, 1], &[1, 2]), &src, 1.0)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(index_add(&x, 1, &long(&[4, 0], &[2]), &src, 1.0)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(index_add(
            &long(&[1, 2], &[2]),
            0,
            &long(&[0], &[1]),
            &long(&[1], &[1]),
            0.5
        )),
        ErrorKind::Type
    );
    // index_put: no indices, too many, shapes that do not broadcast, out of range, values
    let v = t(&[1.0, 2.0], &[2]);
    assert_eq!(kind(index_put(&x, &[], &v, false)), ErrorKind::Value);
    let i0 = long(&[0], &[1]);
    assert_eq!(
        kind(index_put(
            &x,
            &[i0.clone(), i0.clone(), i0.clone()],
            &v,
            false
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(index_put(
            &x,
            &[long(&[0, 1], &[2]), long(&[0, 1, 2], &[3])],
            &v,
            false
        )),
        ErrorKind::Value
    );
    let e = msg(index_put(
        &x,
        &[long(&[-4], &[1])],
        &t(&[0.0; 4], &[4]),
        false,
    ));
    assert!(e.contains("index -4") && e.contains("extent 3"), "{e}");
    let e = msg(index_put(
        &x,
        &[long(&[0, 1], &[2])],
        &t(&[0.0; 3], &[3]),
        false,
    ));
    assert!(e.contains("[3]") && e.contains("[2, 4]"), "{e}");
    assert_eq!(
        kind(index_put(&x, std::slice::from_ref(&x), &v, false)),
        ErrorKind::Type
    );
    let b = bools(&[true; 2], &[2]);
    assert_eq!(
        kind(index_put(
            &b,
            std::slice::from_ref(&i0),
            &bools(&[false], &[1]),
            true
        )),
        ErrorKind::Type
    );
    // masked_select: a mask that is not Bool or does not broadcast
    assert_eq!(kind(masked_select(&x, &x)), ErrorKind::Type);
    assert_eq!(
        kind(masked_select(&x, &bools(&[true; 3], &[3]))),
        ErrorKind::Value
    );
    // take_along_dim: ranks, broadcasting, range
    assert_eq!(
        kind(take_along_dim(&x, &long(&[0], &[1]), 0)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(take_along_dim(&x, &long(&[0, 0], &[2, 1]), 1)),
        ErrorKind::Value
    );
    let e = msg(take_along_dim(&x, &long(&[12], &[1]), None));
    assert!(e.contains("index 12") && e.contains("extent 12"), "{e}");
    assert_eq!(
        kind(take_along_dim(&x, &t(&[0.0], &[1, 1]), 1)),
        ErrorKind::Type
    );
    // repeat_interleave: negative counts, wrong length, rank
    assert_eq!(kind(repeat_interleave(&x, -1, 0)), ErrorKind::Value);
    let e = msg(repeat_interleave(&x, &long(&[1, 2], &[2]), 1));
    assert!(e.contains("2 repeats") && e.contains("extent 4"), "{e}");
    assert_eq!(
        kind(repeat_interleave(&x, &long(&[1; 4], &[2, 2]), 1)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(repeat_interleave(&x, &t(&[1.0], &[1]), 1)),
        ErrorKind::Type
    );
    // diagonal, diag_embed, diag: one axis twice, out of range, ranks
    assert_eq!(kind(diagonal(&x, 0, 1, -1)), ErrorKind::Value);
    assert_eq!(kind(diagonal(&x, 0, 0, 2)), ErrorKind::Value);
    assert_eq!(kind(diag_embed(&x, 0, 0, -3)), ErrorKind::Value);
    assert_eq!(kind(diag_embed(&t(&[1.0], &[]), 0, 0, 1)), ErrorKind::Value);
    assert_eq!(
        kind(diag(&t(&noise(8, 1), &[2, 2, 2]), 0)),
        ErrorKind::Value
    );
    assert_eq!(vals(&x), before);
    assert!(x.grad().unwrap().is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `diagonal(diag_embed(a, k, i, j), k, i, j)` is `a`, for any offset and pair of axes.
    #[test]
    fn the_diagonal_of_diag_embed_is_its_input(
        dims in prop::collection::vec(1usize..4, 1..4),
        offset in -3i64..4,
        axes in (0usize..4, 0usize..4),
    ) {
        let rank = dims.len() + 1;
        let (i, j) = (axes.0 % rank, axes.1 % rank);
        prop_assume!(i != j);
        let size: usize = dims.iter().product();
        let a = t(&noise(size, size as u64 + 3), &dims);
        let e = diag_embed(&a, offset, i, j).unwrap();
        let back = diagonal(&e, offset, i, j).unwrap();
        prop_assert_eq!(back.dims(), a.dims());
        prop_assert_eq!(vals(&back), vals(&a));
        prop_assert_eq!(vals(&e).iter().filter(|v| **v != 0.0).count(), vals(&a).iter().filter(|v| **v != 0.0).count());
    }

    /// Accumulating `index_put` and `index_add` agree with each other on one axis.
    #[test]
    fn index_put_accumulate_is_index_add_on_the_first_axis(
        rows in prop::collection::vec(0i64..4, 1..6),
    ) {
        let a = t(&noise(12, 7), &[4, 3]);
        let n = rows.len();
        let src = t(&noise(3 * n, 8), &[n, 3]);
        let idx = long(&rows, &[n]);
        let put = index_put(&a, std::slice::from_ref(&idx), &src, true).unwrap();
        let add = index_add(&a, 0, &idx, &src, 1.0).unwrap();
        prop_assert_eq!(vals(&put), vals(&add));
    }
}

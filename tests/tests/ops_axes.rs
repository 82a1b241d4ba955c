//! Axes and shapes as PyTorch writes them (issue 38 item 1): negative axes everywhere an axis
//! is taken, `-1` inferred in `reshape`/`view`/`unflatten` and kept in `expand`, `squeeze_all`,
//! `flatten` with negative ends, `movedim`, `split` and `chunk`. Forward values and gradients
//! against the numbers PyTorch 2.15 prints (`tests/fixtures/axes/axes.txt`, written by
//! `gen_axes.py` beside it), every negative axis against its positive twin, the errors (each an
//! `Error::Value` that leaves the input alone), gradcheck through the new views and a property
//! of `reshape` with a `-1`.

use std::sync::Arc;

use autograd_core::{gradcheck, shape, Axis, ErrorKind, GradcheckOptions, IntList, Result, Tensor};
use autograd_ops as ops;
use autograd_tests::fixture::{floats, mismatches, operand, Tolerance};
use autograd_tests::{kind, noise, strided, t, vals};
use proptest::prelude::*;

/// PyTorch's numbers, one case a line.
const AXES: &str = include_str!("../fixtures/axes/axes.txt");

/// A fixture list `2,-1` (or one integer) as `i64`s.
fn ints(field: &str) -> Vec<i64> {
    field
        .split(',')
        .map(|v| v.parse().expect("an integer"))
        .collect()
}

/// An Int32 index tensor from a fixture operand.
fn index(dims: &[usize], values: &[f32]) -> Tensor {
    let v: Vec<i32> = values.iter().map(|&x| x as i32).collect();
    Tensor::from_vec(v, shape_of(dims)).expect("an index tensor")
}

fn shape_of(dims: &[usize]) -> autograd_core::Shape {
    autograd_core::Shape::from(dims)
}

/// Runs the fixture's op with its parameters `p` on our side; every axis comes from the
/// fixture, so negative axes are what run.
fn run(op: &str, p: &[&str], a: &Tensor, b: Option<&Tensor>) -> Result<Vec<Tensor>> {
    let axis = |i: usize| -> i64 { p[i].parse().expect("an axis") };
    let flag = |i: usize| p[i] == "true";
    let one = |y: Result<Tensor>| y.map(|y| vec![y]);
    match op {
        "sum_axes" => one(ops::sum_axes(a, &ints(p[0]), flag(1))),
        "mean_axes" => one(ops::mean_axes(a, &ints(p[0]), flag(1))),
        "max_axes" => one(ops::max_axes(a, &ints(p[0]), flag(1))),
        "min_axes" => one(ops::min_axes(a, &ints(p[0]), flag(1))),
        "var_axes" => one(ops::var_axes(
            a,
            &ints(p[0]),
            flag(1),
            p[2].parse().unwrap(),
        )),
        "argmax" => one(ops::argmax(a, axis(0), flag(1))),
        "argmin" => one(ops::argmin(a, axis(0), flag(1))),
        "softmax" => one(ops::softmax(a, axis(0))),
        "log_softmax" => one(ops::log_softmax(a, axis(0))),
        "transpose" => one(ops::transpose(a, axis(0), axis(1))),
        "permute" => one(ops::permute(a, &ints(p[0]))),
        "reshape" => one(ops::reshape(a, &ints(p[0]))),
        "view" => one(ops::view(a, &ints(p[0]))),
        "flatten" => one(ops::flatten(a, axis(0), axis(1))),
        "unsqueeze" => one(ops::unsqueeze(a, axis(0))),
        "squeeze" => one(ops::squeeze(a, axis(0))),
        "squeeze_all" => one(ops::squeeze_all(a)),
        "narrow" => one(ops::narrow(
            a,
            axis(0),
            p[1].parse().unwrap(),
            p[2].parse().unwrap(),
        )),
        "select" => one(ops::select(a, axis(0), p[1].parse().unwrap())),
        "unbind" => ops::unbind(a, axis(0)),
        "unflatten" => one(ops::unflatten(a, axis(0), &ints(p[1]))),
        "movedim" => one(ops::movedim(a, &ints(p[0]), &ints(p[1]))),
        "expand" => one(a.expand(&ints(p[0]))),
        "split" if p[0].contains(',') => ops::split(a, &ints(p[0]), axis(1)),
        "split" => ops::split(a, axis(0), axis(1)),
        "chunk" => ops::chunk(a, p[0].parse().unwrap(), axis(1)),
        "concat" => one(ops::concat(&[a.clone(), b.unwrap().clone()], axis(0))),
        "stack" => one(ops::stack(&[a.clone(), b.unwrap().clone()], axis(0))),
        "index_select" => one(ops::index_select(a, axis(0), b.unwrap())),
        "gather" => one(ops::gather(a, axis(0), b.unwrap())),
        "scatter_add" => {
            let src = Tensor::full(b.unwrap().shape().clone(), 0.5f32)?;
            one(ops::scatter_add(a, axis(0), b.unwrap(), &src))
        }
        other => panic!("the fixture names an op this test does not know: {other}"),
    }
}

/// How close to PyTorch's values ours must be: 1e-6 relative or 1e-5 absolute (sums of a
/// few dozen Float32 terms).
const TOL: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-6,
};

/// Our values of `y` as `f32` (Int32 indices widened).
fn values(y: &Tensor) -> Vec<f32> {
    match y.values::<f32>() {
        Ok(v) => v,
        Err(_) => y
            .values::<i32>()
            .expect("Float32 or Int32")
            .into_iter()
            .map(|i| i as f32)
            .collect(),
    }
}

/// Every difference between our results (shapes, values, gradients) and PyTorch's on one line.
fn check(line: &str) -> Vec<String> {
    let f: Vec<&str> = line.split('|').collect();
    assert_eq!(f.len(), 9, "a fixture line has 9 fields: {line}");
    let (label, op) = (f[0], f[1]);
    let params: Vec<&str> = f[2].split(' ').filter(|s| !s.is_empty()).collect();
    let (a_dims, a_vals) = operand(f[3]).expect("an input");
    let a = t(&a_vals, &a_dims);
    let b_float = matches!(op, "concat" | "stack");
    let b = operand(f[4]).map(|(dims, v)| {
        if b_float {
            t(&v, &dims)
        } else {
            index(&dims, &v)
        }
    });
    let ys = run(op, &params, &a, b.as_ref()).expect("the op runs");
    let outs: Vec<(Vec<usize>, Vec<f32>)> = f[6].split(';').filter_map(operand).collect();
    let mut wrong = Vec::new();
    if ys.len() != outs.len() {
        return vec![format!(
            "{label}: {} results, PyTorch {}",
            ys.len(),
            outs.len()
        )];
    }
    for (i, (y, (dims, theirs))) in ys.iter().zip(&outs).enumerate() {
        if &y.dims() != dims {
            wrong.push(format!(
                "{label}: result {i} has dims {:?}, PyTorch {dims:?}",
                y.dims()
            ));
        }
        wrong.extend(mismatches(
            label,
            &format!("result {i}"),
            &values(y),
            theirs,
            TOL,
        ));
    }
    if f[7].is_empty() {
        return wrong;
    }
    // the gradient of sum_i <g_i, y_i>: every result's cotangent at once
    let cots: Vec<(Vec<usize>, Vec<f32>)> = f[5].split(';').filter_map(operand).collect();
    let mut loss: Option<Tensor> = None;
    for (y, (dims, g)) in ys.iter().zip(&cots) {
        let term = ops::sum(&ops::mul(y, &t(g, dims)).unwrap()).unwrap();
        loss = Some(match loss {
            Some(l) => ops::add(&l, &term).unwrap(),
            None => term,
        });
    }
    let mut inputs = vec![&a];
    if b_float {
        inputs.push(b.as_ref().unwrap());
    }
    let grads = autograd_core::grad(
        &loss.expect("a result"),
        &inputs,
        &t(&[1.0], &[1]),
        autograd_core::GradOptions::default(),
    )
    .expect("the gradient runs");
    for (j, g) in grads.iter().enumerate() {
        let theirs = floats(f[7 + j]);
        let ours = g.as_ref().map_or_else(|| vec![0.0; theirs.len()], vals);
        wrong.extend(mismatches(label, &format!("grad {j}"), &ours, &theirs, TOL));
    }
    wrong
}

#[test]
fn every_axis_op_matches_pytorch_with_negative_axes() {
    let lines: Vec<&str> = AXES.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.len() >= 39, "the fixture lost cases: {}", lines.len());
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A `[2, 3, 4]` input of distinct values.
fn x234() -> Tensor {
    t(&noise(24, 7), &[2, 3, 4])
}

/// Same dims and values.
fn assert_same(label: &str, ours: &Tensor, other: &Tensor) {
    assert_eq!(ours.dims(), other.dims(), "{label}: dims");
    assert_eq!(vals(ours), vals(other), "{label}: values");
}

/// A label, a negative-axis form and its positive-axis twin.
type Pair = (&'static str, Result<Tensor>, Result<Tensor>);

#[test]
fn negative_axes_equal_their_positive_twins() {
    let x = x234();
    // (label, negative form, positive form)
    let pairs: Vec<Pair> = vec![
        (
            "sum_axes",
            x.sum_axes(&[-1, -3], true),
            x.sum_axes(&[2, 0], true),
        ),
        (
            "mean_axes",
            x.mean_axes(&[-2], false),
            x.mean_axes(&[1], false),
        ),
        (
            "max_axes",
            x.max_axes(&[-1], false),
            x.max_axes(&[2], false),
        ),
        ("min_axes", x.min_axes(&[-3], true), x.min_axes(&[0], true)),
        (
            "var_axes",
            x.var_axes(&[-1], false, 1),
            x.var_axes(&[2], false, 1),
        ),
        ("softmax", ops::softmax(&x, -2), ops::softmax(&x, 1)),
        (
            "log_softmax",
            ops::log_softmax(&x, -1),
            ops::log_softmax(&x, 2),
        ),
        ("transpose", x.transpose(-1, -3), x.transpose(2, 0)),
        ("permute", x.permute(&[-1, -3, -2]), x.permute(&[2, 0, 1])),
        ("flatten", x.flatten(-2, -1), x.flatten(1, 2)),
        ("unsqueeze", x.unsqueeze(-1), x.unsqueeze(3)),
        ("unsqueeze front", x.unsqueeze(-4), x.unsqueeze(0)),
        ("narrow", x.narrow(-1, 1, 2), x.narrow(2, 1, 2)),
        ("slice", x.slice(-2, 1..3), x.slice(1, 1..3)),
        ("select", x.select(-3, 1), x.select(0, 1)),
        (
            "unflatten",
            x.unflatten(-1, &[2, 2]),
            x.unflatten(2, &[2, 2]),
        ),
        ("movedim", x.movedim(-1, -3), x.movedim(2, 0)),
        (
            "concat",
            Tensor::concat(&[x.clone(), x.clone()], -2),
            Tensor::concat(&[x.clone(), x.clone()], 1),
        ),
        (
            "stack",
            Tensor::stack(&[x.clone(), x.clone()], -1),
            Tensor::stack(&[x.clone(), x.clone()], 3),
        ),
    ];
    for (label, neg, pos) in pairs {
        assert_same(label, &neg.unwrap(), &pos.unwrap());
    }
    let ids = Tensor::from_vec(vec![2i32, 0], shape![2]).unwrap();
    assert_same(
        "index_select",
        &x.index_select(-1, &ids).unwrap(),
        &x.index_select(2, &ids).unwrap(),
    );
    let g = Tensor::from_vec(vec![1i32; 24], shape![2, 3, 4]).unwrap();
    assert_same(
        "gather",
        &x.gather(-2, &g).unwrap(),
        &x.gather(1, &g).unwrap(),
    );
    assert_same(
        "scatter_add",
        &x.scatter_add(-2, &g, &x).unwrap(),
        &x.scatter_add(1, &g, &x).unwrap(),
    );
    let ints = |y: Result<Tensor>| y.unwrap().values::<i32>().unwrap();
    assert_eq!(ints(x.argmax(-1, false)), ints(x.argmax(2, false)));
    assert_eq!(ints(x.argmin(-2, true)), ints(x.argmin(1, true)));
    let rows = |ys: Vec<Tensor>| ys.iter().map(vals).collect::<Vec<_>>();
    assert_eq!(rows(x.unbind(-1).unwrap()), rows(x.unbind(2).unwrap()));
    assert_eq!(rows(x.split(2, -2).unwrap()), rows(x.split(2, 1).unwrap()));
    assert_eq!(rows(x.chunk(3, -1).unwrap()), rows(x.chunk(3, 2).unwrap()));
    let s = t(&[1.0, 2.0], &[2, 1]);
    assert_same("squeeze", &s.squeeze(-1).unwrap(), &s.squeeze(1).unwrap());
}

#[test]
fn every_integer_spelling_of_an_axis_compiles_and_agrees() {
    let x = x234();
    let last_usize: usize = 2;
    let last_i64: i64 = -1;
    let last_isize: isize = -1;
    let want = ops::softmax(&x, 2).unwrap();
    for y in [
        ops::softmax(&x, -1),
        ops::softmax(&x, last_usize),
        ops::softmax(&x, last_i64),
        ops::softmax(&x, last_isize),
        ops::softmax(&x, Axis::from(-1)),
    ] {
        assert_same("softmax", &y.unwrap(), &want);
    }
    // lists: literals, typed arrays, slices, vectors, one integer; `&[]` reduces nothing
    let dims: Vec<usize> = vec![0, 2];
    let want = x.sum_axes(&[0, 2], false).unwrap();
    for y in [
        x.sum_axes(&[-3, -1], false),
        x.sum_axes(&dims, false),
        x.sum_axes(&dims[..], false),
        x.sum_axes(&[0i64, -1], false),
        x.sum_axes(&vec![-3i32, 2], false),
        x.sum_axes(&[-3isize, 2], false),
    ] {
        assert_same("sum_axes", &y.unwrap(), &want);
    }
    assert_same(
        "one axis",
        &x.sum_axes(-1, false).unwrap(),
        &x.sum_axes(&[2], false).unwrap(),
    );
    assert_same("no axis", &x.sum_axes(&[], false).unwrap(), &x);
    assert_eq!(
        x.reshape(&[]).map(|_| ()).unwrap_err().kind(),
        ErrorKind::Value
    );
    let one = t(&[5.0], &[1, 1]);
    assert_eq!(one.reshape(&[]).unwrap().dims(), Vec::<usize>::new());
    assert_eq!((&[0usize, 2]).to_ints(), [0, 2]);
}

#[test]
fn minus_one_sizes_are_inferred_and_kept() {
    let x = x234();
    assert_eq!(x.reshape(&[-1]).unwrap().dims(), [24]);
    assert_eq!(x.reshape(&[4, -1]).unwrap().dims(), [4, 6]);
    assert_eq!(x.view(&[-1, 3, 2]).unwrap().dims(), [4, 3, 2]);
    assert_eq!(vals(&x.reshape(&[-1, 6]).unwrap()), vals(&x));
    // a view stays a view: the same storage
    let v = x.view(&[6, -1]).unwrap();
    assert!(Arc::ptr_eq(v.carrier().unwrap(), x.carrier().unwrap()));
    let r = x.unflatten(1, &[-1, 1]).unwrap();
    assert_eq!(r.dims(), [2, 3, 1, 4]);
    assert!(Arc::ptr_eq(r.carrier().unwrap(), x.carrier().unwrap()));
    // expand: -1 keeps, new leading modes repeat
    let c = t(&[1.0, 2.0, 3.0], &[3, 1]);
    let e = c.expand(&[2, -1, 4]).unwrap();
    assert_eq!(e.dims(), [2, 3, 4]);
    assert_eq!(vals(&e)[..8], [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]);
    assert!(Arc::ptr_eq(e.carrier().unwrap(), c.carrier().unwrap()));
    assert_same(
        "broadcast_to",
        &c.broadcast_to(&[-1, 2]).unwrap(),
        &c.expand(&[3, 2]).unwrap(),
    );
    // empty tensors infer around their zero extent
    let empty = t(&[], &[0, 3]);
    assert_eq!(empty.reshape(&[-1, 3]).unwrap().dims(), [0, 3]);
}

#[test]
fn squeeze_all_flatten_movedim_split_and_chunk_follow_pytorch() {
    let x = t(&noise(12, 3), &[1, 3, 1, 4]);
    let s = x.squeeze_all().unwrap();
    assert_eq!(s.dims(), [3, 4]);
    assert_eq!(vals(&s), vals(&x));
    assert!(Arc::ptr_eq(s.carrier().unwrap(), x.carrier().unwrap()));
    let plain = x234();
    assert_same(
        "squeeze_all of no unit",
        &plain.squeeze_all().unwrap(),
        &plain,
    );
    assert_eq!(
        t(&[2.0], &[1, 1]).squeeze_all().unwrap().dims(),
        Vec::<usize>::new()
    );
    // flatten of everything, of a rank-0 tensor, of one axis
    assert_eq!(plain.flatten(0, -1).unwrap().dims(), [24]);
    assert_eq!(plain.flatten(-1, -1).unwrap().dims(), [2, 3, 4]);
    let scalar = t(&[2.0], &[1]).squeeze(0).unwrap();
    assert_eq!(kind(scalar.flatten(0, -1)), ErrorKind::Value);
    assert_eq!(scalar.reshape(&[-1]).unwrap().dims(), [1]);
    // movedim: single axes and lists, the rest in order
    assert_eq!(plain.movedim(0, -1).unwrap().dims(), [3, 4, 2]);
    assert_eq!(plain.movedim(&[0, 1], &[-1, 0]).unwrap().dims(), [3, 4, 2]);
    assert_eq!(plain.movedim(&[2, 0], &[0, 1]).unwrap().dims(), [4, 2, 3]);
    // split and chunk on 10 and 6 rows
    let ten = t(&noise(10, 4), &[10]);
    let lens = |ys: Vec<Tensor>| ys.iter().map(Tensor::size).collect::<Vec<_>>();
    assert_eq!(lens(ten.split(3, 0).unwrap()), [3, 3, 3, 1]);
    assert_eq!(lens(ten.split(&[2, 8], 0).unwrap()), [2, 8]);
    assert_eq!(lens(ten.split(20, -1).unwrap()), [10]);
    assert_eq!(lens(ten.chunk(4, 0).unwrap()), [3, 3, 3, 1]);
    assert_eq!(lens(ten.chunk(20, 0).unwrap()), [1; 10]);
    assert_eq!(lens(t(&noise(6, 5), &[6]).chunk(4, 0).unwrap()), [2, 2, 2]);
    assert_eq!(lens(t(&[], &[0]).chunk(3, 0).unwrap()), [0, 0, 0]);
    assert_eq!(lens(t(&[], &[0]).split(0, 0).unwrap()), [0]);
    let pieces = ten.split(&[2, 8], 0).unwrap();
    assert_eq!(vals(&pieces[1]), vals(&ten)[2..]);
    assert!(Arc::ptr_eq(
        pieces[1].carrier().unwrap(),
        ten.carrier().unwrap()
    ));
}

/// `f` fails with `Error::Value` and leaves `x` (values, dims, graph) as it was.
fn refuses(label: &str, x: &Tensor, f: impl FnOnce(&Tensor) -> Result<Vec<Tensor>>) {
    let (dims, before) = (x.dims(), vals(x));
    assert_eq!(kind(f(x)), ErrorKind::Value, "{label}");
    assert_eq!(
        (x.dims(), vals(x)),
        (dims, before),
        "{label} changed its input"
    );
    assert!(x.grad().unwrap().is_none(), "{label} left a gradient");
}

fn one(y: Result<Tensor>) -> Result<Vec<Tensor>> {
    y.map(|y| vec![y])
}

#[test]
fn axes_out_of_range_and_bad_sizes_are_value_errors_that_change_nothing() {
    let x = x234();
    for bad in [3i64, -4, 100, i64::MIN] {
        refuses("sum_axes", &x, |x| one(x.sum_axes(&[bad], false)));
        refuses("mean_axes", &x, |x| one(x.mean_axes(bad, true)));
        refuses("max_axes", &x, |x| one(x.max_axes(&[0, bad], false)));
        refuses("min_axes", &x, |x| one(x.min_axes(&[bad], false)));
        refuses("var_axes", &x, |x| one(x.var_axes(&[bad], false, 1)));
        refuses("argmax", &x, |x| one(x.argmax(bad, false)));
        refuses("argmin", &x, |x| one(x.argmin(bad, false)));
        refuses("softmax", &x, |x| one(ops::softmax(x, bad)));
        refuses("log_softmax", &x, |x| one(ops::log_softmax(x, bad)));
        refuses("transpose", &x, |x| one(x.transpose(0, bad)));
        refuses("permute", &x, |x| one(x.permute(&[0, 1, bad])));
        refuses("flatten", &x, |x| one(x.flatten(bad, -1)));
        refuses("squeeze", &x, |x| one(x.squeeze(bad)));
        refuses("narrow", &x, |x| one(x.narrow(bad, 0, 1)));
        refuses("select", &x, |x| one(x.select(bad, 0)));
        refuses("unbind", &x, |x| x.unbind(bad));
        refuses("unflatten", &x, |x| one(x.unflatten(bad, &[1, -1])));
        refuses("movedim", &x, |x| one(x.movedim(bad, 0)));
        refuses("split", &x, |x| x.split(1, bad));
        refuses("chunk", &x, |x| x.chunk(2, bad));
        refuses("concat", &x, |x| {
            one(Tensor::concat(std::slice::from_ref(x), bad))
        });
        refuses("index_select", &x, |x| {
            let ids = Tensor::from_vec(vec![0i32], shape![1])?;
            one(x.index_select(bad, &ids))
        });
    }
    // unsqueeze and stack take one more position: rank 3 allows -4..=3
    for bad in [4i64, -5] {
        refuses("unsqueeze", &x, |x| one(x.unsqueeze(bad)));
        refuses("stack", &x, |x| {
            one(Tensor::stack(std::slice::from_ref(x), bad))
        });
    }
    // the message names the axis and the range, as PyTorch's does
    let e = x.sum_axes(&[3], false).unwrap_err().to_string();
    assert!(
        e.contains("expected to be in range of [-3, 2], but got 3"),
        "{e}"
    );
    let e = ops::softmax(&x, -4).unwrap_err().to_string();
    assert!(e.contains("softmax") && e.contains("but got -4"), "{e}");
    // repeated axes (also spelled once positive, once negative)
    refuses("sum_axes twice", &x, |x| one(x.sum_axes(&[2, -1], false)));
    refuses("permute twice", &x, |x| one(x.permute(&[0, 0, 1])));
    refuses("movedim twice", &x, |x| one(x.movedim(&[0, -3], &[1, 2])));
    refuses("movedim lengths", &x, |x| one(x.movedim(&[0, 1], &[0])));
    refuses("flatten reversed", &x, |x| one(x.flatten(-1, 0)));
    // sizes
    refuses("two -1s", &x, |x| one(x.reshape(&[-1, -1])));
    refuses("view two -1s", &x, |x| one(x.view(&[-1, 2, -1])));
    refuses("non-dividing -1", &x, |x| one(x.reshape(&[5, -1])));
    refuses("view non-dividing -1", &x, |x| one(x.view(&[7, -1])));
    refuses("size below -1", &x, |x| one(x.reshape(&[-2, -12])));
    refuses("wrong total", &x, |x| one(x.reshape(&[5, 5])));
    refuses("unflatten two -1s", &x, |x| one(x.unflatten(-1, &[-1, -1])));
    refuses("unflatten not dividing", &x, |x| {
        one(x.unflatten(-1, &[3, -1]))
    });
    refuses("unflatten sum", &x, |x| one(x.unflatten(-1, &[2, 3])));
    refuses("unflatten empty", &x, |x| {
        one(x.unflatten(-1, &Vec::<i64>::new()))
    });
    refuses("expand leading -1", &x, |x| one(x.expand(&[-1, 2, 3, 4])));
    refuses("expand too short", &x, |x| one(x.expand(&[3, 4])));
    refuses("expand below -1", &x, |x| one(x.expand(&[2, -2, 4])));
    refuses("expand wrong extent", &x, |x| one(x.expand(&[2, 5, 4])));
    refuses("chunk 0", &x, |x| x.chunk(0, 0));
    refuses("split sizes not summing", &x, |x| x.split(&[1, 1], -1));
    refuses("split sizes over", &x, |x| x.split(&[3, 2], -1));
    refuses("split negative size", &x, |x| x.split(&[5, -1], -1));
    refuses("split size 0", &x, |x| x.split(0, 0));
    refuses("split negative", &x, |x| x.split(-2, 0));
    refuses("squeeze non-unit", &x, |x| one(x.squeeze(-1)));
}

/// `y` weighted by a position-dependent factor, so a misplaced gradient shows.
fn weigh(y: &Tensor) -> Result<Tensor> {
    let w: Vec<f32> = (0..y.size()).map(|i| 0.5 + i as f32 * 0.25).collect();
    ops::mul(y, &Tensor::from_vec(w, y.shape().clone())?)
}

/// Pieces joined back in reverse order along `axis` and weighed (each piece still reaches its
/// own part of the input).
fn joined(ys: Vec<Tensor>, axis: i64) -> Result<Tensor> {
    let reversed: Vec<Tensor> = ys.into_iter().rev().collect();
    weigh(&ops::concat(&reversed, axis)?)
}

type Check = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

#[test]
fn gradients_flow_through_movedim_unflatten_split_and_chunk() {
    let opts = GradcheckOptions::default();
    let inputs = [
        ("contiguous", t(&noise(24, 11), &[2, 3, 4])),
        ("strided", strided(&noise(24, 12), &[2, 3, 4])),
    ];
    for (layout, x) in inputs {
        let checks: Vec<(&str, Check)> = vec![
            (
                "movedim",
                Box::new(|v: &[Tensor]| weigh(&v[0].movedim(0, -1)?)),
            ),
            (
                "movedim lists",
                Box::new(|v: &[Tensor]| weigh(&v[0].movedim(&[-1, 0], &[0, -2])?)),
            ),
            (
                "unflatten",
                Box::new(|v: &[Tensor]| weigh(&v[0].unflatten(-1, &[2, -1])?)),
            ),
            (
                "split size",
                Box::new(|v: &[Tensor]| joined(v[0].split(3, -1)?, -1)),
            ),
            (
                "split sizes",
                Box::new(|v: &[Tensor]| joined(v[0].split(&[1, 2], -2)?, -2)),
            ),
            (
                "chunk",
                Box::new(|v: &[Tensor]| joined(v[0].chunk(2, 0)?, 0)),
            ),
            (
                "squeeze_all",
                Box::new(|v: &[Tensor]| weigh(&v[0].unsqueeze(1)?.squeeze_all()?)),
            ),
            (
                "reshape -1",
                Box::new(|v: &[Tensor]| weigh(&v[0].reshape(&[-1, 6])?)),
            ),
            (
                "flatten",
                Box::new(|v: &[Tensor]| weigh(&v[0].flatten(-2, -1)?)),
            ),
        ];
        for (name, f) in checks {
            let report = gradcheck(|v: &[Tensor]| f(v), std::slice::from_ref(&x), opts);
            assert!(report.is_ok(), "{name} on {layout}: {report:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `reshape` with a `-1` in any position equals `reshape` with the true extent there, on
    /// contiguous and strided inputs alike.
    #[test]
    fn reshape_with_minus_one_equals_reshape_with_the_true_size(
        target in prop::collection::vec(1usize..5, 1..5),
        at in 0usize..4,
        transposed in any::<bool>(),
    ) {
        let n: usize = target.iter().product();
        let values = noise(n, 9);
        let x = if transposed {
            // the same logical values through a column-major layout (a copy on reshape)
            strided(&values, &target)
        } else {
            t(&values, &[n])
        };
        let at = at % target.len();
        let mut spec: Vec<i64> = target.iter().map(|&d| d as i64).collect();
        spec[at] = -1;
        let inferred = x.reshape(&spec).unwrap();
        let exact = x.reshape(&target).unwrap();
        prop_assert_eq!(inferred.dims(), exact.dims());
        prop_assert_eq!(vals(&inferred), vals(&exact));
        prop_assert_eq!(x.view(&spec).map(|v| v.dims()).ok(), x.view(&target).map(|v| v.dims()).ok());
    }
}

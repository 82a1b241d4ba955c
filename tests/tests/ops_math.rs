//! The math ops of issue 38 item 2 (activations, special functions, rounding, the Bool tests
//! and the broadcasting pointwise ops): forward values and gradients against the numbers
//! PyTorch 2.15 prints (`tests/fixtures/math/math.txt`, written by `gen_math.py` beside it),
//! gradcheck on contiguous, strided and broadcast inputs away from kinks, batched gradients
//! against one cotangent at a time, other dtypes, and errors.

use autograd_core::{
    grad, gradcheck, shape, DType, ErrorKind, GradOptions, GradcheckOptions, Result, Tensor,
};
use autograd_ops as ops;
use autograd_tests::fixture::{floats, mismatches, operand, Tolerance};
use autograd_tests::{broadcast_rows, kind, noise, strided, t, vals};

/// PyTorch's numbers, one case a line.
const MATH: &str = include_str!("../fixtures/math/math.txt");

/// Runs the fixture's op (with its constants `c`) on our side.
fn run(op: &str, c: &[f32], x: &[Tensor]) -> Result<Tensor> {
    let a = &x[0];
    match op {
        "log1p" => ops::log1p(a),
        "expm1" => ops::expm1(a),
        "reciprocal" => ops::reciprocal(a),
        "erf" => ops::erf(a),
        "erfinv" => ops::erfinv(a),
        "sign" => ops::sign(a),
        "floor" => ops::floor(a),
        "ceil" => ops::ceil(a),
        "round" => ops::round(a),
        "softplus" => ops::softplus(a, c[0], c[1]),
        "leaky_relu" => ops::leaky_relu(a, c[0]),
        "elu" => ops::elu(a, c[0]),
        "selu" => ops::selu(a),
        "hardtanh" => ops::hardtanh(a, c[0], c[1]),
        "hardswish" => ops::hardswish(a),
        "mish" => ops::mish(a),
        "nan_to_num" => ops::nan_to_num(
            a,
            f64::from(c[0]),
            c.get(1).map(|&v| f64::from(v)),
            c.get(2).map(|&v| f64::from(v)),
        ),
        "isnan" => ops::isnan(a),
        "isinf" => ops::isinf(a),
        "isfinite" => ops::isfinite(a),
        "atan2" => ops::atan2(a, &x[1]),
        "pow" => ops::pow(a, &x[1]),
        "lerp" => ops::lerp(a, &x[1], c[0]),
        "addcmul" => ops::addcmul(a, &x[1], &x[2], c[0]),
        "addcdiv" => ops::addcdiv(a, &x[1], &x[2], c[0]),
        other => panic!("the fixture names an op this test does not know: {other}"),
    }
}

/// How close to PyTorch's values ours must be (NaN matching NaN, an infinity itself): 1e-6
/// relative or 1e-6 absolute.
const TOL: Tolerance = Tolerance {
    abs: 1e-6,
    rel: 1e-6,
};

/// Every difference between our forward value and gradients and PyTorch's on one line.
fn check(line: &str) -> Vec<String> {
    let f: Vec<&str> = line.split('|').collect();
    assert_eq!(f.len(), 11, "a fixture line has 11 fields: {line}");
    let (label, op, c) = (f[0], f[1], floats(f[2]));
    let inputs: Vec<Tensor> = f[3..6]
        .iter()
        .filter_map(|s| operand(s))
        .map(|(dims, v)| t(&v, &dims))
        .collect();
    let y = run(op, &c, &inputs).expect("the op runs");
    let mut wrong = Vec::new();
    if *y.dtype() == DType::Bool {
        let ours: Vec<f32> = y
            .values::<bool>()
            .expect("Bool values")
            .into_iter()
            .map(|b| if b { 1.0 } else { 0.0 })
            .collect();
        assert!(y.autograd_ctx().is_none(), "{label} records no node");
        return mismatches(label, "output", &ours, &floats(f[7]), TOL);
    }
    wrong.extend(mismatches(label, "output", &vals(&y), &floats(f[7]), TOL));
    let (cot_dims, cot) = operand(f[6]).expect("a cotangent");
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let grads =
        grad(&y, &refs, &t(&cot, &cot_dims), GradOptions::default()).expect("the gradient runs");
    for (j, g) in grads.iter().enumerate() {
        let theirs = floats(f[8 + j]);
        let ours = g.as_ref().map_or_else(|| vec![0.0; theirs.len()], vals);
        wrong.extend(mismatches(label, &format!("grad {j}"), &ours, &theirs, TOL));
    }
    wrong
}

#[test]
fn every_math_op_matches_pytorch_forward_and_gradient_at_edge_values() {
    let lines: Vec<&str> = MATH.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.len() >= 42, "the fixture lost cases: {}", lines.len());
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

type Unary = fn(&Tensor) -> Result<Tensor>;

/// Points away from every unary op's kinks (0, ±1, ±3, integers and halves).
const AWAY: [f32; 8] = [-2.7, -1.6, -0.7, -0.3, 0.35, 0.8, 1.4, 2.2];
/// Points inside erfinv's and log1p's domains, away from the ends.
const INSIDE: [f32; 8] = [-0.65, -0.45, -0.3, -0.1, 0.15, 0.4, 0.55, 0.7];

/// Every differentiable unary op (constants fixed) with the points it is checked at.
fn unary_ops() -> Vec<(&'static str, Unary, &'static [f32; 8])> {
    vec![
        ("log1p", ops::log1p, &INSIDE),
        ("expm1", ops::expm1, &AWAY),
        ("reciprocal", ops::reciprocal, &AWAY),
        ("erf", ops::erf, &AWAY),
        ("erfinv", ops::erfinv, &INSIDE),
        ("sign", ops::sign, &AWAY),
        ("floor", ops::floor, &AWAY),
        ("ceil", ops::ceil, &AWAY),
        ("round", ops::round, &AWAY),
        ("softplus", |a| ops::softplus(a, 1.5, 2.0), &AWAY),
        ("leaky_relu", |a| ops::leaky_relu(a, 0.1), &AWAY),
        ("elu", |a| ops::elu(a, 0.7), &AWAY),
        ("selu", ops::selu, &AWAY),
        ("hardtanh", |a| ops::hardtanh(a, -1.0, 1.0), &AWAY),
        ("hardswish", ops::hardswish, &AWAY),
        ("mish", ops::mish, &AWAY),
        ("nan_to_num", |a| ops::nan_to_num(a, 0.0, None, None), &AWAY),
    ]
}

/// The three layouts of one `[2, 4]` input: contiguous, column-major at an offset, and one
/// row repeated through a stride-0 axis.
fn layouts(v: &[f32; 8]) -> [(&'static str, Tensor); 3] {
    [
        ("contiguous", t(v, &[2, 4])),
        ("strided", strided(v, &[2, 4])),
        ("broadcast", broadcast_rows(&v[..4], 2)),
    ]
}

#[test]
fn unary_ops_pass_gradcheck_on_contiguous_strided_and_broadcast_inputs() {
    for (name, op, points) in unary_ops() {
        for (layout, x) in layouts(points) {
            let report = gradcheck(|v: &[Tensor]| op(&v[0]), &[x], GradcheckOptions::default());
            assert!(report.is_ok(), "{name} on {layout}: {report:?}");
        }
    }
}

type Pointwise = fn(&[Tensor]) -> Result<Tensor>;

/// The broadcasting ops with operands away from their kinks and poles.
fn pointwise_ops() -> Vec<(&'static str, Pointwise, Vec<[f32; 8]>)> {
    let pos = [0.6, 1.3, 0.9, 1.8, 0.75, 1.1, 2.1, 1.45];
    let t2 = [0.8, -1.3, 1.6, -0.9, 1.2, -1.9, 0.7, 1.4];
    vec![
        ("atan2", |v| ops::atan2(&v[0], &v[1]), vec![AWAY, t2]),
        ("pow", |v| ops::pow(&v[0], &v[1]), vec![pos, AWAY]),
        ("lerp", |v| ops::lerp(&v[0], &v[1], 0.3), vec![AWAY, t2]),
        (
            "lerp_high",
            |v| ops::lerp(&v[0], &v[1], 0.8),
            vec![AWAY, t2],
        ),
        (
            "addcmul",
            |v| ops::addcmul(&v[0], &v[1], &v[2], -0.5),
            vec![INSIDE, AWAY, t2],
        ),
        (
            "addcdiv",
            |v| ops::addcdiv(&v[0], &v[1], &v[2], 1.5),
            vec![INSIDE, AWAY, t2],
        ),
    ]
}

#[test]
fn pointwise_ops_pass_gradcheck_on_contiguous_strided_and_broadcast_inputs() {
    for (name, op, points) in pointwise_ops() {
        for which in 0..3 {
            let inputs: Vec<Tensor> = points.iter().map(|p| layouts(p)[which].1.clone()).collect();
            let report = gradcheck(op, &inputs, GradcheckOptions::default());
            assert!(
                report.is_ok(),
                "{name} on {}: {report:?}",
                layouts(&points[0])[which].0
            );
        }
        // numpy broadcasting of operands of different shapes: [2, 1], [4] and [2, 4]
        let shapes: [&[usize]; 3] = [&[2, 1], &[4], &[2, 4]];
        let inputs: Vec<Tensor> = points
            .iter()
            .zip(shapes)
            .map(|(p, dims)| t(&p[..dims.iter().product::<usize>()], dims))
            .collect();
        let y = op(&inputs).expect("operands broadcast");
        assert_eq!(y.dims(), [2, 4], "{name}");
        let report = gradcheck(op, &inputs, GradcheckOptions::default());
        assert!(report.is_ok(), "{name} on broadcast shapes: {report:?}");
    }
}

const BATCHED: GradOptions = GradOptions {
    batched: true,
    retain_graph: true,
};
const RETAIN: GradOptions = GradOptions {
    batched: false,
    retain_graph: true,
};

/// `grad` of `y` for K stacked cotangents at once against K single calls.
fn assert_batched_matches_one_by_one(name: &str, y: &Tensor, xs: &[&Tensor]) {
    let k = 3;
    let n = y.size();
    let basis = noise(k * n, 7);
    let mut dims = vec![k];
    dims.extend(y.dims());
    let got = grad(y, xs, &t(&basis, &dims), BATCHED).expect("batched grad");
    for (j, x) in xs.iter().enumerate() {
        let mut want = Vec::new();
        for row in basis.chunks(n) {
            let g = grad(y, &[x], &t(row, &y.dims()), RETAIN).expect("single grad");
            want.extend(vals(g[0].as_ref().expect("a gradient")));
        }
        let got = vals(got[j].as_ref().expect("a batched gradient"));
        assert_eq!(got.len(), want.len(), "{name} input {j}");
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                "{name} input {j}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn batched_gradients_agree_with_one_cotangent_at_a_time() {
    for (name, op, points) in unary_ops() {
        let x = t(points, &[2, 4]);
        let y = op(&x).expect("the op runs");
        assert_batched_matches_one_by_one(name, &y, &[&x]);
    }
    for (name, op, points) in pointwise_ops() {
        // the first operand broadcast along rows, so its batched gradient is summed per index
        let mut inputs = vec![t(&points[0][..4], &[4])];
        inputs.extend(points[1..].iter().map(|p| t(p, &[2, 4])));
        let y = op(&inputs).expect("the op runs");
        let refs: Vec<&Tensor> = inputs.iter().collect();
        assert_batched_matches_one_by_one(name, &y, &refs);
    }
}

#[test]
fn float64_computes_without_a_node_and_sign_and_the_tests_take_int32() {
    let x = Tensor::from_vec(vec![-1.5f64, 0.25, 2.0], shape![3]).unwrap();
    let y = ops::log1p(&ops::mish(&x).unwrap()).unwrap();
    assert_eq!(y.dtype(), &DType::Float64);
    assert!(y.autograd_ctx().is_none());
    let sp = |v: f64| v.max(0.0) + (-v.abs()).exp().ln_1p();
    let want: Vec<f64> = [-1.5f64, 0.25, 2.0]
        .iter()
        .map(|&v| (v * sp(v).tanh()).ln_1p())
        .collect();
    for (a, b) in y.values::<f64>().unwrap().iter().zip(&want) {
        assert!((a - b).abs() <= 1e-15 * b.abs().max(1.0), "{a} vs {b}");
    }
    let e = ops::erfinv(&ops::erf(&x).unwrap())
        .unwrap()
        .values::<f64>()
        .unwrap();
    for (a, b) in e.iter().zip([-1.5, 0.25, 2.0]) {
        assert!((a - b).abs() <= 1e-13, "erfinv(erf({b})) = {a}");
    }
    let b = Tensor::from_vec(vec![2.0f64, 0.5, -1.0], shape![3]).unwrap();
    let p = ops::pow(&ops::reciprocal(&x).unwrap(), &b).unwrap();
    assert_eq!(p.dtype(), &DType::Float64);
    let i = Tensor::from_vec(vec![-7i32, 0, 3], shape![3]).unwrap();
    assert_eq!(ops::sign(&i).unwrap().values::<i32>().unwrap(), [-1, 0, 1]);
    assert_eq!(
        ops::isfinite(&i).unwrap().values::<bool>().unwrap(),
        [true; 3]
    );
    assert_eq!(
        ops::isnan(&i).unwrap().values::<bool>().unwrap(),
        [false; 3]
    );
    // a default posinf is the dtype's largest finite value
    let inf = Tensor::from_vec(vec![f64::INFINITY, f64::NEG_INFINITY], shape![2]).unwrap();
    let n = ops::nan_to_num(&inf, 0.0, None, None).unwrap();
    assert_eq!(n.values::<f64>().unwrap(), [f64::MAX, f64::MIN]);
    // the method forms call the same ops
    let x32 = t(&AWAY, &[8]);
    assert_eq!(vals(&x32.mish().unwrap()), vals(&ops::mish(&x32).unwrap()));
    assert_eq!(
        vals(&x32.softplus(2.0, 3.0).unwrap()),
        vals(&ops::softplus(&x32, 2.0, 3.0).unwrap())
    );
    let base = x32.abs().unwrap();
    assert_eq!(
        vals(&base.pow(&x32).unwrap()),
        vals(&ops::pow(&base, &x32).unwrap())
    );
}

#[test]
fn wrong_dtypes_are_type_errors_and_bad_parameters_value_errors() {
    let x = t(&AWAY, &[8]);
    let i = Tensor::from_vec(vec![1i32, 2], shape![2]).unwrap();
    let d = Tensor::from_vec(vec![1.0f64; 8], shape![8]).unwrap();
    let m = ops::isnan(&x).unwrap();
    for (name, op, _) in unary_ops() {
        // sign and the rounding ops take integers, as PyTorch's (tests/tests/ops_lerp_integer.rs)
        if matches!(name, "sign" | "floor" | "ceil" | "round") {
            assert_eq!(
                *op(&i).unwrap().dtype(),
                autograd_core::DType::Int32,
                "{name}"
            );
        } else {
            assert_eq!(kind(op(&i)), ErrorKind::Type, "{name} of Int32");
        }
        assert_eq!(kind(op(&m)), ErrorKind::Type, "{name} of Bool");
    }
    assert_eq!(kind(ops::isnan(&m)), ErrorKind::Type);
    for (name, op, points) in pointwise_ops() {
        let mut inputs: Vec<Tensor> = points.iter().map(|p| t(p, &[8])).collect();
        inputs[1] = d.clone();
        assert_eq!(kind(op(&inputs)), ErrorKind::Type, "{name} of mixed dtypes");
        inputs[1] = t(&[1.0; 3], &[3]);
        assert_eq!(
            kind(op(&inputs)),
            ErrorKind::Value,
            "{name} of shapes that do not broadcast"
        );
    }
    assert_eq!(kind(ops::softplus(&x, 0.0, 20.0)), ErrorKind::Value);
    assert_eq!(kind(ops::softplus(&x, f32::NAN, 20.0)), ErrorKind::Value);
    assert_eq!(kind(ops::softplus(&x, 1.0, f32::NAN)), ErrorKind::Value);
    assert_eq!(kind(ops::hardtanh(&x, 1.0, -1.0)), ErrorKind::Value);
    assert_eq!(kind(ops::hardtanh(&x, f32::NAN, 1.0)), ErrorKind::Value);
    assert_eq!(kind(ops::leaky_relu(&x, f32::NAN)), ErrorKind::Value);
    assert_eq!(kind(ops::elu(&x, f32::INFINITY)), ErrorKind::Value);
    // a checked parameter fails before any node is recorded, and the op still runs after
    assert!(ops::hardtanh(&x, -1.0, 1.0).is_ok());
}

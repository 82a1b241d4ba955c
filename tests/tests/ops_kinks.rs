//! Every elementwise op's forward value and gradient at its kinks (0 for `abs` and `relu`,
//! ties for `maximum`/`minimum`, the bounds of `clamp`) and at ±inf, ±0 and NaN, against the
//! numbers PyTorch 2.15 prints for the same Float32 inputs and cotangents
//! (`tests/fixtures/kinks/kinks.txt`, written by `gen_kinks.py` beside it).

use autograd_core::{grad, shape, GradOptions, Result, Tensor};
use autograd_ops as ops;

/// PyTorch's numbers, one case a line.
const KINKS: &str = include_str!("../fixtures/kinks/kinks.txt");

/// One line of the fixture.
struct Case<'a> {
    label: &'a str,
    op: &'a str,
    a: Vec<f32>,
    b: Option<Vec<f32>>,
    cotangent: Vec<f32>,
    output: Vec<f32>,
    grad_a: Vec<f32>,
    grad_b: Option<Vec<f32>>,
}

fn floats(field: &str) -> Option<Vec<f32>> {
    if field.is_empty() {
        return None;
    }
    Some(
        field
            .split(' ')
            .map(|v| {
                v.parse::<f32>()
                    .unwrap_or_else(|e| panic!("fixture value {v:?}: {e}"))
            })
            .collect(),
    )
}

fn cases() -> Vec<Case<'static>> {
    KINKS
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            assert_eq!(f.len(), 8, "fixture line {line:?}");
            Case {
                label: f[0],
                op: f[1],
                a: floats(f[2]).expect("an input"),
                b: floats(f[3]),
                cotangent: floats(f[4]).expect("a cotangent"),
                output: floats(f[5]).expect("an output"),
                grad_a: floats(f[6]).expect("a gradient"),
                grad_b: floats(f[7]),
            }
        })
        .collect()
}

/// The constant after the op's name (`powf:2`, `clamp:-0.5:0.5`).
fn constants(op: &str) -> Vec<f32> {
    op.split(':')
        .skip(1)
        .map(|c| c.parse::<f32>().expect("a constant"))
        .collect()
}

/// Runs the fixture's op on our side.
fn run(op: &str, a: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let name = op.split(':').next().unwrap_or(op);
    let c = constants(op);
    let b = || b.expect("a binary op has a second input");
    match name {
        "neg" => ops::neg(a),
        "abs" => ops::abs(a),
        "exp" => ops::exp(a),
        "log" => ops::log(a),
        "sqrt" => ops::sqrt(a),
        "rsqrt" => ops::rsqrt(a),
        "tanh" => ops::tanh(a),
        "sigmoid" => ops::sigmoid(a),
        "relu" => ops::relu(a),
        "gelu" => ops::gelu(a),
        "gelu_tanh" => ops::gelu_tanh(a),
        "silu" => ops::silu(a),
        "sin" => ops::sin(a),
        "cos" => ops::cos(a),
        "powf" => ops::powf(a, c[0]),
        "clamp" => ops::clamp(a, c[0], c[1]),
        "mul_scalar" => ops::mul_scalar(a, c[0]),
        "add_scalar" => ops::add_scalar(a, c[0]),
        "sub_scalar" => ops::sub_scalar(a, c[0]),
        "rsub_scalar" => ops::rsub_scalar(a, c[0]),
        "div_scalar" => ops::div_scalar(a, c[0]),
        "rdiv_scalar" => ops::rdiv_scalar(a, c[0]),
        "add" => ops::add(a, b()),
        "sub" => ops::sub(a, b()),
        "mul" => ops::mul(a, b()),
        "div" => ops::div(a, b()),
        "maximum" => ops::maximum(a, b()),
        "minimum" => ops::minimum(a, b()),
        other => panic!("the fixture names an op this test does not know: {other}"),
    }
}

/// Equal as PyTorch's values: NaN where it has NaN, the same infinity, otherwise within a few
/// ulps (transcendental kernels differ in the last bits). Signed zeros compare equal.
fn same(ours: f32, theirs: f32) -> bool {
    if theirs.is_nan() || ours.is_nan() {
        return theirs.is_nan() && ours.is_nan();
    }
    if theirs.is_infinite() || ours.is_infinite() {
        return ours == theirs;
    }
    (ours - theirs).abs() <= 1e-6 + 2e-6 * theirs.abs()
}

/// Where `ours` and `theirs` differ, each described with the position's inputs.
fn mismatches(case: &Case<'_>, what: &str, ours: &[f32], theirs: &[f32]) -> Vec<String> {
    assert_eq!(ours.len(), theirs.len(), "{}: {what} lengths", case.label);
    let at = |i: usize| match &case.b {
        Some(b) => format!("({}, {})", case.a[i], b[i]),
        None => format!("{}", case.a[i]),
    };
    ours.iter()
        .zip(theirs)
        .enumerate()
        .filter(|(i, (o, t))| !same(**o, **t) && !deliberate(case, what, *i, **o))
        .map(|(i, (o, t))| {
            format!(
                "{}: {what} at {} (cotangent {}): ours {o}, PyTorch {t}",
                case.label,
                at(i),
                case.cotangent[i]
            )
        })
        .collect()
}

/// Where this library differs from PyTorch 2.15 on purpose, each documented at its op: the
/// fixture label (without its cotangent tag), the quantity, the input, and our value.
const DELIBERATE: &[(&str, &str, f32, f32)] = &[
    // gelu(x) -> x as x -> inf; PyTorch's CPU kernel gives NaN at +inf.
    ("gelu", "output", f32::INFINITY, f32::INFINITY),
];

/// Whether a difference at position `i` is one of [`DELIBERATE`], with our value as listed.
fn deliberate(case: &Case<'_>, what: &str, i: usize, ours: f32) -> bool {
    let op = case.label.rsplit_once('/').map_or(case.label, |(op, _)| op);
    DELIBERATE.iter().any(|&(o, w, x, v)| {
        o == op && w == what && case.b.is_none() && case.a[i] == x && same(ours, v)
    })
}

fn vector(values: &[f32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape![values.len()]).expect("a vector")
}

fn check(case: &Case<'_>) -> Vec<String> {
    let a = vector(&case.a);
    let b = case.b.as_deref().map(vector);
    let y = run(case.op, &a, b.as_ref()).expect("the op runs");
    let mut wrong = Vec::new();
    let output = y.values::<f32>().expect("f32 output");
    wrong.extend(mismatches(case, "output", &output, &case.output));
    let mut inputs = vec![&a];
    if let Some(b) = &b {
        inputs.push(b);
    }
    let grads = grad(
        &y,
        &inputs,
        &vector(&case.cotangent),
        GradOptions::default(),
    )
    .expect("the gradient runs");
    let theirs = std::iter::once(&case.grad_a).chain(case.grad_b.as_ref());
    for ((slot, g), t) in ["grad a", "grad b"].iter().zip(&grads).zip(theirs) {
        let ours = match g {
            Some(g) => g.values::<f32>().expect("f32 gradient"),
            None => vec![0.0; t.len()],
        };
        wrong.extend(mismatches(case, slot, &ours, t));
    }
    wrong
}

#[test]
fn every_elementwise_op_matches_pytorch_at_its_kinks_and_at_inf_and_nan() {
    let cases = cases();
    assert!(cases.len() >= 70, "the fixture lost cases: {}", cases.len());
    let wrong: Vec<String> = cases.iter().flat_map(check).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn clamp_passes_no_gradient_at_its_bounds_as_pytorch() {
    let x = vector(&[-0.5, 0.0, 0.5]);
    let y = ops::clamp(&x, -0.5, 0.5).expect("clamp");
    let g = grad(&y, &[&x], &vector(&[1.0; 3]), GradOptions::default()).expect("grad");
    let g = g[0]
        .as_ref()
        .expect("a gradient")
        .values::<f32>()
        .expect("f32");
    assert_eq!(g, vec![0.0, 1.0, 0.0]);
}

#[test]
fn relu_passes_the_cotangent_at_nan_as_pytorch() {
    let x = vector(&[f32::NAN, 0.0, 1.0, -1.0]);
    let y = ops::relu(&x).expect("relu");
    let g = grad(&y, &[&x], &vector(&[1.0; 4]), GradOptions::default()).expect("grad");
    let g = g[0]
        .as_ref()
        .expect("a gradient")
        .values::<f32>()
        .expect("f32");
    assert_eq!(g, vec![1.0, 0.0, 1.0, 0.0]);
}

#[test]
fn maximum_and_minimum_pass_the_whole_cotangent_to_both_inputs_at_nan() {
    let a = vector(&[f32::NAN, 1.0]);
    let b = vector(&[1.0, f32::NAN]);
    for op in [ops::maximum, ops::minimum] {
        let y = op(&a, &b).expect("the op");
        let g = grad(&y, &[&a, &b], &vector(&[1.0; 2]), GradOptions::default()).expect("grad");
        for g in &g {
            let g = g
                .as_ref()
                .expect("a gradient")
                .values::<f32>()
                .expect("f32");
            assert_eq!(g, vec![1.0, 1.0]);
        }
    }
}

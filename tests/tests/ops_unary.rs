//! The unary elementwise ops: forward values against a plain f64 loop and every VJP against
//! central differences (proptest over shapes) on dense, transposed, sliced and broadcast-aliased
//! (stride-0) leaves; IEEE domain behaviour; dtypes other than Float32; bad input.

mod elementwise_support;

use autograd_core::{gradcheck, DType, ErrorKind, GradcheckOptions, Result, Tensor};
use autograd_ops::{
    abs, clamp, cos, exp, gelu, gelu_tanh, log, neg, powf, relu, rsqrt, sigmoid, silu, sin, sqrt,
    tanh,
};
use autograd_tests::{kind, t};
use elementwise_support::{assert_close, f32s, leaf, signed_away_from_zero, uniform, KINDS};
use proptest::prelude::*;

/// Where an op's inputs are drawn from, so no finite difference straddles a kink or a pole.
#[derive(Debug, Clone, Copy)]
enum Domain {
    /// `[0.5, 2)`: log, sqrt, rsqrt, powf
    Positive,
    /// `|x|` in `[0.2, 1.2)`: abs, relu (kinks at 0)
    NonZero,
    /// `[-2, 2)`
    Any,
    /// non-zero and away from the clamp bounds -0.5 and 0.6
    ClampSafe,
}

fn draw(domain: Domain, n: usize, seed: u64) -> Vec<f32> {
    match domain {
        Domain::Positive => uniform(n, seed, 0.5, 2.0),
        Domain::NonZero => signed_away_from_zero(n, seed),
        Domain::Any => uniform(n, seed, -2.0, 2.0),
        Domain::ClampSafe => signed_away_from_zero(n, seed)
            .into_iter()
            .map(|v| {
                if (v + 0.5).abs() < 0.06 || (v - 0.6).abs() < 0.06 {
                    v * 1.3
                } else {
                    v
                }
            })
            .collect(),
    }
}

/// erf by its Taylor series (converges to f64 precision for |x| <= 3).
fn erf_ref(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..120 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn clamp_op(a: &Tensor) -> Result<Tensor> {
    clamp(a, -0.5, 0.6)
}

fn powf_op(a: &Tensor) -> Result<Tensor> {
    powf(a, 1.7)
}

struct Case {
    name: &'static str,
    op: fn(&Tensor) -> Result<Tensor>,
    reference: fn(f64) -> f64,
    domain: Domain,
}

const CASES: &[Case] = &[
    Case {
        name: "neg",
        op: neg,
        reference: |x| -x,
        domain: Domain::Any,
    },
    Case {
        name: "abs",
        op: abs,
        reference: f64::abs,
        domain: Domain::NonZero,
    },
    Case {
        name: "exp",
        op: exp,
        reference: f64::exp,
        domain: Domain::Any,
    },
    Case {
        name: "log",
        op: log,
        reference: f64::ln,
        domain: Domain::Positive,
    },
    Case {
        name: "sqrt",
        op: sqrt,
        reference: f64::sqrt,
        domain: Domain::Positive,
    },
    Case {
        name: "rsqrt",
        op: rsqrt,
        reference: |x| 1.0 / x.sqrt(),
        domain: Domain::Positive,
    },
    Case {
        name: "powf",
        op: powf_op,
        reference: |x| x.powf(1.7),
        domain: Domain::Positive,
    },
    Case {
        name: "tanh",
        op: tanh,
        reference: f64::tanh,
        domain: Domain::Any,
    },
    Case {
        name: "sigmoid",
        op: sigmoid,
        reference: |x| 1.0 / (1.0 + (-x).exp()),
        domain: Domain::Any,
    },
    Case {
        name: "relu",
        op: relu,
        reference: |x| x.max(0.0),
        domain: Domain::NonZero,
    },
    Case {
        name: "gelu",
        op: gelu,
        reference: |x| 0.5 * x * (1.0 + erf_ref(x / std::f64::consts::SQRT_2)),
        domain: Domain::Any,
    },
    Case {
        name: "gelu_tanh",
        op: gelu_tanh,
        reference: |x| {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
        },
        domain: Domain::Any,
    },
    Case {
        name: "silu",
        op: silu,
        reference: |x| x / (1.0 + (-x).exp()),
        domain: Domain::Any,
    },
    Case {
        name: "sin",
        op: sin,
        reference: f64::sin,
        domain: Domain::Any,
    },
    Case {
        name: "cos",
        op: cos,
        reference: f64::cos,
        domain: Domain::Any,
    },
    Case {
        name: "clamp",
        op: clamp_op,
        reference: |x| x.clamp(-0.5, 0.6),
        domain: Domain::ClampSafe,
    },
];

#[test]
fn every_unary_op_matches_a_plain_loop_on_every_layout() {
    for case in CASES {
        for kind in KINDS {
            let (r, c) = (3, 5);
            let x = leaf(&draw(case.domain, r * c, 3), r, c, kind);
            let y = (case.op)(&x).unwrap();
            assert_eq!(y.dims(), vec![r, c], "{}", case.name);
            let want: Vec<f64> = f32s(&x)
                .iter()
                .map(|&v| (case.reference)(f64::from(v)))
                .collect();
            assert_close(
                &f32s(&y),
                &want,
                2e-6,
                &format!("{} on {kind:?}", case.name),
            );
            // a differentiable input records a node named after the op
            assert_eq!(y.autograd_ctx().unwrap().name(), case.name);
        }
    }
}

#[test]
fn large_inputs_take_the_parallel_path_and_agree_with_the_loop() {
    let n = 70_000;
    for case in CASES {
        let v = draw(case.domain, n, 9);
        let y = (case.op)(&t(&v, &[n])).unwrap();
        let want: Vec<f64> = v.iter().map(|&x| (case.reference)(f64::from(x))).collect();
        assert_close(&f32s(&y), &want, 2e-6, case.name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_unary_vjp_matches_central_differences(
        r in 1usize..4,
        c in 1usize..5,
        k in 0usize..4,
        seed in 0u64..1000,
    ) {
        for case in CASES {
            let x = leaf(&draw(case.domain, r * c, seed), r, c, KINDS[k]);
            let report = gradcheck(|v: &[Tensor]| (case.op)(&v[0]), &[x], GradcheckOptions::default());
            prop_assert!(report.is_ok(), "{} on {:?} [{r}, {c}]: {:?}", case.name, KINDS[k], report);
        }
    }
}

#[test]
fn domain_errors_follow_ieee_and_never_fail() {
    let x = t(&[-1.0, 0.0, 4.0], &[3]);
    let l = f32s(&log(&x).unwrap());
    assert!(l[0].is_nan());
    assert_eq!(l[1], f32::NEG_INFINITY);
    let s = f32s(&sqrt(&x).unwrap());
    assert!(s[0].is_nan());
    assert_eq!(s[2], 2.0);
    let r = f32s(&rsqrt(&x).unwrap());
    assert_eq!(r[1], f32::INFINITY);
    assert!(f32s(&powf(&x, 0.5).unwrap())[0].is_nan());
    // no overflow for large |x|
    let big = t(&[-1000.0, 1000.0], &[2]);
    assert_eq!(f32s(&sigmoid(&big).unwrap()), [0.0, 1.0]);
    assert_eq!(f32s(&silu(&big).unwrap()), [-0.0, 1000.0]);
    let th = f32s(&tanh(&big).unwrap());
    assert!((th[0] + 1.0).abs() < 1e-6 && (th[1] - 1.0).abs() < 1e-6);
    // NaN stays NaN
    let nan = t(&[f32::NAN], &[1]);
    for case in CASES {
        assert!(f32s(&(case.op)(&nan).unwrap())[0].is_nan(), "{}", case.name);
    }
}

#[test]
fn float64_and_int32_tensors_compute_without_a_node() {
    let x = Tensor::from_vec(vec![0.5f64, -2.0, 3.0], autograd_core::shape![3]).unwrap();
    let y = exp(&x).unwrap();
    assert_eq!(y.dtype(), &DType::Float64);
    assert!(y.autograd_ctx().is_none());
    assert_eq!(
        y.values::<f64>().unwrap(),
        [0.5f64.exp(), (-2.0f64).exp(), 3.0f64.exp()]
    );
    assert_eq!(tanh(&x).unwrap().values::<f64>().unwrap()[0], 0.5f64.tanh());
    let i = Tensor::from_vec(vec![-3i32, 0, 7, i32::MIN], autograd_core::shape![4]).unwrap();
    assert_eq!(
        neg(&i).unwrap().values::<i32>().unwrap(),
        [3, 0, -7, i32::MIN]
    );
    assert_eq!(
        abs(&i).unwrap().values::<i32>().unwrap(),
        [3, 0, 7, i32::MIN]
    );
    assert_eq!(relu(&i).unwrap().values::<i32>().unwrap(), [0, 0, 7, 0]);
    // float-only ops refuse integers and Bool with a type error
    assert_eq!(kind(exp(&i)), ErrorKind::Type);
    assert_eq!(kind(clamp(&i, 0.0, 1.0)), ErrorKind::Type);
    let b = Tensor::from_vec(vec![true], autograd_core::shape![1]).unwrap();
    assert_eq!(kind(neg(&b)), ErrorKind::Type);
}

#[test]
fn float64_gelu_is_exact_to_double_precision() {
    // x Phi(x) against erf by its series, well inside f64 precision (the Float32 fit of erf
    // was off by 1e-7 here)
    let xs = [-2.5f64, -1.0, -0.3, 0.0, 0.7, 1.0, 2.9];
    let x = Tensor::from_vec(xs.to_vec(), autograd_core::shape![7]).unwrap();
    let got = gelu(&x).unwrap().values::<f64>().unwrap();
    for (&x, &y) in xs.iter().zip(&got) {
        let want = 0.5 * x * (1.0 + erf_ref(x * std::f64::consts::FRAC_1_SQRT_2));
        assert!((y - want).abs() <= 1e-15, "gelu({x}) = {y}, want {want}");
    }
    // and the tanh form with its constants in double precision
    let got = gelu_tanh(&x).unwrap().values::<f64>().unwrap();
    let c = (2.0 / std::f64::consts::PI).sqrt();
    for (&x, &y) in xs.iter().zip(&got) {
        let want = 0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh());
        assert!(
            (y - want).abs() <= 1e-15,
            "gelu_tanh({x}) = {y}, want {want}"
        );
    }
}

#[test]
fn clamp_with_crossed_or_nan_bounds_is_a_value_error_that_changes_nothing() {
    let x = t(&[0.5, 1.5], &[2]);
    assert_eq!(kind(clamp(&x, 1.0, 0.0)), ErrorKind::Value);
    assert_eq!(kind(clamp(&x, f32::NAN, 1.0)), ErrorKind::Value);
    assert_eq!(f32s(&x), [0.5, 1.5]);
    assert!(x.grad().unwrap().is_none());
    // a value at a bound gets no gradient, as PyTorch 2.15 gives it; one inside gets it all
    let y = clamp(&x, 0.5, 1.0).unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(f32s(&x.grad().unwrap().unwrap()), [0.0, 0.0]);
    let y = clamp(&x, 0.0, 1.0).unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(f32s(&x.grad().unwrap().unwrap()), [1.0, 0.0]);
}

#[test]
fn method_forms_match_the_functions() {
    let x = t(&[0.5, 1.5, 2.0], &[3]);
    let same = |a: Tensor, b: Tensor| assert_eq!(f32s(&a), f32s(&b));
    same(x.exp().unwrap(), exp(&x).unwrap());
    same(x.log().unwrap(), log(&x).unwrap());
    same(x.tanh().unwrap(), tanh(&x).unwrap());
    same(x.gelu().unwrap(), gelu(&x).unwrap());
    same(x.gelu_tanh().unwrap(), gelu_tanh(&x).unwrap());
    same(x.silu().unwrap(), silu(&x).unwrap());
    same(x.powf(2.0).unwrap(), powf(&x, 2.0).unwrap());
    same(x.clamp(0.0, 1.0).unwrap(), clamp(&x, 0.0, 1.0).unwrap());
    same(x.neg().unwrap(), neg(&x).unwrap());
    same(x.rsqrt().unwrap(), rsqrt(&x).unwrap());
}

#[test]
fn results_stay_in_the_input_carrier_class() {
    #[path = "spec_support.rs"]
    #[allow(clippy::duplicate_mod)]
    mod spec_support;
    let x = spec_support::tc(&[0.5, 1.0, 1.5, 2.0], &[2, 2]);
    for case in CASES {
        let y = (case.op)(&x).unwrap();
        assert!(spec_support::on_test_carrier(&y), "{}", case.name);
        y.backward_with(Some(&t(&[1.0; 4], &[2, 2])), false)
            .unwrap();
        assert!(
            spec_support::on_test_carrier(&x.grad().unwrap().unwrap()),
            "{}",
            case.name
        );
    }
}

#[test]
fn the_fast_float32_tanh_stays_within_float_rounding() {
    let v = uniform(10_000, 5, -9.0, 9.0);
    let y = f32s(&tanh(&t(&v, &[v.len()])).unwrap());
    for (&x, &got) in v.iter().zip(&y) {
        let want = f64::from(x).tanh();
        assert!(
            (f64::from(got) - want).abs() <= 4e-7 * want.abs().max(1e-3),
            "tanh({x})"
        );
    }
}

//! The scalar front-end: every op against its hand derivative and central differences,
//! Rosenbrock and a small MLP written in scalars, and agreement with the generic tape.

use autograd_core::tape::{ScalarTape, Var};
use proptest::prelude::*;

/// Central differences of `f` at `xs`, evaluated by recording on fresh tapes.
fn finite_differences(f: &impl for<'t> Fn(&[Var<'t>]) -> Var<'t>, xs: &[f64]) -> Vec<f64> {
    let eval = |xs: &[f64]| {
        let tape = ScalarTape::new();
        let vars = tape.vars(xs);
        f(&vars).value()
    };
    (0..xs.len())
        .map(|i| {
            let h = 1e-6 * xs[i].abs().max(1.0);
            let mut hi = xs.to_vec();
            let mut lo = xs.to_vec();
            hi[i] += h;
            lo[i] -= h;
            (eval(&hi) - eval(&lo)) / (2.0 * h)
        })
        .collect()
}

/// The gradient of `f` at `xs` from one sweep.
fn gradient(f: &impl for<'t> Fn(&[Var<'t>]) -> Var<'t>, xs: &[f64]) -> (f64, Vec<f64>) {
    let tape = ScalarTape::new();
    let vars = tape.vars(xs);
    let y = f(&vars);
    let grads = tape.gradients(y);
    (y.value(), vars.iter().map(|&v| grads[v]).collect())
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let scale = x.abs().max(y.abs()).max(1.0);
        assert!(
            (x - y).abs() <= tol * scale,
            "entry {i}: {x} vs {y} ({a:?} vs {b:?})"
        );
    }
}

/// Checks `f` at `xs` against `hand` (the derivative worked out by hand) and against finite
/// differences.
fn check(f: impl for<'t> Fn(&[Var<'t>]) -> Var<'t>, hand: &[f64], xs: &[f64]) {
    let (_, g) = gradient(&f, xs);
    assert_close(&g, hand, 1e-12);
    assert_close(&g, &finite_differences(&f, xs), 1e-6);
}

#[test]
fn the_example_from_the_issue() {
    let tape = ScalarTape::new();
    let x = tape.var(2.0);
    let y = x.sin() * x + 3.0;
    assert_eq!(y.value(), 2.0f64.sin() * 2.0 + 3.0);
    let grads = tape.gradients(y);
    // d(x sin x + 3) = (sin x + x cos x) dx
    assert!((grads[x] - (2.0f64.sin() + 2.0 * 2.0f64.cos())).abs() < 1e-15);
    assert_eq!(grads.wrt(x), grads[x]);
    assert_eq!(grads.as_slice().len(), tape.len());
}

#[test]
fn arithmetic_with_vars_and_constants() {
    let (a, b) = (1.7, -0.6);
    check(|v| v[0] + v[1], &[1.0, 1.0], &[a, b]);
    check(|v| v[0] - v[1], &[1.0, -1.0], &[a, b]);
    check(|v| v[0] * v[1], &[b, a], &[a, b]);
    // d(a / b) = da / b - a / b^2 db
    check(|v| v[0] / v[1], &[1.0 / b, -a / (b * b)], &[a, b]);
    check(|v| v[0] + 2.5, &[1.0], &[a]);
    check(|v| 2.5 + v[0], &[1.0], &[a]);
    check(|v| v[0] - 2.5, &[1.0], &[a]);
    check(|v| 2.5 - v[0], &[-1.0], &[a]);
    check(|v| v[0] * 2.5, &[2.5], &[a]);
    check(|v| 2.5 * v[0], &[2.5], &[a]);
    check(|v| v[0] / 2.5, &[1.0 / 2.5], &[a]);
    // d(c / x) = -c / x^2
    check(|v| 2.5 / v[0], &[-2.5 / (a * a)], &[a]);
    check(|v| -v[0], &[-1.0], &[a]);
    // x * x: both contributions reach x.
    check(|v| v[0] * v[0], &[2.0 * a], &[a]);
    check(
        |v| {
            let mut y = v[0];
            y += v[1];
            y -= 1.0;
            y *= v[0];
            y /= 2.0;
            y += 3.0;
            y -= v[1];
            y *= 4.0;
            y /= v[1];
            y
        },
        // y = 4 ((a + b - 1) a / 2 + 3 - b) / b
        &[
            4.0 * ((2.0 * a + b - 1.0) / 2.0) / b,
            4.0 * ((a / 2.0 - 1.0) * b - ((a + b - 1.0) * a / 2.0 + 3.0 - b)) / (b * b),
        ],
        &[a, b],
    );
}

#[test]
fn elementary_functions() {
    let x: f64 = 0.8;
    check(|v| v[0].sin(), &[x.cos()], &[x]);
    check(|v| v[0].cos(), &[-x.sin()], &[x]);
    check(|v| v[0].exp(), &[x.exp()], &[x]);
    check(|v| v[0].ln(), &[1.0 / x], &[x]);
    check(|v| v[0].tanh(), &[1.0 - x.tanh().powi(2)], &[x]);
    check(|v| v[0].powi(3), &[3.0 * x * x], &[x]);
    check(|v| v[0].powi(-2), &[-2.0 / (x * x * x)], &[x]);
    check(|v| v[0].powi(1), &[1.0], &[x]);
    check(|v| v[0].powi(0), &[0.0], &[x]);
    check(|v| v[0].sqrt(), &[0.5 / x.sqrt()], &[x]);
    check(|v| v[0].relu(), &[1.0], &[x]);
    check(|v| v[0].relu(), &[0.0], &[-x]);
    // relu'(0) = 0; d(x^0) at 0 is 0, not 0 * 0^-1.
    assert_eq!(gradient(&|v| v[0].relu(), &[0.0]).1, vec![0.0]);
    assert_eq!(gradient(&|v| v[0].powi(0), &[0.0]).1, vec![0.0]);
    // A composition: d sqrt(exp(sin x) + x^2) = (cos x exp(sin x) + 2x) / (2 sqrt(...)).
    let inner = x.sin().exp() + x * x;
    check(
        |v| (v[0].sin().exp() + v[0].powi(2)).sqrt(),
        &[(x.cos() * x.sin().exp() + 2.0 * x) / (2.0 * inner.sqrt())],
        &[x],
    );
}

/// Rosenbrock in n dimensions: sum of 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2.
fn rosenbrock<'t>(v: &[Var<'t>]) -> Var<'t> {
    let mut total = (1.0 - v[0]).powi(2) + 100.0 * (v[1] - v[0].powi(2)).powi(2);
    for i in 1..v.len() - 1 {
        total += (1.0 - v[i]).powi(2) + 100.0 * (v[i + 1] - v[i].powi(2)).powi(2);
    }
    total
}

fn rosenbrock_gradient(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut g = vec![0.0; n];
    for i in 0..n - 1 {
        // d/dx_i: -2 (1 - x_i) - 400 x_i (x_{i+1} - x_i^2); d/dx_{i+1}: 200 (x_{i+1} - x_i^2)
        g[i] += -2.0 * (1.0 - x[i]) - 400.0 * x[i] * (x[i + 1] - x[i] * x[i]);
        g[i + 1] += 200.0 * (x[i + 1] - x[i] * x[i]);
    }
    g
}

#[test]
fn rosenbrock_gradients() {
    for xs in [
        vec![-1.2, 1.0],
        vec![0.3, -0.7, 1.4, 0.9],
        vec![1.0, 1.0, 1.0],
    ] {
        let (_, g) = gradient(&rosenbrock, &xs);
        assert_close(&g, &rosenbrock_gradient(&xs), 1e-12);
        assert_close(&g, &finite_differences(&rosenbrock, &xs), 1e-6);
    }
}

#[test]
fn rosenbrock_descent_on_a_reused_tape() {
    // Gradient descent with the tape cleared and reused every step.
    let mut tape = ScalarTape::new();
    let mut x = vec![-1.2, 1.0];
    let start = {
        let v = tape.vars(&x);
        rosenbrock(&v).value()
    };
    let mut last = start;
    for _ in 0..2000 {
        tape.clear();
        let v = tape.vars(&x);
        let f = rosenbrock(&v);
        last = f.value();
        let g = tape.gradients(f);
        for (xi, vi) in x.iter_mut().zip(&v) {
            *xi -= 1e-3 * g[*vi];
        }
        assert_eq!(tape.len(), 2 + 7);
    }
    assert!(last < start / 10.0, "{start} -> {last}");
}

/// A 2-3-1 tanh MLP on four points with squared error; `p` holds 3x2 weights, 3 biases,
/// 3 output weights and an output bias (13 parameters).
fn mlp_loss<'t>(p: &[Var<'t>]) -> Var<'t> {
    let data = [
        ([0.0, 0.5], 0.2),
        ([1.0, -1.0], -0.4),
        ([0.3, 0.8], 0.9),
        ([-0.7, 0.1], 0.0),
    ];
    let mut loss: Option<Var<'t>> = None;
    for (x, target) in data {
        let mut out = p[12];
        for j in 0..3 {
            let h = (p[2 * j] * x[0] + p[2 * j + 1] * x[1] + p[6 + j]).tanh();
            out += p[9 + j] * h;
        }
        let err = (out - target).powi(2);
        loss = Some(match loss {
            Some(l) => l + err,
            None => err,
        });
    }
    loss.unwrap() / 4.0
}

#[test]
fn small_mlp_against_finite_differences() {
    let params: Vec<f64> = (0..13).map(|i| ((i as f64) * 0.37).sin() * 0.8).collect();
    let (_, g) = gradient(&mlp_loss, &params);
    assert_close(&g, &finite_differences(&mlp_loss, &params), 1e-6);
}

#[test]
fn single_neuron_hand_derivative() {
    // L = (tanh(w x + b) - t)^2: dL/dw = 2 (y - t) (1 - y^2) x, dL/db = 2 (y - t) (1 - y^2).
    let (w, b, x, t): (f64, f64, f64, f64) = (0.7, -0.2, 1.5, 0.3);
    let y = (w * x + b).tanh();
    let common = 2.0 * (y - t) * (1.0 - y * y);
    check(
        move |v| ((v[0] * x + v[1]).tanh() - t).powi(2),
        &[common * x, common],
        &[w, b],
    );
}

#[test]
fn constants_and_unreached_nodes_get_zero() {
    let tape = ScalarTape::new();
    let x = tape.var(3.0);
    let c = tape.constant(2.0);
    let unused = tape.var(5.0);
    let y = x * c + c;
    let g = tape.gradients(y);
    assert_eq!(g[x], 2.0);
    assert_eq!(g[c], 0.0);
    assert_eq!(g[unused], 0.0);
    assert_eq!(g[y], 1.0);
    // The seed of a constant output is kept, as the generic sweep keeps it.
    let g = tape.gradients(c);
    assert_eq!(g[c], 1.0);
    assert_eq!(g[x], 0.0);
    let g = tape.gradients_seeded(y, -2.0);
    assert_eq!(g[x], -4.0);
}

#[test]
fn the_nan_case_on_the_scalar_tape() {
    // x = 0; ln(x) is disconnected from y = 2x.
    let tape = ScalarTape::new();
    let x = tape.var(0.0);
    let z = x.ln();
    let y = x * 2.0;
    let g = tape.gradients(y);
    assert_eq!(g[x], 2.0);
    assert_eq!(g[z], 0.0);
    let generic = tape.to_tape();
    let mut one_hot = vec![0.0; generic.size()];
    one_hot[y.id()] = 1.0;
    let from = generic.backward_dense_from(one_hot).unwrap();
    assert!(from[x.id()].is_nan());
    assert_eq!(
        generic.backward_dense_all(y.id(), 1.0).unwrap(),
        g.into_vec()
    );
}

#[test]
fn to_tape_has_names_parents_and_flags() {
    let tape = ScalarTape::new();
    let x = tape.var(1.0);
    let c = tape.constant(2.0);
    let y = (x * c).sin();
    let generic = tape.to_tape();
    assert_eq!(generic.size(), 4);
    let names: Vec<_> = generic
        .nodes()
        .iter()
        .map(|n| n.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["var", "const", "mul", "sin"]);
    assert_eq!(generic.node(y.id()).unwrap().parents, vec![2]);
    assert_eq!(generic.node(2).unwrap().parents, vec![x.id(), c.id()]);
    assert!(!generic.node(c.id()).unwrap().requires_grad);
    assert_eq!(generic.value(y.id()), Some(&2.0f64.sin()));
}

#[test]
#[should_panic(expected = "different ScalarTapes")]
fn mixing_tapes_panics() {
    let a = ScalarTape::new();
    let b = ScalarTape::new();
    let _ = a.var(1.0) + b.var(2.0);
}

#[test]
fn gradients_know_their_tape_and_recording() {
    let mut tape = ScalarTape::new();
    let (x, y) = {
        let x = tape.var(2.0);
        let y = x * x;
        (x.id(), y.id())
    };
    let _ = (x, y);
    // a node recorded after the sweep's output has gradient zero
    {
        let x = tape.var(3.0);
        let y = x * x;
        let g = tape.gradients(y);
        let z = y.sin();
        assert_eq!(g[x], 6.0);
        assert_eq!(g[z], 0.0);
    }
    let stale = {
        let x = tape.var(1.0);
        tape.gradients(x * 2.0)
    };
    tape.clear();
    let a = tape.var(5.0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stale[a]));
    assert!(
        result.is_err(),
        "gradients of a cleared recording refuse new Vars"
    );
    let other = ScalarTape::new();
    let b = other.var(1.0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stale.wrt(b)));
    assert!(result.is_err(), "gradients refuse a Var of another tape");
}

#[test]
fn powi_of_the_most_negative_exponent_has_a_finite_slope() {
    let tape = ScalarTape::new();
    let x = tape.var(2.0);
    let y = x.powi(i32::MIN);
    let g = tape.gradients(y)[x];
    assert!(g.is_finite() && g.abs() < 1e-300, "{g}");
}

#[test]
fn ops_on_constants_alone_require_no_gradient() {
    let tape = ScalarTape::new();
    let x = tape.var(3.0);
    let c = tape.constant(2.0);
    let d = c.sin();
    let y = d * x;
    let g = tape.gradients(y);
    assert_eq!(g[d], 0.0, "d depends on constants only");
    assert_eq!(g[c], 0.0);
    assert!((g[x] - 2.0f64.sin()).abs() < 1e-15);
    let generic = tape.to_tape();
    assert!(!generic.node(d.id()).unwrap().requires_grad);
    assert!(generic.node(y.id()).unwrap().requires_grad);
    let all = generic.backward_dense_all(y.id(), 1.0).unwrap();
    assert_eq!(all, g.into_vec());
}

#[test]
fn t1_chain_gradient_and_bench() {
    // y_0 = x, y_k = 0.999 y_{k-1} + x: dy_n/dx = sum_{k=0}^{n} 0.999^k.
    let tape = ScalarTape::with_capacity(2001);
    let x = tape.var(0.5);
    let mut y = x;
    for _ in 0..1000 {
        y = y * 0.999 + x;
    }
    assert_eq!(tape.len(), 2001);
    let expected = (1.0 - 0.999f64.powi(1001)) / (1.0 - 0.999);
    assert!((tape.gradients(y)[x] - expected).abs() < 1e-9);
    assert!(format!("{tape:?} {x:?}").contains("2001 nodes"));
}

/// One random scalar op over earlier nodes (indices taken modulo the node count).
#[derive(Debug, Clone)]
enum Step {
    Bin(u8, usize, usize),
    Const(u8, usize, f64),
    Unary(u8, usize),
    Constant(f64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..4, any::<usize>(), any::<usize>()).prop_map(|(k, a, b)| Step::Bin(k, a, b)),
        (0u8..8, any::<usize>(), -3.0f64..3.0).prop_map(|(k, a, c)| Step::Const(k, a, c)),
        (0u8..10, any::<usize>()).prop_map(|(k, a)| Step::Unary(k, a)),
        (-2.0f64..2.0).prop_map(Step::Constant),
    ]
}

fn build<'t>(tape: &'t ScalarTape, inputs: &[f64], steps: &[Step]) -> Vec<Var<'t>> {
    let mut vars = tape.vars(inputs);
    for s in steps {
        let n = vars.len();
        let v = match *s {
            Step::Bin(k, a, b) => {
                let (a, b) = (vars[a % n], vars[b % n]);
                [a + b, a - b, a * b, a / b][k as usize]
            }
            Step::Const(k, a, c) => {
                let a = vars[a % n];
                [a + c, c + a, a - c, c - a, a * c, c * a, a / c, c / a][k as usize]
            }
            Step::Unary(k, a) => {
                let a = vars[a % n];
                match k {
                    0 => -a,
                    1 => a.sin(),
                    2 => a.cos(),
                    3 => a.tanh().exp(),
                    4 => (a * a + 1.0).ln(),
                    5 => a.tanh(),
                    6 => a.powi(3),
                    7 => (a * a).sqrt(),
                    8 => a.relu(),
                    _ => a.powi(-1),
                }
            }
            Step::Constant(c) => tape.constant(c),
        };
        vars.push(v);
    }
    vars
}

proptest! {
    /// The fast sweep is bit-identical to `backward_dense_all` on the equivalent generic tape,
    /// for every node taken as the output.
    #[test]
    fn fast_sweep_matches_generic_tape(
        inputs in prop::collection::vec(-2.0f64..2.0, 1..4),
        steps in prop::collection::vec(step(), 0..30),
        out in any::<usize>(),
    ) {
        let tape = ScalarTape::new();
        let vars = build(&tape, &inputs, &steps);
        let y = vars[out % vars.len()];
        let fast = tape.gradients(y).into_vec();
        let generic = tape.to_tape().backward_dense_all(y.id(), 1.0).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&fast), bits(&generic));
    }
}

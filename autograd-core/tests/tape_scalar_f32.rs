//! The scalar front-end in single precision: an `f32` program against its hand derivative,
//! `f32` and `f64` tapes agreeing to `f32` precision on random programs, `to_tape` of an `f32`
//! tape against the fast sweep, and code written once for both precisions.

use autograd_core::tape::{bench_t1, Float, Gradients, ScalarTape, Tape, Var};
use proptest::prelude::*;

/// `|got - want| <= tol * max(|want|, 1)`, with `want` computed in `f64`.
fn assert_near(got: f32, want: f64, tol: f64, what: &str) {
    let err = (f64::from(got) - want).abs();
    assert!(
        err <= tol * want.abs().max(1.0),
        "{what}: {got} vs {want} (error {err:e})"
    );
}

#[test]
fn a_small_program_against_its_hand_derivative() {
    // f(x, y) = x y + sin x - y / x + sqrt y + e^(x / 2) (2 - y)^2 / 4 + c
    let (x0, y0) = (1.5_f32, 0.7_f32);
    let tape = ScalarTape::<f32>::empty();
    let x = tape.var(x0);
    let y = tape.var(y0);
    let c = tape.constant(0.25);
    let f = x * y + x.sin() - y / x + y.sqrt() + (x / 2.0).exp() * (2.0 - y).powi(2) / 4.0 + c;
    let grads: Gradients<f32> = tape.gradients(f);

    let (a, b) = (f64::from(x0), f64::from(y0));
    let e = (a / 2.0).exp();
    let value = a * b + a.sin() - b / a + b.sqrt() + e * (2.0 - b).powi(2) / 4.0 + 0.25;
    // df/dx = y + cos x + y / x^2 + e^(x / 2) (2 - y)^2 / 8
    let dx = b + a.cos() + b / (a * a) + e * (2.0 - b).powi(2) / 8.0;
    // df/dy = x - 1 / x + 1 / (2 sqrt y) - e^(x / 2) (2 - y) / 2
    let dy = a - 1.0 / a + 0.5 / b.sqrt() - e * (2.0 - b) / 2.0;
    assert_near(f.value(), value, 1e-6, "f");
    assert_near(grads[x], dx, 1e-6, "df/dx");
    assert_near(grads.wrt(y), dy, 1e-6, "df/dy");
    assert_eq!(grads[c], 0.0_f32);
    assert_eq!(grads[f], 1.0_f32);
    assert_eq!(grads.as_slice().len(), tape.len());
}

/// A one-input `f32` program.
type Program = for<'t> fn(Var<'t, f32>) -> Var<'t, f32>;

#[test]
fn every_op_in_f32() {
    // Each case: the program, its derivative at x0 (computed in f64), and x0.
    let x0 = 0.8_f32;
    let a = f64::from(x0);
    let cases: [(Program, f64); 20] = [
        (|x| x + x, 2.0),
        (|x| x - x * 3.0, -2.0),
        (|x| x * x, 2.0 * a),
        (|x| (x + 1.0) / x, -1.0 / (a * a)),
        (|x| 2.5 + x, 1.0),
        (|x| 2.5 - x, -1.0),
        (|x| 2.5 * x, 2.5),
        (|x| 2.5 / x, -2.5 / (a * a)),
        (|x| x / 2.5 - 1.0, 1.0 / 2.5),
        (|x| -x, -1.0),
        (|x| x.sin(), a.cos()),
        (|x| x.cos(), -a.sin()),
        (|x| x.exp(), a.exp()),
        (|x| x.ln(), 1.0 / a),
        (|x| x.tanh(), 1.0 - a.tanh().powi(2)),
        (|x| x.powi(3), 3.0 * a * a),
        (|x| x.powi(-2), -2.0 / (a * a * a)),
        (|x| x.sqrt(), 0.5 / a.sqrt()),
        (|x| x.relu(), 1.0),
        (|x| (-x).relu(), 0.0),
    ];
    for (i, (f, want)) in cases.into_iter().enumerate() {
        let tape = ScalarTape::<f32>::empty();
        let x = tape.var(x0);
        let y = f(x);
        assert_near(tape.gradients(y)[x], want, 1e-6, &format!("case {i}"));
    }
}

#[test]
fn assignment_operators_and_seeds_in_f32() {
    let tape = ScalarTape::<f32>::empty_with_capacity(16);
    let x = tape.var(2.0);
    let mut y = x;
    y += 1.0; // x + 1
    y *= x; // (x + 1) x
    y -= x; // x^2
    y /= 4.0; // x^2 / 4
    assert_eq!(y.value(), 1.0);
    // d(x^2 / 4) = x / 2, times the seed -3
    assert_eq!(tape.gradients_seeded(y, -3.0)[x], -3.0);
}

/// `x^3 / 3 - 2x` written once for both precisions: `Var ⊕ F` is generic in `F`.
fn cubic<F: Float>(x: Var<'_, F>) -> Var<'_, F> {
    x.powi(3) / F::from_i32(3) - x * F::from_i32(2)
}

#[test]
fn generic_code_runs_in_both_precisions() {
    let t64 = ScalarTape::new();
    let x64 = t64.var(1.5);
    let g64 = t64.gradients(cubic(x64))[x64];
    let t32 = ScalarTape::<f32>::empty();
    let x32 = t32.var(1.5);
    let g32 = t32.gradients(cubic(x32))[x32];
    // x^2 - 2 at 1.5
    assert_eq!(g64, 0.25);
    assert_eq!(g32, 0.25);
}

#[test]
fn the_t1_chain_in_f32() {
    // y_0 = x, y_k = 0.999 y_{k-1} + x: dy_n/dx = sum_{k=0}^{n} 0.999^k.
    let tape = ScalarTape::<f32>::empty();
    let x = tape.var(0.5);
    let mut y = x;
    for _ in 0..2000 {
        y = y * 0.999 + x;
    }
    let expected = (1.0 - 0.999f64.powi(2001)) / (1.0 - 0.999);
    assert_near(tape.gradients(y)[x], expected, 1e-4, "dy/dx");
    assert_near(y.value(), 0.5 * expected, 1e-4, "y");
    assert!(bench_t1(100) > std::time::Duration::ZERO);
}

/// One random op over earlier nodes (indices taken modulo the node count). Every op keeps
/// values within a few units of the inputs' range and has a bounded derivative there, so the
/// program is well conditioned and `f32` rounding stays small against the `f64` result.
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
        (0u8..5, any::<usize>(), -1.0f64..1.0).prop_map(|(k, a, c)| Step::Const(k, a, c)),
        (0u8..11, any::<usize>()).prop_map(|(k, a)| Step::Unary(k, a)),
        (-2.0f64..2.0).prop_map(Step::Constant),
    ]
}

/// `fn $name(tape, inputs, steps)`: records the program of `steps` on a tape of `$t`.
macro_rules! program {
    ($name:ident, $t:ty) => {
        fn $name<'t>(tape: &'t ScalarTape<$t>, inputs: &[f64], steps: &[Step]) -> Vec<Var<'t, $t>> {
            let inputs: Vec<$t> = inputs.iter().map(|&x| x as $t).collect();
            let mut vars = tape.vars(&inputs);
            for s in steps {
                let n = vars.len();
                let v = match *s {
                    Step::Bin(k, a, b) => {
                        let (a, b) = (vars[a % n], vars[b % n]);
                        match k {
                            0 => (a + b) * 0.5,
                            1 => (a - b) * 0.5,
                            2 => a.tanh() * b,
                            _ => a / (b * b + 1.0),
                        }
                    }
                    Step::Const(k, a, c) => {
                        let (a, c) = (vars[a % n], c as $t);
                        match k {
                            0 => a + c,
                            1 => c - a,
                            2 => c * a,
                            3 => a / (2.0 + c),
                            _ => c / (a * a + 1.0),
                        }
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
                            6 => a.tanh().powi(3),
                            7 => (a * a + 1.0).sqrt(),
                            8 => (a.tanh() + 0.5).relu(),
                            9 => (a * a + 1.0).powi(-1),
                            _ => a - 1.0,
                        }
                    }
                    Step::Constant(c) => tape.constant(c as $t),
                };
                vars.push(v);
            }
            vars
        }
    };
}

program!(program_f32, f32);
program!(program_f64, f64);

proptest! {
    /// The same program on an `f32` and an `f64` tape: values and gradients of every node agree
    /// to `f32` precision, against the scale of the program (rounding errors are absolute once
    /// values cancel).
    #[test]
    fn f32_and_f64_tapes_agree(
        inputs in prop::collection::vec(-2.0f64..2.0, 1..4),
        steps in prop::collection::vec(step(), 0..30),
        out in any::<usize>(),
    ) {
        let (t32, t64) = (ScalarTape::<f32>::empty(), ScalarTape::new());
        let (v32, v64) = (program_f32(&t32, &inputs, &steps), program_f64(&t64, &inputs, &steps));
        let out = out % v32.len();
        let g32 = t32.gradients(v32[out]).into_vec();
        let g64 = t64.gradients(v64[out]).into_vec();
        let values32: Vec<f32> = v32.iter().map(|v| v.value()).collect();
        let values64: Vec<f64> = v64.iter().map(|v| v.value()).collect();
        for (got, want) in [(&values32, &values64), (&g32, &g64)] {
            let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
            for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
                let err = (f64::from(g) - w).abs();
                prop_assert!(err <= 2e-5 * scale, "node {}: {} vs {} (scale {})", i, g, w, scale);
            }
        }
    }

    /// `to_tape` of an `f32` tape is a `Tape<f32>` whose `backward_dense_all` is bit-identical to
    /// the fast sweep, for every node taken as the output.
    #[test]
    fn f32_fast_sweep_matches_generic_tape(
        inputs in prop::collection::vec(-2.0f64..2.0, 1..4),
        steps in prop::collection::vec(step(), 0..30),
        out in any::<usize>(),
    ) {
        let tape = ScalarTape::<f32>::empty();
        let vars = program_f32(&tape, &inputs, &steps);
        let y = vars[out % vars.len()];
        let fast = tape.gradients(y).into_vec();
        let generic: Tape<f32> = tape.to_tape();
        let all = generic.backward_dense_all(y.id(), 1.0).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&fast), bits(&all));
        prop_assert_eq!(generic.value(y.id()).copied(), Some(y.value()));
    }
}

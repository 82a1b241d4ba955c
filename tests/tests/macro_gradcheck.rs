//! Finite-difference checks of the VJPs of a few `#[differentiable]` ops, each with its hand
//! derivation beside the VJP: fixed inputs, captured scalars, residuals, the forward output,
//! slices, and broadcast (stride-0) inputs.

use autograd_core::{differentiable, gradcheck, GradcheckOptions, Result, Tensor};
use autograd_tests::{map, mul, t, zip};

/// `log(1 + exp(beta x)) / beta`.
#[differentiable]
fn softplus(x: &Tensor, beta: f32) -> Result<Tensor> {
    #[residual]
    let e = map(x, |v| (beta * v).exp())?;
    // d/dx log(1 + e^(beta x)) / beta = e^(beta x) / (1 + e^(beta x))
    fn vjp(g: &Tensor, e: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(zip(g, e, |g, e| g * e / (1.0 + e))?))
    }
    map(&e, |e| e.ln_1p() / beta)
}

/// `tanh(x)`, differentiated through its output.
#[differentiable]
fn tanh(x: &Tensor) -> Result<Tensor> {
    // d tanh = 1 - tanh^2
    fn vjp(g: &Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(zip(g, output, |g, y| g * (1.0 - y * y))?))
    }
    map(x, f32::tanh)
}

/// Huber loss per element with threshold `delta`, summed: a scalar output.
#[differentiable]
fn huber(pred: &Tensor, target: &Tensor, delta: f32) -> Result<Tensor> {
    #[residual]
    let diff: Vec<f32> = zip(pred, target, |p, t| p - t)?.values::<f32>()?;
    // l(d) = d^2 / 2 for |d| <= delta, delta (|d| - delta / 2) beyond: l'(d) = clamp(d, -delta, delta)
    fn vjp(
        g: &Tensor,
        diff: &[f32],
        delta: f32,
        pred: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let g = g.values::<f32>()?[0];
        let d: Vec<f32> = diff.iter().map(|d| g * d.clamp(-delta, delta)).collect();
        let neg = d.iter().map(|v| -v).collect();
        Ok((
            Some(Tensor::from_vec(d, pred.shape().clone())?),
            Some(Tensor::from_vec(neg, pred.shape().clone())?),
        ))
    }
    let loss = diff
        .iter()
        .map(|d| {
            if d.abs() <= delta {
                d * d / 2.0
            } else {
                delta * (d.abs() - delta / 2.0)
            }
        })
        .sum::<f32>();
    Tensor::from_vec(vec![loss], vec![1usize])
}

/// `sum_i w_i x_i` elementwise over a slice of same-shape tensors.
#[differentiable]
fn weighted_sum(xs: &[Tensor], w: &[f32]) -> Result<Tensor> {
    // d/dx_i = w_i g
    fn vjp(g: &Tensor, xs: &[Tensor], w: &[f32]) -> Result<Vec<Option<Tensor>>> {
        xs.iter()
            .zip(w)
            .map(|(_, &wi)| Ok(Some(map(g, |g| wi * g)?)))
            .collect()
    }
    let mut acc = vec![0.0f32; xs[0].size()];
    for (x, wi) in xs.iter().zip(w) {
        for (a, x) in acc.iter_mut().zip(x.values::<f32>()?) {
            *a += wi * x;
        }
    }
    Tensor::from_vec(acc, xs[0].shape().clone())
}

fn check(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    let report = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(report.slots_checked > 0);
}

#[test]
fn mul_matches_finite_differences() {
    check(
        |x| mul(&x[0], &x[1]),
        &[t(&[0.5, -1.0, 2.0], &[3]), t(&[1.5, 0.25, -0.75], &[3])],
    );
}

#[test]
fn mul_of_a_broadcast_input_matches_finite_differences() {
    let row = t(&[0.5, -1.0, 2.0], &[3]);
    // a broadcast *leaf*: the view detached from `row`'s graph
    let wide = row.broadcast_to(&[2, 3]).unwrap().detach();
    check(
        |x| mul(&x[0], &x[1]),
        &[wide, t(&[1.0, 2.0, 3.0, -1.0, 0.5, 0.25], &[2, 3])],
    );
}

#[test]
fn softplus_matches_finite_differences() {
    check(|x| softplus(&x[0], 2.0), &[t(&[-1.0, 0.0, 0.7], &[3])]);
}

#[test]
fn tanh_matches_finite_differences() {
    check(|x| tanh(&x[0]), &[t(&[-1.0, 0.1, 0.9], &[3])]);
}

#[test]
fn huber_matches_finite_differences() {
    // differences -1.5, 0.25 and 2.0 away from the kinks at +-1
    check(
        |x| huber(&x[0], &x[1], 1.0),
        &[t(&[0.5, 1.0, 3.0], &[3]), t(&[2.0, 0.75, 1.0], &[3])],
    );
}

#[test]
fn a_slice_op_matches_finite_differences() {
    check(
        |x| weighted_sum(x, &[1.0, -2.0, 0.5]),
        &[
            t(&[1.0, 2.0], &[2]),
            t(&[3.0, -1.0], &[2]),
            t(&[0.5, 0.5], &[2]),
        ],
    );
}

#[test]
fn a_composition_matches_finite_differences() {
    check(
        |x| tanh(&softplus(&mul(&x[0], &x[1])?, 1.5)?),
        &[t(&[0.3, -0.4], &[2]), t(&[1.2, 0.8], &[2])],
    );
}

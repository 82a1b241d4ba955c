//! The full Jacobian of `f(x) = tanh(W x)` by one batched `grad` call: the identity as K = n
//! stacked cotangents gives every row of the Jacobian at once, checked here against a loop of
//! single `grad` calls and against the closed form `(1 - y²) W`.

use autograd_core::{grad, shape, GradOptions, Result, Rng, Tensor};
use autograd_ops::{matmul, mul_scalar, tanh};

fn main() -> std::process::ExitCode {
    autograd_examples::cli::run(jacobian)
}

fn jacobian() -> Result<()> {
    let n = 8;
    let mut rng = Rng::new(3);
    let w = mul_scalar(&Tensor::randn(shape![n, n], &mut rng)?, 0.5)?.detach();
    let x = Tensor::randn(shape![n], &mut rng)?;
    let y = tanh(&matmul(&w, &x)?)?;

    // one traversal per row: cotangent e_i gives row i of J = dy/dx
    let keep = GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    };
    let eye = Tensor::eye(n)?;
    let mut looped = Vec::with_capacity(n * n);
    for i in 0..n {
        let row = grad(&y, &[&x], &eye.select(0, i)?.contiguous()?, keep)?;
        looped.extend(
            row[0]
                .as_ref()
                .map_or(Ok(vec![0.0; n]), Tensor::values::<f32>)?,
        );
    }

    // all rows at once: the cotangents' first mode indexes K = n independent cotangents
    let batched = GradOptions {
        batched: true,
        ..GradOptions::default()
    };
    let j = grad(&y, &[&x], &eye, batched)?.remove(0);
    let j = j.ok_or_else(|| autograd_core::Error::Runtime("x got no gradient".into()))?;
    println!("J = dy/dx, shape {:?}:\n{j}", j.dims());

    let (jv, wv, yv) = (j.values::<f32>()?, w.values::<f32>()?, y.values::<f32>()?);
    let mut worst = 0.0f32;
    for (k, (&batched, &single)) in jv.iter().zip(&looped).enumerate() {
        let closed_form = (1.0 - yv[k / n] * yv[k / n]) * wv[k];
        worst = worst.max((batched - closed_form).abs().max((batched - single).abs()));
    }
    println!("largest difference from the loop and from (1 - y^2) W: {worst:.2e}");
    autograd_core::ensure!(worst < 1e-5, Runtime, "the Jacobians disagree");
    Ok(())
}

//! A differentiable op defined outside the library with `#[differentiable]`: the Huber loss,
//! checked against finite differences, then used to fit a line to data with outliers.
//!
//!     cargo run --release -p autograd-examples --example custom_op

use autograd_core::{differentiable, gradcheck, shape, GradcheckOptions, Result, Tensor};
use autograd_ops::{add, broadcast_to, mul};

/// Mean Huber loss between `pred` and `target` (equal shapes): quadratic within `delta` of the
/// target, linear beyond, so outliers pull on the fit with bounded force.
#[differentiable]
pub fn huber_loss(pred: &Tensor, target: &Tensor, delta: f32) -> Result<Tensor> {
    // d/dpred = clamp(pred - target, -delta, delta) / n, and the negative of it for target
    fn vjp(
        g: &Tensor,
        pred: &Tensor,
        target: &Tensor,
        delta: f32,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let scale = g.values::<f32>()?[0] / pred.size() as f32;
        let diff = residuals(pred, target)?;
        let dp: Vec<f32> = diff
            .iter()
            .map(|r| r.clamp(-delta, delta) * scale)
            .collect();
        let dt: Vec<f32> = dp.iter().map(|v| -v).collect();
        Ok((Some(pred.f32_like(dp)?), Some(target.f32_like(dt)?)))
    }
    let n = pred.size() as f32;
    let total: f32 = residuals(pred, target)?
        .iter()
        .map(|r| {
            if r.abs() <= delta {
                0.5 * r * r
            } else {
                delta * (r.abs() - 0.5 * delta)
            }
        })
        .sum();
    Tensor::from_vec(vec![total / n], shape![1])
}

fn residuals(pred: &Tensor, target: &Tensor) -> Result<Vec<f32>> {
    autograd_core::ensure!(
        pred.shape() == target.shape(),
        Value,
        "huber_loss: pred shape {} differs from target shape {}",
        pred.shape(),
        target.shape()
    );
    Ok(pred
        .values::<f32>()?
        .iter()
        .zip(target.values::<f32>()?)
        .map(|(p, t)| p - t)
        .collect())
}

fn main() -> std::process::ExitCode {
    autograd_examples::cli::run(custom_op)
}

fn custom_op() -> Result<()> {
    // 1. The hand-written VJP agrees with central differences (away from the kinks at +-delta).
    let p = Tensor::from_vec(vec![0.3f32, -1.7, 2.5, 0.05], shape![4])?;
    let t = Tensor::from_vec(vec![0.0f32, 0.4, -0.9, 0.2], shape![4])?;
    let report = gradcheck(
        |xs| huber_loss(&xs[0], &xs[1], 1.0),
        &[p, t],
        GradcheckOptions::default(),
    )?;
    println!(
        "gradcheck: {} slots, max |analytical - numerical| = {:.2e}",
        report.slots_checked, report.max_abs_error
    );

    // 2. Fit y = w x + b to points on y = 2x + 1, three of them wild outliers.
    let n = 24;
    let xs: Vec<f32> = (0..n).map(|i| i as f32 / 4.0 - 3.0).collect();
    let ys: Vec<f32> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| 2.0 * x + 1.0 + if i % 8 == 3 { 25.0 } else { 0.0 })
        .collect();
    let x = Tensor::from_vec(xs, shape![n])?;
    let y = Tensor::from_vec(ys, shape![n])?;
    let w = Tensor::from_vec(vec![0.0f32], shape![1])?;
    let b = Tensor::from_vec(vec![0.0f32], shape![1])?;
    let lr = 0.5f32;
    for step in 0..=400usize {
        let pred = add(
            &mul(&broadcast_to(&w, &[n])?, &x)?,
            &broadcast_to(&b, &[n])?,
        )?;
        let loss = huber_loss(&pred, &y, 1.0)?;
        loss.backward()?;
        for p in [&w, &b] {
            let g = p
                .grad()?
                .map(|g| g.values::<f32>())
                .transpose()?
                .unwrap_or_default();
            p.add_(&Tensor::from_vec(
                g.iter().map(|v| -lr * v).collect(),
                shape![1],
            )?)?;
            p.set_grad(None)?;
        }
        if step.is_multiple_of(100) {
            println!(
                "step {step:3}: loss {:.4}  w {:.4}  b {:.4}",
                loss.values::<f32>()?[0],
                w.values::<f32>()?[0],
                b.values::<f32>()?[0]
            );
        }
    }
    let (wv, bv) = (w.values::<f32>()?[0], b.values::<f32>()?[0]);
    println!("fit: y = {wv:.3} x + {bv:.3} (truth: y = 2x + 1; least squares would be dragged by the outliers)");
    autograd_core::ensure!(
        (wv - 2.0).abs() < 0.1 && (bv - 1.0).abs() < 0.5,
        Runtime,
        "the fit did not converge"
    );
    Ok(())
}

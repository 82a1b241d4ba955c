//! W9a: `conv2d` forward plus backward (BENCH.md), x `[32, 64, 32, 32]`, w `[64, 64, 3, 3]`,
//! b `[64]`, padding 1, `y.backward(gy)` with a fixed random `gy`; the three gradients of
//! x, w and b. `shared/peers/bench_torch_w9.py w9a` prints PyTorch's side in the same form.

use std::time::Instant;

use autograd_core::{Result, Tensor};
use autograd_ops::{conv2d, Conv2dOptions, Padding};

use crate::{noise, report};

/// Runs W9a and prints one JSON line.
pub(crate) fn w9a(quick: bool) -> Result<()> {
    let (n, c, side, k) = if quick {
        (4, 16, 16, 3)
    } else {
        (32, 64, 32, 3)
    };
    let xs = noise(n * c * side * side, 91);
    let ws: Vec<f32> = noise(c * c * k * k, 92).iter().map(|v| v * 0.05).collect();
    let gy = Tensor::from_vec(noise(n * c * side * side, 93), vec![n, c, side, side])?;
    let options = Conv2dOptions::new().padding(Padding::Explicit([1, 1]));
    let runs = if quick { 3 } else { 20 };
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs + 3 {
        // fresh leaves outside the timer, as the PyTorch peer resets .grad outside its timer
        let x = Tensor::from_vec(xs.clone(), vec![n, c, side, side])?;
        let w = Tensor::from_vec(ws.clone(), vec![c, c, k, k])?;
        let b = Tensor::from_vec(vec![0.0f32; c], vec![c])?;
        let start = Instant::now();
        let y = conv2d(&x, &w, Some(&b), &options)?;
        y.backward_with(Some(&gy), false)?;
        let elapsed = start.elapsed();
        autograd_core::ensure!(
            x.grad()?.is_some() && w.grad()?.is_some() && b.grad()?.is_some(),
            Runtime,
            "W9a leaves got no gradient"
        );
        if i >= 3 {
            times.push(elapsed);
        }
    }
    times.sort();
    let flops = 3.0 * 2.0 * (n * c * c * k * k * side * side) as f64;
    let gflops = flops / times[times.len() / 2].as_secs_f64() / 1e9;
    report(
        "W9a",
        &times,
        &format!(",\"shape\":[{n},{c},{side},{side},{k}],\"gflops\":{gflops:.1}"),
    );
    Ok(())
}

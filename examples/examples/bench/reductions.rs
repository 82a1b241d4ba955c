//! R1: `logsumexp`, `cumsum` and `topk` (k = 10) along the last axis of a [1024, 1024] Float32
//! tensor (issue 38's reduction target: at most PyTorch's time), forward alone and forward plus
//! the functional gradient, median milliseconds of each. `scripts/bench_torch_reductions.py`
//! prints PyTorch's side in the same form.

use autograd_core::{grad, GradOptions, Result, Tensor};
use autograd_ops::{cumsum, logsumexp, topk};

use crate::{median, ms};

/// The side of the square input (`--quick`: 128).
fn side(quick: bool) -> usize {
    if quick {
        128
    } else {
        1024
    }
}

/// The forward and forward-plus-gradient medians of `op` on `x` (a cotangent of ones).
fn both(runs: usize, x: &Tensor, op: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<(f64, f64)> {
    let forward = median(runs, || op(x).map(drop))?;
    let y = op(x)?;
    let ones = Tensor::full(y.dims(), 1.0f32)?;
    let backward = median(runs, || {
        let y = op(x)?;
        grad(&y, &[x], &ones, GradOptions::default()).map(drop)
    })?;
    Ok((ms(forward), ms(backward)))
}

/// Runs R1 and prints one JSON line.
pub(crate) fn r1(quick: bool) -> Result<()> {
    let n = side(quick);
    let runs = if quick { 5 } else { 50 };
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<f32> = (0..n * n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect();
    let x = Tensor::from_vec(values, vec![n, n])?;
    let (lse_f, lse_b) = both(runs, &x, &|x| logsumexp(x, -1, false))?;
    let (cs_f, cs_b) = both(runs, &x, &|x| cumsum(x, -1))?;
    let (tk_f, tk_b) = both(runs, &x, &|x| Ok(topk(x, 10, -1, true, true)?.0))?;
    println!(
        "{{\"workload\":\"R1\",\"threads\":{},\"runs\":{runs},\"n\":{n},\"logsumexp_fwd_ms\":{lse_f:.4},\"logsumexp_fwd_bwd_ms\":{lse_b:.4},\"cumsum_fwd_ms\":{cs_f:.4},\"cumsum_fwd_bwd_ms\":{cs_b:.4},\"topk_fwd_ms\":{tk_f:.4},\"topk_fwd_bwd_ms\":{tk_b:.4}}}",
        autograd_core::kernel::threads()
    );
    Ok(())
}

//! The benchmark workloads of `shared/BENCH.md`, one JSON object per workload on stdout.
//!
//!     cargo run --release -p autograd-examples --example bench -- --json [W1 W1s W3 ...]
//!
//! `--quick` shrinks sizes for smoke runs. W3 and S1's load run in a child process so that
//! their peak RSS is their own. W10 (data-parallel, `ddp.rs`) runs only when named, in a bench
//! built with `--features mpi` and started by `mpirun`. With `BENCH_PROFILE=1` in the
//! environment, W11, W12 and W12c also print one more step's backward profile per op (time and
//! gradient bytes, untimed) to stderr.

mod cnn;
mod conv;
#[cfg(feature = "mpi")]
mod ddp;
mod gpt;
mod reductions;
mod state_dict;

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use autograd_core::{grad, shape, GradOptions, Result, Rng, Tensor};
use autograd_examples::transformer::{Config, Transformer};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::{
    add, causal_attention, cross_entropy, flash_causal_attention, matmul, mul, mul_scalar, relu,
    scaled_dot_product_attention, sum, tanh, AdamW, AdamWConfig, AttentionMask, AttentionOptions,
    CrossEntropyOptions, Linear, Optimizer, Sgd, SgdConfig,
};

const ALL: &[&str] = &[
    "W1", "W1s", "W2", "W2g", "W3", "W4", "W5", "W6", "W7", "W8", "T1", "D1", "S1", "W11", "W12",
    "W12c", "R1", "W9b", "W9a",
];

struct Args {
    quick: bool,
    child: bool,
    workloads: Vec<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        quick: false,
        child: false,
        workloads: Vec::new(),
    };
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--json" => {}
            "--quick" => args.quick = true,
            "--child" => args.child = true,
            w => args.workloads.push(w.to_string()),
        }
    }
    if args.workloads.is_empty() {
        args.workloads = ALL.iter().map(|s| (*s).to_string()).collect();
    }
    args
}

/// Runs `f` once to warm up, then `runs` times; returns the durations sorted.
fn measure(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Vec<Duration>> {
    let mut times = repeat(runs, || {
        let start = Instant::now();
        f()?;
        Ok(start.elapsed())
    })?;
    times.sort();
    Ok(times)
}

/// Runs `f` once to warm up, then `runs` times; returns what those runs returned, in order (a
/// workload that times its own regions returns their durations).
fn repeat<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<Vec<T>> {
    f()?;
    (0..runs).map(|_| f()).collect()
}

/// The median of `runs` timed calls of `f` (at least one) after one warm-up call.
fn median(runs: usize, f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let times = measure(runs.max(1), f)?;
    Ok(times[times.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn report(workload: &str, times: &[Duration], extra: &str) {
    let min = times[0];
    let median = times[times.len() / 2];
    println!(
        "{{\"workload\":\"{workload}\",\"threads\":{},\"runs\":{},\"min_ms\":{:.4},\"median_ms\":{:.4}{extra}}}",
        autograd_core::kernel::threads(),
        times.len(),
        ms(min),
        ms(median)
    );
}

/// The time of a W1/W1s run's forward pass and of its backward pass.
struct ChainTimes {
    forward: Duration,
    backward: Duration,
}

/// W1/W1s: `y = y * 0.999 + x` repeated, `loss = sum(y)`, backward. Returns the times of the
/// forward and backward passes alone, as BENCH.md defines `ns_per_op` and PyTorch's side
/// times it (making `x`, checking the gradient and dropping the graph are outside).
fn chain(n: usize, steps: usize) -> Result<ChainTimes> {
    let x = Tensor::from_vec(vec![0.5f32; n], shape![n])?;
    let start = Instant::now();
    let mut y = x.clone();
    for _ in 0..steps {
        y = add(&mul_scalar(&y, 0.999)?, &x)?;
    }
    let loss = sum(&y)?;
    let forward = start.elapsed();
    let mid = Instant::now();
    loss.backward()?;
    let backward = mid.elapsed();
    drop((loss, y));
    // dy_k/dx = 0.999 dy_(k-1)/dx + 1 from dy_0/dx = 1
    let expected = (0..steps).fold(1.0f64, |d, _| 0.999 * d + 1.0);
    let g = x.grad()?.map(|g| g.values::<f32>()).transpose()?;
    let ok = g.is_some_and(|g| {
        g.len() == n
            && g.iter()
                .all(|&v| (f64::from(v) - expected).abs() <= 1e-3 * expected)
    });
    autograd_core::ensure!(ok, Runtime, "W1 gradient differs from {expected}");
    Ok(ChainTimes { forward, backward })
}

/// Reports `ns_per_op` from the median total, and, as PyTorch's side does, the medians of the
/// forward and backward passes on their own (`fwd_ns_per_op`, `bwd_ns_per_op`), so that the
/// two systems can be compared phase by phase.
fn w1(name: &str, n: usize, quick: bool) -> Result<()> {
    let steps = if quick { 2_000 } else { 20_000 };
    let runs = if quick { 3 } else { 7 };
    let passes = repeat(runs, || chain(n, steps))?;
    let ops = (2 * steps + 1) as f64;
    let per_op = |d: Duration| d.as_secs_f64() * 1e9 / ops;
    let median_of = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut totals: Vec<Duration> = passes.iter().map(|p| p.forward + p.backward).collect();
    totals.sort();
    let forward = median_of(passes.iter().map(|p| p.forward).collect());
    let backward = median_of(passes.iter().map(|p| p.backward).collect());
    report(
        name,
        &totals,
        &format!(
            ",\"steps\":{steps},\"ns_per_op\":{:.1},\"fwd_ns_per_op\":{:.1},\"bwd_ns_per_op\":{:.1}",
            per_op(totals[totals.len() / 2]),
            per_op(forward),
            per_op(backward)
        ),
    );
    Ok(())
}

/// This process's peak resident set in MiB (`VmHWM`).
fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// A memory figure of this process in MiB, from its `key` line of `/proc/self/status`.
fn status_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Runs workload `name` in a child process of this bench (`--child name`, with `--quick`
/// when asked and the environment `env`), so that its peak RSS is its own; returns what the
/// child printed.
fn in_child(name: &str, quick: bool, env: &[(&str, &std::path::Path)]) -> Result<String> {
    let runtime = |e: std::io::Error| autograd_core::Error::Runtime(e.to_string());
    let mut cmd = Command::new(std::env::current_exe().map_err(runtime)?);
    cmd.args(["--child", name]);
    if quick {
        cmd.arg("--quick");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().map_err(runtime)?;
    if !out.status.success() {
        autograd_core::bail!(
            Runtime,
            "the {name} child failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // what the child reports beside its line (a profile) goes where the parent's would
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// This process's minor page faults and kernel time in seconds, from `/proc/self/stat`
/// (which counts time in USER_HZ, 100 per second on Linux): W3's first touches of a heap
/// that grows by hundreds of MiB are a visible share of its time.
fn faults_and_sys_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // fields after the parenthesised command name: state is field 3, minflt 10, stime 15
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| {
        rest.split_whitespace()
            .nth(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (field(10), field(15) / 100.0)
}

/// W3: a 1,000,000-step chain of `y = y * 1.0000001` on shape [1], backward, drop. Returns the
/// times of the forward pass, the backward pass and the drop, as PyTorch's side splits them.
fn w3_once(steps: usize) -> Result<[Duration; 3]> {
    let start = Instant::now();
    let x = Tensor::from_vec(vec![1.0f32], shape![1])?;
    let mut y = x.clone();
    for _ in 0..steps {
        y = mul_scalar(&y, 1.000_000_1)?;
    }
    let loss = sum(&y)?;
    let forward = start.elapsed();
    let mid = Instant::now();
    loss.backward()?;
    let backward = mid.elapsed();
    let end = Instant::now();
    drop((loss, y));
    let dropped = end.elapsed();
    let g = x.grad()?.map(|g| g.values::<f32>()).transpose()?;
    assert!(g.is_some_and(|g| g[0] > 1.0), "W3 gradient must exceed 1");
    Ok([forward, backward, dropped])
}

fn w3(quick: bool, child: bool) -> Result<()> {
    let steps = if quick { 100_000 } else { 1_000_000 };
    if child {
        let [forward, backward, dropped] = w3_once(steps)?;
        let times = vec![forward + backward + dropped];
        let secs = times[0].as_secs_f64();
        let (faults, sys) = faults_and_sys_seconds();
        let phases = format!(
            "\"fwd_s\":{:.3},\"bwd_s\":{:.3},\"drop_s\":{:.3}",
            forward.as_secs_f64(),
            backward.as_secs_f64(),
            dropped.as_secs_f64()
        );
        report("W3", &times, &format!(",\"steps\":{steps},\"seconds\":{secs:.3},{phases},\"peak_rss_mib\":{:.1},\"minor_faults\":{faults},\"sys_seconds\":{sys:.2},\"completed\":true", peak_rss_mib()));
        return Ok(());
    }
    // Each run in a fresh process so the peak RSS is the workload's alone.
    let exe = std::env::current_exe().map_err(|e| autograd_core::Error::Runtime(e.to_string()))?;
    let mut lines = Vec::new();
    for _ in 0..3 {
        let mut cmd = Command::new(&exe);
        cmd.arg("--child").arg("W3");
        if quick {
            cmd.arg("--quick");
        }
        let out = cmd
            .output()
            .map_err(|e| autograd_core::Error::Runtime(e.to_string()))?;
        if !out.status.success() {
            println!(
                "{{\"workload\":\"W3\",\"completed\":false,\"status\":\"{}\"}}",
                out.status
            );
            return Ok(());
        }
        lines.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let field = |l: &str, k: &str| -> f64 {
        l.split(&format!("\"{k}\":"))
            .nth(1)
            .and_then(|r| r.split([',', '}']).next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    lines.sort_by(|a, b| field(a, "seconds").total_cmp(&field(b, "seconds")));
    let secs: Vec<f64> = lines.iter().map(|l| field(l, "seconds")).collect();
    let rss = lines
        .iter()
        .map(|l| field(l, "peak_rss_mib"))
        .fold(0.0f64, f64::max);
    // the phases, page faults and kernel share of the run of median time
    let median = &lines[lines.len() / 2];
    let phases = ["fwd_s", "bwd_s", "drop_s"].map(|k| field(median, k));
    let median = (field(median, "minor_faults"), field(median, "sys_seconds"));
    println!(
        "{{\"workload\":\"W3\",\"threads\":{},\"runs\":{},\"min_ms\":{:.1},\"median_ms\":{:.1},\"steps\":{steps},\"seconds\":{:.3},\"fwd_s\":{:.3},\"bwd_s\":{:.3},\"drop_s\":{:.3},\"peak_rss_mib\":{rss:.1},\"minor_faults\":{},\"sys_seconds\":{:.2},\"completed\":true}}",
        autograd_core::kernel::threads(),
        secs.len(),
        secs[0] * 1e3,
        secs[secs.len() / 2] * 1e3,
        secs[secs.len() / 2],
        phases[0],
        phases[1],
        phases[2],
        median.0,
        median.1
    );
    Ok(())
}

/// W4: the 64 x 64 Jacobian of `tanh(W x)` by 64 `grad` calls on one retained graph, and by
/// one batched `grad` call; both checked against the closed form `(1 - y²) W`.
fn w4(quick: bool) -> Result<()> {
    let n = 64;
    let mut rng = Rng::new(0);
    let w = mul_scalar(&Tensor::randn(shape![n, n], &mut rng)?, 0.125)?.detach();
    let x0 = Tensor::randn(shape![n], &mut rng)?;
    let eye = Tensor::eye(n)?;
    let rows: Vec<Tensor> = (0..n)
        .map(|i| eye.select(0, i)?.contiguous())
        .collect::<Result<_>>()?;
    let keep = GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    };
    let batched = GradOptions {
        batched: true,
        ..GradOptions::default()
    };
    let reference = {
        let (wv, y) = (
            w.values::<f32>()?,
            tanh(&matmul(&w, &x0)?)?.values::<f32>()?,
        );
        (0..n * n)
            .map(|k| (1.0 - y[k / n] * y[k / n]) * wv[k])
            .collect::<Vec<f32>>()
    };
    let check = |j: &[f32]| -> Result<()> {
        let err = j
            .iter()
            .zip(&reference)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        autograd_core::ensure!(err < 1e-5, Runtime, "W4 Jacobian off by {err}");
        Ok(())
    };
    let runs = if quick { 3 } else { 20 };
    let mut jacobian = Vec::new();
    let looped = measure(runs, || {
        let x = x0.detach();
        let y = tanh(&matmul(&w, &x)?)?;
        jacobian.clear();
        for r in &rows {
            let g = grad(&y, &[&x], r, keep)?;
            let g = g[0]
                .as_ref()
                .ok_or_else(|| autograd_core::Error::Runtime("W4: no gradient".into()))?;
            jacobian.extend(g.values::<f32>()?);
        }
        Ok(())
    })?;
    check(&jacobian)?;
    let once = measure(runs, || {
        let x = x0.detach();
        let y = tanh(&matmul(&w, &x)?)?;
        let g = grad(&y, &[&x], &eye, batched)?;
        let g = g[0]
            .as_ref()
            .ok_or_else(|| autograd_core::Error::Runtime("W4: no gradient".into()))?;
        jacobian = g.values::<f32>()?;
        Ok(())
    })?;
    check(&jacobian)?;
    report(
        "W4",
        &once,
        &format!(
            ",\"loop_ms\":{:.4},\"batched_ms\":{:.4},\"loop_min_ms\":{:.4},\"batched_min_ms\":{:.4}",
            ms(looped[looped.len() / 2]),
            ms(once[once.len() / 2]),
            ms(looped[0]),
            ms(once[0])
        ),
    );
    Ok(())
}

/// Times `warm + steps` calls of a training `step` (which returns its loss), keeps the last
/// `steps`, checks that the loss fell and reports `name` with the final loss.
fn training_steps(
    name: &str,
    warm: usize,
    steps: usize,
    extra: &str,
    step: impl FnMut() -> Result<f64>,
) -> Result<()> {
    let (times, last) = training_times(name, warm, steps, step)?;
    report(name, &times, &format!("{extra},\"final_loss\":{last:.4}"));
    Ok(())
}

/// Runs `step` (which returns the loss) `warm + steps` times; returns the last `steps` times,
/// sorted, and the last loss, which must be below the first.
fn training_times(
    name: &str,
    warm: usize,
    steps: usize,
    mut step: impl FnMut() -> Result<f64>,
) -> Result<(Vec<Duration>, f64)> {
    let first = step()?;
    let mut last = first;
    let mut times = Vec::with_capacity(steps);
    for i in 1..warm + steps {
        let start = Instant::now();
        last = step()?;
        if i >= warm {
            times.push(start.elapsed());
        }
    }
    times.sort();
    autograd_core::ensure!(
        last < first,
        Runtime,
        "{name}: the loss did not fall ({first} -> {last})"
    );
    Ok((times, last))
}

/// W2: one MLP training step (Linear(784, 256) -> ReLU -> Linear(256, 10) -> cross-entropy
/// -> backward -> SGD lr 0.01) on a fixed random batch of 128; median over 50 steps after 5.
/// The batch is a Float32 leaf, so `backward` also computes its gradient (the spec fills
/// every reached leaf's `.grad`). W2g takes the step from the functional `grad` of the
/// parameters only: the wanted-gradient mask skips the batch's gradient.
fn w2(name: &str, quick: bool) -> Result<()> {
    let (b, d, h, c) = (128, 784, 256, 10);
    let mut rng = Rng::new(0);
    let x = Tensor::randn(shape![b, d], &mut rng)?;
    let y = Tensor::from_vec(
        (0..b)
            .map(|_| (rng.next_u64() % c as u64) as i32)
            .collect::<Vec<i32>>(),
        shape![b],
    )?;
    let (l1, l2) = (
        Linear::new(d, h, true, &mut rng)?,
        Linear::new(h, c, true, &mut rng)?,
    );
    let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    let mut opt = Sgd::new(
        params.clone(),
        SgdConfig {
            lr: 0.01,
            ..SgdConfig::default()
        },
    )?;
    let functional = name == "W2g";
    let (warm, steps) = if quick { (1, 5) } else { (5, 50) };
    // the PyTorch workload of equal work (issue 40): W2's backward() also computes the
    // batch's gradient, as PyTorch's W2x does; W2g's functional grad does not, as W2
    let peer = if functional { "W2" } else { "W2x" };
    let extra = format!(",\"batch\":{b},\"torch_peer\":\"{peer}\"");
    training_steps(name, warm, steps, &extra, || {
        let loss = cross_entropy(
            &l2.forward(&relu(&l1.forward(&x)?)?)?,
            &y,
            CrossEntropyOptions::default(),
        )?;
        if functional {
            let wrt: Vec<&Tensor> = params.iter().collect();
            let grads = grad(
                &loss,
                &wrt,
                &Tensor::ones_like(&loss)?,
                GradOptions::default(),
            )?;
            opt.step_with(&grads)?;
        } else {
            loss.backward()?;
            opt.step()?;
            opt.zero_grad()?;
            x.set_grad(None)?;
        }
        Ok(loss.item()?.to_f64())
    })
}

/// D1: W2's training step fed by a prefetching `DataLoader` (batch 128, shuffled, two batches
/// ahead) over 64 batches of random images, 8 epochs after a warm-up one: how long each step
/// waits for its batch, against the step itself (issue 37 asks for under 1% of W2's step time).
fn d1(quick: bool) -> Result<()> {
    let (b, d, h, c) = (128, 784, 256, 10);
    let batches = if quick { 4 } else { 64 };
    let mut rng = Rng::new(0);
    let x = Tensor::randn(shape![b * batches, d], &mut rng)?;
    let y = Tensor::from_vec(
        (0..b * batches)
            .map(|_| (rng.next_u64() % c as u64) as i32)
            .collect::<Vec<i32>>(),
        shape![b * batches],
    )?;
    let loader = DataLoader::new(TensorDataset::new(vec![x, y])?, b)?.shuffle(1);
    let (l1, l2) = (
        Linear::new(d, h, true, &mut rng)?,
        Linear::new(h, c, true, &mut rng)?,
    );
    let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    let mut opt = Sgd::new(
        params,
        SgdConfig {
            lr: 0.01,
            ..SgdConfig::default()
        },
    )?;
    let (mut waits, mut steps) = (Vec::new(), Vec::new());
    // the first epoch warms up (the prefetch thread starts with it); the rest are measured,
    // enough steps that one scheduling hiccup of a few milliseconds does not decide the share
    let epochs = if quick { 2 } else { 9 };
    for epoch in 0..epochs {
        let mut epoch_batches = loader.epoch(epoch)?;
        loop {
            let start = Instant::now();
            let Some(fields) = epoch_batches.next() else {
                break;
            };
            let fields = fields?;
            let waited = start.elapsed();
            let loss = cross_entropy(
                &l2.forward(&relu(&l1.forward(&fields[0])?)?)?,
                &fields[1],
                CrossEntropyOptions::default(),
            )?;
            loss.backward()?;
            opt.step()?;
            opt.zero_grad()?;
            if epoch > 0 {
                waits.push(waited);
                steps.push(start.elapsed());
            }
        }
    }
    let share = waits.iter().sum::<Duration>().as_secs_f64()
        / steps
            .iter()
            .sum::<Duration>()
            .as_secs_f64()
            .max(f64::MIN_POSITIVE);
    waits.sort();
    steps.sort();
    report(
        "D1",
        &steps,
        &format!(
            ",\"batch\":{b},\"median_wait_us\":{:.1},\"max_wait_us\":{:.1},\"wait_share\":{share:.5}",
            waits[waits.len() / 2].as_secs_f64() * 1e6,
            waits[waits.len() - 1].as_secs_f64() * 1e6
        ),
    );
    Ok(())
}

/// W6: one training step of the BENCH.md transformer (vocab 16, context 32, d_model 64,
/// 2 heads, 2 pre-LayerNorm blocks with a GELU MLP of 256, batch 32, cross-entropy, AdamW
/// lr 1e-3) on a fixed random batch; median over 50 steps after 5.
fn w6(quick: bool) -> Result<()> {
    let config = Config {
        vocab: 16,
        context: 32,
        d_model: 64,
        heads: 2,
        layers: 2,
        ff: 256,
        checkpoint: false,
    };
    let (b, t) = (32, config.context);
    let mut rng = Rng::new(0);
    let model = Transformer::new(config, &mut rng)?;
    let mut tokens = || -> Result<Tensor> {
        let v: Vec<i32> = (0..b * t)
            .map(|_| (rng.next_u64() % config.vocab as u64) as i32)
            .collect();
        Tensor::from_vec(v, shape![b, t])
    };
    let (ids, targets) = (tokens()?, tokens()?);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 1e-3,
            ..AdamWConfig::default()
        },
    )?;
    let (warm, steps) = if quick { (1, 5) } else { (5, 50) };
    training_steps("W6", warm, steps, &format!(",\"batch\":{b}"), || {
        opt.zero_grad()?;
        let loss = model.loss(&ids, &targets, None)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss.item()?.to_f64())
    })
}

/// W8: causal attention over q, k, v [8, 4, 256, 32] leaves, `sum(o * o).backward()`, in the
/// flash-style and the materialised form (W8m), with the bytes each graph holds before
/// backward; W8k: the flash form with a key-padding mask over the last quarter of the keys.
fn w8(quick: bool) -> Result<()> {
    let (b, h, t, d) = if quick {
        (2, 2, 64, 32)
    } else {
        (8, 4, 256, 32)
    };
    let mut rng = Rng::new(0);
    let leaves: Vec<Vec<f32>> = (0..3)
        .map(|_| Tensor::randn(shape![b, h, t, d], &mut rng)?.values::<f32>())
        .collect::<Result<_>>()?;
    let mut fields = String::new();
    // W8k: the last quarter of the keys is padding for every query, on top of causality
    let padding = Tensor::from_vec(
        (0..b * t)
            .map(|i| i % t >= t - t / 4)
            .collect::<Vec<bool>>(),
        shape![b, t],
    )?;
    let padded = AttentionOptions::new()
        .causal(true)
        .mask(AttentionMask::KeyPadding(padding));
    for (name, workload) in [("flash", "W8"), ("materialised", "W8m"), ("flash", "W8k")] {
        let flash = name == "flash";
        let mut bytes = 0;
        let mut once = || -> Result<Duration> {
            let [q, k, v] =
                [0, 1, 2].map(|i| Tensor::from_vec(leaves[i].clone(), shape![b, h, t, d]));
            let (q, k, v) = (q?, k?, v?);
            let start = Instant::now();
            let o = if workload == "W8k" {
                scaled_dot_product_attention(&q, &k, &v, &padded)?
            } else if flash {
                flash_causal_attention(&q, &k, &v, None)?
            } else {
                causal_attention(&q, &k, &v, None)?.0
            };
            let loss = sum(&mul(&o, &o)?)?;
            let elapsed = start.elapsed();
            bytes = autograd_core::graph_bytes(&loss)?;
            let start = Instant::now();
            loss.backward()?;
            Ok(elapsed + start.elapsed())
        };
        once()?;
        let mut times = (0..if quick { 3 } else { 10 })
            .map(|_| once())
            .collect::<Result<Vec<_>>>()?;
        times.sort();
        let _ = write!(
            fields,
            ",\"{name}_median_ms\":{:.4},\"{name}_min_ms\":{:.4},\"{name}_graph_bytes\":{bytes}",
            ms(times[times.len() / 2]),
            ms(times[0])
        );
        let peer = if workload == "W8k" {
            ",\"torch_peer\":\"W8 sdpa_key_padding\""
        } else {
            ""
        };
        report(
            workload,
            &times,
            &format!(",\"shape\":[{b},{h},{t},{d}]{fields}{peer}"),
        );
        fields.clear();
    }
    Ok(())
}

/// W5: a plain 512 x 512 x 512 matmul without a graph.
fn w5(quick: bool) -> Result<()> {
    let n = if quick { 128 } else { 512 };
    let a = Tensor::from_vec(
        (0..n * n).map(|i| (i % 13) as f32 * 0.1).collect(),
        shape![n, n],
    )?;
    let b = Tensor::from_vec(
        (0..n * n).map(|i| (i % 7) as f32 * 0.2).collect(),
        shape![n, n],
    )?;
    let _guard = autograd_core::no_grad();
    let times = measure(if quick { 3 } else { 20 }, || {
        std::hint::black_box(autograd_ops::matmul(&a, &b)?);
        Ok(())
    })?;
    let flops = 2.0 * (n as f64).powi(3);
    let gflops = flops / times[times.len() / 2].as_secs_f64() / 1e9;
    let best = flops / times[0].as_secs_f64() / 1e9;
    report(
        "W5",
        &times,
        &format!(",\"n\":{n},\"gflops\":{gflops:.1},\"best_gflops\":{best:.1}"),
    );
    Ok(())
}

/// T1: the W1s chain on the scalar tape front-end, recording and sweep.
fn t1(quick: bool) -> Result<()> {
    let steps = if quick { 2_000 } else { 20_000 };
    let times = measure(if quick { 3 } else { 15 }, || {
        std::hint::black_box(autograd_core::tape::bench_t1(steps));
        Ok(())
    })?;
    let ns = times[times.len() / 2].as_secs_f64() * 1e9 / (2 * steps + 1) as f64;
    report(
        "T1",
        &times,
        &format!(",\"steps\":{steps},\"ns_per_op\":{ns:.1}"),
    );
    Ok(())
}

/// Uniform values in [-2, 2) from a fixed-seed generator (xorshift), so runs are repeatable.
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// W7: `z = tanh(x * 0.5 + b) * x` with `x` [n, n] and `b` [n] (broadcast over rows), both
/// leaves; `sum(z).backward()`. Fresh leaves each run (made outside the timer, as the PyTorch
/// peer clones its inputs outside its timer), so no run accumulates into an earlier `.grad`.
fn w7(quick: bool) -> Result<()> {
    let n = if quick { 128 } else { 1024 };
    let (xs, bs) = (noise(n * n, 7), noise(n, 11));
    let once = || -> Result<Duration> {
        let x = Tensor::from_vec(xs.clone(), shape![n, n])?;
        let b = Tensor::from_vec(bs.clone(), shape![n])?;
        let start = Instant::now();
        let z = (tanh(&((&x * 0.5)? + &b)?)? * &x)?;
        sum(&z)?.backward()?;
        let elapsed = start.elapsed();
        autograd_core::ensure!(
            x.grad()?.is_some() && b.grad()?.is_some(),
            Runtime,
            "W7 leaves got no gradient"
        );
        Ok(elapsed)
    };
    for _ in 0..3 {
        once()?;
    }
    let mut times = (0..if quick { 5 } else { 20 })
        .map(|_| once())
        .collect::<Result<Vec<_>>>()?;
    times.sort();
    let min = times[0];
    let median = times[times.len() / 2];
    println!(
        "{{\"workload\":\"W7\",\"threads\":{},\"runs\":{},\"min_ms\":{:.4},\"median_ms\":{:.4},\"n\":{n}}}",
        autograd_core::kernel::threads(),
        times.len(),
        ms(min),
        ms(median)
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    autograd_examples::cli::run(bench)
}

fn bench() -> Result<()> {
    let args = parse_args();
    // every name checked before anything runs: a typo fails the command, not one line of it
    if let Some(unknown) = args
        .workloads
        .iter()
        .find(|w| !ALL.contains(&w.as_str()) && w.as_str() != "W10")
    {
        autograd_core::bail!(
            Value,
            "unknown workload {unknown}; known: {ALL:?} and W10 (under mpirun, built with --features mpi)"
        );
    }
    for w in &args.workloads {
        match w.as_str() {
            "W1" => w1("W1", 16, args.quick)?,
            "W1s" => w1("W1s", 1, args.quick)?,
            "W2" | "W2g" => w2(w, args.quick)?,
            "W3" => w3(args.quick, args.child)?,
            "W4" => w4(args.quick)?,
            "W5" => w5(args.quick)?,
            "W6" => w6(args.quick)?,
            "T1" => t1(args.quick)?,
            "W7" => w7(args.quick)?,
            "W8" => w8(args.quick)?,
            "D1" => d1(args.quick)?,
            "S1" => state_dict::s1(args.quick, args.child)?,
            "W11" | "W12" | "W12c" => gpt::run(w, args.quick, args.child)?,
            "R1" => reductions::r1(args.quick)?,
            "W9b" => cnn::w9b(args.quick)?,
            "W9a" => conv::w9a(args.quick)?,
            #[cfg(feature = "mpi")]
            "W10" => ddp::w10(args.quick)?,
            #[cfg(not(feature = "mpi"))]
            "W10" => autograd_core::bail!(
                NotImplemented,
                "W10 runs under mpirun in a bench built with --features mpi"
            ),
            other => unreachable!("workload {other} was checked against ALL"),
        }
    }
    Ok(())
}

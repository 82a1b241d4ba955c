//! W11 and W12: one training step of a GPT (the `train_gpt` example's model) at nanoGPT's CPU
//! size and at GPT-2 small's 124M parameters, W12 also with every block checkpointed (W12c).
//! Each runs in a child process so that its peak RSS is its own.

use autograd_core::{shape, Result, Rng, Tensor};
use autograd_examples::transformer::{Config, Transformer};
use autograd_ops::{AdamW, AdamWConfig, Module, Optimizer};

use crate::{in_child, peak_rss_mib, report, training_times};

/// A workload's model, batch and step counts.
struct Workload {
    config: Config,
    batch: usize,
    warm: usize,
    steps: usize,
}

/// BENCH.md's sizes (`--quick`: small enough for a debug build's smoke run).
fn workload(name: &str, quick: bool) -> Workload {
    let checkpoint = name == "W12c";
    let (config, batch, warm, steps) = match (name, quick) {
        ("W11", false) => (gpt(65, 64, 4, 4, 128), 12, 3, 30),
        (_, false) => (gpt(50_257, 256, 12, 12, 768), 1, 1, 5),
        ("W11", true) => (gpt(65, 16, 1, 2, 32), 2, 1, 3),
        (_, true) => (gpt(512, 16, 2, 2, 32), 1, 1, 3),
    };
    Workload {
        config: Config {
            checkpoint,
            ..config
        },
        batch,
        warm,
        steps,
    }
}

fn gpt(vocab: usize, context: usize, layers: usize, heads: usize, d_model: usize) -> Config {
    Config {
        vocab,
        context,
        d_model,
        heads,
        layers,
        ff: 4 * d_model,
        checkpoint: false,
    }
}

/// Runs W11, W12 or W12c in a child process and prints its line.
pub(crate) fn run(name: &str, quick: bool, child: bool) -> Result<()> {
    if child {
        return step(name, quick);
    }
    print!("{}", in_child(name, quick, &[])?);
    Ok(())
}

/// The matrix-product FLOPs of one token's forward and backward (three times the forward's):
/// `6 N` for the `N` weights of the linear layers and the tied head, plus `12 L T d` for the
/// attention scores and context (counted in full, as model-FLOPs utilisation counts them).
/// A checkpointed step recomputes the blocks' forward on top of this.
fn model_flops_per_token(c: &Config) -> f64 {
    let (d, ff, layers) = (c.d_model as f64, c.ff as f64, c.layers as f64);
    let weights = layers * (4.0 * d * d + 2.0 * d * ff) + d * c.vocab as f64;
    6.0 * weights + 12.0 * layers * c.context as f64 * d
}

/// The training step itself: random tokens and targets, the GPT's cross-entropy, backward,
/// AdamW (lr 3e-4, weight decay 0.1), as `shared/peers/bench_torch_gpt.py` does.
fn step(name: &str, quick: bool) -> Result<()> {
    let w = workload(name, quick);
    let c = w.config;
    let mut rng = Rng::new(0);
    let model = Transformer::gpt(c, &mut rng)?;
    let mut tokens = || -> Result<Tensor> {
        let v: Vec<i32> = (0..w.batch * c.context)
            .map(|_| (rng.next_u64() % c.vocab as u64) as i32)
            .collect();
        Tensor::from_vec(v, shape![w.batch, c.context])
    };
    let (ids, targets) = (tokens()?, tokens()?);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 3e-4,
            weight_decay: 0.1,
            ..AdamWConfig::default()
        },
    )?;
    let parameters = model.num_parameters();
    let bytes = parameters * 4;
    let (times, last) = training_times(name, w.warm, w.steps, || {
        opt.zero_grad()?;
        let loss = model.loss(&ids, &targets, None)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss.item()?.to_f64())
    })?;
    // the activations: what the graph holds between forward and backward beyond the
    // parameters (which every node that reads them holds, in both runs); checkpointing cuts
    // them to the blocks' inputs (a block's are rebuilt one at a time in backward)
    let held = autograd_core::graph_bytes(&model.loss(&ids, &targets, None)?)?;
    let activation_bytes = held.saturating_sub(bytes);
    if std::env::var_os("BENCH_PROFILE").is_some() {
        opt.zero_grad()?;
        let profile = model
            .loss(&ids, &targets, None)?
            .backward_profiled(None, false)?;
        eprintln!("{name}: the backward of one step, per op\n{profile}");
    }
    let median = times[times.len() / 2].as_secs_f64();
    let tokens = (w.batch * c.context) as f64;
    report(
        name,
        &times,
        &format!(
            ",\"batch\":{},\"checkpoint\":{},\"parameters\":{parameters},\"tokens_per_s\":{:.1},\"model_gflops\":{:.1},\"peak_rss_mib\":{:.1},\"parameter_bytes\":{bytes},\"gradient_bytes\":{bytes},\"optimizer_state_bytes\":{},\"activation_bytes\":{activation_bytes},\"final_loss\":{last:.4}",
            w.batch,
            c.checkpoint,
            tokens / median,
            model_flops_per_token(&c) * tokens / median / 1e9,
            peak_rss_mib(),
            2 * bytes
        ),
    );
    Ok(())
}

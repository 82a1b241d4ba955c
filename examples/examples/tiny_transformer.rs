//! Trains a decoder-only transformer (token and position embeddings, pre-LayerNorm blocks of
//! causal attention and a GELU MLP, cross-entropy, AdamW) to add two-digit numbers written as
//! characters, `07+85=092`, then prints its exact-match accuracy on problems it never saw.
//! `--save model.safetensors` keeps the trained parameters under PyTorch-style state-dict
//! names (`blocks.0.qkv.weight`, ...).
//!
//!     cargo run --release -p autograd-examples --example tiny_transformer -- --help

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use autograd_core::{graph_bytes, Result};
use autograd_examples::addition::{answers, batch, exact_match, split, train, Training, IGNORE};
use autograd_examples::cli::{positive, rate, run};
use autograd_examples::transformer::Transformer;
use autograd_ops::Module;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

/// Train a tiny transformer on two-digit addition.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Optimizer steps.
    #[arg(long, default_value_t = 2000, value_parser = positive)]
    steps: usize,
    /// Problems per step.
    #[arg(long, default_value_t = 64, value_parser = positive)]
    batch: usize,
    /// AdamW's peak learning rate.
    #[arg(long, default_value_t = 3e-3, value_parser = rate)]
    lr: f32,
    /// Seed of the split, the initialisation and the batch order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Problems held out of training (of the 10,000): 1 to 9,999.
    #[arg(long, default_value_t = 1000, value_parser = held_out)]
    held_out: usize,
    /// Checkpoint every block: keep only block inputs between forward and backward.
    #[arg(long)]
    checkpoint: bool,
    /// A 200-step smoke run.
    #[arg(long)]
    quick: bool,
    /// Save the trained model's parameters (safetensors, by state-dict name) here; the
    /// optimizer's state is not saved, so a run cannot be resumed from it.
    #[arg(long)]
    save: Option<PathBuf>,
}

/// `--held-out`: at least one problem to test on and one to train on.
fn held_out(s: &str) -> std::result::Result<usize, String> {
    match positive(s)? {
        n if n < 10_000 => Ok(n),
        n => Err(format!(
            "must leave problems to train on: at most 9999, got {n}"
        )),
    }
}

fn main() -> ExitCode {
    run(|| tiny_transformer(&Args::parse()))
}

fn tiny_transformer(args: &Args) -> Result<()> {
    let (train_set, test_set) = split(args.held_out, args.seed);
    let config = Training {
        model: Training::model(args.checkpoint),
        steps: if args.quick {
            args.steps.min(200)
        } else {
            args.steps
        },
        batch: args.batch,
        lr: args.lr,
        seed: args.seed,
    };
    let m = &config.model;
    println!(
        "addition: {} problems to train on, {} held out; {} blocks of width {}, {} heads, \
         MLP {}{}; AdamW lr {}, batch {}",
        train_set.len(),
        test_set.len(),
        m.layers,
        m.d_model,
        m.heads,
        m.ff,
        if m.checkpoint { ", checkpointed" } else { "" },
        config.lr,
        config.batch
    );
    report_graph_bytes(&config)?;

    let bar = ProgressBar::new(config.steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps {msg} [{elapsed}<{eta}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut recent = f64::NAN;
    let model = train(&config, &train_set, |_, loss| {
        recent = if recent.is_nan() {
            loss
        } else {
            0.95 * recent + 0.05 * loss
        };
        bar.set_message(format!("loss {recent:.4}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    println!(
        "trained {} steps in {:.1} s, final loss {recent:.4}",
        config.steps,
        start.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.save {
        model.save(path)?;
        println!(
            "model saved to {} ({} parameters)",
            path.display(),
            model.num_parameters()
        );
    }

    let written = answers(&model, &test_set[..8.min(test_set.len())])?;
    for (p, w) in test_set.iter().zip(&written) {
        let mark = if p.text()[6..] == w[..] {
            "right"
        } else {
            "wrong"
        };
        println!("  {}{w}  ({mark}, expected {})", &p.text()[..6], p.a + p.b);
    }
    println!(
        "exact match: {:.2}% of {} held-out problems, {:.2}% of the training problems",
        100.0 * exact_match(&model, &test_set)?,
        test_set.len(),
        100.0 * exact_match(&model, &train_set)?
    );
    Ok(())
}

/// Prints what one batch's graph keeps between forward and backward.
fn report_graph_bytes(config: &Training) -> Result<()> {
    let model = Transformer::new(config.model, &mut autograd_core::Rng::new(config.seed))?;
    let (problems, _) = split(0, config.seed);
    let (ids, targets) = batch(&problems[..config.batch.clamp(1, problems.len())])?;
    let loss = model.loss(&ids, &targets, Some(IGNORE))?;
    println!(
        "one step's graph keeps {:.1} KiB between forward and backward",
        graph_bytes(&loss)? as f64 / 1024.0
    );
    Ok(())
}

//! Trains a character-level GPT (the model bench workloads W11 and W12 time) on a text file:
//! token and position embeddings, pre-LayerNorm blocks of flash causal attention and a
//! tanh-GELU MLP, a final LayerNorm, a bias-free head tied to the token embedding, GPT-2's
//! initialisation, AdamW with weight decay. Prints the loss and tokens/s as it goes, the
//! held-out loss at the end, then samples a few lines.
//!
//!     cargo run --release -p autograd-examples --example train_gpt -- --help

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use autograd_core::{no_grad, Result, Rng};
use autograd_examples::cli::{positive, rate, run};
use autograd_examples::gpt::{sample, w11, w12, windows, Chars};
use autograd_examples::transformer::{Config, Transformer};
use autograd_ops::{AdamW, AdamWConfig, Module, Optimizer};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

/// The text trained on when no `--text` is given: this project's README.
const README: &str = include_str!("../../README.md");

/// The model's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Size {
    /// nanoGPT's CPU configuration (bench W11): 4 layers, 4 heads, width 128, context 64,
    /// a vocabulary of the text's characters; batch 12.
    W11,
    /// GPT-2 small (bench W12): 12 layers, 12 heads, width 768, context 256, vocabulary
    /// 50,257, 124M parameters; batch 1.
    W12,
}

/// Train a character-level GPT on a text.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The text to train on (UTF-8); the default is this project's README.
    #[arg(long)]
    text: Option<PathBuf>,
    /// The model's sizes.
    #[arg(long, value_enum, default_value_t = Size::W11)]
    config: Size,
    /// Optimizer steps.
    #[arg(long, default_value_t = 500, value_parser = positive)]
    steps: usize,
    /// Windows per step (default: the configuration's, 12 or 1).
    #[arg(long, value_parser = positive)]
    batch: Option<usize>,
    /// AdamW's learning rate (weight decay 0.1).
    #[arg(long, default_value_t = 1e-3, value_parser = rate)]
    lr: f32,
    /// Seed of the initialisation, the batches and the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Checkpoint every block: keep only block inputs between forward and backward.
    #[arg(long)]
    checkpoint: bool,
    /// Characters to sample after training.
    #[arg(long, default_value_t = 300)]
    sample: usize,
    /// The sampling temperature.
    #[arg(long, default_value_t = 0.8, value_parser = rate)]
    temperature: f32,
    /// A smoke run: a 1-layer model of width 32 and context 16, 5 steps.
    #[arg(long)]
    quick: bool,
    /// Save the trained model's parameters (safetensors, by state-dict name) here.
    #[arg(long)]
    save: Option<PathBuf>,
}

fn main() -> ExitCode {
    run(|| train_gpt(&Args::parse()))
}

/// The model's sizes for `args` over a vocabulary of `chars` characters.
fn config(args: &Args, chars: usize) -> Result<(Config, usize)> {
    let (config, batch) = match (args.quick, args.config) {
        (true, _) => (
            Config {
                vocab: chars,
                context: 16,
                d_model: 32,
                heads: 2,
                layers: 1,
                ff: 128,
                checkpoint: false,
            },
            4,
        ),
        (false, Size::W11) => (w11(chars), 12),
        (false, Size::W12) => {
            let c = w12();
            autograd_core::ensure!(
                chars <= c.vocab,
                Value,
                "the text has {chars} distinct characters, more than W12's vocabulary of {}",
                c.vocab
            );
            (c, 1)
        }
    };
    Ok((
        Config {
            checkpoint: args.checkpoint,
            ..config
        },
        args.batch.unwrap_or(batch),
    ))
}

fn train_gpt(args: &Args) -> Result<()> {
    let text = match &args.text {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            autograd_core::Error::Value(format!("cannot read {}: {e}", path.display()))
        })?,
        None => README.to_string(),
    };
    let chars = Chars::of(&text)?;
    let tokens = chars.encode(&text)?;
    let (config, batch) = config(args, chars.len())?;
    // the last tenth is held out
    let split = tokens.len() - tokens.len() / 10;
    let (train, held_out) = tokens.split_at(split);
    let steps = if args.quick {
        args.steps.min(5)
    } else {
        args.steps
    };
    let mut rng = Rng::new(args.seed);
    let model = Transformer::gpt(config, &mut rng)?;
    println!(
        "{} characters ({} distinct), {} held out; {} layers, {} heads, width {}, context {}, \
         vocabulary {}: {} parameters{}; AdamW lr {}, batch {batch}",
        tokens.len(),
        chars.len(),
        held_out.len(),
        config.layers,
        config.heads,
        config.d_model,
        config.context,
        config.vocab,
        model.num_parameters(),
        if config.checkpoint {
            ", checkpointed"
        } else {
            ""
        },
        args.lr
    );
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: args.lr,
            weight_decay: 0.1,
            ..AdamWConfig::default()
        },
    )?;
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps {msg} [{elapsed}<{eta}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut recent = f64::NAN;
    for step in 0..steps {
        let (ids, targets) = windows(train, batch, config.context, &mut rng)?;
        opt.zero_grad()?;
        let loss = model.loss(&ids, &targets, None)?;
        loss.backward()?;
        opt.step()?;
        let l = loss.item()?.to_f64();
        recent = if recent.is_nan() {
            l
        } else {
            0.9 * recent + 0.1 * l
        };
        let seen = ((step + 1) * batch * config.context) as f64;
        bar.set_message(format!(
            "loss {recent:.4}, {:.0} tokens/s",
            seen / start.elapsed().as_secs_f64()
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "trained {steps} steps in {secs:.1} s ({:.0} tokens/s), final loss {recent:.4}",
        (steps * batch * config.context) as f64 / secs
    );
    if held_out.len() > config.context {
        let _guard = no_grad();
        let (ids, targets) = windows(held_out, batch.max(8), config.context, &mut rng)?;
        let loss = model.loss(&ids, &targets, None)?.item()?.to_f64();
        println!("held-out loss {loss:.4}");
    }
    if let Some(path) = &args.save {
        model.save(path)?;
        println!(
            "model saved to {} ({} parameters)",
            path.display(),
            model.num_parameters()
        );
    }
    if args.sample > 0 {
        // a new line when the text has one, else its first character
        let prompt = chars.encode("\n").unwrap_or_else(|_| vec![0]);
        let out = sample(&model, &prompt, args.sample, args.temperature, &mut rng)?;
        println!("--- sampled ---\n{}\n---", chars.decode(&out));
    }
    Ok(())
}

//! Trains a small CNN (two blocks of 3x3 convolution, batch normalisation, ReLU and 2x2 max
//! pooling, then a linear head) on the real handwritten-digits set (1,797 8x8 images, shipped
//! in `examples/data/`) with a fixed seed, an 80/20 train/test split, AdamW and mini-batches,
//! then prints held-out accuracy (batch norm in eval mode) and writes the loss and accuracy
//! curves to an SVG file. `--save model.safetensors` keeps the model with its running
//! statistics, under the names PyTorch's module of the same fields gives them.
//!
//!     cargo run --release -p autograd-examples --example train_cnn_digits -- --help

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use autograd_core::{ensure, Result};
use autograd_examples::cli::{positive, rate, run};
use autograd_examples::cnn::{train, Config};
use autograd_examples::digits::{load, shipped_path};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

/// Train a CNN on the handwritten-digits data set.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Passes over the training set.
    #[arg(long, default_value_t = 15, value_parser = positive)]
    epochs: usize,
    /// Seed of the split, the initialisation and the batch order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Images per optimizer step.
    #[arg(long, default_value_t = 64, value_parser = positive)]
    batch: usize,
    /// AdamW's learning rate.
    #[arg(long, default_value_t = 3e-3, value_parser = rate)]
    lr: f32,
    /// Where to write the SVG plot of the curves.
    #[arg(long, default_value = "train_cnn_digits.svg")]
    output: PathBuf,
    /// A two-epoch smoke run.
    #[arg(long)]
    quick: bool,
    /// The digits file (gzip'd CSV); defaults to the shipped copy.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Save the trained model (safetensors: parameters and running statistics) here.
    #[arg(long)]
    save: Option<PathBuf>,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.epochs = args.epochs.min(2);
    }
    run(|| train_cnn_digits(&args))
}

fn train_cnn_digits(args: &Args) -> Result<()> {
    let path = args.data.clone().unwrap_or_else(shipped_path);
    let data = load(&path)?;
    let (train_set, test_set) = data.split(0.2, args.seed)?;
    ensure!(
        !train_set.is_empty() && !test_set.is_empty(),
        Value,
        "{}: {} images, too few to train on 80% and hold out 20%",
        path.display(),
        data.len()
    );
    println!(
        "digits: {} images, {} to train on, {} held out; CNN 1-32-64 channels (3x3 conv, batch \
         norm, ReLU, 2x2 max pool) + linear 256-10, AdamW lr {}, batch {}",
        data.len(),
        train_set.len(),
        test_set.len(),
        args.lr,
        args.batch
    );
    let config = Config {
        epochs: args.epochs,
        batch: args.batch,
        lr: args.lr,
        seed: args.seed,
        save: args.save.clone(),
    };
    let per_epoch = train_set.len().div_ceil(args.batch);
    let Some(steps) = args.epochs.checked_mul(per_epoch) else {
        autograd_core::bail!(
            Value,
            "--epochs {} of {per_epoch} batches each is more steps than can be counted",
            args.epochs
        );
    };
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, epoch {prefix} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut recent = 0.0;
    let (mut model, history) = train(&config, &train_set, &test_set, |epoch, loss| {
        recent = if recent == 0.0 {
            loss
        } else {
            0.95 * recent + 0.05 * loss
        };
        bar.set_prefix(format!("{}/{}", epoch + 1, args.epochs));
        bar.set_message(format!("loss {recent:.4}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let (test_loss, test_acc) = model.evaluate(&test_set)?;
    history.print_epochs();
    println!(
        "held-out: loss {test_loss:.4}, accuracy {:.2}% ({} images) after {:.1} s",
        100.0 * test_acc,
        test_set.len(),
        start.elapsed().as_secs_f64()
    );
    history.write_svg(&args.output)?;
    println!("curves written to {}", args.output.display());
    if let Some(path) = &args.save {
        println!("model saved to {}", path.display());
    }
    Ok(())
}

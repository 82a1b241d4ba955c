//! Trains an MLP on the real handwritten-digits set (1,797 8x8 images, shipped in
//! `examples/data/`) with a fixed seed, an 80/20 train/test split, AdamW and mini-batches,
//! then prints held-out accuracy and writes the loss and accuracy curves to an SVG file.
//! `--save model.safetensors` keeps the model (and AdamW's state) for `predict_digits` or a
//! later `--resume`.
//!
//!     cargo run --release -p autograd-examples --example train_digits -- --help

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use autograd_core::{ensure, Result};
use autograd_examples::cli::{positive, rate, run};
use autograd_examples::digits::{load, shipped_path};
use autograd_examples::mlp::{train, Config};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

/// Train an MLP on the handwritten-digits data set.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Passes over the training set in this run; with --resume, further epochs after the
    /// saved ones (`--epochs 2 --save m` then `--epochs 2 --resume m` trains what `--epochs 4`
    /// does).
    #[arg(long, default_value_t = 30, value_parser = positive)]
    epochs: usize,
    /// Seed of the split, the initialisation and the batch order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Width of the hidden layer.
    #[arg(long, default_value_t = 128, value_parser = positive)]
    hidden: usize,
    /// Images per optimizer step.
    #[arg(long, default_value_t = 32, value_parser = positive)]
    batch: usize,
    /// AdamW's learning rate.
    #[arg(long, default_value_t = 3e-3, value_parser = rate)]
    lr: f32,
    /// Where to write the SVG plot of the curves.
    #[arg(long, default_value = "train_digits.svg")]
    output: PathBuf,
    /// A three-epoch smoke run.
    #[arg(long)]
    quick: bool,
    /// The digits file (gzip'd CSV); defaults to the shipped copy.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Save the trained model (safetensors) here, AdamW's state beside it
    /// (`NAME.optim.safetensors`) and the epochs done (`NAME.progress`);
    /// `predict_digits --model` reads the model back.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Continue training from a model saved with `--save` (and the files beside it), from
    /// the epoch it stopped at; give it the --seed, --hidden and --batch it was saved with.
    #[arg(long)]
    resume: Option<PathBuf>,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.epochs = args.epochs.min(3);
    }
    run(|| train_digits(&args))
}

fn train_digits(args: &Args) -> Result<()> {
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
        "digits: {} images, {} to train on, {} held out; MLP 64-{}-10, AdamW lr {}, batch {}",
        data.len(),
        train_set.len(),
        test_set.len(),
        args.hidden,
        args.lr,
        args.batch
    );
    let config = Config {
        epochs: args.epochs,
        hidden: args.hidden,
        batch: args.batch,
        lr: args.lr,
        seed: args.seed,
        resume: args.resume.clone(),
        save: args.save.clone(),
    };
    let Some(steps) = args
        .epochs
        .checked_mul(train_set.len().div_ceil(args.batch))
    else {
        autograd_core::bail!(
            Value,
            "--epochs {} of {} batches each is more steps than can be counted",
            args.epochs,
            train_set.len().div_ceil(args.batch)
        );
    };
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, epoch {prefix} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut recent = 0.0;
    let mut first_epoch = None;
    let (model, history) = train(&config, &train_set, &test_set, |epoch, loss| {
        recent = if recent == 0.0 {
            loss
        } else {
            0.95 * recent + 0.05 * loss
        };
        // a resumed run's epochs continue the saved run's count
        let first = *first_epoch.get_or_insert(epoch);
        bar.set_prefix(format!("{}/{}", epoch + 1, first + args.epochs));
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

//! Classifies the held-out digits with a model `train_digits --save` wrote: the same split
//! (by seed) and the same accuracy as at the end of that training.
//!
//!     cargo run --release -p autograd-examples --example train_digits -- --save model.safetensors
//!     cargo run --release -p autograd-examples --example predict_digits -- --model model.safetensors

use std::path::PathBuf;
use std::process::ExitCode;

use autograd_core::Result;
use autograd_examples::cli::run;
use autograd_examples::digits::{load, shipped_path};
use autograd_examples::mlp::Mlp;
use autograd_ops::Module;
use clap::Parser;

/// Classify the held-out digits with a saved model.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The model file `train_digits --save` wrote.
    #[arg(long)]
    model: PathBuf,
    /// The seed of the split the model was trained with.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The digits file (gzip'd CSV); defaults to the shipped copy.
    #[arg(long)]
    data: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run(|| predict_digits(&args))
}

fn predict_digits(args: &Args) -> Result<()> {
    let path = args.data.clone().unwrap_or_else(shipped_path);
    let (_, test_set) = load(&path)?.split(0.2, args.seed)?;
    let mut model = Mlp::load(&args.model)?;
    model.eval();
    let (loss, accuracy) = model.evaluate(&test_set)?;
    println!(
        "{}: {} parameters; held-out: loss {loss:.4}, accuracy {:.2}% ({} images)",
        args.model.display(),
        model.num_parameters(),
        100.0 * accuracy,
        test_set.len()
    );
    Ok(())
}

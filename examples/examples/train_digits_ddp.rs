//! `train_digits` on several processes: the digits MLP trained data-parallel over MPI. Every
//! rank holds a replica (rank 0's initialisation, broadcast), trains on its shard of each
//! global batch (`DataLoader::shard`) and averages gradients with the others after every
//! backward, stepping each parameter as soon as its mean is in (`Ddp::backward_step`), so the
//! model is the one a single process training on whole global batches gets. Prints each
//! rank's throughput and the held-out accuracy; `--compare` also trains the single-process
//! model on rank 0 and prints its accuracy and how far its parameters are.
//!
//!     cargo build --release -p autograd-examples --features mpi --example train_digits_ddp
//!     mpirun -np 2 target/release/examples/train_digits_ddp --compare

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use autograd_core::{ensure, shape, Result, Rng, Tensor};
use autograd_examples::cli::{positive, rate, run};
use autograd_examples::digits::{load, shipped_path, Digits};
use autograd_examples::mlp::{train, Config, Mlp};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::distributed::{Ddp, DdpOptions, World};
use autograd_ops::{cross_entropy, AdamW, AdamWConfig, CrossEntropyOptions, Module, Optimizer};
use clap::Parser;

/// Train the digits MLP on every process `mpirun` started.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Passes over the training set.
    #[arg(long, default_value_t = 30, value_parser = positive)]
    epochs: usize,
    /// Seed of the split, the initialisation and the batch order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Width of the hidden layer.
    #[arg(long, default_value_t = 128, value_parser = positive)]
    hidden: usize,
    /// Images per optimizer step over all ranks together (a multiple of the number of ranks).
    #[arg(long, default_value_t = 32, value_parser = positive)]
    batch: usize,
    /// AdamW's learning rate.
    #[arg(long, default_value_t = 3e-3, value_parser = rate)]
    lr: f32,
    /// A three-epoch smoke run.
    #[arg(long)]
    quick: bool,
    /// The digits file (gzip'd CSV); defaults to the shipped copy.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Save the trained model (safetensors) here, from rank 0.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Also train the single-process model (`train_digits`' run) on rank 0 and compare.
    #[arg(long)]
    compare: bool,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.epochs = args.epochs.min(3);
    }
    run(|| {
        let world = World::init()?;
        let trained = train_digits_ddp(&world, &args);
        match trained {
            // another rank may be waiting in a collective this rank will not enter
            Err(e) if world.size() > 1 => {
                eprintln!("rank {}: {e}", world.rank());
                world.abort(1)
            }
            done => done,
        }
    })
}

fn train_digits_ddp(world: &World, args: &Args) -> Result<()> {
    let (rank, ranks) = (world.rank(), world.size());
    let data = load(&args.data.clone().unwrap_or_else(shipped_path))?;
    let (train_set, test_set) = data.split(0.2, args.seed)?;
    ensure!(
        args.batch.is_multiple_of(ranks),
        Value,
        "--batch {} does not split evenly over {ranks} ranks",
        args.batch
    );
    let local_batch = args.batch / ranks;
    // with a training set that does not split evenly, every rank drops the same few samples
    // so that all take the same number of steps
    let uneven = !train_set.len().is_multiple_of(ranks);
    let (x, y) = train_set.tensors()?;
    let loader = DataLoader::new(TensorDataset::new(vec![x, y])?, local_batch)?
        .shuffle(args.seed)
        .drop_last(uneven)
        .shard(rank, ranks)?;
    if rank == 0 {
        println!(
            "digits: {} to train on, {} held out; MLP 64-{}-10, AdamW lr {}, global batch {} = {ranks} ranks x {local_batch}{}",
            train_set.len(),
            test_set.len(),
            args.hidden,
            args.lr,
            args.batch,
            if uneven { " (the last partial batch and the samples past a multiple of the ranks dropped)" } else { "" }
        );
    }
    // each rank's own stream; Ddp::new replaces the replicas' parameters by rank 0's
    let mut rng = Rng::new(args.seed);
    for _ in 0..rank {
        rng.jump();
    }
    let ddp = Ddp::new(
        world,
        Mlp::new(args.hidden, &mut rng)?,
        DdpOptions::default(),
    )?;
    let mut opt = AdamW::new(
        ddp.module().parameters(),
        AdamWConfig {
            lr: args.lr,
            ..AdamWConfig::default()
        },
    )?;
    let start = Instant::now();
    let mut images = 0usize;
    for epoch in 0..args.epochs {
        let mut total = 0.0;
        let mut steps = 0u32;
        for batch in loader.epoch(epoch as u64)? {
            let [x, y] = <[Tensor; 2]>::try_from(batch?).map_err(|_| {
                autograd_core::Error::Runtime("a digits batch has two fields".into())
            })?;
            images += x.dims()[0];
            let loss = cross_entropy(
                &ddp.module().forward(&x)?,
                &y,
                CrossEntropyOptions::default(),
            )?;
            opt.zero_grad()?;
            // backward, averaging and AdamW's step, each parameter stepped once its mean is in
            ddp.backward_step(&loss, &mut opt)?;
            total += loss.item()?.to_f64();
            steps += 1;
        }
        let mean = world.all_reduce(
            &Tensor::from_vec(vec![total / f64::from(steps.max(1))], shape![1])?,
            autograd_ops::distributed::ReduceOp::Mean,
        )?;
        if rank == 0 {
            let (_, acc) = ddp.module().evaluate(&test_set)?;
            println!(
                "epoch {:>3}: train loss {:.4}, held-out accuracy {:.2}%",
                epoch + 1,
                mean.to_vec::<f64>()?[0],
                100.0 * acc
            );
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    report_throughput(world, images, seconds)?;
    let (test_loss, test_acc) = ddp.module().evaluate(&test_set)?;
    if rank == 0 {
        println!(
            "held-out: loss {test_loss:.4}, accuracy {:.2}% ({} images) after {seconds:.1} s on {ranks} ranks",
            100.0 * test_acc,
            test_set.len()
        );
    }
    if let Some(path) = &args.save {
        ddp.save(path)?;
        if rank == 0 {
            println!("model saved to {}", path.display());
        }
    }
    if args.compare && rank == 0 {
        compare(args, &train_set, &test_set, ddp.module())?;
    }
    Ok(())
}

/// Prints every rank's images per second, gathered on rank 0.
fn report_throughput(world: &World, images: usize, seconds: f64) -> Result<()> {
    let mine = Tensor::from_vec(vec![images as f64, seconds], shape![2])?;
    let all = world.all_gather(&mine)?.to_vec::<f64>()?;
    if world.rank() == 0 {
        let mut total = 0.0;
        for (r, row) in all.chunks_exact(2).enumerate() {
            let rate = row[0] / row[1].max(1e-9);
            total += rate;
            println!(
                "rank {r}: {} images in {:.2} s, {rate:.0} images/s",
                row[0], row[1]
            );
        }
        println!("all ranks: {total:.0} images/s");
    }
    Ok(())
}

/// Trains the single-process model on rank 0 (`train_digits` with the same flags) and prints
/// its held-out accuracy beside the data-parallel one's.
fn compare(args: &Args, train_set: &Digits, test_set: &Digits, ddp_model: &Mlp) -> Result<()> {
    let config = Config {
        epochs: args.epochs,
        hidden: args.hidden,
        batch: args.batch,
        lr: args.lr,
        seed: args.seed,
        resume: None,
        save: None,
    };
    let (single, _) = train(&config, train_set, test_set, |_, _| {})?;
    let (_, single_acc) = single.evaluate(test_set)?;
    let (_, ddp_acc) = ddp_model.evaluate(test_set)?;
    let mut diff = 0.0f32;
    for (a, b) in single.parameters().iter().zip(ddp_model.parameters()) {
        for (x, y) in a.to_vec::<f32>()?.iter().zip(b.to_vec::<f32>()?) {
            diff = diff.max((x - y).abs());
        }
    }
    println!(
        "single process: held-out accuracy {:.2}%, data parallel {:.2}%, largest parameter difference {diff:.2e}",
        100.0 * single_acc,
        100.0 * ddp_acc
    );
    Ok(())
}

//! W10 (feature `mpi`, run under `mpirun`): data-parallel scaling of W2's MLP step
//! (Linear(784, 256) -> ReLU -> Linear(256, 10) -> cross-entropy -> backward -> SGD lr 0.01)
//! at a fixed global batch of 256, split over the ranks, gradients averaged by `Ddp`. Rank 0
//! prints the median step, each rank's median compute (forward and backward: a step waits for
//! the slowest rank's), the time `Ddp` takes to average the gradients inside the step and
//! alone (back to back), and MPI's own `MPI_Allreduce` of the same bytes (the transport's
//! cost, which ours should be close to).
//! PyTorch's side is `shared/peers/bench_torch_w10.py` (DistributedDataParallel over gloo).
//!
//!     RAYON_NUM_THREADS=1 mpirun -np 2 target/release/examples/bench W10   # and -np 1

use std::cell::RefCell;
use std::time::{Duration, Instant};

use autograd_core::{ensure, shape, Result, Rng, Tensor};
use autograd_ops::distributed::{Ddp, DdpOptions, World};
use autograd_ops::{
    cross_entropy, relu, CrossEntropyOptions, Linear, Module, Optimizer, Sgd, SgdConfig,
};
use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;

use crate::{median, ms, report, training_times};

/// W2's model.
#[derive(Module)]
struct Mlp {
    l1: Linear,
    l2: Linear,
}

/// The global batch, split evenly over the ranks.
const GLOBAL_BATCH: usize = 256;

pub(crate) fn w10(quick: bool) -> Result<()> {
    let world = World::init()?;
    match steps(&world, quick) {
        // another rank may be waiting in a collective this rank will not enter
        Err(e) if world.size() > 1 => {
            eprintln!("W10 on rank {}: {e}", world.rank());
            world.abort(1)
        }
        done => done,
    }
}

/// W10's measurements on `world`.
fn steps(world: &World, quick: bool) -> Result<()> {
    let (d, h, c) = (784, 256, 10);
    let (rank, ranks) = (world.rank(), world.size());
    ensure!(
        GLOBAL_BATCH.is_multiple_of(ranks),
        Value,
        "W10's global batch of {GLOBAL_BATCH} does not split evenly over {ranks} ranks"
    );
    let b = GLOBAL_BATCH / ranks;
    let mut rng = Rng::new(0);
    let x = Tensor::randn(shape![GLOBAL_BATCH, d], &mut rng)?;
    let y = Tensor::from_vec(
        (0..GLOBAL_BATCH)
            .map(|_| (rng.next_u64() % c as u64) as i32)
            .collect::<Vec<i32>>(),
        shape![GLOBAL_BATCH],
    )?;
    // each rank's share is a leaf of its own, as a sharded loader hands it over: a view of
    // the global batch would send every step's input gradient back into the whole batch
    let (x, y) = (
        x.narrow(0, rank * b, b)?.contiguous()?.detach(),
        y.narrow(0, rank * b, b)?.contiguous()?.detach(),
    );
    let model = Mlp {
        l1: Linear::new(d, h, true, &mut rng)?,
        l2: Linear::new(h, c, true, &mut rng)?,
    };
    let ddp = Ddp::new(world, model, DdpOptions::default())?;
    let mut opt = Sgd::new(
        ddp.module().parameters(),
        SgdConfig {
            lr: 0.01,
            ..SgdConfig::default()
        },
    )?;
    let (warm, steps) = if quick { (1, 5) } else { (5, 50) };
    // the averaging inside the step, timed apart: between the steps' compute it costs more
    // than back to back (the standalone figure below), and the step pays this one
    let in_step = RefCell::new(Vec::with_capacity(warm + steps));
    // and each rank's compute (forward and backward): the step waits for the slowest rank's
    let compute = RefCell::new(Vec::with_capacity(warm + steps));
    let (times, last) = training_times("W10", warm, steps, || {
        let start = Instant::now();
        let m = ddp.module();
        let loss = cross_entropy(
            &m.l2.forward(&relu(&m.l1.forward(&x)?)?)?,
            &y,
            CrossEntropyOptions::default(),
        )?;
        // Ddp::backward, in its two parts (a failure on one rank aborts them all, below)
        loss.backward()?;
        compute.borrow_mut().push(start.elapsed());
        let start = Instant::now();
        ddp.sync_grads()?;
        in_step.borrow_mut().push(start.elapsed());
        opt.step()?;
        opt.zero_grad()?;
        // W2's step: the batch's gradient is cleared too, not summed over the steps
        x.set_grad(None)?;
        Ok(loss.item()?.to_f64())
    })?;
    let middle = |all: Vec<Duration>| {
        let mut timed = all.get(warm..).unwrap_or_default().to_vec();
        timed.sort();
        timed.get(timed.len() / 2).copied().unwrap_or_default()
    };
    let in_step = middle(in_step.into_inner());
    let by_rank = world
        .all_gather(&Tensor::from_vec(
            vec![ms(middle(compute.into_inner()))],
            shape![1],
        )?)?
        .to_vec::<f64>()?;
    // the averaging alone, on gradients of the model's sizes
    let loss = cross_entropy(
        &ddp.module()
            .l2
            .forward(&relu(&ddp.module().l1.forward(&x)?)?)?,
        &y,
        CrossEntropyOptions::default(),
    )?;
    loss.backward()?;
    let sync = median(steps, || ddp.sync_grads())?;
    // the transport's own all-reduce of the same bytes
    let n = ddp.module().num_parameters();
    let (send, mut recv) = (vec![1.0f32; n], vec![0.0f32; n]);
    let comm = mpi::topology::SimpleCommunicator::world();
    let raw = median(steps, || {
        comm.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        Ok(())
    })?;
    if rank == 0 {
        let bytes = (n * std::mem::size_of::<f32>()) as f64;
        let rate = |t: Duration| bytes / t.as_secs_f64().max(1e-12) / 1e9;
        report(
            "W10",
            &times,
            &format!(
                ",\"processes\":{ranks},\"global_batch\":{GLOBAL_BATCH},\"local_batch\":{b},\"buckets\":{},\"grad_bytes\":{bytes},\"compute_median_ms_by_rank\":{by_rank:.4?},\"sync_in_step_median_ms\":{:.4},\"sync_median_ms\":{:.4},\"sync_gb_per_s\":{:.3},\"mpi_allreduce_median_ms\":{:.4},\"mpi_allreduce_gb_per_s\":{:.3},\"final_loss\":{last:.4},\"torch_peer\":\"W10 ddp-gloo\"",
                ddp.bucket_count(),
                ms(in_step),
                ms(sync),
                rate(sync),
                ms(raw),
                rate(raw)
            ),
        );
    }
    Ok(())
}

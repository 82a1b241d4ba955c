//! Data-parallel training on MPI (the `mpi` cargo feature): [`World`] (the processes `mpirun`
//! started), collectives on tensors ([`World::all_reduce`], [`World::broadcast`],
//! [`World::all_gather`], [`World::barrier`]) and [`Ddp`], which keeps a module's replicas
//! equal by averaging gradients across ranks in buckets of non-blocking all-reduces.
//!
//! Each rank trains on its share of every batch ([`crate::data::DataLoader::shard`]) and draws
//! its own random numbers: `for _ in 0..world.rank() { rng.jump() }` gives every rank a stream
//! disjoint from the others' ([`autograd_core::Rng::jump`]). Checkpoints are written by rank 0
//! ([`Ddp::save`]) and read by every rank ([`Ddp::load`]).
//!
//! Every tensor collective first agrees, with one fixed-size all-gather, on what every rank is
//! about to send, and [`Ddp::new`] on the model; ranks that disagree (another model, another
//! shape) get an error on every rank, not a hang. A failure on one rank (a failed backward, a
//! tensor that cannot be read) still takes that rank through every collective the others
//! enter, and then is an error on every rank.
//!
//! An error that only one rank sees outside these calls (in the user's own code) leaves the
//! other ranks waiting in their next collective: end such a process with [`World::abort`],
//! not by returning, since dropping the [`World`] waits for every rank to finalise MPI.

mod agreement;
mod bucket;
mod collective;
mod ddp;
mod fingerprint;
mod replica;
mod shared_slots;
mod world;

pub use collective::ReduceOp;
pub use ddp::{Ddp, DdpOptions, DistributedDataParallel};
pub use world::World;

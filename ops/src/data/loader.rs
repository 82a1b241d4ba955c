//! The data loader: a dataset's batches in a seeded order per epoch, for one shard, built on
//! the caller's thread or prefetched on a thread of their own.

use std::sync::Arc;
use std::thread::JoinHandle;

use autograd_core::{ensure, no_grad, Error, Result, Rng};

use super::dataset::{Collate, Dataset};
use super::prefetch::{queue, Receiver};

/// The batch type of dataset `D`.
type BatchOf<D> = <<D as Dataset>::Sample as Collate>::Batch;

/// Batches of a [`Dataset`]: `batch_size` samples each, in dataset order or shuffled anew for
/// every epoch from a seed, the last partial batch kept or dropped, for every sample or for
/// one shard of a data-parallel run, built ahead on a background thread (two batches by
/// default; [`DataLoader::prefetch`]). Batches are built without recording a graph.
#[derive(Debug)]
pub struct DataLoader<D> {
    dataset: Arc<D>,
    batch_size: usize,
    seed: Option<u64>,
    drop_last: bool,
    prefetch: usize,
    rank: usize,
    world: usize,
}

impl<D: Dataset> DataLoader<D> {
    /// Batches of `batch_size` (at least one) samples of `dataset`, in order, the last batch
    /// possibly partial, prefetching two batches ahead.
    pub fn new(dataset: D, batch_size: usize) -> Result<DataLoader<D>> {
        ensure!(
            batch_size >= 1,
            Value,
            "a batch holds at least one sample, not 0"
        );
        Ok(DataLoader {
            dataset: Arc::new(dataset),
            batch_size,
            seed: None,
            drop_last: false,
            prefetch: 2,
            rank: 0,
            world: 1,
        })
    }

    /// Shuffles the samples for every epoch: epoch `e`'s order depends only on `seed` and `e`
    /// (the same on every rank, so that shards of one epoch never overlap).
    #[must_use]
    pub fn shuffle(mut self, seed: u64) -> DataLoader<D> {
        self.seed = Some(seed);
        self
    }

    /// Drops the last batch of an epoch when it would be partial (and, when sharded, the
    /// samples past the largest multiple of the world size, so that every rank gets the same
    /// number of batches).
    #[must_use]
    pub fn drop_last(mut self, drop: bool) -> DataLoader<D> {
        self.drop_last = drop;
        self
    }

    /// Builds up to `batches` batches ahead on a background thread; `0` builds each batch on
    /// the caller's thread when it is asked for.
    #[must_use]
    pub fn prefetch(mut self, batches: usize) -> DataLoader<D> {
        self.prefetch = batches;
        self
    }

    /// Only the samples of rank `rank` of `world` (`rank < world`): every `world`-th sample of
    /// each epoch's order from position `rank`. The shards of one epoch are disjoint and
    /// together hold every sample (with `drop_last`, every sample but fewer than `world`).
    /// Without `drop_last` on a dataset whose length is not a multiple of `world`, the ranks'
    /// epochs can differ by a batch, and a rank that steps once more than the others waits
    /// in its averaging forever: data-parallel training wants `drop_last(true)` there (or
    /// equal batch counts by construction).
    pub fn shard(mut self, rank: usize, world: usize) -> Result<DataLoader<D>> {
        ensure!(
            rank < world,
            Value,
            "rank {rank} of a world of {world}: a rank is below the world size"
        );
        self.rank = rank;
        self.world = world;
        Ok(self)
    }

    /// The dataset.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// The samples this loader hands out in epoch `epoch`, in order (before batching).
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let n = self.dataset.len();
        let mut order: Vec<usize> = (0..n).collect();
        if let Some(seed) = self.seed {
            // one generator per epoch: the order of epoch e never depends on earlier epochs
            let mut rng =
                Rng::new(seed ^ epoch.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for i in (1..n).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
        }
        if self.drop_last {
            order.truncate(n - n % self.world);
        }
        order
            .into_iter()
            .skip(self.rank)
            .step_by(self.world)
            .collect()
    }

    /// The number of batches of every epoch.
    pub fn batches_per_epoch(&self) -> usize {
        // the length of `order`, without drawing it
        let mut n = self.dataset.len();
        if self.drop_last {
            n -= n % self.world;
        }
        let n = n.saturating_sub(self.rank).div_ceil(self.world);
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Epoch `epoch`'s batches.
    pub fn epoch(&self, epoch: u64) -> Result<Batches<D>> {
        let order = self.order(epoch);
        let mut chunks: Vec<Vec<usize>> = order
            .chunks(self.batch_size)
            .map(<[usize]>::to_vec)
            .collect();
        if self.drop_last && chunks.last().is_some_and(|c| c.len() < self.batch_size) {
            chunks.pop();
        }
        let left = chunks.len();
        let dataset = self.dataset.clone();
        if self.prefetch == 0 {
            return Ok(Batches {
                left,
                source: Source::Here {
                    dataset,
                    chunks: chunks.into_iter(),
                },
            });
        }
        let (tx, rx) = queue(self.prefetch);
        let worker = std::thread::Builder::new()
            .name("data-loader".into())
            .spawn(move || {
                for chunk in chunks {
                    let batch = build(&*dataset, &chunk);
                    let failed = batch.is_err();
                    if !tx.send(batch) || failed {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Runtime(format!("cannot start the data loader's thread: {e}")))?;
        Ok(Batches {
            left,
            source: Source::Worker {
                rx: Some(rx),
                worker: Some(worker),
            },
        })
    }
}

/// Batch `indices` of `dataset`, built without recording a graph.
fn build<D: Dataset>(dataset: &D, indices: &[usize]) -> Result<BatchOf<D>> {
    let _guard = no_grad();
    dataset.batch(indices)
}

/// One epoch's batches, in order: an iterator of `Result`s that ends after the first error.
/// Dropping it early stops its prefetching thread.
pub struct Batches<D: Dataset> {
    /// Batches not handed out yet.
    left: usize,
    source: Source<D>,
}

enum Source<D: Dataset> {
    Here {
        dataset: Arc<D>,
        chunks: std::vec::IntoIter<Vec<usize>>,
    },
    Worker {
        rx: Option<Receiver<Result<BatchOf<D>>>>,
        worker: Option<JoinHandle<()>>,
    },
}

impl<D: Dataset> std::fmt::Debug for Batches<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prefetching = matches!(self.source, Source::Worker { .. });
        f.debug_struct("Batches")
            .field("left", &self.left)
            .field("prefetching", &prefetching)
            .finish()
    }
}

impl<D: Dataset> Iterator for Batches<D> {
    type Item = Result<BatchOf<D>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let batch = match &mut self.source {
            Source::Here { dataset, chunks } => build(&**dataset, &chunks.next()?),
            Source::Worker { rx, .. } => match rx.as_ref()?.recv() {
                Some(batch) => batch,
                None => Err(Error::Runtime(
                    "the data loader's thread stopped before the end of the epoch (a dataset panicked)"
                        .into(),
                )),
            },
        };
        self.left = if batch.is_err() { 0 } else { self.left - 1 };
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<D: Dataset> Drop for Batches<D> {
    fn drop(&mut self) {
        if let Source::Worker { rx, worker } = &mut self.source {
            // a worker blocked on a full queue wakes and stops
            drop(rx.take());
            if let Some(worker) = worker.take() {
                // its panic was reported by `next` when it mattered
                let _ = worker.join();
            }
        }
    }
}

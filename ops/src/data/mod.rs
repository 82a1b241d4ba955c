//! Feeding a training loop: a [`Dataset`] (anything indexable whose samples collate into
//! batches), an in-memory [`TensorDataset`], and a [`DataLoader`] that batches a dataset with
//! seeded per-epoch shuffling, drop-last, sharding by rank for data-parallel training and
//! bounded background prefetching.
//!
//! ```
//! use autograd_core::{shape, Tensor};
//! use autograd_ops::data::{DataLoader, TensorDataset};
//!
//! let x = Tensor::from_vec((0..10).map(|v| v as f32).collect::<Vec<_>>(), shape![5, 2])?;
//! let y = Tensor::from_vec(vec![0i32, 1, 0, 1, 1], shape![5])?;
//! let data = TensorDataset::new(vec![x, y])?;
//! let loader = DataLoader::new(data, 2)?.shuffle(7).drop_last(true);
//! let mut seen = 0;
//! for batch in loader.epoch(0)? {
//!     let batch = batch?;
//!     assert_eq!(batch[0].dims(), [2, 2]);
//!     assert_eq!(batch[1].dims(), [2]);
//!     seen += 2;
//! }
//! assert_eq!(seen, 4);
//! # Ok::<(), autograd_core::Error>(())
//! ```

mod dataset;
mod loader;
mod prefetch;

pub use dataset::{Collate, Dataset, TensorDataset};
pub use loader::{Batches, DataLoader};

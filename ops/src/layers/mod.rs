//! Layers a training loop needs without a module framework: each owns its parameter tensors,
//! initialises them from a seeded [`Rng`](autograd_core::Rng) as PyTorch does, and hands them
//! out through `parameters()` (handles sharing storage and `.grad`) for an optimizer. Each is a
//! [`Module`](crate::Module), so a model that derives it finds their tensors by name.

mod batch_norm;
mod dropout;
mod embedding;
mod embedding_lookup;
mod group_norm;
mod linear;
mod pool;

pub use batch_norm::BatchNorm2d;
pub use dropout::Dropout;
pub use embedding::{Embedding, EmbeddingOptions};
pub use group_norm::GroupNorm;
pub use linear::Linear;
pub use pool::{AvgPool2d, MaxPool2d};

//! Layers a training loop needs without a module framework: each owns its parameter tensors,
//! initialises them from a seeded [`Rng`](autograd_core::Rng) as PyTorch does, and hands them
//! out through `parameters()` (handles sharing storage and `.grad`) for an optimizer. Each is a
//! [`Module`](crate::Module), so a model that derives it finds their tensors by name.

mod dropout;
mod embedding;
mod embedding_lookup;
mod linear;

pub use dropout::Dropout;
pub use embedding::{Embedding, EmbeddingOptions};
pub use linear::Linear;

//! Layers a training loop needs without a module framework: each owns its parameter tensors,
//! initialises them from a seeded [`Rng`](autograd_core::Rng) as PyTorch does, and hands them
//! out through `parameters()` (handles sharing storage and `.grad`) for an optimizer.

mod embedding;
mod linear;

pub use embedding::Embedding;
pub use linear::Linear;

//! Causal scaled-dot-product attention over `[B, H, T, D]` in two forms that agree to about
//! 1e-5 in values and gradients: [`causal_attention`] returns the context and the `T x T`
//! probabilities and keeps the probabilities for backward; [`flash_causal_attention`] returns
//! the context only, keeps one logsumexp per row and recomputes probabilities block by block.
//!
//! Layout: `geometry.rs` validates the inputs and holds the sizes, `tile.rs` the tile
//! arithmetic, `head.rs` the per-head buffers and the split of heads across threads, and one
//! file per form holds its op; the kernel layer's `simd!` picks the vector instructions at run
//! time.

mod flash;
mod geometry;
mod head;
mod materialised;
mod tile;

pub use flash::flash_causal_attention;
pub use materialised::causal_attention;

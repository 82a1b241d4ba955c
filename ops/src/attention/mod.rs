//! Scaled-dot-product attention over `[B, H, T, D]` in two forms that agree to about 1e-5 in
//! values and gradients: [`attention_with_probabilities`] returns the context and the
//! `T_q x T_k` probabilities and keeps the probabilities for backward;
//! [`scaled_dot_product_attention`] returns the context only, keeps one logsumexp per row and
//! recomputes probabilities block by block. Both take [`AttentionOptions`]: causality, a Bool
//! or additive mask (full or key-padding), cross-attention (`T_q != T_k`) and dropout on the
//! probabilities; [`causal_attention`] and [`flash_causal_attention`] are their causal
//! self-attention forms, and [`flash_causal_attention_qkv`] the flash form over one packed
//! `[B, T, 3C]` projection (heads read and written in place).
//!
//! Layout: `options.rs` holds the public options, `rule.rs` turns them into what the kernels
//! read (mask bias rows, dropout factors), `geometry.rs` validates the inputs and holds the
//! sizes, `tile.rs` the tile arithmetic, `head.rs` the per-head buffers and the split of heads
//! across threads, one file per form holds its op, and `packed.rs` the flash form's packed
//! door; the kernel layer's `simd!` picks the vector instructions at run time.

mod flash;
mod geometry;
mod head;
mod materialised;
mod options;
mod packed;
mod rule;
mod tile;

pub use flash::{flash_causal_attention, scaled_dot_product_attention};
pub use materialised::{attention_with_probabilities, causal_attention};
pub use options::{AttentionDropout, AttentionMask, AttentionOptions};
pub use packed::flash_causal_attention_qkv;

use autograd_core::{ensure, Result, Tensor};

/// The spec of the causal self-attention forms: q, k and v of one shape (their own check,
/// beyond the general forms'), the causal mask and `scale`.
fn causal_self_attention(
    op: &'static str,
    [q, k, v]: [&Tensor; 3],
    scale: Option<f32>,
) -> Result<rule::Spec> {
    if q.dims().len() == 4 && k.dims().len() == 4 && v.dims().len() == 4 {
        ensure!(
            k.dims() == q.dims() && v.dims() == q.dims(),
            Value,
            "{op}: q, k and v need one shape [B, H, T, D] (causal self-attention), got {}, {} and {}",
            q.shape(),
            k.shape(),
            v.shape()
        );
    }
    Ok(causal_spec(op, scale))
}

/// The spec of causal attention with `scale` (checked with the inputs' extents when resolved).
fn causal_spec(op: &'static str, scale: Option<f32>) -> rule::Spec {
    let options = AttentionOptions {
        causal: true,
        scale,
        ..AttentionOptions::default()
    };
    rule::Spec::of(op, &options).0
}

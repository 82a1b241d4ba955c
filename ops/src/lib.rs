//! The StrideWeave op library.
//!
//! The tensor ops (elementwise, reductions, views, linear algebra) live in
//! [`autograd_core::ops`], beside `Tensor`, so that operators and method forms can use them;
//! this crate re-exports them and will hold the network ops and optimizers.

pub use autograd_core::ops::*;

mod nn;
pub use nn::{
    cross_entropy, dropout, layer_norm, log_softmax, mse_loss, nll_loss, softmax,
    CrossEntropyOptions, LayerNorm,
};
pub mod init;
pub mod layers;
pub mod optim;
pub use layers::{Embedding, Linear};
pub use optim::{clip_grad_norm, clip_grad_norm_of, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
mod attention;
pub use attention::{causal_attention, flash_causal_attention};

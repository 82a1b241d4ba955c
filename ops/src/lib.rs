//! The StrideWeave op library: the tensor ops of [`autograd_core::ops`] re-exported, plus what
//! training needs on top of them — network ops, causal attention in two forms, layers with
//! PyTorch's initialisation, and optimizers that update parameters in place.
//!
//! The tensor ops (elementwise, reductions, views, linear algebra) live in `autograd_core`,
//! beside `Tensor`, so that operators (`&a + &b`) and method forms can call them.
//!
//! ```
//! use autograd_core::{Rng, Tensor, shape};
//! use autograd_ops::{cross_entropy, relu, AdamW, AdamWConfig, CrossEntropyOptions, Linear, Optimizer};
//!
//! let mut rng = Rng::new(0);
//! let (l1, l2) = (Linear::new(4, 8, true, &mut rng)?, Linear::new(8, 3, true, &mut rng)?);
//! let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
//! let mut opt = AdamW::new(params, AdamWConfig { lr: 1e-2, ..AdamWConfig::default() })?;
//! let x = Tensor::randn(shape![16, 4], &mut rng)?;
//! let y = Tensor::from_vec((0..16).map(|i| i % 3).collect::<Vec<i32>>(), shape![16])?;
//! let mut losses = Vec::new();
//! for _ in 0..50 {
//!     let loss = cross_entropy(&l2.forward(&relu(&l1.forward(&x)?)?)?, &y, CrossEntropyOptions::default())?;
//!     losses.push(loss.item()?.to_f64());
//!     opt.zero_grad()?;
//!     loss.backward()?;
//!     opt.step()?;
//! }
//! assert!(losses[49] < losses[0]);
//! # Ok::<(), autograd_core::Error>(())
//! ```

pub use autograd_core::ops::*;

mod attention;
pub mod data;
pub mod init;
pub mod layers;
pub mod module;
mod nn;
pub mod optim;
pub mod persist;

pub use attention::{causal_attention, flash_causal_attention};
pub use layers::{Embedding, Linear};
pub use module::{Field, Module, Role};
pub use nn::{
    cross_entropy, dropout, layer_norm, log_softmax, mse_loss, nll_loss, softmax,
    CrossEntropyOptions, LayerNorm,
};
pub use optim::{clip_grad_norm, clip_grad_norm_of, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};

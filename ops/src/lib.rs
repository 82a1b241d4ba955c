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

//!
//! # Modules
//!
//! A model is a struct deriving [`Module`] (the trait and its derive share the name): its
//! tensors are then found by PyTorch's dotted names and `train()`/`eval()` reach every layer.
//! The layers here ([`Linear`], [`Embedding`], [`LayerNorm`], [`Dropout`]) are modules; fields
//! may also be tensors and `Vec`s, arrays, `Option`s and `Box`es of them. `#[module(skip)]`
//! marks plain data, `#[module(buffer)]` tensors saved but not trained, `#[module(training)]`
//! a `bool` that follows the mode and `#[module(rename = "name")]` another name (the
//! attributes in full: `autograd_macros`' documentation).
//!
//! ```
//! use autograd_core::Rng;
//! use autograd_ops::{Dropout, Linear, Module};
//!
//! #[derive(Module)]
//! struct Mlp {
//!     layers: Vec<Linear>,
//!     drop: Dropout,
//! }
//!
//! let mut rng = Rng::new(0);
//! let layers = vec![Linear::new(4, 8, true, &mut rng)?, Linear::new(8, 2, false, &mut rng)?];
//! let mut mlp = Mlp { layers, drop: Dropout::new(0.1)? };
//! let names: Vec<String> = mlp.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["layers.0.weight", "layers.0.bias", "layers.1.weight"]);
//! assert_eq!(mlp.num_parameters(), 4 * 8 + 8 + 8 * 2);
//! mlp.eval();
//! assert!(!mlp.drop.is_training());
//! # Ok::<(), autograd_core::Error>(())
//! ```

pub use autograd_core::ops::*;
/// The axis and integer-list types every op with an axis takes (`-1` is the last axis; `None` as
/// an [`OptionalAxis`] flattens).
pub use autograd_core::{Axis, IntList, OptionalAxis};

mod attention;
mod convolution;
pub mod data;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod init;
pub mod layers;
pub mod module;
mod nn;
pub mod optim;
pub mod persist;
mod pooling;

pub use attention::{
    attention_with_probabilities, causal_attention, flash_causal_attention,
    flash_causal_attention_qkv, scaled_dot_product_attention, AttentionDropout, AttentionMask,
    AttentionOptions,
};
/// `#[derive(Module)]`: the trait of the same name and this derive are both
/// `autograd_ops::Module`, as serde's `Serialize` names a trait and a derive.
pub use autograd_macros::Module;
pub use convolution::{
    conv1d, conv2d, conv_transpose2d, fold, unfold, Conv2d, Conv2dOptions, ConvTranspose2dOptions,
    Padding,
};
pub use layers::EmbeddingOptions;
pub use layers::{AvgPool2d, BatchNorm2d, GroupNorm, MaxPool2d};
pub use layers::{Dropout, Embedding, Linear};
pub use module::{Field, Module, Role};
pub use nn::{batch_norm, group_norm};
pub use nn::{
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_similarity, cross_entropy_with,
    huber_loss, kl_div, l1_loss, mse_loss_with, nll_loss_with, rms_norm, smooth_l1_loss,
    KlDivReduction, NllLossOptions, Reduction, RmsNorm,
};
pub use nn::{
    cross_entropy, dropout, layer_norm, log_softmax, mse_loss, nll_loss, softmax,
    CrossEntropyOptions, LayerNorm,
};
pub use optim::{clip_grad_norm, clip_grad_norm_of, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
pub use optim::{Adagrad, AdagradConfig, Adam, AdamConfig, ParamGroup, RmsProp, RmsPropConfig};
pub use pooling::{
    adaptive_avg_pool2d, avg_pool2d, interpolate, max_pool2d, max_pool2d_with_indices,
    Interpolation, Pool2dOptions,
};

/// What `#[derive(Module)]` expands to refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::module::{join, Field, Module, Role};
    pub use autograd_core::Tensor;
}

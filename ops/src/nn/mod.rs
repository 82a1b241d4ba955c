//! The network ops a training loop needs beyond the tensor ops: `softmax` and `log_softmax`,
//! `layer_norm` and its [`LayerNorm`] layer, `rms_norm` and its [`RmsNorm`] layer, the losses
//! (classification, binary, regression, `kl_div`, `cosine_similarity`) with PyTorch's
//! [`Reduction`], and `dropout`. Every op is written with `#[differentiable]` over the kernel
//! layer; the row-wise ones share the kernel layer's row kernels (`kernel::read_rows` and the
//! rest of the `map_rows` family).

mod batch_norm;
mod binary;
mod channel_norm;
mod cosine;
mod cross_entropy;
mod dropout;
mod elementwise_loss;
mod group_norm;
mod kl_div;
mod layer;
mod layer_norm;
mod layer_rms;
mod loss;
mod reduction;
mod regression;
mod rms_norm;
mod softmax;
mod target;

pub use batch_norm::batch_norm;
pub use binary::{binary_cross_entropy, binary_cross_entropy_with_logits};
pub use cosine::cosine_similarity;
pub use cross_entropy::{cross_entropy, cross_entropy_with, CrossEntropyOptions};
pub use dropout::dropout;
pub use group_norm::group_norm;
pub use kl_div::{kl_div, KlDivReduction};
pub use layer::LayerNorm;
pub use layer_norm::layer_norm;
pub use layer_rms::RmsNorm;
pub use loss::{mse_loss, nll_loss, nll_loss_with, NllLossOptions};
pub use reduction::Reduction;
pub use regression::{huber_loss, l1_loss, mse_loss_with, smooth_l1_loss};
pub use rms_norm::rms_norm;
pub use softmax::{log_softmax, softmax};

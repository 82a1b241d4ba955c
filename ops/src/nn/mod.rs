//! The network ops a training loop needs beyond the tensor ops: `softmax` and `log_softmax`,
//! `layer_norm` and its [`LayerNorm`] layer, the losses (`cross_entropy`, `nll_loss`,
//! `mse_loss`) and `dropout`. Every op is written with `#[differentiable]` over the kernel
//! layer; the row-wise ones share the kernel layer's row kernels (`kernel::read_rows` and the
//! rest of the `map_rows` family).

mod cross_entropy;
mod dropout;
mod layer;
mod layer_norm;
mod loss;
mod softmax;
mod target;

pub use cross_entropy::{cross_entropy, CrossEntropyOptions};
pub use dropout::dropout;
pub use layer::LayerNorm;
pub use layer_norm::layer_norm;
pub use loss::{mse_loss, nll_loss};
pub use softmax::{log_softmax, softmax};

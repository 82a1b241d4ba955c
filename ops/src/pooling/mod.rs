//! The 2-D pooling and resizing ops over the last two axes of `[N, C, H, W]` tensors:
//! `max_pool2d` (with its argmax indices), `avg_pool2d`, `adaptive_avg_pool2d` and
//! `interpolate`, each `#[differentiable]` over kernels that walk one plane per task.

mod adaptive;
mod interpolate;
mod options;
pub(crate) mod plane;
mod pool;

pub use adaptive::adaptive_avg_pool2d;
pub use interpolate::{interpolate, Interpolation};
pub use options::Pool2dOptions;
pub use pool::{avg_pool2d, max_pool2d, max_pool2d_with_indices};

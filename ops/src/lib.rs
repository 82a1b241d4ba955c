//! The StrideWeave op library.
//!
//! Every op is written with `#[differentiable]`: the forward kernel and its vector-Jacobian
//! product side by side. So far: elementwise add and multiply, scaling, sum and broadcast.

mod elementwise;
mod kernel;
mod reduce;
mod view;

pub use elementwise::{add, add_scalar, mul, mul_scalar};
pub use reduce::sum;
pub use view::broadcast_to;

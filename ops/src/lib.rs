//! The StrideWeave op library.
//!
//! For now a handful of hand-written `Operation` impls (elementwise add and multiply, scaling,
//! sum, broadcast); the op library proper will be written with `#[differentiable]`.

mod elementwise;
mod kernel;
mod reduce;
mod view;

pub use elementwise::{add, add_scalar, mul, mul_scalar};
pub use reduce::sum;
pub use view::broadcast_to;

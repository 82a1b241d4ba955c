//! The tensor op library: every op written with `#[differentiable]` over the
//! [kernel layer](crate::kernel), so each forward kernel sits beside its vector-Jacobian
//! product. It lives in the crate that defines `Tensor`, so operators (`&a + &b`) and method
//! forms can call it.

mod broadcast;
mod elementwise;
mod index;
mod linalg;
mod reduce;
mod view;

pub use broadcast::broadcast_to;
pub use elementwise::{add, add_scalar, mul, mul_scalar};
pub use index::{concat, embedding, gather, index_select, scatter_add, stack};
pub use linalg::{linear, matmul};
pub use reduce::{argmax, argmin, max_axes, mean, mean_axes, min_axes, sum, sum_axes, var_axes};
pub use view::{flatten, narrow, permute, reshape, select, squeeze, transpose, unsqueeze, view};

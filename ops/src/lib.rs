//! The StrideWeave op library.
//!
//! The tensor ops (elementwise, reductions, views, linear algebra) live in
//! [`autograd_core::ops`], beside `Tensor`, so that operators and method forms can use them;
//! this crate re-exports them and will hold the network ops and optimizers.

pub use autograd_core::ops::*;

mod attention;
pub use attention::{causal_attention, flash_causal_attention};

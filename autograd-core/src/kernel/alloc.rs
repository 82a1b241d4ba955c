//! Fallible allocation for kernels: every buffer whose size comes from user input (a result, a
//! row scratch buffer, a gradient) is allocated through these, so a size that cannot be had is
//! `Error::Value` and never aborts the process. `vec![x; n]`, `Vec::with_capacity(n)` and
//! `resize(n, x)` with a user-derived `n` are written [`filled`], [`with_capacity`] and
//! [`resize`].
//!
//! ```
//! use autograd_core::{kernel::alloc, ErrorKind};
//! assert_eq!(alloc::filled(3, 0.5f32).unwrap(), [0.5, 0.5, 0.5]);
//! assert_eq!(alloc::filled(1usize << 62, 0.0f32).unwrap_err().kind(), ErrorKind::Value);
//! ```

pub use crate::storage::allocation::{filled, resize, with_capacity};

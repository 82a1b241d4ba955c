//! Convolution: `conv2d`, `conv1d`, `conv_transpose2d`, `unfold`/`fold` and the `Conv2d`
//! layer. Every op runs on the GEMM over im2col columns (`kernels`, `im2col`), with its
//! arguments checked into a [`geometry::Geom`] first, so an error changes nothing.

mod conv;
mod geometry;
mod im2col;
mod kernels;
mod layer;
mod node;
mod options;
mod unfold;

pub use conv::{conv1d, conv2d, conv_transpose2d};
pub use layer::Conv2d;
pub use options::{Conv2dOptions, ConvTranspose2dOptions, Padding};
pub use unfold::{fold, unfold};

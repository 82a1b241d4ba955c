//! Support shared by the runnable programs in `examples/`: the shipped digits data set and
//! SVG training curves. The programs themselves are the crate's examples (`train_digits`,
//! `tiny_transformer`, `bench`, …).

pub mod addition;
pub mod classifier;
pub mod cli;
pub mod cnn;
pub mod digits;
pub mod gpt;
pub mod mlp;
pub mod plot;
pub mod transformer;

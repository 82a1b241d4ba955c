//! Runnable programs live in `examples/`.

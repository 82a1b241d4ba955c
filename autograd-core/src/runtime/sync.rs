//! What the word lock, the element lock and the traversal claims are built from: std's
//! atomics and cell, or under `--cfg loom` loom's checked models of them, so
//! that the model tests ([`crate::runtime::loom_models`]) explore the real lock and claim code. In a
//! normal build these are plain re-exports of std's items: they cost nothing.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::cell::UnsafeCell;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

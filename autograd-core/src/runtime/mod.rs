//! The performance runtime: the machinery that makes a recorded op cost a few hundred
//! nanoseconds and a million-node graph a few hundred MiB, kept apart from the engine and the
//! data model that use it. Nothing here changes what the engine computes.
//!
//! **The budget it serves** (`shared/BENCH.md`): W1, the engine's overhead per recorded op
//! (`y = y * 0.999 + x` 20,000 times on a [16] leaf, forward and backward, target under
//! 500 ns and under 1/25 of PyTorch's), and W3, a deep chain (1,000,000 steps of `y = y * c` on a
//! [1] tensor, backward, drop: under 0.5 s and 250 MiB peak). At that size every byte of a node
//! or result block is a MiB, and every malloc, free and locked instruction per op is visible.
//!
//! | piece | what it does | what justified it |
//! |---|---|---|
//! | [`arc_cache`] | per-thread free lists of freed node and small-block `Arc` allocations (up to 16 MiB a thread), reused by the next forward pass | a release frees tens of thousands of same-sized objects and the next forward allocates as many, past glibc's per-thread cache: about 720 of W1s's 3,340 instructions per op were malloc/free slow paths |
//! | [`ids`] | process-unique identities for tensors, carriers and nodes, handed out from per-thread blocks; identity-keyed maps and sets with a one-multiply hasher | one shared counter bumped per object would be an atomic read-modify-write on every op's path, on a cache line all threads fight over |
//! | [`spare_nodes`] | each thread keeps the emptied node buffer of its last traversal | keeping more of a plan's buffers counted 5% fewer instructions but ran W1 30–40% slower (freeing them is what lets glibc consolidate the released chunks) |
//! | [`word_lock`] | a lock in bit 0 of a word whose other 63 bits are a payload (a node's claim token, a tensor's identity); unlock is a plain store | no bytes of its own in the millions of nodes and handles W3 holds; one locked instruction per lock, not two |
//! | [`element_lock`] | a reader-writer lock in 32 bits with five payload bits beside it (an inline carrier's length) | a one-element carrier's lock, length and element fit in 8 bytes: W3 keeps a million of them |
//! | [`sync`] | std's atomics and cell, or loom's under `--cfg loom` | lets the loom models ([`loom_models`]) run the real lock and claim code |
//!
//! **Invariants they rely on:** a cached allocation is reused only for a value of the same
//! size and alignment and only once its `Arc` was unique (`arc_cache`); a word lock's payload
//! changes only under its lock and is published by the unlocking store, and a waiter never holds
//! another lock it would need (`word_lock`, the engine's claim order); an element lock's
//! payload is fixed at construction, and a thread never read-locks a carrier it holds while a
//! writer may wait on it (`element_lock`). The `// SAFETY:` comments at each `unsafe` block say
//! which one it needs; the loom models and `scripts/valgrind-tests.sh` check them.

pub(crate) mod arc_cache;
pub(crate) mod element_lock;
pub(crate) mod ids;
#[cfg(all(test, loom))]
mod loom_models;
pub(crate) mod spare_nodes;
pub(crate) mod sync;
pub(crate) mod word_lock;

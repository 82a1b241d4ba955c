//! StrideWeave autograd: reverse-mode automatic differentiation over hierarchical layouts.
//!
//! The data model: a [`Tensor`] has a logical [`DType`], a CuTe-style [`Layout`] and storage in
//! a [`Carrier`]. Operations record [`Operation`] nodes while graph construction is enabled.
//!
//! # Where things are
//!
//! Lowest layer first: each module imports only modules in rows above its own, except
//! tensor ↔ graph, which is inherent (a tensor names its node, a node saves tensors).
//!
//! | module | what it holds | what it imports |
//! |---|---|---|
//! | `error` | the one error type, `bail!` and `ensure!` | — |
//! | `runtime/` | the performance machinery: per-thread allocation caches, one-word locks, loom shims, process-unique identities and identity-keyed maps; its doc states the budget it serves | — |
//! | `storage/` | element types (dtypes, scalars, `Element`, CPU `Buffer`s), carriers (the storage trait and the CPU carrier), the buffer pool, fallible allocation | error, runtime |
//! | `layout/` | CuTe layouts, their integer trees, per-thread interning of compact layouts | error, storage |
//! | `tensor/` | the `Tensor` handle, the handle's storage block, the non-recording views, constructors, ndarray interop | error, runtime, storage, layout, graph |
//! | `graph/` | nodes (`Operation` and its one engine entry point `vjp`, saved inputs and versions, recording), mutation versions, the wanted-gradient mask, `Captured`, the grad mode | error, runtime, storage, layout, tensor |
//! | `kernel/` | the one door to storage for ops: typed element access, maps, reductions, row helpers, GEMM, ISA dispatch, fallible allocation; a tensor's element readers and `contiguous` | error, storage, layout, tensor |
//! | `batch` | batched cotangents: a leading batch mode of K cotangents | error, layout, tensor, kernel |
//! | `engine/` | the traversal (`propagate`; plans, pending cotangents, sinks for its modes, one VJP's checks and routing, staging and commit, claims), its public surface (`backward`, `grad`), the sole-edge release, gradient buffers and their layouts, checkpointing, closure VJPs, profiles, DOT, footprints | error, runtime, storage, layout, tensor, graph, kernel, batch |
//! | `__private` (`macro_support.rs`) | what `#[differentiable]`'s generated code reaches: re-exports and the checks every generated node shares | error, layout, tensor, graph, batch, engine |
//! | `ops/` | the tensor op library, written with `#[differentiable]`, and its method forms | error, storage, layout, tensor, graph, kernel, batch, `__private` |
//! | `tape/` | the scalar Wengert tape and the lowering of a tensor graph to it | error, layout, tensor, graph, engine |
//! | `gradcheck` | finite-difference checking of vector-Jacobian products | error, storage, tensor, graph, engine |
//!
//! Where to start reading: the engine's core loop is `propagate` in `engine/mod.rs` (order →
//! cotangent → VJP → route), one node's VJP with the spec's checks in order is
//! `engine/vjp.rs`, and a node's one entry point is `Operation::vjp` (`graph/op.rs`,
//! `graph/vjp_call.rs`). The performance machinery is `runtime/`; the door to storage is
//! `kernel/`.

pub mod batch;
pub mod error;
mod graph;
pub mod kernel;
pub mod layout;
pub mod ops;
mod runtime;
mod storage;
pub mod tape;
mod tensor;

pub use error::{Error, ErrorKind, Result};
pub use graph::grad_mode::{is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};
pub use graph::op::{
    record, should_record, Node, NodeId, Operation, Recording, Saved, SavedState, VersionSnapshot,
};
pub use layout::axis::{Axis, IntList, OptionalAxis};
pub use layout::int_tuple::{IntTuple, Shape, Stride};
pub use layout::{Aliasing, Layout, Leaf};
pub use storage::carrier::{Carrier, CarrierId, CpuCarrier, Heap, Inline, Store, SMALL_F32};
pub use storage::dtype::{CompoundDType, DType, DTypeCategory};
pub use storage::scalar::{Buffer, Element, Scalar};
pub use tensor::construct::Rng;
pub use tensor::{Subtensor, Tensor};

mod engine;
mod gradcheck;

pub use engine::autograd::{backwards_traversal, grad, GradOptions};
pub use engine::footprint::graph_bytes;
pub use gradcheck::{gradcheck, GradcheckOptions, GradcheckReport};

// Milestone primitives: closure VJPs, activation checkpointing, seeing the graph.

pub use engine::checkpoint::checkpoint;
pub use engine::custom_gradient::custom_gradient;
pub use engine::dot::{to_dot, to_dot_with_profile};
pub use engine::profile::{BackwardProfile, NodeProfile, OpProfile};

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;

pub use autograd_macros::differentiable;

pub use graph::captured::Captured;
pub use graph::needs_grad::NeedsGrad;
pub use graph::vjp_call::{Cotangent, VjpCall, Written};

//! StrideWeave autograd: reverse-mode automatic differentiation over hierarchical layouts.
//!
//! The data model: a [`Tensor`] has a logical [`DType`], a CuTe-style [`Layout`] and storage in
//! a [`Carrier`]. Operations record [`Operation`] nodes while graph construction is enabled.
//!
//! # Where things are
//!
//! | folder | what it holds | layers it is meant to import |
//! |---|---|---|
//! | `tensor/` | the `Tensor` handle, dtypes, scalars and CPU buffers, the handle's storage block, views, constructors, ndarray interop | layout, storage, graph (a tensor names its node), runtime |
//! | `layout/` | CuTe layouts, their integer trees, per-thread interning of compact layouts | — |
//! | `storage/` | carriers (the storage trait and the CPU carrier), the buffer pool, fallible allocation | runtime |
//! | `graph/` | nodes (`Operation`, saved inputs and versions), identities, mutation versions, the wanted-gradient mask, `Captured` | tensor, layout, runtime |
//! | `engine/` | the traversal (discovery, plans, claims, propagation, staging and commit), its public surface (`backward`, `grad`), the sole-edge release, checkpointing, closure VJPs, profiles, DOT, footprints, grad mode | everything below it |
//! | `runtime/` | the performance machinery: per-thread allocation caches, one-word locks, loom shims; its doc states the budget it serves | — |
//! | `kernel/` | the one door to storage for ops: typed element access, maps, reductions, row helpers, GEMM, ISA dispatch, fallible allocation | tensor, layout, storage |
//! | `ops/` | the tensor op library, written with `#[differentiable]` | kernel, tensor, graph |
//! | `tape/` | the scalar Wengert tape and the lowering of a tensor graph to it | tensor, graph, engine |
//!
//! The last column is the target of the core-architecture work in progress. Besides
//! tensor ↔ graph (inherent: a tensor names its node, a node saves tensors), some folders still
//! import upward today: tensor reaches kernel and ops (its method forms), storage and runtime
//! reach graph and tensor (a carrier's identity, the recycled node type), graph reaches engine.

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

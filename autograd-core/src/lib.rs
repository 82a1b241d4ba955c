//! StrideWeave autograd: reverse-mode automatic differentiation over hierarchical layouts.
//!
//! The data model: a [`Tensor`] has a logical [`DType`], a CuTe-style [`Layout`] and storage in
//! a [`Carrier`]. Operations record [`Operation`] nodes while graph construction is enabled.
//!
//! The performance machinery the engine and the data model stand on (per-thread allocation
//! caches, one-word locks) lives in `runtime/`, whose module doc states the budget it serves.

mod allocation;
mod array;
pub mod batch;
mod captured;
mod carrier;
mod construct;
mod dtype;
pub mod error;
mod gemm;
mod grad_mode;
mod handle;
mod ids;
mod int_tuple;
pub mod kernel;
pub mod layout;
mod layout_cache;
mod mutation;
mod needs_grad;
mod op;
pub mod ops;
mod pool;
mod runtime;
mod scalar;
pub mod tape;
mod tensor;
mod view;

pub use carrier::{Carrier, CarrierId, CpuCarrier, Heap, Inline, Store, SMALL_F32};
pub use construct::Rng;
pub use dtype::{CompoundDType, DType, DTypeCategory};
pub use error::{Error, ErrorKind, Result};
pub use grad_mode::{is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};
pub use int_tuple::{IntTuple, Shape, Stride};
pub use layout::{Aliasing, Layout, Leaf};
pub use op::{
    record, should_record, Node, NodeId, Operation, Recording, Saved, SavedState, VersionSnapshot,
};
pub use scalar::{Buffer, Element, Scalar};
pub use tensor::{Subtensor, Tensor};

mod autograd;
mod engine;
mod footprint;
mod gradcheck;
mod gradient;

pub use autograd::{backwards_traversal, grad, GradOptions};
pub use footprint::graph_bytes;
pub use gradcheck::{gradcheck, GradcheckOptions, GradcheckReport};

// Milestone primitives: closure VJPs, activation checkpointing, seeing the graph.
mod checkpoint;
mod custom_gradient;
mod dot;
mod profile;
mod sole_tree;

pub use checkpoint::checkpoint;
pub use custom_gradient::custom_gradient;
pub use dot::{to_dot, to_dot_with_profile};
pub use profile::{BackwardProfile, NodeProfile, OpProfile};

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;

pub use autograd_macros::differentiable;

pub use captured::Captured;
pub use needs_grad::NeedsGrad;

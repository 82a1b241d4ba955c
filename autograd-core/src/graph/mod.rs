//! The recorded graph: nodes ([`Operation`](crate::Operation), `Node`, saved inputs and their
//! version snapshots, `op`), the version bumps of in-place mutation (`mutation`), the
//! wanted-gradient mask (`needs_grad`), the `Captured` promise that a plain value an op takes
//! holds no tensor (`captured`) and the thread's grad mode, whether ops record at all
//! (`grad_mode`). Identities come from [`crate::runtime::ids`].

pub(crate) mod captured;
pub(crate) mod grad_mode;
pub(crate) mod mutation;
pub(crate) mod needs_grad;
pub(crate) mod op;
pub(crate) mod recording;
pub(crate) mod saved;
pub(crate) mod vjp_call;

use std::cell::Cell;
use std::thread::LocalKey;

use crate::graph::op::{Node, Operation};
use crate::runtime::spare_nodes::Spare;

/// Each thread keeps the emptied node buffer of its last traversal (see
/// [`crate::runtime::spare_nodes`]); the slot is declared here, where the node type is known.
impl Spare for dyn Operation {
    #[inline]
    fn slot() -> &'static LocalKey<Cell<Vec<Node>>> {
        thread_local! {
            static SPARE: Cell<Vec<Node>> = const { Cell::new(Vec::new()) };
        }
        &SPARE
    }
}

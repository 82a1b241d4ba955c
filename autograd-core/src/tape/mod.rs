//! The Wengert tape: a grow-only array of nodes with local VJPs, and dense reverse sweeps.
//!
//! This module translates the tape document (`shared/spec/autograd-tape.md`). A [`Tape<V>`]
//! stores nodes whose forward values have type `V`; node ids are array indices, every node's
//! parents come before it, and the reverse sweeps walk ids from last to first, summing the
//! contributions several children send to one parent with [`GradValue::add`].
//!
//! Two traversals live here, and it matters which one a caller runs:
//!
//! - [`Tape::backward_dense`] (and its totalized form [`Tape::backward_dense_all`]) keeps an
//!   `Option` per node and runs a node's VJP only once the node has received a cotangent, so
//!   disconnected nodes are never visited. Skipping is deliberate: feeding a synthetic zero
//!   cotangent through the VJP of a singular value can produce NaN via `0 * (1/0)`.
//! - [`Tape::backward_dense_from`] starts from a total gradient array and runs every node's VJP.
//!
//! The two agree whenever every VJP on the tape sends a zero cotangent to zero contributions of
//! the parents' shapes (the tape is *zero-preserving*). A tape that [`Tape::lower`] produces
//! is zero-preserving when the graph's VJPs are; a VJP that returns no gradient (`None`) for a
//! reached input makes it not so: that input stays unreached by `backward_dense`, while
//! `backward_dense_from` runs its VJP on a zero cotangent (NaN through `-g / x^2` at `x = 0`).
//!
//! Besides the generic tape there are two front-ends:
//!
//! - [`Tape::lower`] turns a recorded tensor graph into a `Tape<Tensor>` whose nodes call the
//!   operations' VJPs, so the tape and the engine check each other;
//! - [`ScalarTape`] records scalar (`f32` or `f64`) programs micrograd-style with operator
//!   overloading, in a compact representation with a fast sweep, and converts to a `Tape<F>`
//!   on request.
//!
//! ```
//! use autograd_core::tape::{Node, Tape};
//!
//! // y = x * x at x = 3: dy/dx = 6.
//! let mut tape = Tape::empty();
//! let x = tape.add_node(Node::leaf(3.0_f64));
//! let y = tape.add_node(Node::new(9.0, vec![x], move |g: &f64| Ok(vec![(x, g * 3.0), (x, g * 3.0)])));
//! let grads = tape.backward_dense_all(y, 1.0).unwrap();
//! assert_eq!(grads, vec![6.0, 1.0]);
//! ```

use std::fmt;

use crate::error::Result;

mod float;
mod grad_value;
mod lower;
mod scalar;
mod sweep;

pub use float::Float;
pub use grad_value::{GradValue, GradZero, SameShape};
pub use lower::Lowered;
pub use scalar::{bench_t1, Gradients, ScalarTape, Var};

/// A node's local vector-Jacobian product: given the cotangent of the node's value, the
/// `(parent id, contribution)` pairs it sends to its parents.
pub type Vjp<V> = Box<dyn Fn(&V) -> Result<Vec<(usize, V)>> + Send + Sync>;

/// One recorded computation step.
///
/// PyTorch comparison: an autograd `Function` instance with its saved tensors, storing the
/// backward closure directly.
pub struct Node<V> {
    /// Optional node name used for debugging and printing.
    pub name: Option<String>,
    /// Forward value computed at this node.
    pub value: V,
    /// Whether this node owns its forward value. Shape views and detached references borrow a
    /// parent's storage, and releasing a borrowed value would also invalidate the parent.
    pub owns_value: bool,
    /// Whether reverse-mode propagation visits this node. If false, the sweeps neither run its
    /// VJP nor accumulate contributions into it (a seed given for it is still kept).
    pub requires_grad: bool,
    /// Parent node ids (dependencies), each smaller than this node's id; a parent may repeat.
    pub parents: Vec<usize>,
    /// Forward workspace kept only because backward may need it; [`Tape::reset`] releases it.
    pub cleanup: Vec<V>,
    /// Local VJP rule: may only send contributions to ids listed in `parents`.
    pub backward: Vjp<V>,
}

impl<V> Node<V> {
    /// A node computed from `parents` with the local VJP `backward`; it owns its value and
    /// requires a gradient.
    pub fn new(
        value: V,
        parents: Vec<usize>,
        backward: impl Fn(&V) -> Result<Vec<(usize, V)>> + Send + Sync + 'static,
    ) -> Node<V> {
        Node {
            name: None,
            value,
            owns_value: true,
            requires_grad: true,
            parents,
            cleanup: Vec::new(),
            backward: Box::new(backward),
        }
    }

    /// A leaf: no parents, a VJP that sends nothing, requires a gradient.
    pub fn leaf(value: V) -> Node<V> {
        Node::new(value, Vec::new(), |_| Ok(Vec::new()))
    }

    /// This node with a name.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Node<V> {
        self.name = Some(name.into());
        self
    }

    /// This node with `requires_grad` set.
    #[must_use]
    pub fn with_requires_grad(mut self, requires_grad: bool) -> Node<V> {
        self.requires_grad = requires_grad;
        self
    }

    /// This node with `owns_value` set.
    #[must_use]
    pub fn with_owns_value(mut self, owns_value: bool) -> Node<V> {
        self.owns_value = owns_value;
        self
    }

    /// This node with forward workspace kept for backward.
    #[must_use]
    pub fn with_cleanup(mut self, cleanup: Vec<V>) -> Node<V> {
        self.cleanup = cleanup;
        self
    }
}

impl<V: fmt::Debug> fmt::Debug for Node<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name)
            .field("value", &self.value)
            .field("owns_value", &self.owns_value)
            .field("requires_grad", &self.requires_grad)
            .field("parents", &self.parents)
            .field("cleanup", &self.cleanup.len())
            .finish_non_exhaustive()
    }
}

/// Autograd tape: a grow-only array of nodes. Node ids are indices; every append returns the
/// pre-append size as the new id, so reverse mode traverses ids in reverse order.
pub struct Tape<V> {
    nodes: Vec<Node<V>>,
}

impl<V> Tape<V> {
    /// Empty tape (no nodes).
    pub fn empty() -> Tape<V> {
        Tape { nodes: Vec::new() }
    }

    /// Number of nodes stored in the tape.
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tape has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node `id`, or `None` when out of bounds.
    pub fn node(&self, id: usize) -> Option<&Node<V>> {
        self.nodes.get(id)
    }

    /// The forward value of node `id`, or `None` when out of bounds.
    pub fn value(&self, id: usize) -> Option<&V> {
        self.nodes.get(id).map(|n| &n.value)
    }

    /// Every node in evaluation order (id = index).
    pub fn nodes(&self) -> &[Node<V>] {
        &self.nodes
    }

    /// Appends `node` and returns its id, which is always the pre-append [`size`](Tape::size).
    ///
    /// An operation (a node with parents) inherits the disjunction of its parents' flags, as
    /// the spec says: it requires a gradient only when some parent does (and it was not built
    /// with `requires_grad` false). A leaf keeps the flag it was built with.
    ///
    /// Parent ids are not checked here (appending stays infallible); the sweeps refuse a
    /// contribution to an id that is not an earlier parent of the node sending it.
    pub fn add_node(&mut self, mut node: Node<V>) -> usize {
        let id = self.nodes.len();
        if !node.parents.is_empty() {
            node.requires_grad &= node
                .parents
                .iter()
                // an id that is not an earlier node keeps the flag: the sweeps refuse it
                .any(|&p| self.nodes.get(p).is_none_or(|n| n.requires_grad));
        }
        self.nodes.push(node);
        id
    }

    /// Releases every node's forward workspace (`cleanup`), keeping values and VJPs.
    pub fn release_cleanup(&mut self) {
        for n in &mut self.nodes {
            n.cleanup = Vec::new();
        }
    }

    /// Removes every node (and with it every value, workspace and VJP).
    pub fn reset(&mut self) {
        self.nodes.clear();
    }
}

impl<V> Default for Tape<V> {
    fn default() -> Tape<V> {
        Tape::empty()
    }
}

impl<V: fmt::Debug> fmt::Debug for Tape<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tape").field("nodes", &self.nodes).finish()
    }
}

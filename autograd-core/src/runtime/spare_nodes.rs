//! The emptied node buffer of the thread's last plan (or sole-edge tree), up to [`CAPACITY`]
//! nodes, for its next one, so that a training loop's traversals do not regrow it. Only this
//! buffer: keeping a plan's other buffers too counts 5% fewer instructions but measured 30-40%
//! slower in W1, because freeing a buffer of 64 KiB or more after a release is what makes glibc
//! consolidate the chunks the release freed; the next forward pass then allocates from merged,
//! contiguous memory instead of reusing those chunks one by one, scattered.

use crate::graph::op::Node;
use std::cell::Cell;

/// The most nodes a kept buffer may have room for.
pub(crate) const CAPACITY: usize = 1 << 16;

thread_local! {
    static SPARE: Cell<Vec<Node>> = const { Cell::new(Vec::new()) };
}

/// An empty buffer, with the spare's capacity when there is one.
pub(crate) fn take() -> Vec<Node> {
    SPARE.try_with(Cell::take).unwrap_or_default()
}

/// Drops a traversal's `nodes` in order, each right after `each` saw it (most go with
/// this reference: their allocations serve the next pass), and keeps the emptied buffer.
pub(crate) fn give_back(mut nodes: Vec<Node>, mut each: impl FnMut(&Node)) {
    for node in nodes.drain(..) {
        each(&node);
        super::arc_cache::recycle(node);
    }
    keep(nodes);
}

/// Keeps the empty `nodes` for the thread's next plan, unless it is too large or the
/// thread is exiting.
fn keep(nodes: Vec<Node>) {
    debug_assert!(nodes.is_empty());
    if nodes.capacity() <= CAPACITY {
        let _ = SPARE.try_with(|spare| {
            let kept = spare.take();
            spare.set(if kept.capacity() > nodes.capacity() {
                kept
            } else {
                nodes
            });
        });
    }
}

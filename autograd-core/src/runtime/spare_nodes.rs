//! The emptied node buffer of the thread's last plan (or sole-edge tree), up to [`CAPACITY`]
//! nodes, for its next one, so that a training loop's traversals do not regrow it. Only this
//! buffer: keeping a plan's other buffers too counts 5% fewer instructions but measured 30-40%
//! slower in W1, because freeing a buffer of 64 KiB or more after a release is what makes glibc
//! consolidate the chunks the release freed; the next forward pass then allocates from merged,
//! contiguous memory instead of reusing those chunks one by one, scattered.
//!
//! Generic over the pointee of the buffer's `Arc`s, so that the runtime does not name the graph's
//! node type: the graph implements [`Spare`] for it, declaring the thread-local kept buffer.

use std::cell::Cell;
use std::sync::Arc;
use std::thread::LocalKey;

/// The most nodes a kept buffer may have room for.
pub(crate) const CAPACITY: usize = 1 << 16;

/// A pointee whose `Arc`s a traversal buffers: `slot` is the thread-local that keeps the
/// emptied buffer between traversals.
pub(crate) trait Spare: 'static {
    /// This thread's kept buffer, empty when there is none.
    fn slot() -> &'static LocalKey<Cell<Vec<Arc<Self>>>>;
}

/// An empty buffer, with the spare's capacity when there is one.
pub(crate) fn take<T: ?Sized + Spare>() -> Vec<Arc<T>> {
    T::slot().try_with(Cell::take).unwrap_or_default()
}

/// Drops a traversal's `nodes` in order, each right after `each` saw it (most go with
/// this reference: their allocations serve the next pass), and keeps the emptied buffer.
pub(crate) fn give_back<T: ?Sized + Spare>(mut nodes: Vec<Arc<T>>, mut each: impl FnMut(&Arc<T>)) {
    for node in nodes.drain(..) {
        each(&node);
        super::arc_cache::recycle(node);
    }
    keep(nodes);
}

/// Keeps the empty `nodes` for the thread's next plan, unless it is too large or the
/// thread is exiting.
fn keep<T: ?Sized + Spare>(nodes: Vec<Arc<T>>) {
    debug_assert!(nodes.is_empty());
    if nodes.capacity() <= CAPACITY {
        let _ = T::slot().try_with(|spare| {
            let kept = spare.take();
            spare.set(if kept.capacity() > nodes.capacity() {
                kept
            } else {
                nodes
            });
        });
    }
}

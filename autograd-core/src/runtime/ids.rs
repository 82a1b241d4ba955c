//! Identities unique for the life of the process, handed out from thread-local blocks: every
//! tensor, carrier and node takes one, and one shared counter bumped per object would be an
//! atomic read-modify-write on every op's path (and a cache line all threads fight over).
//!
//! Identities are unique and never reused, but only ordered within a thread: a block taken
//! later by another thread may hold smaller numbers. A watermark gives a number that every
//! identity handed out before it is below, and that every identity handed out after it (in
//! the happens-before sense, on any thread) is at or above: it starts a new epoch, and a
//! thread takes a new block when it sees one.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::LocalKey;

/// How many identities a thread takes from the shared counter at a time.
const BLOCK: u64 = 1024;

/// What a source's threads share: the next identity no block holds, and the epoch.
pub(crate) struct Shared {
    next: AtomicU64,
    epoch: AtomicU64,
}

impl Shared {
    pub(crate) const fn new() -> Shared {
        Shared {
            next: AtomicU64::new(1),
            epoch: AtomicU64::new(0),
        }
    }
}

/// A thread's current block of identities, `(next, end, epoch taken in)`.
pub(crate) type Block = Cell<(u64, u64, u64)>;

/// Declares `$name`, a source of identities starting at 1: a shared counter and each
/// thread's block of it.
macro_rules! id_source {
    ($vis:vis $name:ident) => {
        $vis struct $name;
        impl $name {
            fn parts() -> (&'static $crate::runtime::ids::Shared, &'static std::thread::LocalKey<$crate::runtime::ids::Block>) {
                static SHARED: $crate::runtime::ids::Shared = $crate::runtime::ids::Shared::new();
                thread_local! {
                    static BLOCK: $crate::runtime::ids::Block = const { std::cell::Cell::new((0, 0, 0)) };
                }
                (&SHARED, &BLOCK)
            }

            /// A new identity.
            #[inline]
            $vis fn next() -> u64 {
                let (shared, local) = Self::parts();
                $crate::runtime::ids::next(shared, local)
            }

            /// A number above every identity handed out so far, on any thread, and at or
            /// below every one handed out from now on.
            #[allow(dead_code)]
            $vis fn watermark() -> u64 {
                let (shared, local) = Self::parts();
                $crate::runtime::ids::watermark(shared, local)
            }
        }
    };
}
pub(crate) use id_source;

/// A new identity from `local`'s block, taking a new block from `shared` when it is used up
/// or a watermark started a new epoch.
#[inline]
pub(crate) fn next(shared: &Shared, local: &'static LocalKey<Block>) -> u64 {
    // a watermark's counter bump happens before any thread sees its epoch
    let epoch = shared.epoch.load(Ordering::Acquire);
    local
        .try_with(|block| {
            let (next, end, taken) = block.get();
            if next < end && taken == epoch {
                block.set((next + 1, end, taken));
                next
            } else {
                let start = shared.next.fetch_add(BLOCK, Ordering::Relaxed);
                block.set((start + 1, start + BLOCK, epoch));
                start
            }
        })
        // a thread tearing down its thread-locals takes one at a time
        .unwrap_or_else(|_| shared.next.fetch_add(1, Ordering::Relaxed))
}

/// Starts a new epoch, and a new block for this thread, and answers the block's start.
pub(crate) fn watermark(shared: &Shared, local: &'static LocalKey<Block>) -> u64 {
    let start = shared.next.fetch_add(BLOCK, Ordering::Relaxed);
    let epoch = shared.epoch.fetch_add(1, Ordering::Release) + 1;
    let _ = local.try_with(|block| block.set((start, start + BLOCK, epoch)));
    start
}

/// A hasher for identity keys: one multiply, no SipHash (ids are sequential, not chosen by an
/// attacker).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by tensor or node identity (or a traversal's cotangent slot).
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A set of tensor or node identities.
pub(crate) type IdSet = HashSet<u64, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    super::id_source!(Ids);

    #[test]
    fn identities_are_unique_across_threads_and_follow_a_watermark() {
        let before: Vec<u64> = (0..10).map(|_| Ids::next()).collect();
        let others: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..3000).map(|_| Ids::next()).collect::<Vec<_>>()))
                .collect();
            hs.into_iter()
                .flat_map(|h| h.join().expect("no panic"))
                .collect()
        });
        let mark = Ids::watermark();
        let after: Vec<u64> = (0..2000).map(|_| Ids::next()).collect();
        let all: HashSet<u64> = before
            .iter()
            .chain(&others)
            .chain(&after)
            .copied()
            .collect();
        assert_eq!(all.len(), 10 + 4 * 3000 + 2000, "never handed out twice");
        assert!(!all.contains(&0), "identities start at 1");
        assert!(before.iter().chain(&others).all(|&i| i < mark));
        assert!(after.iter().all(|&i| i >= mark));
        assert!(
            after.windows(2).all(|w| w[0] < w[1]),
            "ordered within a thread"
        );
    }

    /// A thread that holds a block from before a watermark takes a new one after it, so the
    /// nodes a checkpoint replay records on worker threads are above its watermark.
    #[test]
    fn a_watermark_moves_every_thread_past_it() {
        super::id_source!(Ids);
        let (to_worker, at_worker) = std::sync::mpsc::channel::<u64>();
        let (to_main, at_main) = std::sync::mpsc::channel::<Vec<u64>>();
        let worker = std::thread::spawn(move || {
            let before = Ids::next();
            to_main.send(vec![before]).expect("main listens");
            let mark = at_worker.recv().expect("main sends the mark");
            let after: Vec<u64> = (0..10).map(|_| Ids::next()).collect();
            to_main.send(after).expect("main listens");
            mark
        });
        let before = at_main.recv().expect("worker sends");
        let mark = Ids::watermark();
        assert!(before[0] < mark);
        to_worker.send(mark).expect("worker listens");
        let after = at_main.recv().expect("worker sends");
        assert!(after.iter().all(|&i| i >= mark), "{after:?} against {mark}");
        worker.join().expect("no panic");
    }
}

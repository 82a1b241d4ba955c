//! A reader-writer lock in a 32-bit word that keeps five bits of payload beside its state: a
//! CPU carrier's elements lock, whose payload is the length of an inline array, so that a
//! one-element carrier's lock, length and element take eight bytes (W3 keeps a million of them
//! alive). Readers share it (every kernel reads), a writer excludes everyone, and a waiting
//! writer keeps new readers out, as std's `RwLock` does on Linux: a thread that read-locks a
//! carrier it already holds while a writer waits deadlocks there too. Waiters back off as the
//! word lock's do. Like the `RwLock` it replaced (whose poisoning the carrier ignored), it does
//! not poison: what it guards is plain numbers.

use crate::runtime::sync::{AtomicU32, Ordering};
use crate::runtime::word_lock::backoff;

const WRITER: u32 = 1;
/// A writer waits: new readers stay out until it has had its turn.
const WAITING: u32 = 1 << 1;
const READER: u32 = 1 << 2;
const PAYLOAD_SHIFT: u32 = 27;
const READERS: u32 = ((1 << PAYLOAD_SHIFT) - 1) & !(WRITER | WAITING);

/// The lock state and a payload fixed at construction.
pub(crate) struct ElementLock(AtomicU32);

impl ElementLock {
    /// The largest payload the word holds.
    pub(crate) const MAX_PAYLOAD: u32 = u32::MAX >> PAYLOAD_SHIFT;

    /// An unlocked lock carrying `payload`, at most [`ElementLock::MAX_PAYLOAD`].
    pub(crate) fn new(payload: u32) -> ElementLock {
        assert!(
            payload <= Self::MAX_PAYLOAD,
            "an element lock's payload has 5 bits"
        );
        ElementLock(AtomicU32::new(payload << PAYLOAD_SHIFT))
    }

    /// The payload; it never changes, so any ordering reads it.
    pub(crate) fn payload(&self) -> u32 {
        self.0.load(Ordering::Relaxed) >> PAYLOAD_SHIFT
    }

    /// Takes a shared hold, waiting while a writer holds the lock or waits for it. Pair with
    /// [`ElementLock::unlock_shared`].
    pub(crate) fn lock_shared(&self) {
        // a full reader count waits for a reader to leave rather than overflowing
        self.acquire(
            |s| (s & (WRITER | WAITING) == 0 && s & READERS != READERS).then_some(s + READER),
            |_| {},
        );
    }

    /// Ends a shared hold taken by [`ElementLock::lock_shared`].
    pub(crate) fn unlock_shared(&self) {
        self.0.fetch_sub(READER, Ordering::Release);
    }

    /// Takes the exclusive hold, waiting for readers and writers to leave and keeping new
    /// readers out meanwhile. Pair with [`ElementLock::unlock_exclusive`].
    pub(crate) fn lock_exclusive(&self) {
        self.acquire(
            |s| (s & (WRITER | READERS) == 0).then_some((s | WRITER) & !WAITING),
            |s| {
                if s & WAITING == 0 {
                    // announce the wait; a failed attempt just tries again
                    let _ = self.0.compare_exchange_weak(
                        s,
                        s | WAITING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            },
        );
    }

    /// Moves the state to `next(state)` once `next` admits it, running `waiting(state)`
    /// before each wait.
    fn acquire(&self, next: impl Fn(u32) -> Option<u32>, waiting: impl Fn(u32)) {
        let mut state = self.0.load(Ordering::Relaxed);
        let mut spins = 0u32;
        loop {
            if let Some(new) = next(state) {
                match self
                    .0
                    .compare_exchange_weak(state, new, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => return,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            waiting(state);
            backoff(&mut spins);
            state = self.0.load(Ordering::Relaxed);
        }
    }

    /// Ends the exclusive hold taken by [`ElementLock::lock_exclusive`].
    pub(crate) fn unlock_exclusive(&self) {
        // Another writer may have announced a wait meanwhile: keep its bit.
        self.0.fetch_and(!WRITER, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;
    use std::sync::Arc;

    #[test]
    fn the_payload_survives_every_state() {
        for payload in [0, 1, 16, ElementLock::MAX_PAYLOAD] {
            let l = ElementLock::new(payload);
            l.lock_shared();
            l.lock_shared();
            assert_eq!(l.payload(), payload);
            l.unlock_shared();
            l.unlock_shared();
            l.lock_exclusive();
            assert_eq!(l.payload(), payload);
            l.unlock_exclusive();
            assert_eq!(l.payload(), payload);
            assert_eq!(
                l.0.load(Ordering::Relaxed) & !(u32::MAX << PAYLOAD_SHIFT),
                0
            );
        }
    }

    /// Writers increment a two-word counter non-atomically under the exclusive hold; readers
    /// check under the shared hold that they never see it half-written.
    #[test]
    fn readers_never_see_a_writer_half_done() {
        struct Pair {
            lock: ElementLock,
            words: UnsafeCell<[u64; 2]>,
        }
        // SAFETY: the words are reached only under the lock.
        unsafe impl Sync for Pair {}
        let pair = Arc::new(Pair {
            lock: ElementLock::new(9),
            words: UnsafeCell::new([0, 0]),
        });
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let pair = pair.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if t % 2 == 0 {
                            pair.lock.lock_exclusive();
                            // SAFETY: the exclusive hold.
                            unsafe {
                                let w = &mut *pair.words.get();
                                w[0] += 1;
                                std::hint::spin_loop();
                                w[1] += 1;
                            }
                            pair.lock.unlock_exclusive();
                        } else {
                            pair.lock.lock_shared();
                            // SAFETY: a shared hold.
                            let [a, b] = unsafe { *pair.words.get() };
                            pair.lock.unlock_shared();
                            assert_eq!(a, b);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // SAFETY: every thread has finished.
        assert_eq!(unsafe { *pair.words.get() }, [40_000, 40_000]);
        assert_eq!(pair.lock.payload(), 9);
    }

    /// A writer waiting behind a reader keeps new readers out, so a stream of readers cannot
    /// starve it.
    #[test]
    fn a_waiting_writer_holds_new_readers_back() {
        use std::sync::atomic::AtomicBool;
        let lock = Arc::new(ElementLock::new(3));
        lock.lock_shared();
        let writer = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                lock.lock_exclusive();
                lock.unlock_exclusive();
            })
        };
        while lock.0.load(Ordering::Relaxed) & WAITING == 0 {
            std::thread::yield_now();
        }
        let entered = Arc::new(AtomicBool::new(false));
        let reader = {
            let (lock, entered) = (lock.clone(), entered.clone());
            std::thread::spawn(move || {
                lock.lock_shared();
                entered.store(true, Ordering::SeqCst);
                lock.unlock_shared();
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!entered.load(Ordering::SeqCst), "the new reader waits");
        lock.unlock_shared();
        writer.join().unwrap();
        reader.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(lock.0.load(Ordering::Relaxed), 3 << PAYLOAD_SHIFT);
    }
}

/// Loom models (`--cfg loom`, see [`crate::runtime::loom_models`]) of the real lock guarding a loom
/// cell, whose accesses loom checks against each other's.
#[cfg(all(test, loom))]
mod loom_models {
    use super::{ElementLock, Ordering, PAYLOAD_SHIFT};
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Two words a writer increments one at a time under the lock.
    struct Pair {
        lock: ElementLock,
        words: UnsafeCell<[u64; 2]>,
    }

    // SAFETY: the words are reached only under the lock.
    unsafe impl Sync for Pair {}

    impl Pair {
        fn new() -> Arc<Pair> {
            Arc::new(Pair {
                lock: ElementLock::new(9),
                words: UnsafeCell::new([0, 0]),
            })
        }

        fn write(&self) {
            self.lock.lock_exclusive();
            self.words.with_mut(|w| {
                // SAFETY: the exclusive hold.
                let w = unsafe { &mut *w };
                w[0] += 1;
                w[1] += 1;
            });
            self.lock.unlock_exclusive();
        }

        fn read(&self) -> [u64; 2] {
            self.lock.lock_shared();
            // SAFETY: a shared hold: no writer holds the lock.
            let words = self.words.with(|w| unsafe { *w });
            self.lock.unlock_shared();
            words
        }

        /// The lock is free, with no stale waiting bit, and keeps its payload.
        fn assert_idle(&self) {
            assert_eq!(self.lock.0.load(Ordering::Relaxed), 9 << PAYLOAD_SHIFT);
        }
    }

    /// A reader racing a writer sees the words before or after the write, never half of it,
    /// and its read is ordered against the write either way.
    #[test]
    fn a_reader_sees_a_writer_before_or_after_never_during() {
        crate::runtime::loom_models::check(|| {
            let pair = Pair::new();
            let writer = {
                let pair = Arc::clone(&pair);
                thread::spawn(move || pair.write())
            };
            let [a, b] = pair.read();
            assert_eq!(a, b);
            writer.join().expect("no panic");
            assert_eq!(pair.read(), [1, 1]);
            pair.assert_idle();
        });
    }

    /// Two writers and a reader: the writers exclude each other and each other's waiting
    /// bits, and the reader shares the lock with neither.
    #[test]
    fn two_writers_exclude_each_other_and_a_reader() {
        crate::runtime::loom_models::check(|| {
            let pair = Pair::new();
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let pair = Arc::clone(&pair);
                    thread::spawn(move || pair.write())
                })
                .collect();
            let [a, b] = pair.read();
            assert_eq!(a, b);
            for w in writers {
                w.join().expect("no panic");
            }
            assert_eq!(pair.read(), [2, 2]);
            pair.assert_idle();
        });
    }
}

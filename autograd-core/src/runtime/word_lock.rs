//! A lock that lives in one bit of a word whose other 63 bits carry a payload: a graph node
//! keeps its claim token there and a tensor its identity, so the lock costs no bytes of its
//! own in objects a million-node graph holds millions of. Unlocking is a plain store, not a
//! locked instruction, because the lock keeps no queue of waiters: a waiter spins briefly,
//! then yields, then polls every 20 µs. Holders are short (a node's holder reads its saved
//! inputs or routes one node's gradients; a tensor's holder reads or sets its gradient or
//! node), and two threads rarely want the same node or tensor at once; when they do, the
//! waiter's polling costs it latency, not correctness. Like the `Mutex` it replaced, it
//! has no poisoning: what it guards stays consistent across a panic.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};

use crate::runtime::sync::{AtomicU64, Ordering, UnsafeCell};

const LOCKED: u64 = 1;

/// `T` behind a lock in bit 0 of a word whose upper 63 bits hold a payload.
pub(crate) struct WordLock<T> {
    word: AtomicU64,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and the lock bit admits one guard at a
// time, as `Mutex` does; `T: Send` suffices for the same reason as for `Mutex<T>`.
unsafe impl<T: Send> Sync for WordLock<T> {}
// As for `Mutex`: a panic while locked leaves nothing half-done that the lock hides.
impl<T> UnwindSafe for WordLock<T> {}
impl<T> RefUnwindSafe for WordLock<T> {}

impl<T> WordLock<T> {
    /// The largest payload a word holds.
    pub(crate) const MAX_PAYLOAD: u64 = u64::MAX >> 1;

    /// An unlocked `value` with `payload`, which must be at most [`WordLock::MAX_PAYLOAD`]
    /// (identities from a sequential counter never come near it).
    pub(crate) fn new(payload: u64, value: T) -> WordLock<T> {
        assert!(
            payload <= Self::MAX_PAYLOAD,
            "a lock word's payload has 63 bits"
        );
        WordLock {
            word: AtomicU64::new(payload << 1),
            value: UnsafeCell::new(value),
        }
    }

    /// The payload as of the last unlock, read without taking the lock.
    pub(crate) fn payload(&self) -> u64 {
        self.word.load(Ordering::Acquire) >> 1
    }

    /// Takes the lock, waiting while another guard holds it.
    pub(crate) fn lock(&self) -> WordGuard<'_, T> {
        let mut word = self.word.load(Ordering::Relaxed);
        let mut spins = 0u32;
        loop {
            if word & LOCKED == 0 {
                match self.word.compare_exchange_weak(
                    word,
                    word | LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        return WordGuard {
                            lock: self,
                            payload: word >> 1,
                            #[cfg(loom)]
                            access: Some(self.value.get_mut()),
                            _value: PhantomData,
                        }
                    }
                    Err(now) => {
                        word = now;
                        continue;
                    }
                }
            }
            backoff(&mut spins);
            word = self.word.load(Ordering::Relaxed);
        }
    }

    /// The value, through exclusive access (no lock needed).
    #[cfg(not(loom))]
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value, through exclusive access (no lock needed).
    #[cfg(loom)]
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other reference.
        unsafe { &mut *self.value.with_mut(|p| p) }
    }

    /// The value, read without taking the lock.
    ///
    /// # Safety
    /// No guard may exist or be taken while the reference lives, and every write made under
    /// an earlier guard must happen before this call.
    pub(crate) unsafe fn get_unlocked(&self) -> &T {
        #[cfg(not(loom))]
        let value = self.value.get();
        // loom checks here that the last guard's writes happen before this read
        #[cfg(loom)]
        let value = self.value.with(|p| p);
        // SAFETY: per the caller, nothing writes the value while the reference lives.
        unsafe { &*value }
    }
}

/// Waits a little longer each time: spins first, then yields the core, then sleeps, so that a
/// waiter behind a long holder (a lock held through a VJP's routing, a traversal holding a
/// claim) does not burn a core another thread could use.
#[cfg(not(loom))]
pub(crate) fn backoff(spins: &mut u32) {
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 128 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
    *spins = spins.saturating_add(1);
}

/// [`backoff`] in a loom model, whose threads share one OS thread: a waiter hands over to
/// the holder at once. Loom may keep showing a waiter a stale "held" (any store it has not
/// seen yet) and may keep scheduling waiters before the holder, so a path where a waiter
/// spun [`LOOM_SPINS`] times is explored no further: its later waits only repeat what a
/// waiter already saw, and the interleavings before them are all explored.
#[cfg(loom)]
pub(crate) fn backoff(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if *spins == LOOM_SPINS {
        loom::skip_branch();
    }
    loom::thread::yield_now();
}

/// How often a waiter spins in a loom path before loom stops branching on it.
#[cfg(loom)]
const LOOM_SPINS: u32 = 3;

/// Exclusive access to a [`WordLock`]'s value and payload; dropping it unlocks and publishes
/// the payload.
pub(crate) struct WordGuard<'a, T> {
    lock: &'a WordLock<T>,
    payload: u64,
    /// Under loom, the guard's access to the value, tracked from lock to unlock so that loom
    /// checks it against every other thread's.
    #[cfg(loom)]
    access: Option<loom::cell::MutPtr<T>>,
    /// Shared across threads only when `T` is `Sync`: the guard lends `&T`.
    _value: PhantomData<&'a mut T>,
}

impl<T> WordGuard<'_, T> {
    /// The payload.
    pub(crate) fn payload(&self) -> u64 {
        self.payload
    }

    /// Sets the payload (at most [`WordLock::MAX_PAYLOAD`]), published at unlock.
    pub(crate) fn set_payload(&mut self, payload: u64) {
        assert!(
            payload <= WordLock::<T>::MAX_PAYLOAD,
            "a lock word's payload has 63 bits"
        );
        self.payload = payload;
    }
}

impl<T> WordGuard<'_, T> {
    /// The value's address, which only this guard may dereference.
    #[cfg(not(loom))]
    fn value(&self) -> *mut T {
        self.lock.value.get()
    }

    /// The value's address, through the guard's tracked access.
    #[cfg(loom)]
    fn value(&self) -> *mut T {
        let access = self
            .access
            .as_ref()
            .expect("a guard holds its access until dropped");
        access.with(|p| p)
    }
}

impl<T> Deref for WordGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock (its acquiring CAS synchronized with the last
        // holder's releasing store), so no other reference to the value exists.
        unsafe { &*self.value() }
    }
}

impl<T> DerefMut for WordGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the guard's only borrow.
        unsafe { &mut *self.value() }
    }
}

impl<T> Drop for WordGuard<'_, T> {
    fn drop(&mut self) {
        // the access ends before the next holder's can begin
        #[cfg(loom)]
        drop(self.access.take());
        // Only the holder writes the word, so a plain store unlocks it; Release publishes the
        // holder's writes to the value to the next holder's Acquire.
        self.lock.word.store(self.payload << 1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_payload_survives_locking_and_is_published_at_unlock() {
        let lock = WordLock::new(41, vec![1]);
        {
            let mut g = lock.lock();
            assert_eq!(g.payload(), 41);
            g.push(2);
            g.set_payload(WordLock::<Vec<i32>>::MAX_PAYLOAD);
            assert_eq!(lock.payload(), 41, "published only at unlock");
        }
        assert_eq!(lock.payload(), WordLock::<Vec<i32>>::MAX_PAYLOAD);
        assert_eq!(*lock.lock(), vec![1, 2]);
    }

    /// A tensor's identity is read while another thread holds its state: the read neither
    /// waits nor sees the lock bit.
    #[test]
    fn the_payload_reads_without_waiting_while_another_thread_holds_the_lock() {
        let lock = Arc::new(WordLock::new(12_345, ()));
        let guard = lock.lock();
        let l2 = Arc::clone(&lock);
        let seen = std::thread::spawn(move || l2.payload())
            .join()
            .expect("no panic");
        assert_eq!(seen, 12_345);
        drop(guard);
    }

    #[test]
    fn threads_that_contend_lose_no_update() {
        let lock = Arc::new(WordLock::new(0, 0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = lock.lock();
                        *g += 1;
                        let p = g.payload();
                        g.set_payload(p + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
        assert_eq!(*lock.lock(), 80_000);
        assert_eq!(lock.payload(), 80_000);
    }

    #[test]
    fn a_panic_while_locked_unlocks() {
        let lock = Arc::new(WordLock::new(7, 0));
        let l2 = Arc::clone(&lock);
        let r = std::thread::spawn(move || {
            let _g = l2.lock();
            panic!("inside the lock");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(lock.payload(), 7);
        *lock.lock() += 1;
        assert_eq!(*lock.lock(), 1);
    }
}

/// Loom models (`--cfg loom`, see [`crate::runtime::loom_models`]): every interleaving of threads
/// taking the real lock, with loom checking each guard's access to the value against every
/// other thread's.
#[cfg(all(test, loom))]
mod loom_models {
    use super::WordLock;
    use loom::sync::Arc;
    use loom::thread;

    /// Two threads read, modify and write the value and the payload under the lock: neither
    /// update is lost, and each guard's access happens after the previous holder's.
    #[test]
    fn two_holders_exclude_each_other_and_publish_their_writes() {
        crate::runtime::loom_models::check(|| {
            let lock = Arc::new(WordLock::new(5, 0u64));
            let other = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let mut g = lock.lock();
                    *g += 1;
                    let p = g.payload();
                    g.set_payload(p + 1);
                })
            };
            {
                let mut g = lock.lock();
                *g += 10;
                let p = g.payload();
                g.set_payload(p + 1);
            }
            other.join().expect("no panic");
            assert_eq!(*lock.lock(), 11);
            assert_eq!(lock.payload(), 7);
        });
    }

    /// A reader that sees the payload a holder published at unlock may read the value without
    /// the lock (as a tensor's sole-handle check does): the holder's writes happen before it.
    #[test]
    fn a_published_payload_orders_the_holders_writes_before_an_unlocked_read() {
        crate::runtime::loom_models::check(|| {
            let lock = Arc::new(WordLock::new(0, 0u64));
            let reader = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    (lock.payload() == 1).then(|| {
                        // SAFETY: the writer unlocked (it publishes the payload only then) and
                        // locks no more; the Acquire load of the payload ordered its writes
                        // before this read.
                        unsafe { *lock.get_unlocked() }
                    })
                })
            };
            {
                let mut g = lock.lock();
                *g = 42;
                g.set_payload(1);
            }
            let seen = reader.join().expect("no panic");
            assert!(seen.is_none_or(|v| v == 42), "{seen:?}");
            assert_eq!(*lock.lock(), 42);
        });
    }
}

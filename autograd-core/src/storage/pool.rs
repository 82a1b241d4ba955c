//! Reuse of large Float32 buffers across a process's threads.
//!
//! A training step allocates the same activations and gradients every iteration. Allocations
//! of this size come from the kernel (glibc maps them, or trims them from the heap top once
//! freed), so every step would fault in and zero its pages again, which costs more than the
//! arithmetic of an elementwise op or a small matrix product. Dropped CPU buffers of at least
//! [`MIN_BYTES`] are kept here instead, bounded in count and bytes, and handed out zeroed or
//! (for a caller that overwrites them) as they are. One pool serves every thread: a buffer a
//! rayon worker made is often freed on the thread that drives the step, and the other way
//! round.
//!
//! The pool is a queue in the order buffers were freed: a request takes the most recently
//! freed buffer that fits, and when the bounds are reached the longest-held buffer goes back
//! to the allocator, so the pool follows the sizes the current workload uses (a model trained
//! after another does not find the pool full of the first one's sizes).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

/// Buffers smaller than this go back to the allocator (its own caches serve them well).
const MIN_BYTES: usize = 64 << 10;
/// At most this many buffers are held (a transformer step frees a few hundred).
const MAX_HELD: usize = 256;
/// At most this many bytes are held: a GPT-2-small step (W12) frees buffers of 50-150 MB
/// (logits, their gradient, the tied embedding's two gradients) that the next step asks for
/// again; held within 256 MiB they were evicted and faulted back in page by page every step
/// (a fifth of its time).
const MAX_BYTES: usize = 1 << 30;

/// Held buffers, oldest first, with their total size.
struct Pool {
    buffers: VecDeque<Vec<f32>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool::new());

fn bytes(v: &Vec<f32>) -> usize {
    v.capacity() * std::mem::size_of::<f32>()
}

impl Pool {
    const fn new() -> Pool {
        Pool {
            buffers: VecDeque::new(),
            bytes: 0,
        }
    }

    /// The most recently freed held buffer of capacity `n..=2n`, if any.
    fn take(&mut self, n: usize) -> Option<Vec<f32>> {
        let i = self
            .buffers
            .iter()
            .rposition(|v| v.capacity() >= n && v.capacity() / 2 <= n)?;
        let v = self.buffers.remove(i)?;
        self.bytes -= bytes(&v);
        Some(v)
    }

    /// Holds `v`, returning the longest-held buffers it evicts to stay within the bounds (the
    /// caller frees them outside the lock); a buffer outside the size bounds comes back itself.
    fn keep(&mut self, v: Vec<f32>) -> Vec<Vec<f32>> {
        let size = bytes(&v);
        if !(MIN_BYTES..=MAX_BYTES).contains(&size) {
            return vec![v];
        }
        let mut evicted = Vec::new();
        while self.buffers.len() >= MAX_HELD || self.bytes + size > MAX_BYTES {
            match self.buffers.pop_front() {
                Some(old) => {
                    self.bytes -= bytes(&old);
                    evicted.push(old);
                }
                None => break,
            }
        }
        self.bytes += size;
        self.buffers.push_back(v);
        evicted
    }
}

fn take_from(pool: &Mutex<Pool>, n: usize) -> Option<Vec<f32>> {
    // (a size whose bytes overflow is left to the allocation, which fails with an error)
    if n.checked_mul(std::mem::size_of::<f32>())
        .is_none_or(|bytes| bytes < MIN_BYTES)
    {
        return None;
    }
    pool.lock().unwrap_or_else(PoisonError::into_inner).take(n)
}

fn zeroed_from(pool: &Mutex<Pool>, n: usize) -> crate::error::Result<Vec<f32>> {
    match take_from(pool, n) {
        Some(mut v) => {
            v.clear();
            v.resize(n, 0.0);
            Ok(v)
        }
        None => crate::storage::allocation::filled(n, 0.0f32),
    }
}

fn overwritable_from(pool: &Mutex<Pool>, n: usize) -> crate::error::Result<Vec<f32>> {
    match take_from(pool, n) {
        Some(mut v) => {
            v.resize(n, 0.0);
            v.truncate(n);
            Ok(v)
        }
        None => crate::storage::allocation::filled(n, 0.0f32),
    }
}

fn recycle_into(pool: &Mutex<Pool>, v: Vec<f32>) {
    if bytes(&v) < MIN_BYTES {
        return;
    }
    let evicted = pool.lock().unwrap_or_else(PoisonError::into_inner).keep(v);
    drop(evicted);
}

/// `n` zeros, in a held buffer of capacity `n..=2n` when there is one.
pub(crate) fn zeroed(n: usize) -> crate::error::Result<Vec<f32>> {
    zeroed_from(&POOL, n)
}

/// `n` values for a caller that overwrites every one of them: a held buffer keeps whatever
/// it held (no pass to zero it), a new one is zeroed by the allocator.
pub(crate) fn overwritable(n: usize) -> crate::error::Result<Vec<f32>> {
    overwritable_from(&POOL, n)
}

/// Keeps `v` for reuse when it is large, evicting the longest-held buffers to stay within the
/// bounds; a buffer larger than the byte bound is freed.
pub(crate) fn recycle(v: Vec<f32>) {
    recycle_into(&POOL, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each test uses a pool of its own: tests run in parallel, and kernels elsewhere in the
    // crate use the process's pool meanwhile.

    #[test]
    fn a_reused_buffer_comes_back_zeroed_and_small_ones_are_not_held() {
        let pool = Mutex::new(Pool::new());
        let n = MIN_BYTES / 4 + 3;
        let mut dirty = zeroed_from(&pool, n).unwrap();
        dirty.fill(7.0);
        let address = dirty.as_ptr();
        recycle_into(&pool, dirty);
        let again = zeroed_from(&pool, n - 1).unwrap();
        assert_eq!(again.as_ptr(), address, "the held buffer is reused");
        assert_eq!(again.len(), n - 1);
        assert!(again.iter().all(|&x| x == 0.0));
        // a buffer more than twice the request is not handed out for it
        recycle_into(&pool, again);
        let small = zeroed_from(&pool, n / 4).unwrap();
        assert_ne!(small.as_ptr(), address);
        recycle_into(&pool, vec![1.0; 8]);
        let p = pool.lock().unwrap();
        assert!(p.buffers.iter().all(|v| bytes(v) >= MIN_BYTES));
    }

    #[test]
    fn an_overwritable_buffer_has_the_requested_length_and_reuses_storage() {
        let pool = Mutex::new(Pool::new());
        let n = MIN_BYTES / 4 + 5;
        let v = overwritable_from(&pool, n).unwrap();
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0.0), "a new buffer is zeroed");
        let address = v.as_ptr();
        recycle_into(&pool, v);
        let shorter = overwritable_from(&pool, n - 3).unwrap();
        assert_eq!((shorter.as_ptr(), shorter.len()), (address, n - 3));
        recycle_into(&pool, shorter);
        let longer = overwritable_from(&pool, n).unwrap();
        assert_eq!((longer.as_ptr(), longer.len()), (address, n));
    }

    #[test]
    fn the_pool_is_bounded_and_keeps_the_latest_sizes() {
        let pool = Mutex::new(Pool::new());
        for _ in 0..2 * MAX_HELD {
            recycle_into(&pool, vec![0.0f32; MIN_BYTES / 4]);
        }
        {
            let p = pool.lock().unwrap();
            assert_eq!(p.buffers.len(), MAX_HELD);
            assert_eq!(p.bytes, p.buffers.iter().map(bytes).sum::<usize>());
        }
        // a full pool of small buffers still takes a larger one, evicting the oldest
        let big = vec![0.0f32; 4 * MIN_BYTES];
        let address = big.as_ptr();
        recycle_into(&pool, big);
        {
            let p = pool.lock().unwrap();
            assert!(p.buffers.len() <= MAX_HELD);
            assert!(p.bytes <= MAX_BYTES);
        }
        let again = zeroed_from(&pool, 4 * MIN_BYTES).unwrap();
        assert_eq!(again.as_ptr(), address);
        // more than the byte bound is never held
        recycle_into(&pool, vec![0.0f32; MAX_BYTES / 4 + 1]);
        assert!(pool.lock().unwrap().bytes <= MAX_BYTES);
    }

    #[test]
    fn a_buffer_freed_on_one_thread_serves_a_request_on_another() {
        let pool = Mutex::new(Pool::new());
        let n = MIN_BYTES / 4;
        let address = std::thread::scope(|s| {
            s.spawn(|| {
                let v = vec![1.0f32; n];
                let address = v.as_ptr() as usize;
                recycle_into(&pool, v);
                address
            })
            .join()
            .unwrap()
        });
        let reused = zeroed_from(&pool, n).unwrap();
        assert_eq!(reused.as_ptr() as usize, address);
    }
}

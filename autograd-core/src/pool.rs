//! Reuse of large Float32 buffers on the thread that freed them.
//!
//! A training step allocates the same activations and gradients every iteration. Allocations
//! of this size come from the kernel (glibc maps them, or trims them from the heap top once
//! freed), so every step would fault in and zero its pages again, which costs more than the
//! arithmetic of an elementwise op or a small matrix product. Dropped CPU buffers of at least
//! [`MIN_BYTES`] are kept here instead, bounded in count and bytes, and handed out zeroed.
//!
//! The pool is a queue in the order buffers were freed: a request takes the most recently
//! freed buffer that fits, and when the bounds are reached the longest-held buffer goes back
//! to the allocator, so the pool follows the sizes the current workload uses (a model trained
//! after another does not find the pool full of the first one's sizes).

use std::cell::RefCell;
use std::collections::VecDeque;

/// Buffers smaller than this go back to the allocator (its own caches serve them well).
const MIN_BYTES: usize = 64 << 10;
/// At most this many buffers are held per thread.
const MAX_HELD: usize = 64;
/// At most this many bytes are held per thread.
const MAX_BYTES: usize = 256 << 20;

/// The buffers one thread holds, oldest first, with their total size.
struct Held {
    buffers: VecDeque<Vec<f32>>,
    bytes: usize,
}

thread_local! {
    static HELD: RefCell<Held> = const {
        RefCell::new(Held { buffers: VecDeque::new(), bytes: 0 })
    };
}

fn bytes(v: &Vec<f32>) -> usize {
    v.capacity() * std::mem::size_of::<f32>()
}

/// The most recently freed held buffer of capacity `n..=2n`, if any.
fn take_held(n: usize) -> Option<Vec<f32>> {
    if n * std::mem::size_of::<f32>() < MIN_BYTES {
        return None;
    }
    HELD.try_with(|h| {
        let mut h = h.borrow_mut();
        let i = h
            .buffers
            .iter()
            .rposition(|v| v.capacity() >= n && v.capacity() / 2 <= n)?;
        let v = h.buffers.remove(i)?;
        h.bytes -= bytes(&v);
        Some(v)
    })
    .ok()
    .flatten()
}

/// `n` zeros, in a held buffer of capacity `n..=2n` when there is one.
pub(crate) fn zeroed(n: usize) -> crate::error::Result<Vec<f32>> {
    match take_held(n) {
        Some(mut v) => {
            v.clear();
            v.resize(n, 0.0);
            Ok(v)
        }
        None => crate::scalar::filled(n, 0.0f32),
    }
}

/// `n` values for a caller that overwrites every one of them: a held buffer keeps whatever
/// it held (no pass to zero it), a new one is zeroed by the allocator.
pub(crate) fn overwritable(n: usize) -> crate::error::Result<Vec<f32>> {
    match take_held(n) {
        Some(mut v) => {
            v.resize(n, 0.0);
            v.truncate(n);
            Ok(v)
        }
        None => crate::scalar::filled(n, 0.0f32),
    }
}

/// Keeps `v` for reuse when it is large, evicting the longest-held buffers to stay within the
/// bounds; a buffer larger than the byte bound is freed.
pub(crate) fn recycle(v: Vec<f32>) {
    let size = bytes(&v);
    if !(MIN_BYTES..=MAX_BYTES).contains(&size) {
        return;
    }
    let _ = HELD.try_with(|h| {
        let mut h = h.borrow_mut();
        while h.buffers.len() >= MAX_HELD || h.bytes + size > MAX_BYTES {
            match h.buffers.pop_front() {
                Some(old) => h.bytes -= bytes(&old),
                None => break,
            }
        }
        h.bytes += size;
        h.buffers.push_back(v);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held<R>(f: impl FnOnce(&Held) -> R) -> R {
        HELD.with(|h| f(&h.borrow()))
    }

    #[test]
    fn a_reused_buffer_comes_back_zeroed_and_small_ones_are_not_held() {
        let n = MIN_BYTES / 4 + 3;
        let mut dirty = zeroed(n).unwrap();
        dirty.fill(7.0);
        let address = dirty.as_ptr();
        recycle(dirty);
        let again = zeroed(n - 1).unwrap();
        assert_eq!(again.as_ptr(), address, "the held buffer is reused");
        assert_eq!(again.len(), n - 1);
        assert!(again.iter().all(|&x| x == 0.0));
        // a buffer more than twice the request is not handed out for it
        recycle(again);
        let small = zeroed(n / 4).unwrap();
        assert_ne!(small.as_ptr(), address);
        recycle(vec![1.0; 8]);
        held(|h| assert!(h.buffers.iter().all(|v| bytes(v) >= MIN_BYTES)));
    }

    #[test]
    fn an_overwritable_buffer_has_the_requested_length_and_reuses_storage() {
        let n = MIN_BYTES / 4 + 5;
        let v = overwritable(n).unwrap();
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0.0), "a new buffer is zeroed");
        let address = v.as_ptr();
        recycle(v);
        let shorter = overwritable(n - 3).unwrap();
        assert_eq!((shorter.as_ptr(), shorter.len()), (address, n - 3));
        recycle(shorter);
        let longer = overwritable(n).unwrap();
        assert_eq!((longer.as_ptr(), longer.len()), (address, n));
    }

    #[test]
    fn the_pool_is_bounded_and_keeps_the_latest_sizes() {
        for _ in 0..2 * MAX_HELD {
            recycle(vec![0.0f32; MIN_BYTES / 4]);
        }
        held(|h| {
            assert_eq!(h.buffers.len(), MAX_HELD);
            assert_eq!(h.bytes, h.buffers.iter().map(bytes).sum::<usize>());
        });
        // a full pool of small buffers still takes a larger one, evicting the oldest
        let big = vec![0.0f32; 4 * MIN_BYTES];
        let address = big.as_ptr();
        recycle(big);
        held(|h| {
            assert!(h.buffers.len() <= MAX_HELD);
            assert!(h.bytes <= MAX_BYTES);
        });
        let again = zeroed(4 * MIN_BYTES).unwrap();
        assert_eq!(again.as_ptr(), address);
        // more than the byte bound is never held
        recycle(vec![0.0f32; MAX_BYTES / 4 + 1]);
        held(|h| assert!(h.bytes <= MAX_BYTES));
    }
}

//! Reuse of large Float32 buffers on the thread that freed them.
//!
//! A training step allocates the same large activations and gradients every iteration. Fresh
//! multi-megabyte allocations come from the kernel (glibc maps them, or trims them from the
//! heap top once freed), so every step would fault in and zero its pages again, which costs
//! more than the arithmetic of an elementwise op. Dropped CPU buffers of at least
//! [`MIN_BYTES`] are kept here instead, bounded in count and bytes, and handed out zeroed.

use std::cell::RefCell;

/// Buffers smaller than this go back to the allocator (its own caches serve them well).
const MIN_BYTES: usize = 1 << 20;
/// At most this many buffers are held per thread.
const MAX_HELD: usize = 16;
/// At most this many bytes are held per thread.
const MAX_BYTES: usize = 256 << 20;

thread_local! {
    static HELD: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

fn bytes(v: &Vec<f32>) -> usize {
    v.capacity() * std::mem::size_of::<f32>()
}

/// `n` zeros, in a held buffer of capacity `n..=2n` when there is one.
pub(crate) fn zeroed(n: usize) -> crate::error::Result<Vec<f32>> {
    if n * std::mem::size_of::<f32>() >= MIN_BYTES {
        let held = HELD
            .try_with(|h| {
                let mut h = h.borrow_mut();
                let i = h
                    .iter()
                    .position(|v| v.capacity() >= n && v.capacity() / 2 <= n)?;
                Some(h.swap_remove(i))
            })
            .ok()
            .flatten();
        if let Some(mut v) = held {
            v.clear();
            v.resize(n, 0.0);
            return Ok(v);
        }
    }
    crate::scalar::filled(n, 0.0f32)
}

/// Keeps `v` for reuse when it is large and there is room; otherwise frees it.
pub(crate) fn recycle(v: Vec<f32>) {
    if bytes(&v) < MIN_BYTES {
        return;
    }
    let _ = HELD.try_with(|h| {
        let mut h = h.borrow_mut();
        let total: usize = h.iter().map(bytes).sum();
        if h.len() < MAX_HELD && total + bytes(&v) <= MAX_BYTES {
            h.push(v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
        HELD.with(|h| assert!(h.borrow().iter().all(|v| bytes(v) >= MIN_BYTES)));
    }

    #[test]
    fn the_pool_is_bounded() {
        for _ in 0..2 * MAX_HELD {
            recycle(vec![0.0f32; MIN_BYTES / 4]);
        }
        HELD.with(|h| {
            let h = h.borrow();
            assert!(h.len() <= MAX_HELD);
            assert!(h.iter().map(bytes).sum::<usize>() <= MAX_BYTES);
        });
    }
}

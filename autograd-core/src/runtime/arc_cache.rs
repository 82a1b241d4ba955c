//! Per-thread caches of freed `Arc` allocations, by size and alignment.
//!
//! Every recorded op allocates two small objects, its result's block and its node, and a
//! traversal frees them all again when it releases the graph. A training step thus frees tens
//! of thousands of same-sized objects at once and allocates as many in its next forward pass:
//! more than the system allocator's per-thread cache holds, so each allocation and each free
//! takes its slow path. Freed allocations of values of at most [`MAX_SIZE`] bytes are kept
//! here, up to [`MAX_BYTES`] per thread, and reused by the next `Arc` of the same size and
//! alignment, whatever its type (`Arc::from_raw` allows exactly that). Memory past the bound
//! goes back to the allocator at once; what is cached goes back when the thread's
//! thread-local destructors run (at its exit).

use std::cell::RefCell;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr;
use std::sync::Arc;

/// Larger values are allocated and freed as usual.
const MAX_SIZE: usize = 256;
/// At most this many bytes of `Arc` allocations (values and their two counts) are cached per
/// thread; the allocator's own bookkeeping per allocation comes on top.
const MAX_BYTES: usize = 16 << 20;
/// The two counts in front of an `Arc`'s value (8- or 16-aligned values follow them at once).
const COUNTS: usize = 16;
/// Size classes per alignment: sizes 8, 16, .., `MAX_SIZE` (a size is a multiple of its
/// alignment, so the 16-aligned classes use every other slot).
const CLASSES: usize = MAX_SIZE / 8;

/// A size class: values of `8 * (index + 1)` bytes, aligned to 8 or to 16.
#[derive(Clone, Copy)]
struct Class {
    align16: bool,
    index: usize,
}

impl Class {
    /// The class of values of `size` bytes aligned to `align`, if they are cached.
    const fn of(size: usize, align: usize) -> Option<Class> {
        if size == 0 || size > MAX_SIZE || (align != 8 && align != 16) {
            return None;
        }
        Some(Class {
            align16: align == 16,
            index: size / 8 - 1,
        })
    }

    /// The bytes of one cached allocation: its value and counts.
    fn bytes(self) -> usize {
        8 * (self.index + 1) + COUNTS
    }

    /// The function that frees a cached allocation of this class.
    fn free(self) -> Free {
        if self.align16 {
            FREE16[self.index]
        } else {
            FREE8[self.index]
        }
    }
}

/// Stand-ins of a class's size and alignment, to free a cached allocation at thread exit.
#[repr(C, align(8))]
struct Dead8<const N: usize>(MaybeUninit<[u8; N]>);
#[repr(C, align(16))]
struct Dead16<const N: usize>(MaybeUninit<[u8; N]>);

/// Frees a cached allocation of class `N` bytes aligned to 8.
///
/// # Safety
/// `p` must be a cached allocation of that class.
unsafe fn free8<const N: usize>(p: *mut u8) {
    // SAFETY: `Arc::from_raw` accepts any type of the original value's size and alignment.
    drop(unsafe { Arc::from_raw(p.cast::<Dead8<N>>()) });
}

/// [`free8`] for the 16-aligned classes.
///
/// # Safety
/// As for [`free8`].
unsafe fn free16<const N: usize>(p: *mut u8) {
    // SAFETY: as in `free8`.
    drop(unsafe { Arc::from_raw(p.cast::<Dead16<N>>()) });
}

type Free = unsafe fn(*mut u8);

macro_rules! frees {
    ($f:ident, $round:expr; $($k:literal)*) => {
        [$($f::<{ (8 * $k + $round) / ($round + 1) * ($round + 1) }>),*]
    };
}

/// Each class's free function, by index: exact sizes for 8-aligned classes; 16-aligned
/// classes exist only at odd indices (sizes that are multiples of 16), and the even entries,
/// which no class reaches, are fillers.
const FREE8: [Free; CLASSES] = frees!(free8, 7; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18
    19 20 21 22 23 24 25 26 27 28 29 30 31 32);
const FREE16: [Free; CLASSES] = frees!(free16, 15; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17
    18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);

/// Per alignment (8, 16) and size class, a list of uniquely owned `Arc` allocations whose
/// values are dropped, linked through their first word (every class holds at least one).
struct Cache {
    heads: [[*mut u8; CLASSES]; 2],
    bytes: usize,
}

impl Cache {
    const EMPTY: Cache = Cache {
        heads: [[ptr::null_mut(); CLASSES]; 2],
        bytes: 0,
    };

    fn push(&mut self, class: Class, p: *mut u8) {
        let head = &mut self.heads[usize::from(class.align16)][class.index];
        // SAFETY: `p` is a cached allocation: its value's bytes are dead and ours, and at least
        // a word (aligned for one too, though the access does not rely on it).
        unsafe { p.cast::<*mut u8>().write_unaligned(*head) };
        *head = p;
        self.bytes += class.bytes();
    }

    fn pop(&mut self, class: Class) -> Option<*mut u8> {
        let head = &mut self.heads[usize::from(class.align16)][class.index];
        let p = std::mem::replace(head, ptr::null_mut());
        if p.is_null() {
            return None;
        }
        // SAFETY: as in `push`, which wrote the link.
        *head = unsafe { p.cast::<*mut u8>().read_unaligned() };
        self.bytes -= class.bytes();
        Some(p)
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        for align16 in [false, true] {
            for index in 0..CLASSES {
                let class = Class { align16, index };
                while let Some(p) = self.pop(class) {
                    // SAFETY: every allocation in a list is a cached allocation of its class.
                    unsafe { class.free()(p) };
                }
            }
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Cache::EMPTY) };
}
// a loom model's threads share one OS thread, and each needs its own cache
#[cfg(loom)]
loom::thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::EMPTY);
}

/// `Arc::new(value)`, in a cached allocation of `T`'s size and alignment when there is one.
pub(crate) fn new_arc<T>(value: T) -> Arc<T> {
    let class = const { Class::of(size_of::<T>(), align_of::<T>()) };
    let Some(class) = class else {
        return Arc::new(value);
    };
    let cached = CACHE
        .try_with(|c| c.try_borrow_mut().ok()?.pop(class))
        .ok()
        .flatten();
    match cached {
        Some(p) => {
            // SAFETY: `p` is the data pointer of a uniquely owned `Arc` allocation for a value
            // of `T`'s size and alignment (its class), whose value was dropped: writing a new
            // one and taking the `Arc` back (strong count 1, no weak) is what `Arc::from_raw`
            // allows for a type of the same size and alignment.
            unsafe {
                let p = p.cast::<T>();
                p.write(value);
                Arc::from_raw(p)
            }
        }
        None => Arc::new(value),
    }
}

/// Drops `arc`; when it was the only reference (no other `Arc`, no `Weak`) and its value is
/// of a cached size, the allocation is kept for [`new_arc`] instead of freed.
pub(crate) fn recycle<T: ?Sized>(arc: Arc<T>) {
    let class = Class::of(size_of_val(&*arc), align_of_val(&*arc));
    // a full cache (a million-node graph's release) costs one look, not the uniqueness check
    let Some(class) = class.filter(|c| has_room(c.bytes())) else {
        return drop(arc);
    };
    let mut arc = ManuallyDrop::new(arc);
    let Some(value) = Arc::get_mut(&mut arc) else {
        return drop(ManuallyDrop::into_inner(arc));
    };
    let value: *mut T = value;
    // SAFETY: this is the only reference to the value, dropped once here; if its drop panics
    // the allocation leaks (`arc` is not dropped again).
    unsafe { ptr::drop_in_place(value) };
    let p = Arc::into_raw(ManuallyDrop::into_inner(arc))
        .cast::<u8>()
        .cast_mut();
    let kept = CACHE
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            if c.bytes + class.bytes() > MAX_BYTES {
                return false;
            }
            c.push(class, p);
            true
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: `p` is a uniquely owned allocation of its class with its value dropped.
        unsafe { class.free()(p) };
    }
}

/// Whether this thread's cache may take `bytes` more (checked again when it takes them).
fn has_room(bytes: usize) -> bool {
    CACHE
        .try_with(|c| c.try_borrow().is_ok_and(|c| c.bytes + bytes <= MAX_BYTES))
        .unwrap_or(false)
}

/// Frees every allocation this thread's cache holds (tests start from an empty cache).
#[cfg(test)]
pub(crate) fn clear() {
    CACHE.with(|c| drop(std::mem::replace(&mut *c.borrow_mut(), Cache::EMPTY)));
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::{clear, new_arc, recycle, Class, FREE16, FREE8, MAX_BYTES};

    /// Counts its drops; 32 bytes.
    struct Counted<'a> {
        drops: &'a AtomicUsize,
        _pad: [u64; 3],
    }

    fn counted(drops: &AtomicUsize) -> Counted<'_> {
        Counted {
            drops,
            _pad: [0; 3],
        }
    }

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn cached_bytes() -> usize {
        super::CACHE.with(|c| c.borrow().bytes)
    }

    #[test]
    fn a_recycled_allocation_serves_the_next_arc_of_its_size() {
        clear();
        let drops = AtomicUsize::new(0);
        let a = new_arc(counted(&drops));
        let at = Arc::as_ptr(&a).cast::<u8>();
        recycle(a);
        assert_eq!(
            drops.load(Ordering::Relaxed),
            1,
            "recycling drops the value once"
        );
        // another class (24 bytes) does not take it
        let small = new_arc([1u64; 3]);
        assert_ne!(Arc::as_ptr(&small).cast::<u8>(), at);
        // a value of another type with the same size and alignment does
        let b = new_arc([4u64, 5, 6, 7]);
        assert_eq!(Arc::as_ptr(&b).cast::<u8>(), at);
        assert_eq!(*b, [4, 5, 6, 7]);
        assert_eq!((Arc::strong_count(&b), Arc::weak_count(&b)), (1, 0));
        drop((b, small));
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_shared_or_watched_arc_is_dropped_as_usual() {
        clear();
        let drops = AtomicUsize::new(0);
        let a = new_arc(counted(&drops));
        let other = a.clone();
        recycle(a);
        assert_eq!(
            drops.load(Ordering::Relaxed),
            0,
            "another Arc still holds it"
        );
        let weak = Arc::downgrade(&other);
        recycle(other);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert!(weak.upgrade().is_none());
        assert_eq!(cached_bytes(), 0, "a weak reference keeps the allocation");
    }

    #[test]
    fn unsized_values_recycle_through_their_vtable() {
        clear();
        let drops = AtomicUsize::new(0);
        let a: Arc<dyn Send + Sync> = Arc::new([9u64; 5]);
        let at = Arc::as_ptr(&a).cast::<u8>();
        recycle(a);
        let b = new_arc([1u64; 5]);
        assert_eq!(Arc::as_ptr(&b).cast::<u8>(), at);
        assert_eq!(*b, [1; 5]);
        let c: Arc<Counted<'_>> = Arc::new(counted(&drops));
        let c: Arc<dyn Sync + '_> = c;
        recycle(c);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_value_whose_drop_panics_is_dropped_once_and_leaks() {
        struct Bomb<'a> {
            _counted: Counted<'a>,
        }
        impl Drop for Bomb<'_> {
            fn drop(&mut self) {
                panic!("drop panics");
            }
        }
        clear();
        let drops = AtomicUsize::new(0);
        let a = Arc::new(Bomb {
            _counted: counted(&drops),
        });
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| recycle(a)));
        assert!(unwound.is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(cached_bytes(), 0, "the allocation leaked, it is not reused");
    }

    #[test]
    fn the_cache_keeps_at_most_its_bound() {
        clear();
        let values: Vec<Arc<[u64; 32]>> = (0..(MAX_BYTES / 272 + 100))
            .map(|i| Arc::new([i as u64; 32]))
            .collect();
        for v in values {
            recycle(v);
        }
        let cached = cached_bytes();
        assert!(cached <= MAX_BYTES, "{cached} bytes cached");
        assert!(cached >= MAX_BYTES - 272, "{cached} bytes cached");
        clear();
        assert_eq!(cached_bytes(), 0);
    }

    /// A training step's pattern: the nodes and result blocks a backward released (or a
    /// dropped graph emptied) are where the next forward's go, and nothing of the old graph
    /// shows through. The intermediates are dropped before the backward, so that it is the
    /// release that frees their nodes into the cache, whatever the system allocator does with
    /// a chunk freed to it (glibc hands it back at once, valgrind's does not).
    #[test]
    fn a_released_graph_feeds_the_next_forward() -> crate::Result<()> {
        use crate::ops::{mul_scalar, sum};
        use crate::{shape, Tensor};
        fn node_at(t: &Tensor) -> usize {
            t.autograd_ctx()
                .map_or(0, |n| Arc::as_ptr(&n).cast::<u8>() as usize)
        }
        fn block_at(t: &Tensor) -> crate::Result<usize> {
            Ok(Arc::as_ptr(t.carrier()?).cast::<u8>() as usize)
        }
        clear();
        let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])?;
        let y = mul_scalar(&x, 2.0)?;
        let z = mul_scalar(&y, 3.0)?;
        let nodes = [node_at(&y), node_at(&z)];
        let blocks = [block_at(&y)?, block_at(&z)?];
        let loss = sum(&z)?;
        drop((y, z));
        loss.backward()?;
        drop(loss);
        let cached = cached_bytes();
        assert!(cached > 0);
        let w = mul_scalar(&x, 4.0)?;
        let v = mul_scalar(&w, 0.5)?;
        assert!(
            cached_bytes() < cached,
            "the new nodes and blocks came from the cache"
        );
        assert!(nodes.contains(&node_at(&w)) && nodes.contains(&node_at(&v)));
        assert!(blocks.contains(&block_at(&w)?) && blocks.contains(&block_at(&v)?));
        assert_eq!(w.values::<f32>()?, [4.0, 8.0]);
        assert_eq!(v.values::<f32>()?, [2.0, 4.0]);
        assert!(w.grad()?.is_none() && w.autograd_ctx().is_some());
        sum(&v)?.backward()?;
        assert_eq!(
            x.grad()?.map(|g| g.values::<f32>()).transpose()?,
            Some(vec![8.0, 8.0])
        );
        Ok(())
    }

    /// A graph built on one thread and released on another: the releasing thread's cache
    /// takes its allocations and serves that thread's next graph, and the gradients stay right.
    #[test]
    fn a_graph_released_on_another_thread_feeds_that_thread() -> crate::Result<()> {
        use crate::ops::{mul_scalar, sum};
        use crate::{shape, Tensor};
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3])?;
        let rounds = 8;
        for _ in 0..rounds {
            let mut y = x.clone();
            for _ in 0..50 {
                y = mul_scalar(&y, 1.25)?;
            }
            let loss = sum(&y)?;
            let worker = std::thread::spawn(move || -> crate::Result<(usize, usize)> {
                loss.backward()?;
                drop((loss, y));
                let cached = cached_bytes();
                let one = Tensor::from_vec(vec![2.0f32], shape![1])?;
                let z = mul_scalar(&mul_scalar(&one, 3.0)?, 0.5)?;
                assert_eq!(z.values::<f32>()?, [3.0]);
                Ok((cached, cached_bytes()))
            });
            let (released, after) = worker.join().expect("the worker does not panic")?;
            assert!(released > 0, "the worker's release filled its cache");
            assert!(after < released, "the worker's next graph came from it");
        }
        let expected = rounds as f32 * 1.25f32.powi(50);
        let g = x.grad()?.map(|g| g.values::<f32>()).transpose()?;
        assert!(g.is_some_and(|g| g.iter().all(|v| (v - expected).abs() <= 1e-4 * expected)));
        Ok(())
    }

    #[test]
    fn classes_cover_the_sizes_of_their_alignment() {
        assert!(Class::of(0, 8).is_none());
        assert!(Class::of(264, 8).is_none());
        assert!(Class::of(16, 4).is_none());
        assert_eq!(Class::of(8, 8).map(Class::bytes), Some(8 + 16));
        assert_eq!(
            Class::of(256, 16).map(|c| (c.align16, c.index, c.bytes())),
            Some((true, 31, 256 + 16))
        );
        assert_eq!((FREE8.len(), FREE16.len()), (32, 32));
        // a thread exits with allocations cached: its cache frees them through the stand-ins
        // (nothing to observe but that this runs through without a fault)
        std::thread::spawn(|| {
            for i in 0..1000u64 {
                recycle(Arc::new([i; 2]));
            }
            recycle(Arc::new(std::sync::atomic::AtomicU64::new(0)));
        })
        .join()
        .unwrap();
    }
}

//! The tensor handle: a reference-counted pointer to a tensor's header. The header lives in an
//! allocation of its own, or, for a small Float32 result, inside the allocation of its own CPU
//! carrier, so that a result costs one allocation instead of two.
//!
//! A carrier block outlives its header: the header's tensor holds the block's carrier handle
//! (its `Parts::One`), and the block never drops the header itself. Views and detached tensors
//! hold the carrier handle alone, so they keep the storage (and the dead header's bytes) alive
//! but not the tensor's gradient or graph.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::layout::layout_cache::KeptLayout;
use crate::storage::carrier::{
    inline_f32, Carrier, CarrierId, CpuCarrier, InlineSink, Store, Token,
};
use crate::storage::dtype::DType;
use crate::storage::scalar::{Buffer, Scalar};
use crate::tensor::{AutogradState, Parts, TensorInner};

/// Set in a header's count when the header lives inside a carrier block.
const HOMED: usize = 1 << (usize::BITS - 1);
/// More handles than this is a leak of `mem::forget`ed clones; abort, as `Arc` does, with half
/// the range below [`HOMED`] to spare for clones racing with the abort.
const MAX_HANDLES: usize = HOMED >> 1;

pub(crate) struct Header {
    /// Live handles, with [`HOMED`] set for a header inside a carrier block.
    handles: AtomicUsize,
    inner: TensorInner,
}

/// One handle to a tensor header; clones share it, the last one drops the tensor.
pub(crate) struct Handle(NonNull<Header>);

// SAFETY: a handle gives shared access to a `TensorInner`, which is `Send + Sync` (checked
// below); the count is atomic, and the last handle drops the header once, as `Arc` does.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

impl Handle {
    /// A handle to `inner` in an allocation of its own.
    pub(crate) fn new(inner: TensorInner) -> Handle {
        let header = Box::new(Header {
            handles: AtomicUsize::new(1),
            inner,
        });
        Handle(NonNull::from(Box::leak(header)))
    }

    /// Whether this is the only handle to the tensor.
    pub(crate) fn is_unique(&self) -> bool {
        self.header().handles.load(Ordering::Acquire) & !HOMED == 1
    }

    /// The tensor's autograd state, mutably, when this is its only handle. Only that: the
    /// rest of a header in a block (its carrier handle) must not be replaced.
    pub(crate) fn autograd_mut(&mut self) -> Option<&mut AutogradState> {
        // SAFETY: no other handle exists, and `&mut self` keeps this one from being cloned.
        self.is_unique().then(|| {
            let inner = unsafe { &mut (*self.0.as_ptr()).inner };
            inner.autograd.get_mut()
        })
    }

    /// Whether two handles are of the same tensor.
    pub(crate) fn ptr_eq(a: &Handle, b: &Handle) -> bool {
        a.0 == b.0
    }

    fn header(&self) -> &Header {
        // SAFETY: the header stays alive while a handle to it does.
        unsafe { self.0.as_ref() }
    }
}

impl Deref for Handle {
    type Target = TensorInner;
    fn deref(&self) -> &TensorInner {
        &self.header().inner
    }
}

impl Clone for Handle {
    fn clone(&self) -> Handle {
        let before = self.header().handles.fetch_add(1, Ordering::Relaxed);
        if before & !HOMED >= MAX_HANDLES {
            std::process::abort();
        }
        Handle(self.0)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // The last handle needs no locked decrement: no other handle exists to clone or drop
        // concurrently, and the acquire load orders every other handle's (releasing) drop
        // before the header goes. Most drops are of the last handle (a result, a cotangent).
        let handles = &self.header().handles;
        let before = match handles.load(Ordering::Acquire) {
            last if last & !HOMED == 1 => last,
            _ => {
                let before = handles.fetch_sub(1, Ordering::Release);
                if before & !HOMED != 1 {
                    return;
                }
                // Every other handle's use of the header happens before it is dropped.
                fence(Ordering::Acquire);
                before
            }
        };
        let header = self.0.as_ptr();
        if before & HOMED == 0 {
            // SAFETY: the header came from `Box::leak` in `Handle::new`, and this was its last
            // handle.
            drop(unsafe { Box::from_raw(header) });
            return;
        }
        // SAFETY: this was the header's last handle, so nothing else reads it. The carrier
        // handle that keeps the block (and so the header) alive is moved out first and dropped
        // last, after the rest of the tensor, because it may free the block.
        unsafe {
            let inner = &mut (*header).inner;
            let home = std::mem::replace(&mut inner.parts, Parts::Many(Box::new([])));
            std::ptr::drop_in_place(inner);
            if let Parts::One { carrier, .. } = home {
                crate::runtime::arc_cache::recycle(carrier);
            }
        }
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<TensorInner>();
    // what the header's lock lends to several threads at once must itself be `Sync`
    assert_send_sync::<AutogradState>();
    assert_send_sync::<CpuCarrier<crate::storage::carrier::Inline<1>>>();
};

/// A small CPU carrier with room for the header of the tensor it was made for.
struct Block<S: Store> {
    header: UnsafeCell<MaybeUninit<Header>>,
    carrier: CpuCarrier<S>,
}

// SAFETY: the header cell is written once, before any handle or carrier handle to the block
// is shared, and afterwards only read through `Handle`s (a `TensorInner` is `Sync`).
unsafe impl<S: Store> Sync for Block<S> {}

impl<S: Store> fmt::Debug for Block<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.carrier.fmt(f)
    }
}

/// The block never drops its header: the header's tensor holds the block, so by the time the
/// block goes, the last handle has dropped the header already (or none was ever written).
impl<S: Store> Carrier for Block<S> {
    fn id(&self) -> CarrierId {
        self.carrier.id()
    }
    fn version(&self) -> u64 {
        self.carrier.version()
    }
    fn len(&self) -> usize {
        self.carrier.len()
    }
    fn dtype(&self) -> DType {
        self.carrier.dtype()
    }
    fn class_name(&self) -> &'static str {
        self.carrier.class_name()
    }
    fn read(&self, offset: usize) -> Result<Scalar> {
        self.carrier.read(offset)
    }
    fn to_buffer(&self) -> Buffer {
        self.carrier.to_buffer()
    }
    fn write(&self, writes: &[(usize, Scalar)]) -> Result<()> {
        self.carrier.write(writes)
    }
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>> {
        self.carrier.fresh(data)
    }
    fn fresh_f32(&self, values: &[f32]) -> Result<Arc<dyn Carrier>> {
        self.carrier.fresh_f32(values)
    }
    /// The carrier itself: a block downcasts as the CPU carrier it holds.
    fn as_any(&self) -> &dyn std::any::Any {
        self.carrier.as_any()
    }
    fn __as_cpu(&self, _: Token) -> Option<&CpuCarrier<dyn Store>> {
        Some(&self.carrier)
    }
}

/// A handle to a new Float32 tensor of `layout` over `carrier`, its header and carrier in one
/// allocation.
fn homed<S: Store>(carrier: CpuCarrier<S>, layout: KeptLayout) -> Handle {
    let block = crate::runtime::arc_cache::new_arc(Block {
        header: UnsafeCell::new(MaybeUninit::uninit()),
        carrier,
    });
    let header = block.header.get();
    let parts = Parts::One {
        carrier: block,
        offset: 0,
    };
    let inner = TensorInner::new(DType::Float32, layout, parts);
    // SAFETY: nothing else can reach the block yet but `inner`, which holds it; the cell is
    // written once here, and `handles` marks it as living in the block.
    unsafe {
        (*header).write(Header {
            handles: AtomicUsize::new(1 | HOMED),
            inner,
        });
        Handle(NonNull::new_unchecked(header.cast::<Header>()))
    }
}

/// A new Float32 tensor of `layout` holding `values`, its header and carrier in one
/// allocation; `layout` back when the values do not fit a carrier's inline array.
pub(crate) fn small_f32(values: &[f32], layout: KeptLayout) -> Result<Handle, KeptLayout> {
    struct Homed(KeptLayout);
    impl InlineSink for Homed {
        type Out = Handle;
        fn take<S: Store>(self, carrier: CpuCarrier<S>) -> Handle {
            homed(carrier, self.0)
        }
    }
    inline_f32(values, Homed(layout)).map_err(|Homed(layout)| layout)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::ops::mul_scalar;
    use crate::{shape, Tensor};

    /// A small result's storage outlives its header for whoever holds the carrier (a detached
    /// copy, a view), and the header still drops the result's graph and gradient on time.
    #[test]
    fn a_small_result_lends_its_storage_but_not_its_graph() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
        let y = mul_scalar(&x, 2.0).unwrap();
        assert!(y.carrier().unwrap().as_cpu().is_some());
        let node = Arc::downgrade(&y.autograd_ctx().unwrap());
        let detached = y.detach();
        let carrier = y.carrier().unwrap().clone();
        drop(y);
        assert!(node.upgrade().is_none(), "the graph went with the result");
        assert_eq!(detached.values::<f32>().unwrap(), [2.0, 4.0, 6.0]);
        drop(detached);
        assert_eq!(carrier.len(), 3);
        assert_eq!(carrier.to_buffer().len(), 3);
        assert_eq!(Arc::strong_count(&carrier), 1);
    }

    #[test]
    fn handles_count_their_clones() {
        let x = Tensor::from_vec(vec![1.0f32], shape![1]).unwrap();
        let mut y = mul_scalar(&x, 3.0).unwrap();
        assert!(y.0.is_unique() && y.0.autograd_mut().is_some());
        let z = y.clone();
        assert!(!y.0.is_unique() && y.0.autograd_mut().is_none());
        assert!(super::Handle::ptr_eq(&y.0, &z.0));
        assert!(!super::Handle::ptr_eq(&y.0, &x.0));
        drop(z);
        assert!(y.0.is_unique());
        assert_eq!(y.values::<f32>().unwrap(), [3.0]);
    }

    /// W3 keeps a million one-element result blocks alive: with `Arc`'s two counts and
    /// glibc's 8-byte chunk header, 104 bytes make a 128-byte chunk, the largest glibc keeps
    /// in its fast bins; growing it is a memory regression.
    #[test]
    fn a_one_element_result_block_fits_a_128_byte_chunk() {
        assert!(std::mem::size_of::<super::Block<crate::storage::carrier::Inline<1>>>() <= 104);
    }

    /// Clones dropped on several threads at once: exactly one drop frees the header, whichever
    /// thread's it is (the last handle frees it without a locked decrement).
    #[test]
    fn clones_dropped_on_many_threads_free_the_tensor_once() {
        let x = Tensor::from_vec(vec![1.0f32], shape![1]).unwrap();
        for round in 0..200 {
            let y = mul_scalar(&x, round as f32).unwrap();
            let node = Arc::downgrade(&y.autograd_ctx().unwrap());
            let clones: Vec<Tensor> = (0..4).map(|_| y.clone()).collect();
            drop(y);
            let threads: Vec<_> = clones
                .into_iter()
                .map(|t| std::thread::spawn(move || t.values::<f32>().unwrap()[0]))
                .collect();
            for t in threads {
                assert_eq!(t.join().unwrap(), round as f32);
            }
            assert!(node.upgrade().is_none(), "the last drop freed the result");
        }
    }

    /// Results of 1 to 17 elements: inline arrays of every size, then a buffer of its own.
    #[test]
    fn results_of_every_small_size_read_back() {
        for n in 1..=crate::SMALL_F32 + 1 {
            let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let x = Tensor::from_vec(values.clone(), shape![n]).unwrap();
            let y = mul_scalar(&x, 2.0).unwrap();
            let doubled: Vec<f32> = values.iter().map(|v| v * 2.0).collect();
            assert_eq!(y.values::<f32>().unwrap(), doubled);
            let y2 = mul_scalar(&y, 0.5).unwrap();
            drop(y);
            assert_eq!(y2.values::<f32>().unwrap(), values);
        }
    }
}

//! Storage behind tensors: the public `Carrier` trait and the CPU carrier.
//!
//! A carrier has an identity, a version that every successful public mutation bumps once, and
//! can make fresh storage of its own exact implementation class (so gradients of a tensor live
//! where the tensor lives). Kernels reach CPU elements as typed slices through [`CpuCarrier`].

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::runtime::element_lock::ElementLock;
use crate::runtime::ids::id_source;
use crate::storage::dtype::DType;
use crate::storage::scalar::{Buffer, Element, Scalar};

/// The identity of one carrier, unique for the life of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CarrierId(u64);

impl CarrierId {
    /// A new identity, never handed out before.
    pub fn fresh() -> CarrierId {
        id_source!(CarrierIds);
        CarrierId(CarrierIds::next())
    }
}

impl fmt::Display for CarrierId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "carrier#{}", self.0)
    }
}

/// Storage of elements of one simple dtype.
///
/// Implementations bump their version exactly once for every successful call of a mutating
/// method and never for a failed one that changed nothing ([`Carrier::write`] is all or
/// nothing); an exclusive access that may have changed elements always bumps.
pub trait Carrier: Send + Sync + fmt::Debug + 'static {
    /// This carrier's identity.
    fn id(&self) -> CarrierId;
    /// The number of successful mutations so far.
    fn version(&self) -> u64;
    /// Number of elements held.
    fn len(&self) -> usize;
    /// Whether it holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The simple dtype of the elements.
    fn dtype(&self) -> DType;
    /// A short name of the implementation class, for messages.
    fn class_name(&self) -> &'static str;
    /// Element `offset`.
    fn read(&self, offset: usize) -> Result<Scalar>;
    /// A copy of every element.
    fn to_buffer(&self) -> Buffer;
    /// Writes every `(offset, value)` pair, all or nothing, with one version bump. Values must
    /// already have this carrier's dtype.
    fn write(&self, writes: &[(usize, Scalar)]) -> Result<()>;
    /// Fresh storage of this carrier's exact implementation class holding `data`.
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>>;
    /// Fresh storage of this carrier's class holding a copy of `values`; a class may keep
    /// small ones without allocating a buffer (the CPU carrier does).
    fn fresh_f32(&self, values: &[f32]) -> Result<Arc<dyn Carrier>> {
        self.fresh(Buffer::F32(values.to_vec()))
    }
    /// For downcasting to the implementation.
    fn as_any(&self) -> &dyn Any;
    /// The CPU carrier's typed slices, for kernels; only the crate's CPU carriers answer (the
    /// token's type cannot be named outside it). Call `as_cpu` on `dyn Carrier` instead.
    #[doc(hidden)]
    fn __as_cpu(&self, _: sealed::Token) -> Option<&CpuCarrier<dyn Store>> {
        None
    }
}

impl dyn Carrier {
    /// Whether two carriers are of the same implementation class.
    pub fn same_class(&self, other: &dyn Carrier) -> bool {
        self.class_id() == other.class_id()
    }

    /// The implementation class as a `TypeId`; every CPU carrier, whatever its store, is of
    /// the class `CpuCarrier`.
    pub fn class_id(&self) -> TypeId {
        match self.as_cpu() {
            Some(_) => TypeId::of::<CpuCarrier>(),
            None => self.as_any().type_id(),
        }
    }

    /// This carrier as a CPU carrier, if it is one. Test for the CPU class with this or
    /// `class_id`, not by downcasting `as_any` to `CpuCarrier`: small Float32 storage is a
    /// `CpuCarrier` of an inline array store.
    pub fn as_cpu(&self) -> Option<&CpuCarrier<dyn Store>> {
        self.__as_cpu(sealed::Token(()))
    }
}

/// Storage in main memory: one [`Buffer`] of a simple dtype (the default store, [`Heap`]), or,
/// for up to [`SMALL_F32`] Float32 elements, an [`Inline`] array sized to them.
///
/// Kernels see every CPU carrier as `CpuCarrier<dyn Store>` (`as_cpu` on `dyn Carrier`), so
/// one class serves every size, and a one-element result costs a 48-byte allocation, not one
/// sized for sixteen elements.
///
/// A reader-writer lock guards the elements: readers (every kernel) share it, a mutation takes
/// it exclusively. A lock because tensors are `Send + Sync` and a user may mutate a tensor on
/// one thread while another reads it. The lock's word also holds an inline array's length, so
/// a one-element carrier's lock, length and element take eight bytes.
pub struct CpuCarrier<S: ?Sized + Store = Heap> {
    id: CarrierId,
    version: AtomicU64,
    lock: ElementLock,
    store: S,
}

/// A carrier's length and element dtype in one word: the dtype in the top three bits (no
/// allocation can hold 2^61 elements), so the carrier stays within its allocation size class.
#[derive(Clone, Copy)]
struct Extent(usize);

impl Extent {
    const DTYPE_SHIFT: u32 = usize::BITS - 3;

    fn new(len: usize, dtype: Simple) -> Extent {
        debug_assert!(
            len >> Extent::DTYPE_SHIFT == 0,
            "no buffer holds 2^61 elements"
        );
        Extent(len | ((dtype as usize) << Extent::DTYPE_SHIFT))
    }

    fn len(self) -> usize {
        self.0 & ((1 << Extent::DTYPE_SHIFT) - 1)
    }

    fn dtype(self) -> DType {
        match self.0 >> Extent::DTYPE_SHIFT {
            0 => DType::Float32,
            1 => DType::Float64,
            2 => DType::Int32,
            3 => DType::Int64,
            _ => DType::Bool,
        }
    }
}

/// The element dtype of CPU storage, as [`Extent`] packs it.
#[derive(Debug, Clone, Copy)]
enum Simple {
    F32 = 0,
    F64 = 1,
    I32 = 2,
    I64 = 3,
    Bool = 4,
}

impl Simple {
    fn of(b: &Buffer) -> Simple {
        match b {
            Buffer::F32(_) => Simple::F32,
            Buffer::F64(_) => Simple::F64,
            Buffer::I32(_) => Simple::I32,
            Buffer::I64(_) => Simple::I64,
            Buffer::Bool(_) => Simple::Bool,
        }
    }
}

/// Float32 storage of at most this many elements (one cache line) lives inside the carrier.
/// Small tensors (losses, biases, per-step scalars) make up most of an overhead-bound graph,
/// and inline storage saves each of them an allocation and a pointer hop.
pub const SMALL_F32: usize = 16;

mod sealed {
    pub trait Sealed {}

    /// Only this crate can name it, so only this crate's carriers answer `__as_cpu`.
    #[derive(Debug, Clone, Copy)]
    pub struct Token(pub(crate) ());
}

pub(crate) use sealed::Token;

/// The element store of a [`CpuCarrier`]: a [`Heap`] buffer or an [`Inline`] array. Sealed: its
/// elements are reached only through the carrier, under the carrier's lock.
pub trait Store:
    sealed::Sealed + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe + 'static
{
    /// The store itself when it is a heap store; an inline store's length and dtype are the
    /// carrier lock's payload and Float32.
    #[doc(hidden)]
    fn heap(&self) -> Option<&Heap>;
}

/// A CPU carrier's store of one [`Buffer`]: its length and dtype readable without the lock (a
/// caller may ask while it holds the elements), the buffer behind it.
pub struct Heap {
    extent: Extent,
    buffer: UnsafeCell<Buffer>,
}

impl fmt::Debug for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Heap({} x {})", self.extent.len(), self.extent.dtype())
    }
}

// SAFETY: the buffer is reached only through its carrier's guards, which hold the carrier's
// lock: shared for `&Buffer`, exclusive for `&mut Buffer`, as an `RwLock<Buffer>` would.
unsafe impl Sync for Heap {}

impl sealed::Sealed for Heap {}

impl Store for Heap {
    fn heap(&self) -> Option<&Heap> {
        Some(self)
    }
}

/// A CPU carrier's store of up to `N` Float32 elements inside the carrier; the carrier's lock
/// word holds how many are in use. Transparent, so the carrier finds the elements without
/// asking the store (kernels see `dyn Store`, and small tensors are where a call shows).
#[repr(transparent)]
pub struct Inline<const N: usize>(UnsafeCell<[f32; N]>);

impl<const N: usize> fmt::Debug for Inline<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Inline<{N}>")
    }
}

// SAFETY: as for `Heap`, the array is reached only under its carrier's lock.
unsafe impl<const N: usize> Sync for Inline<N> {}

// The stores keep the auto traits the `RwLock` they replaced had: a panic while elements are
// held leaves plain numbers, nothing half-done.
impl std::panic::RefUnwindSafe for Heap {}
impl<const N: usize> std::panic::RefUnwindSafe for Inline<N> {}

const _: () = {
    const fn assert_auto_traits<
        T: ?Sized + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe,
    >() {
    }
    assert_auto_traits::<CpuCarrier>();
    assert_auto_traits::<CpuCarrier<Inline<1>>>();
    // what kernels and `as_cpu` callers hold
    assert_auto_traits::<CpuCarrier<dyn Store>>();
};

impl<const N: usize> sealed::Sealed for Inline<N> {}

impl<const N: usize> Store for Inline<N> {
    fn heap(&self) -> Option<&Heap> {
        None
    }
}

/// A shared hold on a CPU carrier's lock, lending its elements.
struct ReadHold<'a, S: ?Sized + Store>(&'a CpuCarrier<S>);

impl<S: ?Sized + Store> ReadHold<'_, S> {
    fn buffer(&self) -> Option<&Buffer> {
        if self.0.inline_len() != 0 {
            return None;
        }
        // SAFETY: the shared hold keeps writers out while the reference lives.
        self.0.store.heap().map(|h| unsafe { &*h.buffer.get() })
    }
    /// An inline store's elements in use; empty for a heap store.
    fn inline(&self) -> &[f32] {
        // SAFETY: as above; `inline_ptr` addresses `inline_len` elements of the array.
        unsafe { std::slice::from_raw_parts(self.0.inline_ptr(), self.0.inline_len()) }
    }

    /// The elements as a typed slice; `None` unless `T` is their dtype.
    fn slice<T: Element>(&self) -> Option<&[T]> {
        match self.buffer() {
            Some(b) => T::slice(b),
            None => T::from_f32_slice(self.inline()),
        }
    }

    fn get(&self, i: usize) -> Option<Scalar> {
        match self.buffer() {
            Some(b) => b.get(i),
            None => self.inline().get(i).map(|x| Scalar::F32(*x)),
        }
    }

    fn to_buffer(&self) -> Buffer {
        match self.buffer() {
            Some(b) => b.clone(),
            None => Buffer::F32(self.inline().to_vec()),
        }
    }
}

impl<S: ?Sized + Store> Drop for ReadHold<'_, S> {
    fn drop(&mut self) {
        self.0.lock.unlock_shared();
    }
}

/// The exclusive hold on a CPU carrier's lock, lending its elements mutably.
struct WriteHold<'a, S: ?Sized + Store>(&'a CpuCarrier<S>);

impl<S: ?Sized + Store> WriteHold<'_, S> {
    fn buffer_mut(&mut self) -> Option<&mut Buffer> {
        if self.0.inline_len() != 0 {
            return None;
        }
        // SAFETY: the exclusive hold keeps every other access out while the reference lives,
        // and `&mut self` lends one reference at a time.
        self.0.store.heap().map(|h| unsafe { &mut *h.buffer.get() })
    }
    /// An inline store's elements in use; empty for a heap store.
    fn inline_mut(&mut self) -> &mut [f32] {
        // SAFETY: as above; the elements lie inside the store's `UnsafeCell`.
        unsafe { std::slice::from_raw_parts_mut(self.0.inline_ptr(), self.0.inline_len()) }
    }

    /// The elements as a mutable typed slice; `None` unless `T` is their dtype.
    fn slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        if self.0.inline_len() == 0 {
            return self.buffer_mut().and_then(T::slice_mut);
        }
        T::from_f32_slice_mut(self.inline_mut())
    }
}

impl<S: ?Sized + Store> Drop for WriteHold<'_, S> {
    fn drop(&mut self) {
        self.0.lock.unlock_exclusive();
    }
}

/// What to make of small Float32 values once they sit in a CPU carrier's inline array.
pub(crate) trait InlineSink {
    type Out;
    fn take<S: Store>(self, carrier: CpuCarrier<S>) -> Self::Out;
}

/// `values` in a CPU carrier with the smallest inline array that holds them, handed to
/// `sink`; the sink back when none does (no values, or more than [`SMALL_F32`]).
pub(crate) fn inline_f32<K: InlineSink>(values: &[f32], sink: K) -> Result<K::Out, K> {
    fn make<const N: usize, K: InlineSink>(values: &[f32], sink: K) -> K::Out {
        let mut data = [0.0f32; N];
        data[..values.len()].copy_from_slice(values);
        const {
            assert!(
                N <= ElementLock::MAX_PAYLOAD as usize,
                "the lock word holds the length"
            );
        };
        let len = u32::try_from(values.len()).unwrap_or(u32::MAX);
        sink.take(CpuCarrier {
            id: CarrierId::fresh(),
            version: AtomicU64::new(0),
            lock: ElementLock::new(len),
            store: Inline(UnsafeCell::new(data)),
        })
    }
    // one allocation class each (48, 64, 80 and 112 bytes with the reference counts), so a
    // result is never more than one class larger than its elements need
    Ok(match values.len() {
        1 => make::<1, K>(values, sink),
        2..=4 => make::<4, K>(values, sink),
        5..=8 => make::<8, K>(values, sink),
        9..=SMALL_F32 => make::<SMALL_F32, K>(values, sink),
        _ => return Err(sink),
    })
}

/// Makes shared carriers of inline arrays.
struct Shared;

impl InlineSink for Shared {
    type Out = Arc<dyn Carrier>;
    fn take<S: Store>(self, carrier: CpuCarrier<S>) -> Arc<dyn Carrier> {
        Arc::new(carrier)
    }
}

impl<S: ?Sized + Store> CpuCarrier<S> {
    /// An inline store's element count (the lock's payload; never 0), 0 for a heap store.
    fn inline_len(&self) -> usize {
        self.lock.payload() as usize
    }

    /// The first element of an inline store: `Inline` is a transparent array.
    fn inline_ptr(&self) -> *mut f32 {
        std::ptr::from_ref(&self.store).cast::<f32>().cast_mut()
    }

    fn element_count(&self) -> usize {
        match self.inline_len() {
            0 => self.store.heap().map_or(0, |h| h.extent.len()),
            n => n,
        }
    }

    fn element_dtype(&self) -> DType {
        if self.inline_len() == 0 {
            self.store
                .heap()
                .map_or(DType::Float32, |h| h.extent.dtype())
        } else {
            DType::Float32
        }
    }

    /// This carrier's identity (as [`Carrier::id`], also for the `dyn Store` view).
    pub fn id(&self) -> CarrierId {
        self.id
    }
}

impl<S: ?Sized + Store> fmt::Debug for CpuCarrier<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CpuCarrier({}, v{}, {} x {})",
            self.id,
            self.version.load(Ordering::Acquire),
            self.element_count(),
            self.element_dtype()
        )
    }
}

impl CpuCarrier {
    /// A CPU carrier owning `data`, keeping its allocation (no copy).
    pub fn new(data: Buffer) -> CpuCarrier {
        let extent = Extent::new(data.len(), Simple::of(&data));
        CpuCarrier {
            id: CarrierId::fresh(),
            version: AtomicU64::new(0),
            lock: ElementLock::new(0),
            store: Heap {
                extent,
                buffer: UnsafeCell::new(data),
            },
        }
    }

    /// A CPU carrier owning `data`, shared.
    pub fn shared(data: Buffer) -> Arc<dyn Carrier> {
        Arc::new(CpuCarrier::new(data))
    }

    /// A shared CPU carrier owning the elements of `v`.
    pub fn from_vec<T: Element>(v: Vec<T>) -> Arc<dyn Carrier> {
        CpuCarrier::shared(T::into_buffer(v))
    }
}

impl<S: ?Sized + Store> CpuCarrier<S> {
    fn lock_read(&self) -> ReadHold<'_, S> {
        self.lock.lock_shared();
        ReadHold(self)
    }

    fn lock_write(&self) -> WriteHold<'_, S> {
        self.lock.lock_exclusive();
        WriteHold(self)
    }

    fn wrong_type(&self, wanted: impl fmt::Display) -> crate::Error {
        crate::Error::Type(format!(
            "{} holds {} elements, not {wanted}",
            self.id,
            self.element_dtype()
        ))
    }

    /// Runs `f` on the elements as a typed slice.
    pub fn with_slice<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        let data = self.lock_read();
        match data.slice::<T>() {
            Some(s) => Ok(f(s)),
            None => Err(self.wrong_type(T::DTYPE)),
        }
    }

    /// Runs `f` on the elements of `self` and `other` as typed slices, locking each carrier
    /// once (they may be the same carrier, as in `x * x`) and in a fixed order, so that no
    /// thread ever holds one carrier's lock while it waits to lock the same carrier again.
    pub fn with_slice_pair<T: Element, R>(
        &self,
        other: &CpuCarrier<dyn Store>,
        f: impl FnOnce(&[T], &[T]) -> R,
    ) -> Result<R> {
        let (a, b) = (
            std::ptr::from_ref(self).cast::<u8>(),
            std::ptr::from_ref(other).cast::<u8>(),
        );
        if a == b {
            return self.with_slice(|s| f(s, s));
        }
        if a < b {
            self.with_slice(|a| other.with_slice(|b| f(a, b)))?
        } else {
            other.with_slice(|b| self.with_slice(|a| f(a, b)))?
        }
    }

    /// Runs `f` on the elements as two typed slices under one read lock (for two tensors on
    /// this one carrier); fails unless both types are the element type.
    pub fn with_slices<T: Element, U: Element, R>(
        &self,
        f: impl FnOnce(&[T], &[U]) -> R,
    ) -> Result<R> {
        let data = self.lock_read();
        match (data.slice::<T>(), data.slice::<U>()) {
            (Some(x), Some(y)) => Ok(f(x, y)),
            _ => Err(self.wrong_type(format_args!("{} and {}", T::DTYPE, U::DTYPE))),
        }
    }

    /// Runs `f` on the whole buffer (any dtype); small inline storage is lent as a copy.
    pub fn with_buffer<R>(&self, f: impl FnOnce(&Buffer) -> R) -> R {
        let data = self.lock_read();
        match data.buffer() {
            Some(b) => f(b),
            None => f(&data.to_buffer()),
        }
    }

    /// Runs `f` on the elements as a mutable typed slice and bumps the version once, whatever
    /// `f` returns: a closure that wrote and then failed still changed the elements, and a
    /// graph that saved them must see it. Only a dtype mismatch (no access given) leaves the
    /// version alone.
    pub fn with_slice_mut<T: Element, R>(
        &self,
        f: impl FnOnce(&mut [T]) -> Result<R>,
    ) -> Result<R> {
        let mut data = self.lock_write();
        let Some(s) = data.slice_mut::<T>() else {
            return Err(self.wrong_type(T::DTYPE));
        };
        // Bumped while the lock is held, before `f` can unwind, so no reader ever sees new
        // elements under the old version.
        self.version.fetch_add(1, Ordering::AcqRel);
        f(s)
    }

    /// [`CpuCarrier::with_slice_mut`] for a carrier no other thread or handle can reach: no
    /// locked instruction, and the version bumped by a plain store (nothing can read it
    /// meanwhile). `None`, with nothing bumped, unless `T` is the elements' dtype.
    ///
    /// # Safety
    /// While `f` runs no other reference to this carrier may exist or be made: its `Arc` is
    /// the only one, without `Weak`s, and only the caller reaches it
    /// ([`Tensor::sole_carrier`](crate::Tensor) proves that).
    pub(crate) unsafe fn with_slice_mut_unshared<T: Element, R>(
        &self,
        f: impl FnOnce(&mut [T]) -> R,
    ) -> Option<R> {
        // The hold is never unlocked because it was never locked: nobody else can lock it.
        let mut hold = std::mem::ManuallyDrop::new(WriteHold(self));
        let s = hold.slice_mut::<T>()?;
        let version = self.version.load(Ordering::Relaxed);
        self.version
            .store(version.wrapping_add(1), Ordering::Relaxed);
        Some(f(s))
    }
}

impl<S: ?Sized + Store> Drop for CpuCarrier<S> {
    /// A large Float32 buffer goes to the process-wide reuse pool instead of the allocator.
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nothing else reaches the buffer.
        if let Some(Buffer::F32(v)) = self.store.heap().map(|h| unsafe { &mut *h.buffer.get() }) {
            crate::storage::pool::recycle(std::mem::take(v));
        }
    }
}

impl<S: Store> Carrier for CpuCarrier<S> {
    fn id(&self) -> CarrierId {
        self.id
    }
    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
    fn len(&self) -> usize {
        self.element_count()
    }
    fn dtype(&self) -> DType {
        self.element_dtype()
    }
    fn class_name(&self) -> &'static str {
        "CpuCarrier"
    }
    fn read(&self, offset: usize) -> Result<Scalar> {
        match self.lock_read().get(offset) {
            Some(v) => Ok(v),
            None => bail!(
                Value,
                "offset {offset} is out of range for {} of length {}",
                self.id,
                self.element_count()
            ),
        }
    }
    fn to_buffer(&self) -> Buffer {
        self.lock_read().to_buffer()
    }
    fn write(&self, writes: &[(usize, Scalar)]) -> Result<()> {
        let mut data = self.lock_write();
        let (len, dtype) = (self.element_count(), self.element_dtype());
        for &(o, v) in writes {
            ensure!(
                o < len,
                Value,
                "offset {o} is out of range for {} of length {len}",
                self.id
            );
            ensure!(
                v.dtype() == dtype,
                Type,
                "cannot write a {} value into {dtype} storage",
                v.dtype()
            );
        }
        if let Some(b) = data.buffer_mut() {
            for &(o, v) in writes {
                b.put(o, v);
            }
        } else {
            let inline = data.inline_mut();
            for &(o, v) in writes {
                if let Scalar::F32(x) = v {
                    inline[o] = x;
                }
            }
        }
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
    /// Fresh storage for computed values: up to [`SMALL_F32`] Float32 elements are moved
    /// inline.
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>> {
        if let Buffer::F32(v) = &data {
            if let Ok(small) = inline_f32(v, Shared) {
                return Ok(small);
            }
        }
        Ok(CpuCarrier::shared(data))
    }
    fn fresh_f32(&self, values: &[f32]) -> Result<Arc<dyn Carrier>> {
        Ok(inline_f32(values, Shared)
            .unwrap_or_else(|_| CpuCarrier::shared(Buffer::F32(values.to_vec()))))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn __as_cpu(&self, _: Token) -> Option<&CpuCarrier<dyn Store>> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extent_keeps_length_and_dtype_apart() {
        let dtypes = [
            (Simple::F32, DType::Float32),
            (Simple::F64, DType::Float64),
            (Simple::I32, DType::Int32),
            (Simple::I64, DType::Int64),
            (Simple::Bool, DType::Bool),
        ];
        let largest = (1usize << Extent::DTYPE_SHIFT) - 1;
        for (simple, dtype) in dtypes {
            for len in [0, 1, 17, 1 << 40, largest] {
                let e = Extent::new(len, simple);
                assert_eq!((e.len(), e.dtype()), (len, dtype.clone()));
            }
        }
    }

    #[test]
    fn versions_bump_once_per_successful_mutation() {
        let c = CpuCarrier::new(Buffer::F32(vec![0.0; 4]));
        assert_eq!(c.version(), 0);
        c.write(&[(0, Scalar::F32(1.0)), (3, Scalar::F32(2.0))])
            .unwrap();
        assert_eq!(c.version(), 1);
        assert!(c
            .write(&[(0, Scalar::F32(5.0)), (4, Scalar::F32(1.0))])
            .is_err());
        assert!(c.write(&[(0, Scalar::I32(5))]).is_err());
        assert_eq!(c.version(), 1);
        assert_eq!(
            c.read(0).unwrap(),
            Scalar::F32(1.0),
            "a failed write changes nothing"
        );
        c.with_slice_mut::<f32, _>(|s| {
            s[1] = 9.0;
            Ok(())
        })
        .unwrap();
        assert_eq!(c.version(), 2);
        assert!(c.with_slice_mut::<i32, ()>(|_| Ok(())).is_err());
        assert_eq!(c.version(), 2, "no access was given");
        assert!(c
            .with_slice_mut::<f32, ()>(|s| {
                s[2] = 7.0;
                bail!(Value, "wrote, then failed")
            })
            .is_err());
        assert_eq!(
            c.version(),
            3,
            "an exclusive access that wrote and failed still bumps"
        );
        assert_eq!(c.to_buffer(), Buffer::F32(vec![1.0, 9.0, 7.0, 2.0]));
    }

    /// W3 keeps a million one-element results alive: their carriers must stay in the 48-byte
    /// allocation class (24 bytes plus 16 of reference counts and 8 of allocator header), and
    /// the sixteen-element ones W1 makes in the 112-byte class.
    #[test]
    fn small_carriers_stay_in_their_allocation_class() {
        assert!(std::mem::size_of::<CpuCarrier<Inline<1>>>() <= 24);
        assert!(std::mem::size_of::<CpuCarrier<Inline<4>>>() <= 40);
        assert!(std::mem::size_of::<CpuCarrier<Inline<8>>>() <= 56);
        assert!(std::mem::size_of::<CpuCarrier<Inline<SMALL_F32>>>() <= 88);
        assert!(std::mem::size_of::<CpuCarrier>() <= 64);
    }

    #[test]
    fn fresh_small_values_are_inline_cpu_carriers_of_one_class() {
        let c = CpuCarrier::from_vec(vec![0.0f32; 100]);
        for n in [1, 2, 4, 5, 8, 9, SMALL_F32, SMALL_F32 + 1] {
            let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let f = c.fresh_f32(&values).unwrap();
            assert_eq!(f.len(), n);
            assert!(f.same_class(&*c), "{n} elements");
            assert_eq!(f.class_id(), TypeId::of::<CpuCarrier>());
            assert_eq!(f.to_buffer(), Buffer::F32(values.clone()));
            let cpu = f.as_cpu().unwrap();
            assert_eq!(cpu.with_slice::<f32, _>(<[f32]>::to_vec).unwrap(), values);
            f.write(&[(n - 1, Scalar::F32(-1.0))]).unwrap();
            assert_eq!(f.read(n - 1).unwrap(), Scalar::F32(-1.0));
            assert!(
                f.read(n).is_err(),
                "the array's spare room is not an element"
            );
            assert!(f.write(&[(n, Scalar::F32(0.0))]).is_err());
            assert_eq!(f.version(), 1);
        }
    }

    #[test]
    fn fresh_is_same_class_with_new_identity() {
        let c = CpuCarrier::from_vec(vec![1i32, 2]);
        let f = c.fresh(Buffer::F32(vec![0.0])).unwrap();
        assert!(c.same_class(&*f));
        assert_ne!(c.id(), f.id());
        assert_eq!(f.dtype(), DType::Float32);
    }
}

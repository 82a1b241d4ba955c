//! Storage behind tensors: the public `Carrier` trait and the CPU carrier.
//!
//! A carrier has an identity, a version that every successful public mutation bumps once, and
//! can make fresh storage of its own exact implementation class (so gradients of a tensor live
//! where the tensor lives). Kernels reach CPU elements as typed slices through [`CpuCarrier`].

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::dtype::DType;
use crate::error::{bail, ensure, Result};
use crate::scalar::{Buffer, Element, Scalar};

/// The identity of one carrier, unique for the life of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CarrierId(u64);

impl CarrierId {
    /// A new identity, never handed out before.
    pub fn fresh() -> CarrierId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        CarrierId(NEXT.fetch_add(1, Ordering::Relaxed))
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
    /// For downcasting to the implementation (kernels use this to reach typed slices).
    fn as_any(&self) -> &dyn Any;
}

impl dyn Carrier {
    /// Whether two carriers are of the same implementation class.
    pub fn same_class(&self, other: &dyn Carrier) -> bool {
        self.as_any().type_id() == other.as_any().type_id()
    }

    /// The implementation class as a `TypeId`.
    pub fn class_id(&self) -> TypeId {
        self.as_any().type_id()
    }

    /// This carrier as the CPU carrier, if it is one.
    pub fn as_cpu(&self) -> Option<&CpuCarrier> {
        self.as_any().downcast_ref::<CpuCarrier>()
    }
}

/// Storage in main memory: one `Vec` of a simple dtype, or up to [`SMALL_F32`] Float32
/// elements inline.
///
/// An `RwLock` guards the elements: readers (every kernel) share it, a mutation takes it
/// exclusively. A lock rather than `UnsafeCell` because tensors are `Send + Sync` and a user
/// may mutate a tensor on one thread while another reads it.
pub struct CpuCarrier {
    id: CarrierId,
    version: AtomicU64,
    // The length and dtype never change after construction; kept outside the lock so reading
    // them takes no lock (a caller may ask while it holds the elements).
    extent: Extent,
    data: RwLock<Storage>,
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

/// Float32 storage of at most this many elements (one cache line) lives inside the carrier.
/// Small tensors (losses, biases, per-step scalars) make up most of an overhead-bound graph,
/// and inline storage saves each of them an allocation and a pointer hop.
pub const SMALL_F32: usize = 16;

enum Storage {
    SmallF32 { len: u8, data: [f32; SMALL_F32] },
    Heap(Buffer),
}

impl Storage {
    /// `data`, moved inline when it is small Float32.
    fn compact(data: Buffer) -> Storage {
        match data {
            Buffer::F32(v) => Storage::small_f32(&v).unwrap_or(Storage::Heap(Buffer::F32(v))),
            other => Storage::Heap(other),
        }
    }

    /// A copy of `values` inline, if they fit.
    fn small_f32(values: &[f32]) -> Option<Storage> {
        let len = u8::try_from(values.len())
            .ok()
            .filter(|&n| usize::from(n) <= SMALL_F32)?;
        let mut data = [0.0; SMALL_F32];
        data[..values.len()].copy_from_slice(values);
        Some(Storage::SmallF32 { len, data })
    }

    fn slice<T: Element>(&self) -> Option<&[T]> {
        match self {
            Storage::SmallF32 { len, data } => T::from_f32_slice(&data[..usize::from(*len)]),
            Storage::Heap(b) => T::slice(b),
        }
    }

    fn slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        match self {
            Storage::SmallF32 { len, data } => {
                T::from_f32_slice_mut(&mut data[..usize::from(*len)])
            }
            Storage::Heap(b) => T::slice_mut(b),
        }
    }

    fn simple(&self) -> Simple {
        match self {
            Storage::SmallF32 { .. } | Storage::Heap(Buffer::F32(_)) => Simple::F32,
            Storage::Heap(Buffer::F64(_)) => Simple::F64,
            Storage::Heap(Buffer::I32(_)) => Simple::I32,
            Storage::Heap(Buffer::I64(_)) => Simple::I64,
            Storage::Heap(Buffer::Bool(_)) => Simple::Bool,
        }
    }

    fn len(&self) -> usize {
        match self {
            Storage::SmallF32 { len, .. } => usize::from(*len),
            Storage::Heap(b) => b.len(),
        }
    }

    fn get(&self, i: usize) -> Option<Scalar> {
        match self {
            Storage::SmallF32 { len, data } => {
                data[..usize::from(*len)].get(i).map(|x| Scalar::F32(*x))
            }
            Storage::Heap(b) => b.get(i),
        }
    }

    fn put(&mut self, i: usize, value: Scalar) -> bool {
        match (self, value) {
            (Storage::SmallF32 { len, data }, Scalar::F32(x)) if i < usize::from(*len) => {
                data[i] = x;
                true
            }
            (Storage::SmallF32 { .. }, _) => false,
            (Storage::Heap(b), v) => b.put(i, v),
        }
    }

    fn to_buffer(&self) -> Buffer {
        match self {
            Storage::SmallF32 { len, data } => Buffer::F32(data[..usize::from(*len)].to_vec()),
            Storage::Heap(b) => b.clone(),
        }
    }
}

impl fmt::Debug for CpuCarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CpuCarrier({}, v{}, {} x {})",
            self.id,
            self.version(),
            self.extent.len(),
            self.extent.dtype()
        )
    }
}

impl CpuCarrier {
    /// A CPU carrier owning `data`, keeping its allocation (no copy).
    pub fn new(data: Buffer) -> CpuCarrier {
        CpuCarrier::with_storage(Storage::Heap(data))
    }

    fn with_storage(storage: Storage) -> CpuCarrier {
        CpuCarrier {
            id: CarrierId::fresh(),
            version: AtomicU64::new(0),
            extent: Extent::new(storage.len(), storage.simple()),
            data: RwLock::new(storage),
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

    // A poisoned lock only means a panic happened while writing elements; the elements are
    // plain numbers, so the data is still usable.
    fn lock_read(&self) -> RwLockReadGuard<'_, Storage> {
        self.data
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_write(&self) -> RwLockWriteGuard<'_, Storage> {
        self.data
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the elements as a typed slice.
    pub fn with_slice<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        let data = self.lock_read();
        match data.slice::<T>() {
            Some(s) => Ok(f(s)),
            None => bail!(
                Type,
                "{} holds {} elements, not {}",
                self.id,
                self.extent.dtype(),
                T::DTYPE
            ),
        }
    }

    /// Runs `f` on the elements of `self` and `other` as typed slices, locking each carrier
    /// once (they may be the same carrier, as in `x * x`) and in a fixed order, so that no
    /// thread ever holds one carrier's lock while it waits to lock the same carrier again.
    pub fn with_slice_pair<T: Element, R>(
        &self,
        other: &CpuCarrier,
        f: impl FnOnce(&[T], &[T]) -> R,
    ) -> Result<R> {
        if std::ptr::eq(self, other) {
            return self.with_slice(|s| f(s, s));
        }
        if std::ptr::from_ref(self) < std::ptr::from_ref(other) {
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
            _ => bail!(
                Type,
                "{} holds {} elements, not {} and {}",
                self.id,
                self.extent.dtype(),
                T::DTYPE,
                U::DTYPE
            ),
        }
    }

    /// Runs `f` on the whole buffer (any dtype); small inline storage is lent as a copy.
    pub fn with_buffer<R>(&self, f: impl FnOnce(&Buffer) -> R) -> R {
        match &*self.lock_read() {
            Storage::Heap(b) => f(b),
            small @ Storage::SmallF32 { .. } => f(&small.to_buffer()),
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
            bail!(
                Type,
                "{} holds {} elements, not {}",
                self.id,
                self.extent.dtype(),
                T::DTYPE
            )
        };
        // Bumped while the lock is held, before `f` can unwind, so no reader ever sees new
        // elements under the old version.
        self.version.fetch_add(1, Ordering::AcqRel);
        f(s)
    }
}

impl Drop for CpuCarrier {
    /// A large Float32 buffer goes to the process-wide reuse pool instead of the allocator.
    fn drop(&mut self) {
        let data = self
            .data
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Storage::Heap(Buffer::F32(v)) = data {
            crate::pool::recycle(std::mem::take(v));
        }
    }
}

impl Carrier for CpuCarrier {
    fn id(&self) -> CarrierId {
        self.id
    }
    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
    fn len(&self) -> usize {
        self.extent.len()
    }
    fn dtype(&self) -> DType {
        self.extent.dtype()
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
                self.extent.len()
            ),
        }
    }
    fn to_buffer(&self) -> Buffer {
        self.lock_read().to_buffer()
    }
    fn write(&self, writes: &[(usize, Scalar)]) -> Result<()> {
        let mut data = self.lock_write();
        let (len, dtype) = (self.extent.len(), self.extent.dtype());
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
        for &(o, v) in writes {
            data.put(o, v);
        }
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
    /// Fresh storage for computed values: up to [`SMALL_F32`] Float32 elements are moved
    /// inline.
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>> {
        Ok(Arc::new(CpuCarrier::with_storage(Storage::compact(data))))
    }
    fn fresh_f32(&self, values: &[f32]) -> Result<Arc<dyn Carrier>> {
        let storage = match Storage::small_f32(values) {
            Some(small) => small,
            None => Storage::Heap(Buffer::F32(values.to_vec())),
        };
        Ok(Arc::new(CpuCarrier::with_storage(storage)))
    }
    fn as_any(&self) -> &dyn Any {
        self
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

    #[test]
    fn fresh_is_same_class_with_new_identity() {
        let c = CpuCarrier::from_vec(vec![1i32, 2]);
        let f = c.fresh(Buffer::F32(vec![0.0])).unwrap();
        assert!(c.same_class(&*f));
        assert_ne!(c.id(), f.id());
        assert_eq!(f.dtype(), DType::Float32);
    }
}

//! The `Carrier` trait: the CPU carrier's contract, and a custom carrier class defined here to
//! show that tensors work over storage the library does not know.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use autograd_core::{
    bail, ensure, shape, stride, Buffer, Carrier, CarrierId, CpuCarrier, DType, ErrorKind, Layout,
    Result, Scalar, Store, Tensor,
};

// ---------------------------------------------------------------------------------------------
// CpuCarrier
// ---------------------------------------------------------------------------------------------

/// A user's kernel names the CPU view of any CPU carrier, a buffer or a small result's inline
/// array, as one type, and both are of the one class `CpuCarrier`.
#[test]
fn a_users_kernel_reads_every_cpu_carrier_through_one_type() {
    fn total(c: &CpuCarrier<dyn Store>) -> f32 {
        c.with_slice::<f32, _>(|s| s.iter().sum()).unwrap()
    }
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
    let y = autograd_core::ops::mul_scalar(&x, 2.0).unwrap();
    let (cx, cy) = (x.carrier().unwrap(), y.carrier().unwrap());
    assert_eq!(total(cx.as_cpu().unwrap()), 6.0);
    assert_eq!(total(cy.as_cpu().unwrap()), 12.0);
    assert!(cx.same_class(&**cy));
    assert_eq!(cy.class_id(), std::any::TypeId::of::<CpuCarrier>());
    assert_eq!(cy.class_name(), "CpuCarrier");
}

#[test]
fn cpu_carrier_identity_length_dtype_and_reads() {
    let a = CpuCarrier::from_vec(vec![1.0f32, 2.0, 3.0]);
    let b = CpuCarrier::from_vec(vec![1.0f32, 2.0, 3.0]);
    assert_ne!(a.id(), b.id(), "equal contents, distinct identities");
    assert_eq!(a.id(), a.clone().id());
    assert_eq!(
        (a.len(), a.is_empty(), a.dtype()),
        (3, false, DType::Float32)
    );
    assert_eq!(a.class_name(), "CpuCarrier");
    assert_eq!(a.version(), 0);
    assert_eq!(a.read(2).unwrap(), Scalar::F32(3.0));
    let e = a.read(3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains('3'), "{e}");
    assert_eq!(a.to_buffer(), Buffer::F32(vec![1.0, 2.0, 3.0]));
    let empty = CpuCarrier::shared(Buffer::Bool(vec![]));
    assert!(empty.is_empty());
    assert_eq!(empty.dtype(), DType::Bool);
    assert!(a.as_cpu().is_some());
    assert!(format!("{a:?}").contains("CpuCarrier"));
    assert!(CarrierId::fresh() != CarrierId::fresh());
}

#[test]
fn cpu_carrier_writes_are_all_or_nothing_with_one_bump() {
    let c = CpuCarrier::from_vec(vec![0i64; 4]);
    c.write(&[
        (0, Scalar::I64(5)),
        (3, Scalar::I64(7)),
        (0, Scalar::I64(6)),
    ])
    .unwrap();
    assert_eq!(c.version(), 1);
    assert_eq!(c.to_buffer(), Buffer::I64(vec![6, 0, 0, 7]));
    // one bad offset: nothing written
    let e = c
        .write(&[(1, Scalar::I64(1)), (4, Scalar::I64(1))])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    // one bad dtype: nothing written
    let e = c
        .write(&[(1, Scalar::I64(1)), (2, Scalar::I32(1))])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert_eq!(c.version(), 1);
    assert_eq!(c.to_buffer(), Buffer::I64(vec![6, 0, 0, 7]));
    // an empty write is still one successful call
    c.write(&[]).unwrap();
    assert_eq!(c.version(), 2);
}

#[test]
fn cpu_carrier_typed_slices() {
    let c = CpuCarrier::new(Buffer::F64(vec![1.0, 2.0]));
    assert_eq!(
        c.with_slice::<f64, _>(<[f64]>::to_vec).unwrap(),
        vec![1.0, 2.0]
    );
    assert_eq!(
        c.with_slice::<f32, _>(<[f32]>::len).unwrap_err().kind(),
        ErrorKind::Type
    );
    c.with_slice_mut::<f64, _>(|s| {
        s[1] = 20.0;
        Ok(())
    })
    .unwrap();
    assert_eq!(c.version(), 1);
    // the wrong type gives no access: no bump
    assert_eq!(
        c.with_slice_mut::<i32, ()>(|_| Ok(())).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(c.version(), 1);
    // a closure that had exclusive access may have written before failing: it bumps
    assert!(c
        .with_slice_mut::<f64, ()>(|_| bail!(Value, "refused"))
        .is_err());
    assert_eq!(c.version(), 2);
    assert_eq!(c.to_buffer().len(), 2);
    assert_eq!(c.read(1).unwrap(), Scalar::F64(20.0));
}

#[test]
fn fresh_storage_is_of_the_same_class() {
    let c = CpuCarrier::from_vec(vec![1i32, 2, 3]);
    c.write(&[(0, Scalar::I32(9))]).unwrap();
    let f = c.fresh(Buffer::F32(vec![0.5, 1.5])).unwrap();
    assert!(c.same_class(&*f));
    assert_eq!(c.class_id(), f.class_id());
    assert_ne!(f.id(), c.id());
    assert_eq!(f.version(), 0);
    assert_eq!((f.len(), f.dtype()), (2, DType::Float32));
    assert_eq!(f.to_buffer(), Buffer::F32(vec![0.5, 1.5]));
    assert!(f.as_cpu().is_some());
    // the original is untouched
    assert_eq!(c.to_buffer(), Buffer::I32(vec![9, 2, 3]));
}

#[test]
fn tensors_over_one_carrier_see_each_others_versions() {
    let c = CpuCarrier::from_vec(vec![0.0f32; 6]);
    let a = Tensor::from_parts(c.clone(), Layout::row_major(&[2, 3]).unwrap(), 0).unwrap();
    let b = Tensor::from_parts(c.clone(), Layout::new(shape![3], stride![2]).unwrap(), 1).unwrap();
    a.set(&[0, 1], 1.0f32).unwrap();
    assert_eq!(b.get(&[0]).unwrap(), Scalar::F32(1.0));
    assert_eq!(b.carrier().unwrap().version(), 1);
    b.fill(2.0f32).unwrap();
    assert_eq!(
        a.values::<f32>().unwrap(),
        vec![0.0, 2.0, 0.0, 2.0, 0.0, 2.0]
    );
    assert_eq!(c.version(), 2);
    // a write straight to the carrier is seen by the tensors
    c.write(&[(0, Scalar::F32(-1.0))]).unwrap();
    assert_eq!(a.get(&[0, 0]).unwrap(), Scalar::F32(-1.0));
    assert_eq!(a.carrier().unwrap().version(), 3);
}

// ---------------------------------------------------------------------------------------------
// A custom carrier class
// ---------------------------------------------------------------------------------------------

/// Storage the library knows nothing about: a mutex around a `Buffer`, counting its reads.
#[derive(Debug)]
struct TestCarrier {
    id: CarrierId,
    version: AtomicU64,
    reads: AtomicUsize,
    /// When set, every write fails after the library validated it.
    frozen: AtomicBool,
    data: Mutex<Buffer>,
}

impl TestCarrier {
    fn shared(data: Buffer) -> Arc<dyn Carrier> {
        Arc::new(TestCarrier {
            id: CarrierId::fresh(),
            version: AtomicU64::new(0),
            reads: AtomicUsize::new(0),
            frozen: AtomicBool::new(false),
            data: Mutex::new(data),
        })
    }
}

fn put(b: &mut Buffer, i: usize, v: Scalar) -> bool {
    match (b, v) {
        (Buffer::F32(d), Scalar::F32(x)) if i < d.len() => d[i] = x,
        (Buffer::F64(d), Scalar::F64(x)) if i < d.len() => d[i] = x,
        (Buffer::I32(d), Scalar::I32(x)) if i < d.len() => d[i] = x,
        (Buffer::I64(d), Scalar::I64(x)) if i < d.len() => d[i] = x,
        (Buffer::Bool(d), Scalar::Bool(x)) if i < d.len() => d[i] = x,
        _ => return false,
    }
    true
}

impl Carrier for TestCarrier {
    fn id(&self) -> CarrierId {
        self.id
    }
    fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }
    fn len(&self) -> usize {
        self.data.lock().unwrap().len()
    }
    fn dtype(&self) -> DType {
        self.data.lock().unwrap().dtype()
    }
    fn class_name(&self) -> &'static str {
        "TestCarrier"
    }
    fn read(&self, offset: usize) -> Result<Scalar> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        match self.data.lock().unwrap().get(offset) {
            Some(v) => Ok(v),
            None => bail!(Value, "offset {offset} is out of range"),
        }
    }
    fn to_buffer(&self) -> Buffer {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.data.lock().unwrap().clone()
    }
    fn write(&self, writes: &[(usize, Scalar)]) -> Result<()> {
        ensure!(
            !self.frozen.load(Ordering::SeqCst),
            Runtime,
            "this storage is frozen"
        );
        let mut data = self.data.lock().unwrap();
        let mut copy = data.clone();
        for &(o, v) in writes {
            ensure!(o < copy.len(), Value, "offset {o} is out of range");
            ensure!(put(&mut copy, o, v), Type, "cannot store {v:?}");
        }
        *data = copy;
        self.version.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>> {
        Ok(TestCarrier::shared(data))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn test_tensor(values: Vec<f32>, dims: &[usize]) -> Tensor {
    Tensor::from_parts(
        TestCarrier::shared(Buffer::F32(values)),
        Layout::row_major(dims).unwrap(),
        0,
    )
    .unwrap()
}

fn is_test_class(c: &Arc<dyn Carrier>) -> bool {
    c.as_any().downcast_ref::<TestCarrier>().is_some()
}

#[test]
fn a_write_a_carrier_refuses_late_leaves_the_other_pieces_as_they_were() {
    let cpu = Tensor::from_vec(vec![1.0f32, 2.0], autograd_core::shape![1, 2]).unwrap();
    let custom = test_tensor(vec![3.0, 4.0, 5.0, 6.0], &[2, 2]);
    let t = Tensor::from_subtensors(&[cpu.clone(), custom.clone()]).unwrap();
    let c = custom.carrier().unwrap();
    let tc = c.as_any().downcast_ref::<TestCarrier>().unwrap();
    tc.frozen.store(true, Ordering::SeqCst);
    let src = Tensor::from_vec(vec![9.0f32; 6], autograd_core::shape![3, 2]).unwrap();
    for (name, r) in [
        ("fill", t.fill(0.0f32)),
        ("copy_from", t.copy_from(&src)),
        ("scale_", t.scale_(2.0)),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Runtime, "{name}");
        assert!(e.message().contains("were restored"), "{name}: {e}");
        assert_eq!(cpu.values::<f32>().unwrap(), [1.0, 2.0], "{name}");
        assert_eq!(
            custom.values::<f32>().unwrap(),
            [3.0, 4.0, 5.0, 6.0],
            "{name}"
        );
    }
    // a refusal of the only (or first) carrier wrote nothing and restores nothing
    let e = custom.fill(1.0f32).unwrap_err();
    assert!(!e.message().contains("restored"), "{e}");
    tc.frozen.store(false, Ordering::SeqCst);
    t.fill(0.5f32).unwrap();
    assert_eq!(t.values::<f32>().unwrap(), [0.5; 6]);
}

#[test]
fn tensors_read_a_custom_carrier() {
    let t = test_tensor(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(t.carrier().unwrap().class_name(), "TestCarrier");
    assert!(t.carrier().unwrap().as_cpu().is_none());
    assert!(t.is_differentiable());
    assert_eq!(
        t.values::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(t.get(&[1, 2]).unwrap(), Scalar::F32(6.0));
    assert_eq!(t.scalars().unwrap()[3], Scalar::F32(4.0));
    assert_eq!(t.to_string(), "[[1, 2, 3], [4, 5, 6]]");
    assert_eq!(kind_of(t.get(&[2, 0])), ErrorKind::Value);
    assert_eq!(kind_of(t.values::<f64>()), ErrorKind::Type);
    let a = t.to_array::<f32>().unwrap();
    assert_eq!(a[[1, 0]], 4.0);
    // the carrier really was asked
    let c = t.carrier().unwrap();
    let tc = c.as_any().downcast_ref::<TestCarrier>().unwrap();
    assert!(tc.reads.load(Ordering::SeqCst) > 0);
    // views read through it too
    let tr = t.transpose(0, 1).unwrap();
    assert_eq!(
        tr.values::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    assert!(is_test_class(tr.carrier().unwrap()));
    assert_eq!(tr.carrier().unwrap().id(), c.id());
    // from_parts is validated against the custom carrier's length
    let e = Tensor::from_parts(c.clone(), Layout::row_major(&[7]).unwrap(), 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = Tensor::from_parts(c.clone(), Layout::row_major(&[6]).unwrap(), 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
}

fn kind_of<T: std::fmt::Debug>(r: Result<T>) -> ErrorKind {
    r.unwrap_err().kind()
}

#[test]
fn mutations_go_through_a_custom_carrier_and_bump_its_version() {
    let t = test_tensor(vec![0.0; 6], &[2, 3]);
    let view = t.narrow(1, 1, 2).unwrap();
    let c = t.carrier().unwrap().clone();
    assert_eq!(c.version(), 0);
    t.set(&[0, 1], 1.0f32).unwrap();
    assert_eq!((c.version(), view.carrier().unwrap().version()), (1, 1));
    assert_eq!(view.get(&[0, 0]).unwrap(), Scalar::F32(1.0));
    view.fill(2.0f32).unwrap();
    assert_eq!(c.version(), 2);
    assert_eq!(
        t.values::<f32>().unwrap(),
        vec![0.0, 2.0, 2.0, 0.0, 2.0, 2.0]
    );
    t.scale_(0.5).unwrap();
    assert_eq!(c.version(), 3);
    let src = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2]).unwrap();
    view.copy_from(&src).unwrap();
    assert_eq!(c.version(), 4);
    view.add_(&src).unwrap();
    assert_eq!(c.version(), 5);
    assert_eq!(
        t.values::<f32>().unwrap(),
        vec![0.0, 2.0, 4.0, 0.0, 6.0, 8.0]
    );
    // failures do not bump
    assert_eq!(kind_of(t.set(&[2, 0], 1.0f32)), ErrorKind::Value);
    assert_eq!(kind_of(t.set(&[0, 0], true)), ErrorKind::Type);
    let b = t.broadcast_to(&[2, 2, 3]).unwrap();
    let e = b
        .copy_from(&Tensor::zeros(shape![2, 2, 3], &DType::Float32).unwrap())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(c.version(), 5);
    assert_eq!(
        t.values::<f32>().unwrap(),
        vec![0.0, 2.0, 4.0, 0.0, 6.0, 8.0]
    );
    // a CPU tensor can read from a custom one
    let cpu = Tensor::zeros(shape![2, 2], &DType::Float32).unwrap();
    cpu.copy_from(&view).unwrap();
    assert_eq!(cpu.values::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
    assert_eq!(c.version(), 5);
}

#[test]
fn copies_keep_the_custom_class() {
    let t = test_tensor(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let tr = t.transpose(0, 1).unwrap();
    let k = tr.contiguous().unwrap();
    let kc = k.carrier().unwrap();
    assert!(is_test_class(kc));
    assert!(kc.same_class(&**t.carrier().unwrap()));
    assert_ne!(kc.id(), t.carrier().unwrap().id());
    assert_eq!(kc.version(), 0);
    assert!(k.layout().is_row_major_contiguous());
    assert_eq!(
        k.values::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    // a reshape that must copy keeps the class as well
    let r = tr.reshape(&[6]).unwrap();
    assert!(is_test_class(r.carrier().unwrap()));
    assert_eq!(
        r.values::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    // a reshape that can view shares the carrier
    let v = t.reshape(&[3, 2]).unwrap();
    assert_eq!(v.carrier().unwrap().id(), t.carrier().unwrap().id());
    // fresh storage from the trait
    let f = t.carrier().unwrap().fresh(Buffer::I32(vec![1, 2])).unwrap();
    assert!(is_test_class(&f));
    assert_eq!(f.dtype(), DType::Int32);
    // a CPU tensor's contiguous copy stays on the CPU
    let cpu = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
    assert!(cpu
        .contiguous()
        .unwrap()
        .carrier()
        .unwrap()
        .as_cpu()
        .is_some());
}

#[test]
fn subtensors_may_live_on_different_carrier_classes() {
    let a = test_tensor(vec![1.0, 2.0], &[1, 2]);
    let b = Tensor::from_vec(vec![3.0f32, 4.0, 5.0, 6.0], shape![2, 2]).unwrap();
    let t = Tensor::from_subtensors(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(t.subtensor_count(), 2);
    assert_eq!(
        t.values::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let classes: Vec<&str> = t.carriers().iter().map(|c| c.class_name()).collect();
    assert_eq!(classes, vec!["TestCarrier", "CpuCarrier"]);
    t.fill(0.0f32).unwrap();
    assert_eq!(a.carrier().unwrap().version(), 1);
    assert_eq!(b.carrier().unwrap().version(), 1);
    t.set(&[0, 1], 7.0f32).unwrap();
    assert_eq!(a.get(&[0, 1]).unwrap(), Scalar::F32(7.0));
    assert_eq!(a.carrier().unwrap().version(), 2);
    assert_eq!(b.carrier().unwrap().version(), 1);
}

#[test]
fn int_and_bool_storage_on_a_custom_carrier() {
    let t = Tensor::from_parts(
        TestCarrier::shared(Buffer::Bool(vec![false, true, false])),
        Layout::row_major(&[3]).unwrap(),
        0,
    )
    .unwrap();
    assert_eq!(t.dtype(), &DType::Bool);
    assert!(!t.is_differentiable());
    t.set(&[2], true).unwrap();
    assert_eq!(t.values::<bool>().unwrap(), vec![false, true, true]);
    let i = Tensor::from_parts(
        TestCarrier::shared(Buffer::I32(vec![5, 6, 7, 8])),
        Layout::new(shape![2, 2], stride![1, 2]).unwrap(),
        0,
    )
    .unwrap();
    assert_eq!(i.values::<i32>().unwrap(), vec![5, 7, 6, 8]);
    assert_eq!(i.to_string(), "[[5, 7], [6, 8]]");
}

#[test]
fn small_float32_storage_behaves_like_heap_storage() {
    // Fresh storage of up to 16 Float32 elements lives inline in the carrier, 17 on the heap;
    // both answer alike.
    for n in [1usize, 16, 17] {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let c = CpuCarrier::from_vec(vec![0i32])
            .fresh(Buffer::F32(values.clone()))
            .unwrap();
        assert_eq!(c.len(), n);
        assert_eq!(c.dtype(), DType::Float32);
        assert_eq!(c.to_buffer(), Buffer::F32(values.clone()));
        let cpu = c.as_cpu().unwrap();
        assert_eq!(cpu.with_slice::<f32, _>(<[f32]>::to_vec).unwrap(), values);
        assert_eq!(
            cpu.with_slice::<f64, _>(<[f64]>::len).unwrap_err().kind(),
            ErrorKind::Type
        );
        assert_eq!(c.read(n - 1).unwrap(), Scalar::F32((n - 1) as f32 * 0.5));
        assert_eq!(c.read(n).unwrap_err().kind(), ErrorKind::Value);
        // a write out of range or of the wrong dtype changes nothing
        assert!(c
            .write(&[(0, Scalar::F32(9.0)), (n, Scalar::F32(1.0))])
            .is_err());
        assert!(c.write(&[(0, Scalar::F64(9.0))]).is_err());
        assert_eq!(c.version(), 0);
        c.write(&[(n - 1, Scalar::F32(-1.0))]).unwrap();
        let cpu = c.as_cpu().unwrap();
        cpu.with_slice_mut::<f32, _>(|s| {
            s[0] = 7.0;
            Ok(())
        })
        .unwrap();
        assert_eq!(c.version(), 2);
        let now = cpu.with_slice::<f32, _>(<[f32]>::to_vec).unwrap();
        assert_eq!((now[0], now[n - 1]), (7.0, if n == 1 { 7.0 } else { -1.0 }));
        assert_eq!(now.len(), n);
    }
}

#[test]
fn the_length_needs_no_lock_and_small_storage_lends_a_buffer() {
    use std::sync::mpsc;
    use std::time::Duration;
    let small = CpuCarrier::from_vec(vec![0i32])
        .fresh(Buffer::F32(vec![1.0, 2.0]))
        .unwrap();
    assert_eq!(
        small.as_cpu().unwrap().with_buffer(Buffer::clone),
        Buffer::F32(vec![1.0, 2.0])
    );
    let heap = CpuCarrier::new(Buffer::F64(vec![3.0; 40]));
    assert_eq!(heap.with_buffer(Buffer::len), 40);
    // asking for the length while holding the elements must not lock the carrier again
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let n = heap.with_slice_mut::<f64, _>(|s| Ok(s.len() + heap.len()));
        let _ = done.send(n.map_err(|e| e.to_string()));
    });
    let n = result
        .recv_timeout(Duration::from_secs(60))
        .expect("no deadlock");
    assert_eq!(n, Ok(80));
}

#[test]
fn a_pair_of_slices_may_come_from_one_carrier() {
    let a = CpuCarrier::new(Buffer::F32(vec![1.0, 2.0]));
    let b = CpuCarrier::new(Buffer::F32(vec![10.0, 20.0]));
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
    assert_eq!(a.with_slice_pair::<f32, _>(&a, dot).unwrap(), 5.0);
    assert_eq!(a.with_slice_pair::<f32, _>(&b, dot).unwrap(), 50.0);
    // the first slice is always `self`'s, whichever lock is taken first
    let first = |x: &[f32], _: &[f32]| x[0];
    assert_eq!(a.with_slice_pair::<f32, _>(&b, first).unwrap(), 1.0);
    assert_eq!(b.with_slice_pair::<f32, _>(&a, first).unwrap(), 10.0);
    assert_eq!(
        a.with_slice_pair::<i32, _>(&b, |_, _| ())
            .unwrap_err()
            .kind(),
        ErrorKind::Type
    );
}

#[test]
fn the_dtype_needs_no_lock_either() {
    use std::sync::mpsc;
    use std::time::Duration;
    let c = CpuCarrier::new(Buffer::I64(vec![1, 2, 3]));
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let d = c.with_slice_mut::<i64, _>(|_| Ok(c.dtype()));
        let _ = done.send(d.map_err(|e| e.to_string()));
    });
    let d = result
        .recv_timeout(Duration::from_secs(60))
        .expect("no deadlock");
    assert_eq!(d, Ok(DType::Int64));
}

#[test]
fn tensors_from_borrowed_values_keep_the_class_and_lay_values_out_logically() {
    let small = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let large: Vec<f32> = (0..20u8).map(f32::from).collect();
    for like in [
        Tensor::from_vec(vec![0.0f32], shape![1]).unwrap(),
        test_tensor(vec![0.0], &[1]),
    ] {
        let custom = is_test_class(like.carrier().unwrap());
        // dense: the values are the storage
        let row = Arc::new(Layout::row_major(&[2, 3]).unwrap());
        let t = like.f32_from_slice(&small, row.clone()).unwrap();
        assert_eq!(t.values::<f32>().unwrap(), small.to_vec());
        assert_eq!(is_test_class(t.carrier().unwrap()), custom);
        let big = Arc::new(Layout::row_major(&[20]).unwrap());
        let t = like.f32_from_slice(&large, big).unwrap();
        assert_eq!(t.values::<f32>().unwrap(), large);
        // a column-major layout: values are given in logical order and placed
        let col = Arc::new(Layout::new(shape![2, 3], stride![1, 2]).unwrap());
        let t = like.f32_from_slice(&small, col.clone()).unwrap();
        assert_eq!(t.layout(), &*col);
        assert_eq!(t.values::<f32>().unwrap(), small.to_vec());
        assert_eq!(t.get(&[1, 0]).unwrap(), Scalar::F32(4.0));
        assert_eq!(is_test_class(t.carrier().unwrap()), custom);
        // the wrong number of values
        let e = like.f32_from_slice(&small[..5], row).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value);
    }
}

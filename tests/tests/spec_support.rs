//! Helpers shared by the spec conformance tests (`mod spec_support;` in each `spec_*.rs`).
//!
//! Cargo also builds this file as a test target of its own; it holds no tests.
#![allow(dead_code)]

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use autograd_core::{
    record, Buffer, Carrier, CarrierId, CpuCarrier, DType, Error, ErrorKind, Layout, Operation,
    Result, SavedState, Scalar, Tensor,
};

/// A carrier implementation class of its own (storage delegated to a CPU carrier), so tests can
/// tell "fresh storage of the exact implementation class" apart from "a CPU carrier". Every
/// carrier made from it by `fresh` shares its allocation counter.
#[derive(Debug)]
pub struct TestCarrier {
    inner: CpuCarrier,
    allocations: Arc<AtomicUsize>,
    /// While set, every write fails (after the library validated it), as read-only or
    /// device storage may.
    refuse_writes: Arc<AtomicBool>,
}

impl TestCarrier {
    /// A test carrier holding `data` with a new allocation counter.
    pub fn shared(data: Buffer) -> (Arc<dyn Carrier>, Arc<AtomicUsize>) {
        let allocations = Arc::new(AtomicUsize::new(0));
        let c = TestCarrier {
            inner: CpuCarrier::new(data),
            allocations: allocations.clone(),
            refuse_writes: Arc::new(AtomicBool::new(false)),
        };
        (Arc::new(c), allocations)
    }
}

impl Carrier for TestCarrier {
    fn id(&self) -> CarrierId {
        self.inner.id()
    }
    fn version(&self) -> u64 {
        self.inner.version()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn dtype(&self) -> DType {
        self.inner.dtype()
    }
    fn class_name(&self) -> &'static str {
        "TestCarrier"
    }
    fn read(&self, offset: usize) -> Result<Scalar> {
        self.inner.read(offset)
    }
    fn to_buffer(&self) -> Buffer {
        self.inner.to_buffer()
    }
    fn write(&self, writes: &[(usize, Scalar)]) -> Result<()> {
        if self.refuse_writes.load(Ordering::SeqCst) {
            return Err(Error::Runtime("this TestCarrier refuses writes".into()));
        }
        self.inner.write(writes)
    }
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>> {
        self.allocations.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(TestCarrier {
            inner: CpuCarrier::new(data),
            allocations: self.allocations.clone(),
            refuse_writes: Arc::new(AtomicBool::new(false)),
        }))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A Float32 tensor of flat `dims` (row-major) on a [`TestCarrier`].
pub fn tc(values: &[f32], dims: &[usize]) -> Tensor {
    tc_counted(values, dims).0
}

/// [`tc`] plus the allocation counter of its carrier family.
pub fn tc_counted(values: &[f32], dims: &[usize]) -> (Tensor, Arc<AtomicUsize>) {
    let (carrier, count) = TestCarrier::shared(Buffer::F32(values.to_vec()));
    let t = Tensor::from_parts(carrier, Layout::row_major(dims).unwrap(), 0).unwrap();
    (t, count)
}

/// A switch that makes `t`'s [`TestCarrier`] refuse (or accept again) every write.
pub fn refuse_writes(t: &Tensor, refuse: bool) {
    let c = t.carrier().unwrap();
    let tc = c
        .as_any()
        .downcast_ref::<TestCarrier>()
        .expect("a TestCarrier tensor");
    tc.refuse_writes.store(refuse, Ordering::SeqCst);
}

/// A Float32 tensor over a CPU carrier holding `storage`, seen through `layout` at offset 0.
pub fn with_layout(storage: &[f32], layout: Layout) -> Tensor {
    Tensor::from_parts(CpuCarrier::from_vec(storage.to_vec()), layout, 0).unwrap()
}

/// Whether `t`'s carrier is a [`TestCarrier`].
pub fn on_test_carrier(t: &Tensor) -> bool {
    t.carrier().unwrap().class_id() == TypeId::of::<TestCarrier>()
}

/// Whether `t`'s carrier is a [`CpuCarrier`].
pub fn on_cpu(t: &Tensor) -> bool {
    t.carrier().unwrap().class_id() == TypeId::of::<CpuCarrier>()
}

/// The carrier identity of a one-subtensor tensor.
pub fn carrier_id(t: &Tensor) -> CarrierId {
    t.carrier().unwrap().id()
}

/// `.grad` as layout and bit patterns, for bit-identical comparisons.
pub type GradBits = Option<(Layout, Vec<u32>)>;

/// [`GradBits`] of one tensor.
pub fn grad_bits(t: &Tensor) -> GradBits {
    t.grad().unwrap().map(|g| {
        let bits = g
            .values::<f32>()
            .unwrap()
            .into_iter()
            .map(f32::to_bits)
            .collect();
        (g.layout().clone(), bits)
    })
}

/// [`GradBits`] of several tensors.
pub fn grads_bits(ts: &[&Tensor]) -> Vec<GradBits> {
    ts.iter().map(|t| grad_bits(t)).collect()
}

/// The error of a failed call, checked for its kind and for each `needles` substring.
#[track_caller]
pub fn expect_err<T: Debug>(r: Result<T>, kind: ErrorKind, needles: &[&str]) -> Error {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind(), kind, "unexpected error class: {e}");
    for n in needles {
        assert!(
            e.to_string().contains(n),
            "error `{e}` does not mention `{n}`"
        );
    }
    e
}

/// What a [`probe`] node saw.
#[derive(Debug, Default)]
pub struct Probe {
    calls: AtomicUsize,
    received: Mutex<Vec<Vec<f32>>>,
    classes: Mutex<Vec<TypeId>>,
    layouts: Mutex<Vec<Layout>>,
}

impl Probe {
    /// How often the node's backward ran.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    /// The cotangents it received, in order.
    pub fn received(&self) -> Vec<Vec<f32>> {
        self.received.lock().unwrap().clone()
    }
    /// The carrier classes of the cotangents it received.
    pub fn classes(&self) -> Vec<TypeId> {
        self.classes.lock().unwrap().clone()
    }
    /// The layouts of the cotangents it received.
    pub fn layouts(&self) -> Vec<Layout> {
        self.layouts.lock().unwrap().clone()
    }
}

#[derive(Debug)]
struct ProbeOp {
    saved: SavedState,
    probe: Arc<Probe>,
}

impl Operation for ProbeOp {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        self.probe.calls.fetch_add(1, Ordering::SeqCst);
        self.probe.received.lock().unwrap().push(g.values()?);
        self.probe
            .classes
            .lock()
            .unwrap()
            .push(g.carrier()?.class_id());
        self.probe.layouts.lock().unwrap().push(g.layout().clone());
        let x = self.saved.with("probe", |s| s.input(0).clone())?;
        Ok(vec![Some(x.f32_like(g.values()?)?)])
    }
}

/// The identity function (a compact row-major copy of `x`), recording a node that counts its
/// backward runs and keeps every cotangent it receives.
#[track_caller]
pub fn probe(x: &Tensor) -> (Tensor, Arc<Probe>) {
    let p = Arc::new(Probe::default());
    let out = x.contiguous().unwrap();
    let probe = p.clone();
    let y = record(out, &[x], Vec::new(), move |saved| ProbeOp { saved, probe });
    (y, p)
}

/// Values of a tensor as f32 in logical order.
pub fn v(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().unwrap()
}

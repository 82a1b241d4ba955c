//! The tensor model: constructors, dtypes, multi-subtensor tensors, views sharing storage,
//! mutation and versions, errors, ndarray interop and Display.

use std::sync::Arc;

use autograd_core::{
    shape, stride, CpuCarrier, DType, DTypeCategory, ErrorKind, IntTuple, Layout, Scalar, Shape,
    Tensor,
};
use ndarray::{s, Array2, Array3, ArrayD, Axis, IxDyn};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().unwrap()
}

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// Where a CPU tensor's storage starts, to tell a zero-copy constructor from a copying one.
fn storage_ptr(t: &Tensor) -> *const f32 {
    t.carrier()
        .unwrap()
        .as_cpu()
        .unwrap()
        .with_slice::<f32, _>(<[f32]>::as_ptr)
        .unwrap()
}

fn version(t: &Tensor) -> u64 {
    t.carrier().unwrap().version()
}

fn kind<T: std::fmt::Debug>(r: autograd_core::Result<T>) -> ErrorKind {
    r.unwrap_err().kind()
}

// ---------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------

#[test]
fn from_vec_is_row_major() {
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
    assert_eq!(t.layout().to_string(), "(2,3):(3,1)");
    assert_eq!(t.dims(), vec![2, 3]);
    assert_eq!(t.size(), 6);
    assert_eq!(t.dtype(), &DType::Float32);
    assert_eq!(t.get(&[0, 2]).unwrap(), Scalar::F32(3.0));
    assert_eq!(t.get(&[1, 0]).unwrap(), Scalar::F32(4.0));
    assert_eq!(f32s(&t), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        t.scalars().unwrap(),
        [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].map(Scalar::F32).to_vec()
    );
    assert_eq!(t.subtensor_count(), 1);
    assert_eq!(t.offset(), 0);
}

#[test]
fn from_vec_with_a_nested_mode() {
    // top-level row-major; inside the nested mode (2,3) colexicographic
    let t = Tensor::from_vec(iota(12), shape![2, [2, 3]]).unwrap();
    assert_eq!(t.layout().stride(), &stride![6, [1, 2]]);
    assert_eq!(t.dims(), vec![2, 6]);
    assert_eq!(f32s(&t), iota(12));
    // nested entry 4 is sub-coordinate (0, 2)
    assert_eq!(t.get(&[1, 4]).unwrap(), Scalar::F32(10.0));
    let c = IntTuple::from(vec![IntTuple::from(1), IntTuple::from(vec![0, 2])]);
    assert_eq!(t.get_coord(&c).unwrap(), Scalar::F32(10.0));
    let c = IntTuple::from(vec![IntTuple::from(1), IntTuple::from(vec![1, 0])]);
    assert_eq!(t.get_coord(&c).unwrap(), Scalar::F32(7.0));
    assert_eq!(t.to_string(), "[[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]");
}

#[test]
fn from_vec_rejects_a_wrong_length() {
    let e = Tensor::from_vec(vec![1.0f32; 5], shape![2, 3]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.message().contains('5') && e.message().contains("(2,3)"),
        "{e}"
    );
    assert_eq!(
        kind(Tensor::from_vec(vec![1i32; 7], shape![2, 3])),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Tensor::from_vec(vec![1.0f32; 2], shape![2, -1])),
        ErrorKind::Value
    );
    // an empty shape holds zero values
    let t = Tensor::from_vec(Vec::<f32>::new(), shape![0, 3]).unwrap();
    assert_eq!((t.size(), t.dims()), (0, vec![0, 3]));
    assert!(f32s(&t).is_empty());
}

#[test]
fn full_zeros_ones_for_every_dtype() {
    let cases: [(DType, Scalar, Scalar); 5] = [
        (DType::Float32, Scalar::F32(0.0), Scalar::F32(1.0)),
        (DType::Float64, Scalar::F64(0.0), Scalar::F64(1.0)),
        (DType::Int32, Scalar::I32(0), Scalar::I32(1)),
        (DType::Int64, Scalar::I64(0), Scalar::I64(1)),
        (DType::Bool, Scalar::Bool(false), Scalar::Bool(true)),
    ];
    for (dtype, zero, one) in cases {
        let z = Tensor::zeros(shape![2, 3], &dtype).unwrap();
        assert_eq!(z.dtype(), &dtype);
        assert_eq!(z.carrier().unwrap().dtype(), dtype);
        assert_eq!(z.layout().to_string(), "(2,3):(3,1)");
        assert_eq!(z.scalars().unwrap(), vec![zero; 6], "{dtype}");
        let o = Tensor::ones(shape![3], &dtype).unwrap();
        assert_eq!(o.dtype(), &dtype);
        assert_eq!(o.scalars().unwrap(), vec![one; 3], "{dtype}");
    }
    let f = Tensor::full(shape![2, 2], 2.5f64).unwrap();
    assert_eq!(f.dtype(), &DType::Float64);
    assert_eq!(f.values::<f64>().unwrap(), vec![2.5; 4]);
    let f = Tensor::full(shape![3], -7i64).unwrap();
    assert_eq!(f.values::<i64>().unwrap(), vec![-7; 3]);
    let f = Tensor::full(shape![2], true).unwrap();
    assert_eq!(f.values::<bool>().unwrap(), vec![true, true]);
    // categories and compound dtypes are not storage dtypes
    let floating = DType::Category(DTypeCategory::Floating);
    assert_eq!(kind(Tensor::zeros(shape![2], &floating)), ErrorKind::Type);
    assert_eq!(kind(Tensor::ones(shape![2], &floating)), ErrorKind::Type);
    let rec = DType::compound([("a", DType::Float32)]).unwrap();
    assert_eq!(kind(Tensor::zeros(shape![2], &rec)), ErrorKind::Type);
    assert_eq!(
        kind(Tensor::zeros(shape![-2], &DType::Float32)),
        ErrorKind::Value
    );
}

#[test]
fn scalar_has_layout_1_1() {
    let t = Tensor::scalar(2.5);
    assert_eq!(t.layout().to_string(), "(1):(1)");
    assert_eq!(t.layout(), &Layout::new(shape![1], stride![1]).unwrap());
    assert_eq!(t.dtype(), &DType::Float32);
    assert!(t.is_differentiable());
    assert_eq!(t.get(&[0]).unwrap(), Scalar::F32(2.5));
    assert_eq!(f32s(&t), vec![2.5]);
    assert_eq!(t.to_string(), "[2.5]");
}

#[test]
fn from_parts_is_validated_against_the_carrier() {
    let c = CpuCarrier::from_vec(iota(6));
    // (2,2):(1,2) at offset 1 addresses 1..=4
    let t = Tensor::from_parts(
        c.clone(),
        Layout::new(shape![2, 2], stride![1, 2]).unwrap(),
        1,
    )
    .unwrap();
    assert_eq!(f32s(&t), vec![1.0, 3.0, 2.0, 4.0]);
    assert_eq!(t.offset(), 1);
    assert_eq!(t.carrier().unwrap().id(), c.id());
    assert_eq!(t.dtype(), &DType::Float32);
    // the largest fitting offset, then one more
    let l = Layout::new(shape![2, 2], stride![1, 2]).unwrap();
    assert!(Tensor::from_parts(c.clone(), l.clone(), 2).is_ok());
    let e = Tensor::from_parts(c.clone(), l, 3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains('6'), "{e}");
    let big = Layout::row_major(&[7]).unwrap();
    assert_eq!(
        kind(Tensor::from_parts(c.clone(), big, 0)),
        ErrorKind::Value
    );
    // an empty layout needs no storage
    let empty = Layout::row_major(&[0, 4]).unwrap();
    assert_eq!(Tensor::from_parts(c, empty, 6).unwrap().size(), 0);
    // the dtype follows the carrier
    let t = Tensor::from_parts(
        CpuCarrier::from_vec(vec![1i64, 2]),
        Layout::row_major(&[2]).unwrap(),
        0,
    )
    .unwrap();
    assert_eq!(t.dtype(), &DType::Int64);
}

#[test]
fn int32_and_bool_tensors() {
    let i = Tensor::from_vec(vec![1i32, -2, 3, 4], shape![2, 2]).unwrap();
    assert_eq!(i.dtype(), &DType::Int32);
    assert_eq!(i.get(&[0, 1]).unwrap(), Scalar::I32(-2));
    assert_eq!(i.values::<i32>().unwrap(), vec![1, -2, 3, 4]);
    assert_eq!(i.to_string(), "[[1, -2], [3, 4]]");
    i.set(&[1, 1], 40i32).unwrap();
    i.set(&[1, 0], 30i64).unwrap(); // an in-range Int64 is stored as Int32
    assert_eq!(i.values::<i32>().unwrap(), vec![1, -2, 30, 40]);
    assert_eq!(kind(i.set(&[0, 0], 1i64 << 40)), ErrorKind::Value);
    assert_eq!(kind(i.set(&[0, 0], 1.5f32)), ErrorKind::Type);
    assert_eq!(kind(i.set(&[0, 0], true)), ErrorKind::Type);
    assert_eq!(kind(i.values::<f32>()), ErrorKind::Type);
    assert_eq!(kind(i.values::<i64>()), ErrorKind::Type);

    let b = Tensor::from_vec(vec![true, false, true], shape![3]).unwrap();
    assert_eq!(b.dtype(), &DType::Bool);
    assert_eq!(b.get(&[1]).unwrap(), Scalar::Bool(false));
    b.set(&[1], true).unwrap();
    assert_eq!(b.values::<bool>().unwrap(), vec![true, true, true]);
    assert_eq!(kind(b.set(&[0], 1i32)), ErrorKind::Type);
    assert_eq!(kind(b.scale_(2.0)), ErrorKind::Type);
    assert_eq!(kind(b.add_(&b.contiguous().unwrap())), ErrorKind::Type);
    assert_eq!(b.values::<bool>().unwrap(), vec![true, true, true]);
    assert_eq!(b.to_string(), "[true, true, true]");
    assert!(!i.is_differentiable() && !b.is_differentiable());
}

#[test]
fn only_float32_is_differentiable() {
    let f = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![4]).unwrap();
    assert!(f.is_differentiable());
    assert!(!Tensor::zeros(shape![2], &DType::Float64)
        .unwrap()
        .is_differentiable());
    assert!(!Tensor::zeros(shape![2], &DType::Int64)
        .unwrap()
        .is_differentiable());
    // the same Float32 storage under a category is not differentiable
    let floating = f
        .with_logical_dtype(DType::Category(DTypeCategory::Floating))
        .unwrap();
    assert_eq!(floating.dtype(), &DType::Category(DTypeCategory::Floating));
    assert!(!floating.is_differentiable());
    assert_eq!(f32s(&floating), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(floating.carrier().unwrap().id(), f.carrier().unwrap().id());
    let any = f
        .with_logical_dtype(DType::Category(DTypeCategory::Any))
        .unwrap();
    assert!(!any.is_differentiable());
    // relabelled back to exactly Float32 it is differentiable again
    assert!(floating
        .with_logical_dtype(DType::Float32)
        .unwrap()
        .is_differentiable());
    // categories that do not contain the storage dtype, and other simple dtypes, are refused
    assert_eq!(
        kind(f.with_logical_dtype(DType::Category(DTypeCategory::Integer))),
        ErrorKind::Type
    );
    assert_eq!(kind(f.with_logical_dtype(DType::Float64)), ErrorKind::Type);
    let d = Tensor::zeros(shape![2], &DType::Float64).unwrap();
    assert_eq!(kind(d.with_logical_dtype(DType::Float32)), ErrorKind::Type);
}

#[test]
fn compound_dtype_over_float32_storage() {
    let complex = DType::compound([("re", DType::Float32), ("im", DType::Float32)]).unwrap();
    // two records over four floats
    let c = CpuCarrier::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
    let base = Tensor::from_parts(c, Layout::row_major(&[2]).unwrap(), 0).unwrap();
    let z = base.with_logical_dtype(complex.clone()).unwrap();
    assert_eq!(z.dtype(), &complex);
    assert!(!z.is_differentiable());
    assert_eq!(
        z.get_record(&[1]).unwrap(),
        vec![Scalar::F32(3.0), Scalar::F32(4.0)]
    );
    assert_eq!(
        z.get_record(&[0]).unwrap(),
        vec![Scalar::F32(1.0), Scalar::F32(2.0)]
    );
    assert_eq!(kind(z.get(&[0])), ErrorKind::NotImplemented);
    assert_eq!(kind(z.get_record(&[2])), ErrorKind::Value);
    assert_eq!(f32s(&z), vec![1.0, 2.0, 3.0, 4.0]);
    // a contiguous copy keeps the dtype and the records
    let copy = z.contiguous().unwrap();
    assert_eq!(copy.dtype(), &complex);
    assert_eq!(
        copy.get_record(&[1]).unwrap(),
        vec![Scalar::F32(3.0), Scalar::F32(4.0)]
    );
    // four records do not fit in four floats
    let all = Tensor::from_vec(vec![0.0f32; 4], shape![4]).unwrap();
    assert_eq!(
        kind(all.with_logical_dtype(complex.clone())),
        ErrorKind::Value
    );
    // a record of another storage dtype is refused
    let ints = DType::compound([("a", DType::Int32), ("b", DType::Int32)]).unwrap();
    assert_eq!(kind(base.with_logical_dtype(ints)), ErrorKind::Type);
    // element-wise mutation of records is not supported, and changes nothing
    let v = base.carrier().unwrap().version();
    assert_eq!(kind(z.set(&[0], 9.0f32)), ErrorKind::NotImplemented);
    assert_eq!(kind(z.fill(9.0f32)), ErrorKind::NotImplemented);
    assert_eq!(base.carrier().unwrap().version(), v);
}

// ---------------------------------------------------------------------------------------------
// Multi-subtensor tensors
// ---------------------------------------------------------------------------------------------

#[test]
fn from_subtensors_assembles_pieces_along_the_first_mode() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
    let b = Tensor::from_vec(vec![7.0f32, 8.0, 9.0], shape![1, 3]).unwrap();
    // a non-contiguous piece: (2,3) from the transpose of a (3,2)
    let c0 = Tensor::from_vec(vec![10.0f32, 13.0, 11.0, 14.0, 12.0, 15.0], shape![3, 2]).unwrap();
    let c = c0.transpose(0, 1).unwrap();
    assert_eq!(f32s(&c), vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0]);
    let t = Tensor::from_subtensors(&[a.clone(), b.clone(), c.clone()]).unwrap();
    assert_eq!(t.subtensor_count(), 3);
    assert_eq!(t.dims(), vec![5, 3]);
    assert_eq!(t.shape(), &shape![5, 3]);
    assert_eq!(t.dtype(), &DType::Float32);
    assert_eq!(f32s(&t), (1..=15).map(|x| x as f32).collect::<Vec<_>>());
    assert_eq!(t.get(&[0, 0]).unwrap(), Scalar::F32(1.0));
    assert_eq!(t.get(&[1, 2]).unwrap(), Scalar::F32(6.0));
    assert_eq!(t.get(&[2, 1]).unwrap(), Scalar::F32(8.0));
    assert_eq!(t.get(&[3, 0]).unwrap(), Scalar::F32(10.0));
    assert_eq!(t.get(&[4, 2]).unwrap(), Scalar::F32(15.0));
    assert_eq!(kind(t.get(&[5, 0])), ErrorKind::Value);
    assert_eq!(kind(t.get(&[0, 3])), ErrorKind::Value);
    assert_eq!(kind(t.get(&[0])), ErrorKind::Value);
    // the pieces are the storage: no copy
    let subs = t.subtensors();
    assert_eq!(subs.len(), 3);
    assert_eq!(subs[1].carrier.id(), b.carrier().unwrap().id());
    assert_eq!(subs[2].layout.as_ref(), c.layout());
    assert_eq!(t.carriers().len(), 3);
    assert_eq!(kind(t.carrier()), ErrorKind::NotImplemented);
    assert_eq!(kind(t.single()), ErrorKind::NotImplemented);
    // a write through the assembled tensor lands in the piece, with one bump there only
    let (va, vb) = (version(&a), version(&b));
    t.set(&[2, 1], 80.0f32).unwrap();
    assert_eq!(b.get(&[0, 1]).unwrap(), Scalar::F32(80.0));
    assert_eq!((version(&a), version(&b)), (va, vb + 1));
    t.set(&[3, 2], 120.0f32).unwrap();
    assert_eq!(c0.get(&[2, 0]).unwrap(), Scalar::F32(120.0));
    assert_eq!(kind(t.set(&[5, 0], 0.0f32)), ErrorKind::Value);
    // and a write to a piece is visible in the assembled tensor
    a.set(&[1, 1], 50.0f32).unwrap();
    assert_eq!(t.get(&[1, 1]).unwrap(), Scalar::F32(50.0));
    // readers and copies
    assert_eq!(
        t.to_string(),
        "[[1, 2, 3], [4, 50, 6], [7, 80, 9], [10, 11, 120], [13, 14, 15]]"
    );
    let flat = t.contiguous().unwrap();
    assert_eq!(flat.subtensor_count(), 1);
    assert_eq!(f32s(&flat), f32s(&t));
    let arr = t.to_array::<f32>().unwrap();
    assert_eq!(arr.shape(), &[5, 3]);
    assert_eq!(arr[[3, 2]], 120.0);
    let r = t.reshape(&[15]).unwrap();
    assert_eq!(r.subtensor_count(), 1);
    assert_eq!(f32s(&r), f32s(&t));
    // views of a multi-subtensor tensor are not supported
    assert_eq!(kind(t.narrow(0, 0, 1)), ErrorKind::NotImplemented);
    assert_eq!(kind(t.transpose(0, 1)), ErrorKind::NotImplemented);
}

#[test]
fn multi_subtensor_mutations_bump_each_carrier_once() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![1, 2]).unwrap();
    let b = Tensor::from_vec(vec![3.0f32, 4.0, 5.0, 6.0], shape![2, 2]).unwrap();
    let t = Tensor::from_subtensors(&[a.clone(), b.clone()]).unwrap();
    let (va, vb) = (version(&a), version(&b));
    t.fill(0.5f32).unwrap();
    assert_eq!((version(&a), version(&b)), (va + 1, vb + 1));
    assert_eq!(f32s(&t), vec![0.5; 6]);
    t.scale_(4.0).unwrap();
    assert_eq!((version(&a), version(&b)), (va + 2, vb + 2));
    let src = Tensor::from_vec(iota(6), shape![3, 2]).unwrap();
    t.add_(&src).unwrap();
    assert_eq!(f32s(&a), vec![2.0, 3.0]);
    assert_eq!(f32s(&b), vec![4.0, 5.0, 6.0, 7.0]);
    t.copy_from(&src).unwrap();
    assert_eq!(f32s(&t), iota(6));
    assert_eq!((version(&a), version(&b)), (va + 4, vb + 4));
    // two pieces over one carrier: one bump per mutation
    let whole = Tensor::from_vec(iota(6), shape![3, 2]).unwrap();
    let t = Tensor::from_subtensors(&[
        whole.narrow(0, 2, 1).unwrap(),
        whole.narrow(0, 0, 2).unwrap(),
    ])
    .unwrap();
    assert_eq!(f32s(&t), vec![4.0, 5.0, 0.0, 1.0, 2.0, 3.0]);
    assert_eq!(t.carriers().len(), 1);
    let v = version(&whole);
    t.fill(1.0f32).unwrap();
    assert_eq!(version(&whole), v + 1);
}

#[test]
fn from_subtensors_rejects_mismatched_pieces() {
    let a = Tensor::from_vec(iota(6), shape![2, 3]).unwrap();
    assert_eq!(kind(Tensor::from_subtensors(&[])), ErrorKind::Value);
    // trailing shape differs
    let b = Tensor::from_vec(iota(4), shape![1, 4]).unwrap();
    let e = Tensor::from_subtensors(&[a.clone(), b]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("(1,4)"), "{e}");
    // rank differs
    let b = Tensor::from_vec(iota(3), shape![3]).unwrap();
    assert_eq!(
        kind(Tensor::from_subtensors(&[a.clone(), b])),
        ErrorKind::Value
    );
    // dtype differs
    let b = Tensor::from_vec(vec![1i32, 2, 3], shape![1, 3]).unwrap();
    assert_eq!(
        kind(Tensor::from_subtensors(&[a.clone(), b])),
        ErrorKind::Type
    );
    // a nested first mode cannot be cut into pieces
    let n = Tensor::from_vec(iota(6), shape![[2, 1], 3]).unwrap();
    assert_eq!(
        kind(Tensor::from_subtensors(&[n.clone(), n])),
        ErrorKind::Value
    );
    // a rank-0 piece has no first mode
    let r0 = a.select(0, 0).unwrap().select(0, 0).unwrap();
    assert_eq!(r0.layout().rank(), 0);
    assert_eq!(kind(Tensor::from_subtensors(&[r0])), ErrorKind::Value);
    // one category label over pieces of different storage dtypes
    let floating = DType::Category(DTypeCategory::Floating);
    let f = a.with_logical_dtype(floating.clone()).unwrap();
    let d = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], shape![1, 3])
        .unwrap()
        .with_logical_dtype(floating.clone())
        .unwrap();
    let e = Tensor::from_subtensors(&[f.clone(), d]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert!(e.message().contains("Float64"), "{e}");
    // the same label over the same storage dtype is fine
    let ok = Tensor::from_subtensors(&[f.clone(), f]).unwrap();
    assert_eq!(ok.dtype(), &floating);
    assert_eq!(f32s(&ok.contiguous().unwrap()).len(), 12);
    // a piece with several subtensors
    let multi = Tensor::from_subtensors(&[a.clone(), a.clone()]).unwrap();
    assert_eq!(
        kind(Tensor::from_subtensors(&[a.clone(), multi])),
        ErrorKind::NotImplemented
    );
}

// ---------------------------------------------------------------------------------------------
// Views share the carrier
// ---------------------------------------------------------------------------------------------

#[test]
fn narrow_shares_storage_both_ways() {
    let t = Tensor::from_vec(iota(12), shape![4, 3]).unwrap();
    let v = t.narrow(0, 1, 2).unwrap();
    assert_eq!(v.dims(), vec![2, 3]);
    assert_eq!(f32s(&v), vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    assert_eq!(v.carrier().unwrap().id(), t.carrier().unwrap().id());
    assert_eq!(v.offset(), 3);
    let w = t.narrow(1, 1, 2).unwrap();
    assert_eq!(f32s(&w), vec![1.0, 2.0, 4.0, 5.0, 7.0, 8.0, 10.0, 11.0]);
    assert_eq!(w.layout().to_string(), "(4,2):(3,1)");

    let v0 = version(&t);
    v.set(&[0, 1], 100.0f32).unwrap();
    assert_eq!(t.get(&[1, 1]).unwrap(), Scalar::F32(100.0));
    assert_eq!(w.get(&[1, 0]).unwrap(), Scalar::F32(100.0));
    assert_eq!(
        (version(&t), version(&v), version(&w)),
        (v0 + 1, v0 + 1, v0 + 1)
    );
    t.set(&[2, 2], -1.0f32).unwrap();
    assert_eq!(v.get(&[1, 2]).unwrap(), Scalar::F32(-1.0));
    assert_eq!(w.get(&[2, 1]).unwrap(), Scalar::F32(-1.0));
    assert_eq!(version(&v), v0 + 2);
    // narrowing a narrow
    let vv = v.narrow(1, 2, 1).unwrap();
    assert_eq!(f32s(&vv), vec![5.0, -1.0]);
    // errors
    assert_eq!(kind(t.narrow(0, 3, 2)), ErrorKind::Value);
    assert_eq!(kind(t.narrow(0, usize::MAX, 2)), ErrorKind::Value);
    assert_eq!(kind(t.narrow(2, 0, 1)), ErrorKind::Value);
    let n = Tensor::from_vec(iota(12), shape![2, [2, 3]]).unwrap();
    assert_eq!(kind(n.narrow(1, 0, 1)), ErrorKind::NotImplemented);
    // an empty narrow at the end is fine
    assert_eq!(t.narrow(0, 4, 0).unwrap().size(), 0);
}

#[test]
fn select_permute_transpose_share_storage() {
    let t = Tensor::from_vec(iota(24), shape![2, 3, 4]).unwrap();
    let s = t.select(1, 2).unwrap();
    assert_eq!(s.dims(), vec![2, 4]);
    assert_eq!(f32s(&s), vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]);
    let p = t.permute(&[2, 0, 1]).unwrap();
    assert_eq!(p.dims(), vec![4, 2, 3]);
    assert_eq!(p.get(&[3, 1, 2]).unwrap(), t.get(&[1, 2, 3]).unwrap());
    assert_eq!(p.layout().stride(), &stride![1, 12, 4]);
    let tr = t.transpose(0, 2).unwrap();
    assert_eq!(tr.dims(), vec![4, 3, 2]);
    assert_eq!(tr.get(&[1, 2, 0]).unwrap(), Scalar::F32(9.0));
    for v in [&s, &p, &tr] {
        assert_eq!(v.carrier().unwrap().id(), t.carrier().unwrap().id());
    }
    let v0 = version(&t);
    s.set(&[1, 3], 0.5f32).unwrap();
    assert_eq!(t.get(&[1, 2, 3]).unwrap(), Scalar::F32(0.5));
    assert_eq!(p.get(&[3, 1, 2]).unwrap(), Scalar::F32(0.5));
    assert_eq!(tr.get(&[3, 2, 1]).unwrap(), Scalar::F32(0.5));
    tr.set(&[0, 0, 1], 7.5f32).unwrap();
    assert_eq!(t.get(&[1, 0, 0]).unwrap(), Scalar::F32(7.5));
    assert_eq!(
        (version(&t), version(&s), version(&p)),
        (v0 + 2, v0 + 2, v0 + 2)
    );
    // select down to rank 0
    let r0 = s.select(0, 1).unwrap().select(0, 3).unwrap();
    assert_eq!(r0.dims(), Vec::<usize>::new());
    assert_eq!(r0.size(), 1);
    assert_eq!(r0.get(&[]).unwrap(), Scalar::F32(0.5));
    assert_eq!(r0.to_string(), "0.5");
    // select on a nested mode uses its colexicographic index
    let n = Tensor::from_vec(iota(12), shape![2, [2, 3]]).unwrap();
    assert_eq!(f32s(&n.select(1, 3).unwrap()), vec![3.0, 9.0]);
    assert_eq!(f32s(&n.select(0, 1).unwrap()), iota(12)[6..].to_vec());
    // errors
    assert_eq!(kind(t.select(3, 0)), ErrorKind::Value);
    assert_eq!(kind(t.select(1, 3)), ErrorKind::Value);
    assert_eq!(kind(t.permute(&[0, 1])), ErrorKind::Value);
    assert_eq!(kind(t.permute(&[0, 1, 1])), ErrorKind::Value);
    assert_eq!(kind(t.permute(&[0, 1, 3])), ErrorKind::Value);
    assert_eq!(kind(t.transpose(0, 3)), ErrorKind::Value);
    assert_eq!(version(&t), v0 + 2);
}

#[test]
fn broadcast_to_is_a_stride_zero_view() {
    let row = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
    let b = row.broadcast_to(&[2, 3]).unwrap();
    assert_eq!(b.layout().to_string(), "(2,3):(0,1)");
    assert_eq!(f32s(&b), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    assert_eq!(b.layout().aliasing(), autograd_core::Aliasing::Broadcast);
    assert_eq!(b.carrier().unwrap().id(), row.carrier().unwrap().id());
    row.set(&[1], 20.0f32).unwrap();
    assert_eq!(f32s(&b), vec![1.0, 20.0, 3.0, 1.0, 20.0, 3.0]);
    // extent-1 modes repeat
    let col = Tensor::from_vec(vec![5.0f32, 6.0], shape![2, 1]).unwrap();
    let c = col.broadcast_to(&[3, 2, 4]).unwrap();
    assert_eq!(c.dims(), vec![3, 2, 4]);
    assert_eq!(c.get(&[2, 1, 3]).unwrap(), Scalar::F32(6.0));
    assert_eq!(c.get(&[0, 0, 2]).unwrap(), Scalar::F32(5.0));
    // incompatible extents and fewer modes are refused
    assert_eq!(kind(row.broadcast_to(&[2, 4])), ErrorKind::Value);
    assert_eq!(kind(col.broadcast_to(&[2])), ErrorKind::Value);
    assert_eq!(kind(col.broadcast_to(&[3, 3])), ErrorKind::Value);
}

#[test]
fn reshape_views_when_contiguous_and_copies_otherwise() {
    let t = Tensor::from_vec(iota(6), shape![2, 3]).unwrap();
    let r = t.reshape(&[3, 2]).unwrap();
    assert_eq!(r.carrier().unwrap().id(), t.carrier().unwrap().id());
    assert_eq!(r.layout().to_string(), "(3,2):(2,1)");
    assert_eq!(f32s(&r), iota(6));
    r.set(&[2, 0], 40.0f32).unwrap();
    assert_eq!(t.get(&[1, 1]).unwrap(), Scalar::F32(40.0));
    // a contiguous view at an offset reshapes in place too
    let tail = t.narrow(0, 1, 1).unwrap().reshape(&[3]).unwrap();
    assert_eq!(tail.carrier().unwrap().id(), t.carrier().unwrap().id());
    assert_eq!(f32s(&tail), vec![3.0, 40.0, 5.0]);

    // the transpose is not contiguous: reshape copies, in logical order
    let tr = t.transpose(0, 1).unwrap();
    let flat = tr.reshape(&[6]).unwrap();
    assert_eq!(f32s(&flat), vec![0.0, 3.0, 1.0, 40.0, 2.0, 5.0]);
    assert_ne!(flat.carrier().unwrap().id(), t.carrier().unwrap().id());
    assert!(flat.layout().is_row_major_contiguous());
    let v0 = version(&t);
    flat.set(&[0], -9.0f32).unwrap();
    assert_eq!(t.get(&[0, 0]).unwrap(), Scalar::F32(0.0));
    assert_eq!(version(&t), v0);
    // a broadcast view copies too
    let row = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
    let b = row.broadcast_to(&[2, 2]).unwrap().reshape(&[4]).unwrap();
    assert_eq!(f32s(&b), vec![1.0, 2.0, 1.0, 2.0]);
    assert!(b.layout().is_injective());
    assert_ne!(b.carrier().unwrap().id(), row.carrier().unwrap().id());
    // wrong sizes
    let e = t.reshape(&[4]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("[4]"), "{e}");
}

#[test]
fn with_layout_detached_is_an_arbitrary_validated_view() {
    let t = Tensor::from_vec(iota(8), shape![8]).unwrap();
    // a 2 x 2 window with a stride-3 row at offset 1
    let w = t
        .with_layout_detached(Layout::new(shape![2, 2], stride![3, 1]).unwrap(), 1)
        .unwrap();
    assert_eq!(f32s(&w), vec![1.0, 2.0, 4.0, 5.0]);
    assert_eq!(w.carrier().unwrap().id(), t.carrier().unwrap().id());
    w.set(&[1, 1], 50.0f32).unwrap();
    assert_eq!(t.get(&[5]).unwrap(), Scalar::F32(50.0));
    // a hierarchical layout over the same storage
    let h = t
        .with_layout_detached(
            Layout::new(shape![2, [2, 2]], stride![1, [2, 4]]).unwrap(),
            0,
        )
        .unwrap();
    assert_eq!(f32s(&h), vec![0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 50.0, 7.0]);
    let c = IntTuple::from(vec![IntTuple::from(1), IntTuple::from(vec![0, 1])]);
    assert_eq!(h.get_coord(&c).unwrap(), Scalar::F32(50.0));
    h.set_coord(&c, 55.0f32).unwrap();
    assert_eq!(t.get(&[5]).unwrap(), Scalar::F32(55.0));
    // does not fit
    let e = t
        .with_layout_detached(Layout::new(shape![2, 2], stride![3, 1]).unwrap(), 4)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(
        kind(t.with_layout_detached(Layout::row_major(&[9]).unwrap(), 0)),
        ErrorKind::Value
    );
}

#[test]
fn clones_are_the_same_tensor_and_detach_shares_storage() {
    let t = Tensor::from_vec(iota(4), shape![4]).unwrap();
    let c = t.clone();
    assert!(c.same_tensor(&t));
    assert_eq!(c.id(), t.id());
    let d = t.detach();
    assert!(!d.same_tensor(&t));
    assert_eq!(d.carrier().unwrap().id(), t.carrier().unwrap().id());
    d.set(&[3], 30.0f32).unwrap();
    assert_eq!(c.get(&[3]).unwrap(), Scalar::F32(30.0));
    assert_eq!(version(&c), 1);
    // contiguous() is a copy in fresh storage with no sharing
    let k = t.contiguous().unwrap();
    assert_ne!(k.carrier().unwrap().id(), t.carrier().unwrap().id());
    assert_eq!(k.carrier().unwrap().version(), 0);
    k.set(&[0], 9.0f32).unwrap();
    assert_eq!(t.get(&[0]).unwrap(), Scalar::F32(0.0));
}

#[test]
fn tensors_are_send_and_sync() {
    let t = Tensor::from_vec(iota(4), shape![4]).unwrap();
    let view = t.narrow(0, 2, 2).unwrap();
    std::thread::spawn(move || view.set(&[1], 99.0f32).unwrap())
        .join()
        .unwrap();
    assert_eq!(t.get(&[3]).unwrap(), Scalar::F32(99.0));
    assert_eq!(version(&t), 1);
}

// ---------------------------------------------------------------------------------------------
// Mutation, versions and errors
// ---------------------------------------------------------------------------------------------

#[test]
fn every_successful_mutation_bumps_once_and_failures_do_not() {
    let t = Tensor::from_vec(iota(6), shape![2, 3]).unwrap();
    let view = t.transpose(0, 1).unwrap();
    let check = |expect: u64| {
        assert_eq!(version(&t), expect);
        assert_eq!(version(&view), expect);
    };
    check(0);
    t.set(&[0, 0], 1.0f32).unwrap();
    check(1);
    view.set(&[2, 1], 2.0f32).unwrap();
    check(2);
    t.set_coord(&IntTuple::from(vec![1, 1]), 3.0f32).unwrap();
    check(3);
    view.fill(0.5f32).unwrap();
    check(4);
    t.scale_(2.0).unwrap();
    check(5);
    assert_eq!(f32s(&t), vec![1.0; 6]);
    let src = Tensor::from_vec(iota(6), shape![3, 2]).unwrap();
    view.copy_from(&src).unwrap();
    check(6);
    assert_eq!(f32s(&t), vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
    view.add_(&src).unwrap();
    check(7);
    assert_eq!(f32s(&view), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    assert_eq!(version(&src), 0, "reading a source does not bump it");

    // failures change nothing and bump nothing
    let before = f32s(&t);
    assert_eq!(kind(t.set(&[2, 0], 1.0f32)), ErrorKind::Value);
    assert_eq!(kind(t.set(&[0, 3], 1.0f32)), ErrorKind::Value);
    assert_eq!(kind(t.set(&[0], 1.0f32)), ErrorKind::Value);
    assert_eq!(kind(t.set(&[0, 0, 0], 1.0f32)), ErrorKind::Value);
    assert_eq!(kind(t.set(&[0, 0], true)), ErrorKind::Type);
    assert_eq!(
        kind(t.set_coord(&IntTuple::from(vec![0, 3]), 1.0f32)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(t.set_coord(&IntTuple::from(vec![0, -1]), 1.0f32)),
        ErrorKind::Value
    );
    assert_eq!(kind(t.fill(false)), ErrorKind::Type);
    assert_eq!(
        kind(t.copy_from(&src)),
        ErrorKind::Value,
        "shape (3,2) into (2,3)"
    );
    assert_eq!(kind(t.add_(&src)), ErrorKind::Value);
    let ints = Tensor::from_vec(vec![1i32; 6], shape![2, 3]).unwrap();
    assert_eq!(kind(t.copy_from(&ints)), ErrorKind::Type);
    assert_eq!(kind(t.add_(&ints)), ErrorKind::Type);
    assert_eq!(kind(ints.scale_(2.0)), ErrorKind::Type);
    check(7);
    assert_eq!(f32s(&t), before);
}

#[test]
fn out_of_range_reads_are_value_errors_naming_the_coordinate() {
    let t = Tensor::from_vec(iota(6), shape![2, 3]).unwrap();
    let e = t.get(&[2, 1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("[2, 1]"), "{e}");
    assert_eq!(kind(t.get(&[1, 3])), ErrorKind::Value);
    assert_eq!(kind(t.get(&[])), ErrorKind::Value);
    assert_eq!(kind(t.get(&[usize::MAX, 0])), ErrorKind::Value);
    assert_eq!(kind(t.get_record(&[0, 9])), ErrorKind::Value);
    assert_eq!(
        kind(t.get_coord(&IntTuple::from(vec![2, 0]))),
        ErrorKind::Value
    );
    assert_eq!(
        kind(t.get_coord(&IntTuple::from(vec![0, 1, 2]))),
        ErrorKind::Value
    );
    // an integer coordinate is the colexicographic index over the whole shape
    assert_eq!(t.get_coord(&IntTuple::from(1)).unwrap(), Scalar::F32(3.0));
    assert_eq!(kind(t.get_coord(&IntTuple::from(6))), ErrorKind::Value);
    // a view checks its own extents, not the carrier's
    let v = t.narrow(1, 0, 2).unwrap();
    assert_eq!(kind(v.get(&[0, 2])), ErrorKind::Value);
    assert_eq!(kind(v.set(&[0, 2], 1.0f32)), ErrorKind::Value);
    assert_eq!(t.get(&[0, 2]).unwrap(), Scalar::F32(2.0));
}

#[test]
fn writes_into_a_broadcast_view_are_rejected() {
    let row = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
    let b = row.broadcast_to(&[2, 3]).unwrap();
    let src = Tensor::from_vec(iota(6), shape![2, 3]).unwrap();
    for (name, r) in [
        ("copy_from", b.copy_from(&src)),
        ("add_", b.add_(&src)),
        ("scale_", b.scale_(2.0)),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{name}");
        assert!(e.message().contains("(2,3):(0,1)"), "{name}: {e}");
    }
    assert_eq!(f32s(&row), vec![1.0, 2.0, 3.0]);
    assert_eq!(version(&row), 0);
    // an aliasing layout that is not a broadcast is rejected the same way
    let base = Tensor::from_vec(iota(4), shape![4]).unwrap();
    let overlap = base
        .with_layout_detached(Layout::new(shape![2, 2], stride![1, 1]).unwrap(), 0)
        .unwrap();
    assert_eq!(
        kind(overlap.copy_from(&Tensor::zeros(shape![2, 2], &DType::Float32).unwrap())),
        ErrorKind::Value
    );
    assert_eq!(f32s(&base), iota(4));
    assert_eq!(version(&base), 0);
}

#[test]
fn element_writes_into_a_broadcast_view_write_the_shared_slot() {
    let row = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
    let b = row.broadcast_to(&[2, 3]).unwrap();
    b.set(&[1, 0], 9.0f32).unwrap();
    assert_eq!(f32s(&b), vec![9.0, 2.0, 3.0, 9.0, 2.0, 3.0]);
    assert_eq!(f32s(&row), vec![9.0, 2.0, 3.0]);
    b.fill(4.0f32).unwrap();
    assert_eq!(f32s(&row), vec![4.0; 3]);
    // one bump per call
    assert_eq!(version(&row), 2);
}

#[test]
fn writes_into_overlapping_subtensors_are_rejected() {
    // two pieces over the same storage: the assembled tensor is not injective
    let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![1, 2]).unwrap();
    let t = Tensor::from_subtensors(&[x.clone(), x.clone()]).unwrap();
    assert_eq!(f32s(&t), vec![1.0, 2.0, 1.0, 2.0]);
    let src = Tensor::from_vec(vec![10.0f32, 20.0, 30.0, 40.0], shape![2, 2]).unwrap();
    for (name, r) in [
        ("copy_from", t.copy_from(&src)),
        ("add_", t.add_(&src)),
        ("scale_", t.scale_(3.0)),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{name}");
        assert!(e.message().contains(name), "{e}");
    }
    assert_eq!(f32s(&x), vec![1.0, 2.0]);
    assert_eq!(version(&x), 0);
    // partially overlapping pieces of one carrier
    let base = Tensor::from_vec(iota(6), shape![3, 2]).unwrap();
    let t =
        Tensor::from_subtensors(&[base.narrow(0, 0, 2).unwrap(), base.narrow(0, 1, 2).unwrap()])
            .unwrap();
    assert_eq!(
        kind(t.copy_from(&Tensor::zeros(shape![4, 2], &DType::Float32).unwrap())),
        ErrorKind::Value
    );
    assert_eq!(f32s(&base), iota(6));
    // a single-slot write stays well defined
    t.set(&[3, 1], 50.0f32).unwrap();
    assert_eq!(base.get(&[2, 1]).unwrap(), Scalar::F32(50.0));
}

#[test]
fn mutating_an_empty_tensor_still_counts_as_a_mutation() {
    let e = Tensor::zeros(shape![0, 3], &DType::Float32).unwrap();
    let v = e.narrow(1, 1, 2).unwrap();
    e.fill(1.0f32).unwrap();
    assert_eq!(version(&e), 1);
    v.copy_from(&Tensor::zeros(shape![0, 2], &DType::Float32).unwrap())
        .unwrap();
    assert_eq!(version(&e), 2);
    e.scale_(2.0).unwrap();
    assert_eq!(version(&v), 3);
    // a multi-subtensor tensor with an empty piece bumps that piece's carrier too
    let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![1, 2]).unwrap();
    let empty = Tensor::zeros(shape![0, 2], &DType::Float32).unwrap();
    let t = Tensor::from_subtensors(&[a.clone(), empty.clone()]).unwrap();
    t.fill(0.0f32).unwrap();
    assert_eq!((version(&a), version(&empty)), (1, 1));
}

#[test]
fn copy_from_an_overlapping_source_reads_it_first() {
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![4]).unwrap();
    let dst = t.narrow(0, 1, 3).unwrap();
    let src = t.narrow(0, 0, 3).unwrap();
    dst.copy_from(&src).unwrap();
    assert_eq!(f32s(&t), vec![1.0, 1.0, 2.0, 3.0]);
    dst.add_(&src).unwrap();
    assert_eq!(f32s(&t), vec![1.0, 2.0, 3.0, 5.0]);
    assert_eq!(version(&t), 2);
    // self-copy of a transpose into itself through another view
    let m = Tensor::from_vec(iota(4), shape![2, 2]).unwrap();
    m.copy_from(&m.transpose(0, 1).unwrap()).unwrap();
    assert_eq!(f32s(&m), vec![0.0, 2.0, 1.0, 3.0]);
}

#[test]
fn scale_and_add_compute_the_right_values() {
    let d = Tensor::from_vec(vec![1.0f64, -2.0, 0.25], shape![3]).unwrap();
    d.scale_(-4.0).unwrap();
    assert_eq!(d.values::<f64>().unwrap(), vec![-4.0, 8.0, -1.0]);
    let i = Tensor::from_vec(vec![1i64, 2, 3], shape![3]).unwrap();
    i.add_(&Tensor::from_vec(vec![10i64, 20, 30], shape![3]).unwrap())
        .unwrap();
    assert_eq!(i.values::<i64>().unwrap(), vec![11, 22, 33]);
    // a broadcast source is fine: only the target must be injective
    let m = Tensor::zeros(shape![2, 3], &DType::Float32).unwrap();
    let row = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
    m.add_(&row.broadcast_to(&[2, 3]).unwrap()).unwrap();
    assert_eq!(f32s(&m), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
}

// ---------------------------------------------------------------------------------------------
// ndarray interop
// ---------------------------------------------------------------------------------------------

#[test]
fn from_array_standard_layout_is_zero_copy() {
    let a = Array2::from_shape_vec((2, 3), vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let ptr = a.as_ptr();
    let t = Tensor::from_array(a);
    assert_eq!(t.layout().to_string(), "(2,3):(3,1)");
    assert_eq!(f32s(&t), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(storage_ptr(&t), ptr, "no copy");
}

#[test]
fn from_array_keeps_a_transposed_arrays_strides() {
    let a = Array2::from_shape_vec((2, 3), vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let at = a.reversed_axes();
    let expect = at.clone();
    let ptr = at.as_ptr();
    let t = Tensor::from_array(at);
    assert_eq!(t.dims(), vec![3, 2]);
    assert_eq!(t.layout().to_string(), "(3,2):(1,3)");
    assert_eq!(f32s(&t), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(t.get(&[2, 1]).unwrap(), Scalar::F32(6.0));
    assert_eq!(storage_ptr(&t), ptr, "no copy");
    assert_eq!(t.to_array::<f32>().unwrap(), expect.into_dyn());
}

#[test]
fn from_array_of_a_sliced_or_reversed_array() {
    // an owned array whose first element is not at the start of its buffer
    let a = Array2::from_shape_vec((3, 2), (0..6).map(|x| x as f64).collect()).unwrap();
    let tail = a.slice_move(s![1.., ..]);
    let t = Tensor::from_array(tail.clone());
    assert_eq!(t.dims(), vec![2, 2]);
    assert_eq!(t.values::<f64>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
    assert_eq!(t.to_array::<f64>().unwrap(), tail.into_dyn());
    // negative strides cannot be a layout: a copy in logical order
    let mut r = Array2::from_shape_vec((2, 3), (0..6).collect::<Vec<i32>>()).unwrap();
    r.invert_axis(Axis(1));
    let t = Tensor::from_array(r.clone());
    assert_eq!(t.values::<i32>().unwrap(), vec![2, 1, 0, 5, 4, 3]);
    assert!(t.layout().is_row_major_contiguous());
    assert_eq!(t.to_array::<i32>().unwrap(), r.into_dyn());
    // a 0-d array
    let z = Tensor::from_array(ndarray::arr0(4.5f32));
    assert_eq!(z.dims(), Vec::<usize>::new());
    assert_eq!(f32s(&z), vec![4.5]);
    // an empty array
    let e = Tensor::from_array(Array2::<f32>::zeros((0, 3)));
    assert_eq!((e.size(), e.dims()), (0, vec![0, 3]));
}

#[test]
fn from_array_view_copies() {
    let a = Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i64);
    let view = a.slice(s![.., 1.., ..;2]);
    let t = Tensor::from_array_view(&view);
    assert_eq!(t.dims(), vec![2, 2, 2]);
    assert_eq!(
        t.values::<i64>().unwrap(),
        vec![10, 12, 20, 22, 110, 112, 120, 122]
    );
    t.set(&[0, 0, 0], -1i64).unwrap();
    assert_eq!(a[[0, 1, 0]], 10, "the array is untouched");
    assert_eq!(t.to_array::<i64>().unwrap(), {
        let mut v = view.to_owned().into_dyn();
        v[[0, 0, 0]] = -1;
        v
    });
}

#[test]
fn to_array_lists_logical_order_and_round_trips() {
    let t = Tensor::from_vec(iota(6), shape![2, 3]).unwrap();
    let a = t.to_array::<f32>().unwrap();
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!(a[[1, 0]], 3.0);
    assert_eq!(a.iter().copied().collect::<Vec<_>>(), iota(6));
    // a transposed view reads out transposed
    let tt = t.transpose(0, 1).unwrap().to_array::<f32>().unwrap();
    assert_eq!(tt, a.t().to_owned());
    // nested modes become one axis each
    let n = Tensor::from_vec(iota(12), shape![2, [2, 3]]).unwrap();
    let na = n.to_array::<f32>().unwrap();
    assert_eq!(na.shape(), &[2, 6]);
    assert_eq!(na[[1, 4]], 10.0);
    // round trip
    let orig = ArrayD::from_shape_vec(IxDyn(&[2, 2, 3]), (0..12).collect::<Vec<i32>>()).unwrap();
    let back = Tensor::from_array(orig.clone()).to_array::<i32>().unwrap();
    assert_eq!(back, orig);
    let bools = Array2::from_shape_vec((1, 3), vec![true, false, true]).unwrap();
    assert_eq!(
        Tensor::from_array(bools.clone())
            .to_array::<bool>()
            .unwrap(),
        bools.into_dyn()
    );
    // the wrong element type
    assert_eq!(kind(t.to_array::<f64>()), ErrorKind::Type);
    // an array copy is detached from the tensor
    let mut a2 = t.to_array::<f32>().unwrap();
    a2[[0, 0]] = 100.0;
    assert_eq!(t.get(&[0, 0]).unwrap(), Scalar::F32(0.0));
}

// ---------------------------------------------------------------------------------------------
// Display
// ---------------------------------------------------------------------------------------------

#[test]
fn display_nests_by_top_level_mode() {
    let t = Tensor::from_vec(vec![1.5f32, 2.0, -3.0, 4.0], shape![2, 2]).unwrap();
    assert_eq!(t.to_string(), "[[1.5, 2], [-3, 4]]");
    assert_eq!(
        t.transpose(0, 1).unwrap().to_string(),
        "[[1.5, -3], [2, 4]]"
    );
    let c = Tensor::from_vec((0..8).collect::<Vec<i64>>(), shape![2, 2, 2]).unwrap();
    assert_eq!(c.to_string(), "[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]");
    assert_eq!(
        Tensor::zeros(shape![0], &DType::Int32).unwrap().to_string(),
        "[]"
    );
    assert_eq!(
        Tensor::zeros(shape![2, 0], &DType::Int32)
            .unwrap()
            .to_string(),
        "[[], []]"
    );
    let row = Tensor::from_vec(vec![7i32, 8], shape![2]).unwrap();
    assert_eq!(
        row.broadcast_to(&[2, 2]).unwrap().to_string(),
        "[[7, 8], [7, 8]]"
    );
    // Debug names the dtype and layout
    let dbg = format!("{t:?}");
    assert!(
        dbg.contains("Float32") && dbg.contains("(2,2):(2,1)"),
        "{dbg}"
    );
}

#[test]
fn layouts_of_tensors_from_shapes_and_trees() {
    // a bare-leaf shape is a rank-1 tensor
    let t = Tensor::from_vec(iota(3), Shape(IntTuple::Int(3))).unwrap();
    assert_eq!(t.dims(), vec![3]);
    assert_eq!(t.get(&[2]).unwrap(), Scalar::F32(2.0));
    let n = t.narrow(0, 1, 2).unwrap();
    assert_eq!(f32s(&n), vec![1.0, 2.0]);
    assert!(Arc::ptr_eq(&t.layout_arc(), &t.clone().layout_arc()));
}

#[test]
fn dtype_descriptors() {
    let e = DType::compound(Vec::<(String, DType)>::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = DType::compound([("x", DType::Float32), ("x", DType::Float64)]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains('x'), "{e}");
    let e = DType::compound([("", DType::Float32)]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = DType::compound([("c", DType::Category(DTypeCategory::Any))]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let rec = DType::compound([("re", DType::Float32), ("im", DType::Float32)]).unwrap();
    assert_eq!(rec.to_string(), "{re: Float32, im: Float32}");
    assert!(!rec.is_simple() && rec.size_of().is_none());
    assert_eq!(DType::Int64.size_of(), Some(8));
    assert!(DType::Category(DTypeCategory::Numeric).admits(&DType::Int32));
    assert!(!DType::Category(DTypeCategory::Numeric).admits(&DType::Bool));
    assert!(DType::Category(DTypeCategory::Integer).admits(&DType::Int64));
    assert!(!DType::Float32.admits(&DType::Float64));
    // exactly one descriptor is differentiable
    let all = [
        DType::Float32,
        DType::Float64,
        DType::Int32,
        DType::Int64,
        DType::Bool,
        DType::Category(DTypeCategory::Floating),
        DType::Category(DTypeCategory::Any),
        rec,
    ];
    let diff: Vec<String> = all
        .iter()
        .filter(|d| d.is_differentiable())
        .map(ToString::to_string)
        .collect();
    assert_eq!(diff, vec!["Float32".to_string()]);
}

#[test]
fn copy_from_and_add_take_equal_extents_under_another_shape_tree() {
    let bare = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], 3usize).unwrap();
    bare.copy_from(&Tensor::from_vec(vec![4.0f32, 5.0, 6.0], shape![3]).unwrap())
        .unwrap();
    assert_eq!(f32s(&bare), vec![4.0, 5.0, 6.0]);
    bare.add_(&Tensor::from_vec(vec![1.0f32; 3], shape![3]).unwrap())
        .unwrap();
    assert_eq!(f32s(&bare), vec![5.0, 6.0, 7.0]);
    let nested = Tensor::from_vec(iota(12), shape![[2, 2], 3]).unwrap();
    nested
        .copy_from(&Tensor::from_vec(vec![1.0f32; 12], shape![4, 3]).unwrap())
        .unwrap();
    assert_eq!(f32s(&nested), vec![1.0; 12]);
    assert_eq!(
        kind(bare.copy_from(&Tensor::zeros(shape![4], &DType::Float32).unwrap())),
        ErrorKind::Value
    );
}

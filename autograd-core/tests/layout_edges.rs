//! Layouts at the edges of the address space: zero extents beside huge ones, extents converted
//! from a `usize` above `i64::MAX`, and view offsets near `usize::MAX`. Nothing panics; what
//! does not fit in memory is an `Error::Value`.

use std::any::Any;
use std::sync::Arc;

use autograd_core::{
    shape, stride, Buffer, Carrier, CarrierId, CpuCarrier, DType, ErrorKind, IntTuple, Layout,
    Result, Scalar, Shape, Stride, Tensor,
};
use proptest::prelude::*;

/// A Float32 carrier that claims `usize::MAX` elements and stores none: lets a test place a
/// tensor at any offset. Reading an element fails; nothing here reads one.
#[derive(Debug)]
struct Vast(CarrierId);

impl Vast {
    fn shared() -> Arc<dyn Carrier> {
        Arc::new(Vast(CarrierId::fresh()))
    }
}

impl Carrier for Vast {
    fn id(&self) -> CarrierId {
        self.0
    }
    fn version(&self) -> u64 {
        0
    }
    fn len(&self) -> usize {
        usize::MAX
    }
    fn dtype(&self) -> DType {
        DType::Float32
    }
    fn class_name(&self) -> &'static str {
        "Vast"
    }
    fn read(&self, offset: usize) -> Result<Scalar> {
        autograd_core::bail!(Runtime, "Vast stores nothing (read at {offset})")
    }
    fn to_buffer(&self) -> Buffer {
        Buffer::F32(Vec::new())
    }
    fn write(&self, _: &[(usize, Scalar)]) -> Result<()> {
        autograd_core::bail!(Runtime, "Vast stores nothing")
    }
    fn fresh(&self, data: Buffer) -> Result<Arc<dyn Carrier>> {
        Ok(Arc::new(CpuCarrier::new(data)))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn kind<T: std::fmt::Debug>(r: Result<T>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

// ---------------------------------------------------------------------------------------------
// Worked cases.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_zero_extent_does_not_hide_an_overflowing_mode() {
    let e = Layout::new(shape![0, [1i64 << 40, 1i64 << 40]], stride![1, [1, 1]]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.message().contains("(0,(1099511627776,1099511627776))"),
        "{e}"
    );
    // flat, with the zero between the huge extents, and all stride 0 (a broadcast)
    assert_eq!(
        kind(Layout::new(
            shape![1i64 << 40, 0, 1i64 << 40],
            stride![1, 1, 1]
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Layout::new(
            shape![0, 1i64 << 40, 1i64 << 40],
            stride![0, 0, 0]
        )),
        ErrorKind::Value
    );
    // nor an overflowing span
    assert_eq!(
        kind(Layout::new(shape![0, 1i64 << 40], stride![1, 1i64 << 40])),
        ErrorKind::Value
    );
}

#[test]
fn an_empty_layout_with_large_modes_that_fit_supports_every_view() {
    let l = Layout::new(
        shape![0, [1i64 << 20, 1i64 << 20]],
        stride![1, [1, 1i64 << 20]],
    )
    .unwrap();
    assert_eq!((l.size(), l.cosize(), l.dims()), (0, 0, vec![0, 1 << 40]));
    assert_eq!(l.modes().len(), 2);
    let t = Tensor::from_parts(CpuCarrier::from_vec(vec![0.0f32; 3]), l, 3).unwrap();
    assert_eq!(t.permute(&[1, 0]).unwrap().dims(), vec![1 << 40, 0]);
    assert_eq!(t.transpose(0, 1).unwrap().dims(), vec![1 << 40, 0]);
    assert_eq!(t.narrow(0, 0, 0).unwrap().dims(), vec![0, 1 << 40]);
    // the second mode is nested: it cannot be cut, but can be selected from
    assert_eq!(kind(t.narrow(1, 0, 1)), ErrorKind::NotImplemented);
    let s = t.select(1, (1 << 40) - 1).unwrap();
    assert_eq!((s.dims(), s.offset()), (vec![0], 3));
    assert_eq!(kind(t.select(1, 1 << 40)), ErrorKind::Value);
    assert_eq!(
        t.reshape(&[1usize << 50, 0, 7]).unwrap().dims(),
        vec![1 << 50, 0, 7]
    );
    assert_eq!(
        kind(t.reshape(&[1usize << 40, 1 << 40, 0])),
        ErrorKind::Value
    );
}

#[test]
fn broadcasting_to_a_shape_that_does_not_fit_is_a_value_error() {
    let empty = Tensor::from_vec(Vec::<f32>::new(), shape![0, 1, 1]).unwrap();
    assert_eq!(
        kind(empty.broadcast_to(&[0usize, 1 << 40, 1 << 40])),
        ErrorKind::Value
    );
    let b = empty.broadcast_to(&[0usize, 1 << 20, 1 << 20]).unwrap();
    assert_eq!((b.dims(), b.size()), (vec![0, 1 << 20, 1 << 20], 0));
    let one = Tensor::from_vec(vec![1.0f32], shape![1]).unwrap();
    assert_eq!(
        kind(one.broadcast_to(&[0usize, 1 << 40, 1 << 40])),
        ErrorKind::Value
    );
    assert_eq!(kind(one.broadcast_to(&[usize::MAX])), ErrorKind::Value);
    assert_eq!(kind(one.broadcast_to(&[0, usize::MAX])), ErrorKind::Value);
}

#[test]
fn compact_constructors_refuse_extents_that_do_not_fit() {
    let huge = usize::MAX;
    let e = Layout::row_major(&[huge]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("does not fit in i64"), "{e}");
    assert_eq!(kind(Layout::row_major(&[huge, 0])), ErrorKind::Value);
    assert_eq!(
        kind(Layout::row_major(&[0, 1 << 40, 1 << 40])),
        ErrorKind::Value
    );
    assert_eq!(kind(Layout::row_major(&[1 << 62, 4])), ErrorKind::Value);
    assert_eq!(
        kind(Layout::canonical(Shape::from(&[huge][..]))),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Layout::canonical(shape![0, 1i64 << 40, 1i64 << 40])),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Layout::compact_row_major(Shape::from(&[huge][..]))),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Layout::compact_row_major(shape![
            [1i64 << 40, 1i64 << 40],
            0
        ])),
        ErrorKind::Value
    );
    // the largest extent that fits is still fine
    let max = isize::MAX as usize;
    assert_eq!(Layout::row_major(&[max]).unwrap().size(), max);
    assert_eq!(Layout::row_major(&[max, 0]).unwrap().dims(), vec![max, 0]);
}

#[test]
fn usize_leaves_above_i64_max_are_refused_not_saturated() {
    // a stride of usize::MAX on an extent-1 mode used to become i64::MAX and be accepted
    let e = Layout::new(shape![1], Stride::from(vec![usize::MAX])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("stride"), "{e}");
    let e = Layout::new(Shape::from(vec![usize::MAX]), stride![0]).unwrap_err();
    assert!(e.message().contains("extent"), "{e}");
    let l = Layout::row_major(&[2, 3]).unwrap();
    assert_eq!(kind(l.prepend_mode(usize::MAX, 0)), ErrorKind::Value);
    assert_eq!(kind(l.prepend_mode(0, usize::MAX)), ErrorKind::Value);
    assert_eq!(
        kind(Tensor::zeros(
            Shape::from(vec![usize::MAX]),
            &DType::Float32
        )),
        ErrorKind::Value
    );
}

#[test]
fn every_mode_of_a_valid_layout_is_a_layout() {
    // The second mode interleaves 2^26 coordinates over a span of 2^50: deciding its
    // injectivity alone would need enumerating them. Once that mode was accepted inside an
    // empty (or pigeonhole-aliased) layout, `modes()` lost it and `permute` indexed past the end.
    let empty = Layout::new(
        shape![0, [8192, 8192]],
        stride![1, [1i64 << 36, (1i64 << 36) + 1]],
    );
    assert_eq!(kind(empty), ErrorKind::NotImplemented);
    let aliased = Layout::new(
        shape![[8192, 8192], 1i64 << 36],
        stride![[1i64 << 36, (1i64 << 36) + 1], 1],
    );
    assert_eq!(kind(aliased), ErrorKind::NotImplemented);
    // a nested mode that can be decided is fine, and its modes are layouts too
    let l = Layout::new(shape![0, [[3, 2], 5]], stride![1, [[1, 1], 0]]).unwrap();
    let m = l.modes();
    assert_eq!(m.len(), 2);
    assert_eq!(m[1].modes().len(), 2);
    assert_eq!(m[1].dims(), vec![6, 5]);
}

#[test]
fn narrow_and_select_near_the_end_of_the_address_space_are_value_errors() {
    let l = Layout::new(shape![0, 3], stride![1, 1i64 << 61]).unwrap();
    let t = Tensor::from_parts(Vast::shared(), l, usize::MAX).unwrap();
    assert_eq!(kind(t.narrow(1, 2, 1)), ErrorKind::Value);
    assert_eq!(kind(t.narrow(1, 3, 0)), ErrorKind::Value);
    assert_eq!(kind(t.select(1, 1)), ErrorKind::Value);
    // no shift, no overflow
    let n = t.narrow(1, 0, 2).unwrap();
    assert_eq!((n.dims(), n.offset()), (vec![0, 2], usize::MAX));
    let s = t.select(1, 0).unwrap();
    assert_eq!((s.dims(), s.offset()), (vec![0], usize::MAX));
    // a non-empty view at the very end
    let v = Tensor::from_parts(
        Vast::shared(),
        Layout::row_major(&[3]).unwrap(),
        usize::MAX - 3,
    )
    .unwrap();
    assert_eq!(v.narrow(0, 2, 1).unwrap().offset(), usize::MAX - 1);
    assert_eq!(v.select(0, 2).unwrap().offset(), usize::MAX - 1);
    assert_eq!(
        kind(Tensor::from_parts(
            Vast::shared(),
            Layout::row_major(&[3]).unwrap(),
            usize::MAX - 2
        )),
        ErrorKind::Value
    );
}

// ---------------------------------------------------------------------------------------------
// Properties: zero extents mixed with huge ones.
// ---------------------------------------------------------------------------------------------

const BIG: [i64; 6] = [1 << 20, 1 << 31, 1 << 40, 1 << 62, i64::MAX, 3];

fn extent() -> BoxedStrategy<i64> {
    prop_oneof![3 => Just(0i64), 3 => 1i64..4, 4 => prop::sample::select(&BIG[..])].boxed()
}

fn stride_leaf() -> BoxedStrategy<i64> {
    prop_oneof![2 => Just(0i64), 3 => 1i64..4, 3 => prop::sample::select(&BIG[..])].boxed()
}

fn leaf() -> BoxedStrategy<(IntTuple, IntTuple)> {
    (extent(), stride_leaf())
        .prop_map(|(e, s)| (IntTuple::Int(e), IntTuple::Int(s)))
        .boxed()
}

fn zip_children(children: Vec<(IntTuple, IntTuple)>) -> (IntTuple, IntTuple) {
    let (s, d): (Vec<IntTuple>, Vec<IntTuple>) = children.into_iter().unzip();
    (IntTuple::Tuple(s), IntTuple::Tuple(d))
}

/// Trees of depth at most 2: usually a tuple of 0..=4 modes, each a leaf or a pair/triple.
fn trees() -> impl Strategy<Value = (IntTuple, IntTuple)> {
    let mode = prop_oneof![
        3 => leaf(),
        1 => prop::collection::vec(leaf(), 1..=3).prop_map(zip_children),
    ];
    prop_oneof![
        1 => leaf(),
        6 => prop::collection::vec(mode, 0..=4).prop_map(zip_children),
    ]
}

fn flat_leaves(t: &IntTuple) -> Vec<u128> {
    t.leaves()
        .iter()
        .map(|&x| u128::try_from(x).unwrap())
        .collect()
}

fn modes_of(t: &IntTuple) -> Vec<IntTuple> {
    match t {
        IntTuple::Int(_) => vec![t.clone()],
        IntTuple::Tuple(v) => v.clone(),
    }
}

/// The size of a mode (0 if any extent is), in u128 saturating arithmetic.
fn size_of(extents: &[u128]) -> u128 {
    if extents.contains(&0) {
        return 0;
    }
    extents.iter().fold(1u128, |a, &e| a.saturating_mul(e))
}

/// Whether the rule of `Layout::new` admits the trees: the nonzero extents multiply to at most
/// `isize::MAX` and the span stays below it.
fn fits(s: &IntTuple, d: &IntTuple) -> bool {
    let (e, st) = (flat_leaves(s), flat_leaves(d));
    let limit = isize::MAX as u128;
    let nonzero = e
        .iter()
        .filter(|&&x| x > 0)
        .fold(1u128, |a, &x| a.saturating_mul(x));
    let span = e
        .iter()
        .zip(&st)
        .filter(|(&x, _)| x > 0)
        .fold(0u128, |a, (&x, &y)| {
            a.saturating_add((x - 1).saturating_mul(y))
        });
    nonzero <= limit && span < limit
}

fn on_vast(l: Layout, offset: usize) -> Tensor {
    Tensor::from_parts(Vast::shared(), l, offset).expect("fits the vast carrier")
}

/// An offset at which a layout of cosize `c` fits the vast carrier: small, or at its end.
fn offset_for(cosize: usize, pick: u8) -> usize {
    let last = usize::MAX - cosize;
    match pick % 4 {
        0 => 0,
        1 => last.min(7),
        2 => last,
        _ => last - last.min(1 << 20),
    }
}

fn is_value_or_not_implemented(k: ErrorKind) -> bool {
    matches!(k, ErrorKind::Value | ErrorKind::NotImplemented)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn new_accepts_exactly_what_fits_and_sizes_never_overflow((s, d) in trees()) {
        let r = Layout::new(Shape(s.clone()), Stride(d.clone()));
        if !fits(&s, &d) {
            prop_assert_eq!(kind(r), ErrorKind::Value);
            return Ok(());
        }
        let l = match r {
            Ok(l) => l,
            // injectivity that only enumeration could decide (see Layout::new)
            Err(e) => {
                prop_assert_eq!(e.kind(), ErrorKind::NotImplemented, "{}", e);
                return Ok(());
            }
        };
        let dims: Vec<u128> = modes_of(&s).iter().map(|m| size_of(&flat_leaves(m))).collect();
        prop_assert_eq!(l.dims().iter().map(|&x| x as u128).collect::<Vec<_>>(), dims);
        prop_assert_eq!(l.size() as u128, size_of(&flat_leaves(&s)));
        let modes = l.modes();
        prop_assert_eq!(modes.len(), l.rank());
        for (m, &dim) in modes.iter().zip(&l.dims()) {
            prop_assert_eq!(m.size(), dim);
            prop_assert_eq!(m.modes().len(), m.rank());
        }
    }

    #[test]
    fn views_never_panic_and_agree_with_the_dims(
        (s, d) in trees(),
        pick in any::<u8>(),
        dim in 0usize..5,
        start in prop_oneof![0usize..4, Just(1usize << 40), Just(usize::MAX)],
        len in prop_oneof![0usize..4, Just(1usize << 40), Just(usize::MAX)],
        order_seed in any::<u64>(),
        target in prop::collection::vec(
            prop_oneof![0usize..3, Just(1usize << 20), Just(1usize << 40), Just(usize::MAX)],
            0..5,
        ),
    ) {
        let Ok(l) = Layout::new(Shape(s.clone()), Stride(d.clone())) else {
            return Ok(());
        };
        let offset = offset_for(l.cosize(), pick);
        let dims = l.dims();
        let rank = l.rank();
        let t = on_vast(l.clone(), offset);

        // permute and transpose: always succeed on a valid layout
        let mut order: Vec<usize> = (0..rank).collect();
        let mut seed = order_seed;
        for i in (1..rank).rev() {
            order.swap(i, (seed % (i as u64 + 1)) as usize);
            seed /= i as u64 + 1;
        }
        let p = t.permute(&order).unwrap();
        prop_assert_eq!(p.dims(), order.iter().map(|&i| dims[i]).collect::<Vec<_>>());
        prop_assert_eq!(p.offset(), offset);
        if rank >= 2 {
            let tr = t.transpose(0, rank - 1).unwrap();
            prop_assert_eq!(tr.dims()[0], dims[rank - 1]);
        }

        // narrow: in range on a leaf mode, at an offset that fits, or an error of the right kind
        match t.narrow(dim, start, len) {
            Ok(n) => {
                prop_assert!(dim < rank && l.mode_is_leaf(dim));
                prop_assert!(start as u128 + len as u128 <= dims[dim] as u128);
                let mut want = dims.clone();
                want[dim] = len;
                prop_assert_eq!(n.dims(), want);
                let stride = l.mode_leaves(dim)[0].stride as u128;
                let moved = offset as u128 + start as u128 * stride;
                if n.size() > 0 {
                    prop_assert_eq!(n.offset() as u128, moved);
                } else {
                    prop_assert_eq!(n.offset() as u128, moved.min(usize::MAX as u128));
                }
            }
            Err(e) => {
                prop_assert!(is_value_or_not_implemented(e.kind()), "{}", e);
                if e.kind() == ErrorKind::Value && dim < rank && l.mode_is_leaf(dim)
                    && start as u128 + len as u128 <= dims[dim] as u128
                {
                    // the only other Value error: the view's offset overflows
                    let stride = l.mode_leaves(dim)[0].stride as u128;
                    prop_assert!(offset as u128 + start as u128 * stride > usize::MAX as u128, "{}", e);
                }
            }
        }

        // select: in range, or a Value error
        match t.select(dim, start) {
            Ok(x) => {
                prop_assert!(dim < rank && start < dims[dim]);
                let mut want = dims.clone();
                want.remove(dim);
                prop_assert_eq!(x.dims(), want);
                prop_assert!(x.offset() >= offset);
            }
            Err(e) => prop_assert!(is_value_or_not_implemented(e.kind()), "{}", e),
        }

        // broadcast_to: numpy rules, or a Value error
        match t.broadcast_to(&target) {
            Ok(b) => {
                prop_assert_eq!(b.dims(), target.clone());
                prop_assert_eq!(b.offset(), offset);
            }
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Value, "{}", e),
        }

        // reshape to the target: the same size, or a Value error (copies read nothing when empty)
        if l.size() == 0 || l.is_row_major_contiguous() {
            match t.reshape(&target) {
                Ok(r) => {
                    prop_assert_eq!(r.dims(), target.clone());
                    prop_assert_eq!(r.size(), l.size());
                }
                Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Value, "{}", e),
            }
        }
    }

    #[test]
    fn empty_tensors_fit_exactly_up_to_the_end((s, d) in trees(), len in 0usize..6, offset in 0usize..9) {
        let Ok(l) = Layout::new(Shape(s), Stride(d)) else { return Ok(()); };
        prop_assume!(l.size() == 0);
        let r = Tensor::from_parts(CpuCarrier::from_vec(vec![0.0f32; len]), l, offset);
        if offset <= len {
            let t = r.unwrap();
            prop_assert!(t.values::<f32>().unwrap().is_empty());
        } else {
            prop_assert_eq!(kind(r), ErrorKind::Value);
        }
    }
}

/// The generator reaches every case the properties above distinguish.
#[test]
fn generator_covers_every_case() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = trees();
    let (mut refused, mut empty_huge, mut nonempty_huge, mut small) = (0, 0, 0, 0);
    for _ in 0..2000 {
        let (s, d) = strategy.new_tree(&mut runner).unwrap().current();
        match Layout::new(Shape(s), Stride(d)) {
            Err(_) => refused += 1,
            Ok(l) if l.size() == 0 && l.dims().iter().any(|&x| x >= 1 << 20) => empty_huge += 1,
            Ok(l) if l.size() >= 1 << 20 => nonempty_huge += 1,
            Ok(_) => small += 1,
        }
    }
    for (name, n) in [
        ("refused", refused),
        ("empty with a huge mode", empty_huge),
        ("non-empty and huge", nonempty_huge),
        ("small", small),
    ] {
        assert!(n >= 100, "only {n} of 2000 generated layouts are {name}");
    }
}

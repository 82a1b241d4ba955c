//! Views that are ops (issue 11, item 2): `transpose`, `permute`, `reshape`/`view`, `flatten`,
//! `unsqueeze`/`squeeze`, `narrow`/`slice`, `select`, `broadcast_to`/`expand` share their
//! input's storage, record a node, and pass gradcheck, also chained and on strided or
//! broadcast inputs. `with_layout_detached` (and `detach` after a view) is the one way out of
//! the graph.

use autograd_core::{
    gradcheck, no_grad, shape, stride, DType, ErrorKind, GradcheckOptions, Layout, Result, Tensor,
    VersionSnapshot,
};
use autograd_ops::{mul, sum};
use autograd_tests::{grad_vals, t, vals};
use proptest::prelude::*;

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// Asserts that `y` is a view of `x` (same carrier) recorded as `name`.
fn assert_view_op(x: &Tensor, y: &Tensor, name: &str) {
    assert_eq!(
        y.carrier().unwrap().id(),
        x.carrier().unwrap().id(),
        "{name} copied its input"
    );
    let node = y
        .autograd_ctx()
        .unwrap_or_else(|| panic!("{name} recorded no node"));
    assert_eq!(node.name(), name);
    assert!(node.inputs()[0].same_tensor(x));
}

fn check(f: impl Fn(&[Tensor]) -> Result<Tensor>, x: &Tensor) {
    let report = gradcheck(f, std::slice::from_ref(x), GradcheckOptions::default())
        .unwrap_or_else(|e| panic!("gradcheck failed for layout {}: {e}", x.layout()));
    assert!(report.slots_checked > 0 || x.size() == 0);
}

// ---- the motivating bug ---------------------------------------------------------------------

/// On main before this change, `x.transpose(0, 1)` recorded no node: `w` got its gradient and
/// `x` silently got none.
#[test]
fn transpose_inside_a_model_gives_the_input_a_gradient() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let loss = sum(&mul(&x.transpose(0, 1).unwrap(), &w).unwrap()).unwrap();
    loss.backward().unwrap();
    assert_eq!(grad_vals(&w), Some(vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
    // d loss / dx = w^T
    assert_eq!(grad_vals(&x), Some(vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]));
}

// ---- forward: values, shared storage, a node ------------------------------------------------

#[test]
fn every_view_op_shares_storage_and_records_a_node() {
    let x = t(&iota(24), &[2, 3, 4]);
    let y = x.transpose(0, 2).unwrap();
    assert_view_op(&x, &y, "transpose");
    assert_eq!(y.dims(), [4, 3, 2]);
    assert_eq!(y.get(&[3, 1, 0]).unwrap().to_f64(), 7.0);

    let y = x.permute(&[1, 2, 0]).unwrap();
    assert_view_op(&x, &y, "permute");
    assert_eq!(y.dims(), [3, 4, 2]);
    assert_eq!(y.get(&[2, 1, 1]).unwrap().to_f64(), 21.0);

    let y = x.reshape(&[6, 4]).unwrap();
    assert_view_op(&x, &y, "reshape");
    assert_eq!(vals(&y), iota(24));

    let y = x.view(&[4, 6]).unwrap();
    assert_view_op(&x, &y, "view");
    assert_eq!(y.dims(), [4, 6]);

    let y = x.flatten(1, 2).unwrap();
    assert_view_op(&x, &y, "flatten");
    assert_eq!(y.dims(), [2, 12]);
    assert_eq!(x.flatten(0, 2).unwrap().dims(), [24]);

    let y = x.unsqueeze(1).unwrap();
    assert_view_op(&x, &y, "unsqueeze");
    assert_eq!(y.dims(), [2, 1, 3, 4]);
    assert_eq!(x.unsqueeze(3).unwrap().dims(), [2, 3, 4, 1]);

    let y2 = y.squeeze(1).unwrap();
    assert_view_op(&y, &y2, "squeeze");
    assert_eq!(y2.dims(), [2, 3, 4]);
    assert_eq!(vals(&y2), iota(24));

    let y = x.narrow(2, 1, 2).unwrap();
    assert_view_op(&x, &y, "narrow");
    assert_eq!(y.dims(), [2, 3, 2]);
    assert_eq!(y.get(&[1, 2, 1]).unwrap().to_f64(), 22.0);

    let y = x.slice(1, 1..3).unwrap();
    assert_view_op(&x, &y, "narrow");
    assert_eq!(y.dims(), [2, 2, 4]);
    assert_eq!(y.get(&[0, 0, 0]).unwrap().to_f64(), 4.0);

    let y = x.select(1, 2).unwrap();
    assert_view_op(&x, &y, "select");
    assert_eq!(y.dims(), [2, 4]);
    assert_eq!(vals(&y), [8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]);

    let r = t(&[1.0, 2.0, 3.0], &[3]);
    let y = r.broadcast_to(&[2, 3]).unwrap();
    assert_view_op(&r, &y, "broadcast_to");
    assert_eq!(vals(&y), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let y = r.expand(&[2, 3]).unwrap();
    assert_view_op(&r, &y, "broadcast_to");
}

#[test]
fn reshape_copies_only_when_no_view_exists_and_view_refuses() {
    let x = t(&iota(6), &[2, 3]);
    let tr = x.transpose(0, 1).unwrap();
    let r = tr.reshape(&[6]).unwrap();
    assert_ne!(r.carrier().unwrap().id(), x.carrier().unwrap().id());
    assert_eq!(vals(&r), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(r.autograd_ctx().unwrap().name(), "reshape");
    let e = tr.view(&[6]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("reshape"), "{e}");
    // flatten of a strided input copies too, and still differentiates
    let f = tr.flatten(0, 1).unwrap();
    assert_eq!(vals(&f), vals(&r));
    sum(&mul(&f, &t(&iota(6), &[6])).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]));
}

#[test]
fn the_escape_hatch_and_detach_make_leaves() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let b = x
        .with_layout_detached(Layout::new(shape![2, 3], stride![0, 1]).unwrap(), 0)
        .unwrap();
    assert!(b.autograd_ctx().is_none());
    assert_eq!(b.carrier().unwrap().id(), x.carrier().unwrap().id());
    let d = x.broadcast_to(&[2, 3]).unwrap().detach();
    assert!(d.autograd_ctx().is_none());
    sum(&mul(&d, &d).unwrap()).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x), None, "a detached view passes nothing back");
    // the leaf's own gradient folds its broadcast aliases: 2 * x_j, summed over the 2 rows
    assert_eq!(grad_vals(&d), Some(vec![4.0, 8.0, 12.0, 4.0, 8.0, 12.0]));
}

// ---- no node -------------------------------------------------------------------------------

#[test]
fn no_node_with_grad_mode_off_or_a_non_float32_input() {
    let x = t(&iota(6), &[2, 3]);
    {
        let _off = no_grad();
        for y in [
            x.transpose(0, 1).unwrap(),
            x.reshape(&[3, 2]).unwrap(),
            x.narrow(1, 0, 2).unwrap(),
            x.select(0, 1).unwrap(),
            x.unsqueeze(0).unwrap(),
            x.broadcast_to(&[4, 2, 3]).unwrap(),
        ] {
            assert!(y.autograd_ctx().is_none());
            assert_eq!(y.carrier().unwrap().id(), x.carrier().unwrap().id());
        }
    }
    let i = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], shape![2, 3]).unwrap();
    assert_eq!(i.dtype(), &DType::Int32);
    for y in [
        i.transpose(0, 1).unwrap(),
        i.permute(&[1, 0]).unwrap(),
        i.flatten(0, 1).unwrap(),
        i.narrow(0, 1, 1).unwrap(),
        i.select(1, 2).unwrap(),
        i.expand(&[2, 2, 3]).unwrap(),
    ] {
        assert!(y.autograd_ctx().is_none());
        assert_eq!(y.carrier().unwrap().id(), i.carrier().unwrap().id());
    }
    assert_eq!(
        i.transpose(0, 1).unwrap().values::<i32>().unwrap(),
        [1, 4, 2, 5, 3, 6]
    );
}

// ---- bad arguments ---------------------------------------------------------------------------

#[test]
fn bad_axes_are_value_errors_that_change_nothing() {
    let x = t(&iota(6), &[2, 3]);
    let version = VersionSnapshot::of(&x);
    let layout = x.layout().clone();
    let errors = [
        x.transpose(0, 2).map(|_| ()),
        x.permute(&[0, 0]).map(|_| ()),
        x.permute(&[0]).map(|_| ()),
        x.reshape(&[4]).map(|_| ()),
        x.view(&[5]).map(|_| ()),
        x.flatten(1, 0).map(|_| ()),
        x.flatten(0, 2).map(|_| ()),
        x.unsqueeze(3).map(|_| ()),
        x.squeeze(0).map(|_| ()),
        x.squeeze(2).map(|_| ()),
        x.narrow(2, 0, 1).map(|_| ()),
        x.narrow(1, 2, 2).map(|_| ()),
        x.narrow(1, usize::MAX, 2).map(|_| ()),
        x.slice(0, 1..3).map(|_| ()),
        x.select(2, 0).map(|_| ()),
        x.select(0, 2).map(|_| ()),
        x.broadcast_to(&[3]).map(|_| ()),
        x.broadcast_to(&[2, 4]).map(|_| ()),
        x.expand(&[3, 3]).map(|_| ()),
    ];
    for (k, e) in errors.into_iter().enumerate() {
        assert_eq!(e.unwrap_err().kind(), ErrorKind::Value, "case {k}");
    }
    assert!(x.autograd_ctx().is_none());
    assert_eq!(VersionSnapshot::of(&x), version);
    assert_eq!(x.layout(), &layout);
    assert_eq!(vals(&x), iota(6));
    assert_eq!(grad_vals(&x), None);
}

// ---- nested (hierarchical) modes -------------------------------------------------------------

#[test]
fn nested_modes_move_whole_and_cuts_of_them_are_refused_clearly() {
    // shape (2, (2, 3)): the nested mode moves whole under transpose
    let x = Tensor::from_vec(iota(12), shape![2, [2, 3]]).unwrap();
    let y = x.transpose(0, 1).unwrap();
    assert_view_op(&x, &y, "transpose");
    assert_eq!(y.shape(), &shape![[2, 3], 2]);
    check(|v| v[0].transpose(0, 1), &x);
    check(|v| v[0].select(1, 4), &x);
    check(|v| v[0].reshape(&[3, 4]), &x);
    check(|v| v[0].unsqueeze(1), &x);
    check(|v| v[0].broadcast_to(&[3, 2, 6]), &x);
    let e = x.narrow(1, 0, 2).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented);
    assert!(e.message().contains("nested"), "{e}");
}

// ---- gradcheck: fixed chains ----------------------------------------------------------------

#[test]
fn a_chain_transpose_narrow_select_broadcast_passes_gradcheck() {
    let x = t(
        &[
            0.3, -0.7, 1.1, 0.2, -0.4, 0.9, 0.5, -1.3, 0.8, 0.05, -0.6, 1.7,
        ],
        &[3, 4],
    );
    let f = |v: &[Tensor]| {
        v[0].broadcast_to(&[2, 3, 4])?
            .select(0, 1)?
            .narrow(1, 1, 2)?
            .transpose(0, 1)
    };
    check(f, &x);
    // and the gradient lands where it should: positions of columns 1..3, once per position
    let y = f(std::slice::from_ref(&x)).unwrap();
    sum(&y).unwrap().backward().unwrap();
    let mut want = vec![0.0; 12];
    for r in 0..3 {
        want[r * 4 + 1] = 1.0;
        want[r * 4 + 2] = 1.0;
    }
    assert_eq!(grad_vals(&x), Some(want));
}

#[test]
fn views_of_a_broadcast_leaf_pass_gradcheck() {
    // a leaf whose rows alias one row of storage (stride 0), built with the escape hatch
    let x = t(&[0.3, -0.7, 1.1], &[3])
        .with_layout_detached(Layout::new(shape![4, 3], stride![0, 1]).unwrap(), 0)
        .unwrap();
    check(|v| v[0].transpose(0, 1), &x);
    check(|v| v[0].narrow(0, 1, 2)?.select(1, 2), &x);
    check(|v| v[0].reshape(&[2, 6]), &x);
    check(|v| v[0].unsqueeze(0)?.broadcast_to(&[2, 4, 3]), &x);
}

// ---- gradcheck: random shapes and chains -----------------------------------------------------

/// One view step, applied to a tensor of rank `rank` with top-level extents `dims`; each
/// parameter is reduced into its valid range.
#[derive(Debug, Clone)]
enum Step {
    Transpose(usize, usize),
    Permute(u64),
    Reshape,
    Flatten(usize, usize),
    Unsqueeze(usize),
    Squeeze,
    Narrow(usize, usize, usize),
    Select(usize, usize),
    Broadcast(usize),
}

impl Step {
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let rank = dims.len();
        if rank == 0 {
            // a chain that squeezed down to a scalar: every step below needs an axis
            return x.unsqueeze(0);
        }
        match *self {
            Step::Transpose(a, b) => x.transpose(a % rank, b % rank),
            Step::Permute(seed) => {
                let mut order: Vec<usize> = (0..rank).collect();
                let mut s = seed;
                for i in (1..rank).rev() {
                    order.swap(i, (s % (i as u64 + 1)) as usize);
                    s /= i as u64 + 1;
                }
                x.permute(&order)
            }
            Step::Reshape => {
                // the extents reversed: same size, another shape
                let rev: Vec<usize> = dims.iter().rev().copied().collect();
                x.reshape(&rev)
            }
            Step::Flatten(a, b) => {
                let (a, b) = (a % rank, b % rank);
                x.flatten(a.min(b), a.max(b))
            }
            Step::Unsqueeze(d) => x.unsqueeze(d % (rank + 1)),
            Step::Squeeze => match dims.iter().position(|&d| d == 1) {
                Some(d) => x.squeeze(d),
                None => x.unsqueeze(0)?.squeeze(0),
            },
            Step::Narrow(d, s, l) => {
                let d = d % rank;
                let s = s % dims[d];
                x.narrow(d, s, 1 + l % (dims[d] - s))
            }
            Step::Select(d, i) => {
                if rank == 1 {
                    return x.narrow(0, i % dims[0], 1);
                }
                let d = d % rank;
                x.select(d, i % dims[d])
            }
            Step::Broadcast(lead) => {
                let mut to = vec![1 + lead % 3];
                to.extend(dims.iter().map(|&d| if d == 1 { 2 } else { d }));
                x.broadcast_to(&to)
            }
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..4, 0usize..4).prop_map(|(a, b)| Step::Transpose(a, b)),
        any::<u64>().prop_map(Step::Permute),
        Just(Step::Reshape),
        (0usize..4, 0usize..4).prop_map(|(a, b)| Step::Flatten(a, b)),
        (0usize..5).prop_map(Step::Unsqueeze),
        Just(Step::Squeeze),
        (0usize..4, 0usize..4, 0usize..4).prop_map(|(d, s, l)| Step::Narrow(d, s, l)),
        (0usize..4, 0usize..4).prop_map(|(d, i)| Step::Select(d, i)),
        (0usize..3).prop_map(Step::Broadcast),
    ]
}

/// How the leaf is laid out: compact, transposed (strided), with holes, or broadcast.
#[derive(Debug, Clone, Copy)]
enum Leaf {
    Compact,
    Transposed,
    Holes,
    Broadcast,
}

fn leaf(dims: &[usize], values: &[f32], kind: Leaf) -> Tensor {
    let n: usize = dims.iter().product();
    match kind {
        Leaf::Compact => t(&values[..n], dims),
        Leaf::Transposed => {
            let rev: Vec<usize> = dims.iter().rev().copied().collect();
            let order: Vec<usize> = (0..dims.len()).rev().collect();
            t(&values[..n], &rev).permute(&order).unwrap().detach()
        }
        Leaf::Holes => {
            // every other element of twice the storage along the last mode
            let mut wide = dims.to_vec();
            let last = wide.len() - 1;
            wide[last] *= 2;
            let storage: Vec<f32> = values.iter().cycle().take(2 * n).copied().collect();
            let w = t(&storage, &wide);
            let layout = Layout::row_major(dims).unwrap();
            let strides: Vec<usize> = layout.leaves().iter().map(|l| l.stride * 2).collect();
            let mut modes = Vec::new();
            for (&d, &s) in dims.iter().zip(&strides) {
                modes.push(
                    Layout::new(
                        autograd_core::Shape::from(d),
                        autograd_core::Stride::from(s),
                    )
                    .unwrap(),
                );
            }
            w.with_layout_detached(Layout::from_modes(&modes).unwrap(), 1)
                .unwrap()
        }
        Leaf::Broadcast => {
            // the first mode repeats one slice of storage (stride 0)
            let mut one = dims.to_vec();
            one[0] = 1;
            let inner: usize = one.iter().product();
            t(&values[..inner], &one)
                .broadcast_to(dims)
                .unwrap()
                .detach()
        }
    }
}

fn leaf_kind() -> impl Strategy<Value = Leaf> {
    prop_oneof![
        Just(Leaf::Compact),
        Just(Leaf::Transposed),
        Just(Leaf::Holes),
        Just(Leaf::Broadcast),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Each view op alone, and chains of up to four, on every kind of leaf layout: gradcheck
    /// agrees with central differences, and every step shares storage unless it is a reshape
    /// or flatten that must copy.
    #[test]
    fn chains_of_views_pass_gradcheck(
        dims in prop::collection::vec(1usize..4, 1..4),
        values in prop::collection::vec(-2.0f32..2.0, 64),
        kind in leaf_kind(),
        steps in prop::collection::vec(step(), 1..5),
    ) {
        let x = leaf(&dims, &values, kind);
        prop_assert!(x.autograd_ctx().is_none());
        // the forward chain: every step records its node and shares storage where a view exists
        let mut y = x.clone();
        for s in &steps {
            let next = s.apply(&y).unwrap();
            prop_assert!(next.autograd_ctx().is_some(), "{s:?} recorded no node");
            let copies = matches!(s, Step::Reshape | Step::Flatten(..))
                && !y.layout().is_row_major_contiguous();
            if !copies {
                prop_assert_eq!(next.carrier().unwrap().id(), y.carrier().unwrap().id());
            }
            y = next;
        }
        let f = |v: &[Tensor]| {
            let mut y = v[0].clone();
            for s in &steps {
                y = s.apply(&y)?;
            }
            Ok(y)
        };
        let report = gradcheck(f, std::slice::from_ref(&x), GradcheckOptions::default());
        prop_assert!(report.is_ok(), "{:?} on {}: {:?}", steps, x.layout(), report.err());
    }
}

#[test]
fn select_of_a_vector_and_squeeze_to_rank_zero_differentiate() {
    let x = t(&[0.5, -1.5, 2.5], &[3]);
    let s = x.select(0, 1).unwrap();
    assert_view_op(&x, &s, "select");
    assert_eq!((s.layout().rank(), s.size()), (0, 1));
    assert_eq!(vals(&s), [-1.5]);
    check(|v| v[0].select(0, 2), &x);
    let one = t(&[4.0], &[1]);
    check(
        |v| v[0].squeeze(0)?.unsqueeze(0)?.broadcast_to(&[2, 3]),
        &one,
    );
}

#[test]
fn reshape_of_strided_storage_is_a_view_when_a_layout_expresses_it() {
    // narrowed rows (3,4):(6,1) split into heads: (3,2,2):(6,2,1), the same storage
    let x = t(&iota(18), &[3, 6]);
    let n = x.narrow(1, 0, 4).unwrap();
    let v = n.view(&[3, 2, 2]).unwrap();
    assert_eq!(v.layout().to_string(), "(3,2,2):(6,2,1)");
    assert_eq!(v.carrier().unwrap().id(), x.carrier().unwrap().id());
    assert_eq!(vals(&v), vals(&n));
    let r = n.reshape(&[3, 2, 2]).unwrap();
    assert_eq!(r.carrier().unwrap().id(), x.carrier().unwrap().id());
    r.set(&[1, 1, 0], 100.0f32).unwrap();
    assert_eq!(
        x.get(&[1, 2]).unwrap().to_f64(),
        100.0,
        "a write through the view"
    );
    // a transposed (6,4):(1,6) splits its second mode without a copy
    let y = t(&iota(24), &[4, 6]);
    let s = y.transpose(0, 1).unwrap().reshape(&[6, 2, 2]).unwrap();
    assert_eq!(s.layout().to_string(), "(6,2,2):(1,12,6)");
    assert_eq!(vals(&s), vals(&y.transpose(0, 1).unwrap()));
    // gradients through the view land where the narrowed elements live
    let x = t(&iota(18), &[3, 6]);
    let w = t(&iota(12), &[3, 2, 2]);
    sum(&mul(&x.narrow(1, 0, 4).unwrap().reshape(&[3, 2, 2]).unwrap(), &w).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let mut want = vec![0.0; 18];
    for row in 0..3 {
        for col in 0..4 {
            want[row * 6 + col] = (row * 4 + col) as f32;
        }
    }
    assert_eq!(grad_vals(&x), Some(want));
}

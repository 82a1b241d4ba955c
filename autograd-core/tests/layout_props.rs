//! Layout predicates and coordinate maps checked against brute-force enumeration of offsets over
//! random hierarchical layouts (up to depth 3), plus the worked examples.

use std::collections::HashSet;

use autograd_core::{shape, stride, Aliasing, ErrorKind, IntTuple, Layout, Shape, Stride};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Strategy: congruent shape/stride trees.
// ---------------------------------------------------------------------------------------------

/// A leaf pair: extent in 0..4 (rarely 0, so that most layouts are not empty), stride in
/// 0..12 (small strides weighted up, so that collisions are common).
fn leaf() -> BoxedStrategy<(IntTuple, IntTuple)> {
    let extent = prop_oneof![1 => Just(0i64), 8 => 1i64..4];
    let stride = prop_oneof![1 => Just(0i64), 2 => 1i64..4, 2 => 0i64..12];
    (extent, stride)
        .prop_map(|(e, s)| (IntTuple::Int(e), IntTuple::Int(s)))
        .boxed()
}

fn zip_children(children: Vec<(IntTuple, IntTuple)>) -> (IntTuple, IntTuple) {
    let (s, d): (Vec<IntTuple>, Vec<IntTuple>) = children.into_iter().unzip();
    (IntTuple::Tuple(s), IntTuple::Tuple(d))
}

/// A node of at most `depth` more levels below it: a leaf or a tuple of 1..=`width` children.
fn node(depth: u32, width: usize) -> BoxedStrategy<(IntTuple, IntTuple)> {
    if depth == 0 {
        return leaf();
    }
    prop_oneof![
        3 => leaf(),
        2 => prop::collection::vec(node(depth - 1, 2), 1..=width).prop_map(zip_children),
    ]
    .boxed()
}

fn count_leaves(t: &IntTuple) -> usize {
    match t {
        IntTuple::Int(_) => 1,
        IntTuple::Tuple(v) => v.iter().map(count_leaves).sum(),
    }
}

/// Congruent (shape, stride) trees of depth at most 3 with at most 7 leaves: usually a tuple of
/// 0..=3 top-level modes, sometimes a bare leaf.
fn trees() -> impl Strategy<Value = (IntTuple, IntTuple)> {
    prop_oneof![
        1 => leaf(),
        6 => prop::collection::vec(node(2, 3), 0..=3).prop_map(zip_children),
    ]
    .prop_filter("at most 7 leaves", |(s, _)| count_leaves(s) <= 7)
}

// ---------------------------------------------------------------------------------------------
// Brute-force reference, written from the trees alone.
// ---------------------------------------------------------------------------------------------

fn leaves_of(t: &IntTuple, out: &mut Vec<usize>) {
    match t {
        IntTuple::Int(x) => out.push(usize::try_from(*x).expect("non-negative leaf")),
        IntTuple::Tuple(v) => v.iter().for_each(|c| leaves_of(c, out)),
    }
}

fn flat(t: &IntTuple) -> Vec<usize> {
    let mut out = Vec::new();
    leaves_of(t, &mut out);
    out
}

/// The top-level modes of a tree (a bare leaf is one mode).
fn top_modes(t: &IntTuple) -> Vec<IntTuple> {
    match t {
        IntTuple::Int(_) => vec![t.clone()],
        IntTuple::Tuple(v) => v.clone(),
    }
}

/// Colexicographic decomposition of `index` over `extents` (first fastest).
fn colex(index: usize, extents: &[usize]) -> Vec<usize> {
    let mut rest = index;
    extents
        .iter()
        .map(|&e| {
            let c = rest % e;
            rest /= e;
            c
        })
        .collect()
}

fn dot(coord: &[usize], strides: &[usize]) -> usize {
    coord.iter().zip(strides).map(|(c, s)| c * s).sum()
}

struct Reference {
    extents: Vec<usize>,
    strides: Vec<usize>,
    size: usize,
    /// Offsets of colexicographic indices 0..size.
    colex_offsets: Vec<usize>,
    /// Leaf coordinates of colexicographic indices 0..size.
    colex_coords: Vec<Vec<usize>>,
    /// (extents, strides) of each top-level mode.
    modes: Vec<(Vec<usize>, Vec<usize>)>,
    /// Offsets in logical order: row-major over top-level modes, colex inside each.
    logical_offsets: Vec<usize>,
}

impl Reference {
    fn new(shape: &IntTuple, stride: &IntTuple) -> Reference {
        let extents = flat(shape);
        let strides = flat(stride);
        let size: usize = extents.iter().product();
        let colex_coords: Vec<Vec<usize>> = (0..size).map(|i| colex(i, &extents)).collect();
        let colex_offsets = colex_coords.iter().map(|c| dot(c, &strides)).collect();
        let modes: Vec<(Vec<usize>, Vec<usize>)> = top_modes(shape)
            .iter()
            .zip(top_modes(stride))
            .map(|(s, d)| (flat(s), flat(&d)))
            .collect();
        let dims: Vec<usize> = modes.iter().map(|(e, _)| e.iter().product()).collect();
        let mut logical_offsets = Vec::with_capacity(size);
        for idx in 0..size {
            let top = row_major_coord(idx, &dims);
            let off: usize = top
                .iter()
                .zip(&modes)
                .map(|(&c, (e, s))| dot(&colex(c, e), s))
                .sum();
            logical_offsets.push(off);
        }
        Reference {
            extents,
            strides,
            size,
            colex_offsets,
            colex_coords,
            modes,
            logical_offsets,
        }
    }

    fn dims(&self) -> Vec<usize> {
        self.modes.iter().map(|(e, _)| e.iter().product()).collect()
    }

    fn cosize(&self) -> usize {
        self.colex_offsets.iter().max().map_or(0, |m| m + 1)
    }

    fn injective(&self) -> bool {
        all_distinct(&self.colex_offsets)
    }

    fn aliasing(&self) -> Aliasing {
        if self.injective() {
            return Aliasing::None;
        }
        // Remove every stride-0 leaf mode and enumerate what is left.
        let (e, s): (Vec<usize>, Vec<usize>) = self
            .extents
            .iter()
            .zip(&self.strides)
            .filter(|(_, &s)| s != 0)
            .map(|(&e, &s)| (e, s))
            .unzip();
        let n: usize = e.iter().product();
        let rest: Vec<usize> = (0..n).map(|i| dot(&colex(i, &e), &s)).collect();
        if all_distinct(&rest) {
            Aliasing::Broadcast
        } else {
            Aliasing::Other
        }
    }
}

fn row_major_coord(index: usize, dims: &[usize]) -> Vec<usize> {
    let mut rest = index;
    let mut out = vec![0; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        out[k] = rest % d;
        rest /= d;
    }
    out
}

fn all_distinct(v: &[usize]) -> bool {
    v.iter().collect::<HashSet<_>>().len() == v.len()
}

/// The hierarchical coordinate congruent to `shape` whose leaves are `coord`; a node is written
/// as its colexicographic integer index instead when the next bit of `collapse` is set.
fn hier_coord(shape: &IntTuple, coord: &[usize], next: &mut usize, collapse: &mut u64) -> IntTuple {
    let bit = *collapse & 1 == 1;
    *collapse = collapse.rotate_right(1);
    match shape {
        IntTuple::Int(_) => {
            let c = coord[*next];
            *next += 1;
            IntTuple::Int(c as i64)
        }
        IntTuple::Tuple(_) if bit => {
            let n = count_leaves(shape);
            let ext = flat(shape);
            let mut index = 0usize;
            let mut scale = 1usize;
            for (c, e) in coord[*next..*next + n].iter().zip(&ext) {
                index += c * scale;
                scale *= e;
            }
            *next += n;
            IntTuple::Int(index as i64)
        }
        IntTuple::Tuple(children) => IntTuple::Tuple(
            children
                .iter()
                .map(|c| hier_coord(c, coord, next, collapse))
                .collect(),
        ),
    }
}

fn layout_of(s: &IntTuple, d: &IntTuple) -> Layout {
    Layout::new(Shape(s.clone()), Stride(d.clone())).expect("generated layouts are valid")
}

// ---------------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn size_cosize_rank_depth_match_brute_force((s, d) in trees()) {
        let l = layout_of(&s, &d);
        let r = Reference::new(&s, &d);
        prop_assert_eq!(l.size(), r.size);
        prop_assert_eq!(l.cosize(), r.cosize());
        prop_assert_eq!(l.rank(), r.modes.len());
        prop_assert_eq!(l.depth(), s.depth());
        prop_assert_eq!(l.dims(), r.dims());
        let leaves: Vec<(usize, usize)> = l.leaves().iter().map(|x| (x.extent, x.stride)).collect();
        let expect: Vec<(usize, usize)> = r.extents.iter().copied().zip(r.strides.iter().copied()).collect();
        prop_assert_eq!(leaves, expect);
        prop_assert_eq!(l.shape(), &Shape(s.clone()));
        prop_assert_eq!(l.stride(), &Stride(d.clone()));
        // every top-level mode as a layout of its own
        let modes = l.modes();
        prop_assert_eq!(modes.len(), r.modes.len());
        for (m, (e, st)) in modes.iter().zip(&r.modes) {
            prop_assert_eq!(m.size(), e.iter().product::<usize>());
            let ml: Vec<(usize, usize)> = m.leaves().iter().map(|x| (x.extent, x.stride)).collect();
            let me: Vec<(usize, usize)> = e.iter().copied().zip(st.iter().copied()).collect();
            prop_assert_eq!(ml, me);
        }
        prop_assert_eq!(l.to_string(), format!("{s}:{d}"));
    }

    #[test]
    fn injectivity_and_aliasing_are_exact((s, d) in trees()) {
        let l = layout_of(&s, &d);
        let r = Reference::new(&s, &d);
        prop_assert_eq!(l.is_injective(), r.injective(), "layout {}", l);
        prop_assert_eq!(l.aliasing(), r.aliasing(), "layout {}", l);
        prop_assert_eq!(
            l.is_compact(),
            r.injective() && r.cosize() == r.size,
            "layout {}", l
        );
    }

    #[test]
    fn offset_of_index_is_colexicographic((s, d) in trees()) {
        let l = layout_of(&s, &d);
        let r = Reference::new(&s, &d);
        for (i, &o) in r.colex_offsets.iter().enumerate() {
            prop_assert_eq!(l.offset_of_index(i).unwrap(), o);
            // an integer coordinate is the colexicographic index into the whole shape
            prop_assert_eq!(l.offset_of_coord(&IntTuple::Int(i as i64)).unwrap(), o);
        }
        let e = l.offset_of_index(r.size).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::Value);
        let e = l.offset_of_coord(&IntTuple::Int(r.size as i64)).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::Value);
        let e = l.offset_of_coord(&IntTuple::Int(-1)).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::Value);
    }

    #[test]
    fn hierarchical_coordinates_agree_with_brute_force((s, d) in trees(), collapse in any::<u64>()) {
        let l = layout_of(&s, &d);
        let r = Reference::new(&s, &d);
        for (coord, &o) in r.colex_coords.iter().zip(&r.colex_offsets) {
            // fully hierarchical
            let full = hier_coord(&s, coord, &mut 0, &mut 0);
            prop_assert_eq!(l.offset_of_coord(&full).unwrap(), o, "coord {}", full);
            // some nodes given as integer (colexicographic) indices
            let mut bits = collapse;
            let mixed = hier_coord(&s, coord, &mut 0, &mut bits);
            prop_assert_eq!(l.offset_of_coord(&mixed).unwrap(), o, "coord {}", mixed);
        }
        // a coordinate one past a leaf's extent is rejected
        if r.size > 0 {
            let mut bad = vec![0usize; r.extents.len()];
            if !bad.is_empty() {
                bad[0] = r.extents[0];
                let c = hier_coord(&s, &bad, &mut 0, &mut 0);
                let e = l.offset_of_coord(&c).unwrap_err();
                prop_assert_eq!(e.kind(), ErrorKind::Value, "coord {}", c);
            }
        }
    }

    #[test]
    fn logical_order_matches_brute_force((s, d) in trees()) {
        let l = layout_of(&s, &d);
        let r = Reference::new(&s, &d);
        let offsets = l.try_offsets().unwrap();
        prop_assert_eq!(&offsets, &r.logical_offsets, "layout {}", l);
        let mut seen = Vec::new();
        l.for_each_offset(|o| seen.push(o));
        prop_assert_eq!(&seen, &offsets);
        for (i, &o) in offsets.iter().enumerate() {
            prop_assert_eq!(l.offset_of_logical(i).unwrap(), o);
        }
        prop_assert_eq!(l.offset_of_logical(r.size).unwrap_err().kind(), ErrorKind::Value);
        // offset_of_top with one entry per top-level mode is consistent with logical order
        let dims = r.dims();
        for (i, &o) in offsets.iter().enumerate() {
            let top = row_major_coord(i, &dims);
            prop_assert_eq!(l.offset_of_top(&top).unwrap(), o, "top coord {:?}", top);
            // the same coordinate as a tuple of integers
            let t = IntTuple::Tuple(top.iter().map(|&c| IntTuple::Int(c as i64)).collect());
            if matches!(s, IntTuple::Tuple(_)) {
                prop_assert_eq!(l.offset_of_coord(&t).unwrap(), o);
            }
        }
        if r.size > 0 {
            for k in 0..dims.len() {
                let mut top = vec![0; dims.len()];
                top[k] = dims[k];
                prop_assert_eq!(l.offset_of_top(&top).unwrap_err().kind(), ErrorKind::Value);
            }
        }
        let mut long = vec![0; dims.len() + 1];
        prop_assert_eq!(l.offset_of_top(&long).unwrap_err().kind(), ErrorKind::Value);
        long.truncate(dims.len());
        if r.size > 0 {
            prop_assert_eq!(l.offset_of_top(&long).unwrap(), 0);
        }
        // row-major contiguity is exactly "logical offsets are 0, 1, 2, ..."
        if r.size > 0 {
            let expect = r.logical_offsets.iter().copied().eq(0..r.size);
            prop_assert_eq!(l.is_row_major_contiguous(), expect, "layout {}", l);
        }
    }

    #[test]
    fn wide_flat_layouts_enumerate_like_brute_force(
        leaves in prop::collection::vec((1i64..3, 0i64..40), 9..13),
        nested in any::<bool>(),
    ) {
        // many leaves that rarely coalesce exercise the general odometer of for_each_offset
        let (e, d): (Vec<i64>, Vec<i64>) = leaves.into_iter().unzip();
        let (s, d) = if nested {
            // the same leaves as two top-level modes: ((e0..e4), (e5..))
            let split = |v: &[i64]| IntTuple::Tuple(vec![IntTuple::from(v[..5].to_vec()), IntTuple::from(v[5..].to_vec())]);
            (split(&e), split(&d))
        } else {
            (IntTuple::from(e), IntTuple::from(d))
        };
        let l = layout_of(&s, &d);
        let r = Reference::new(&s, &d);
        prop_assert_eq!(&l.try_offsets().unwrap(), &r.logical_offsets);
        prop_assert_eq!(l.cosize(), r.cosize());
        prop_assert_eq!(l.aliasing(), r.aliasing());
        for (i, &o) in r.colex_offsets.iter().enumerate().step_by(7) {
            prop_assert_eq!(l.offset_of_index(i).unwrap(), o);
        }
    }

    #[test]
    fn canonical_is_compact_and_colexicographic((s, d) in trees()) {
        let _ = d;
        let c = Layout::canonical(Shape(s.clone())).unwrap();
        prop_assert_eq!(c.shape(), &Shape(s.clone()));
        prop_assert!(c.shape().0.congruent(&c.stride().0));
        prop_assert!(c.is_injective());
        prop_assert_eq!(c.aliasing(), Aliasing::None);
        prop_assert!(c.is_compact());
        prop_assert_eq!(c.cosize(), c.size());
        // first mode fastest at every depth: colexicographic index i sits at offset i
        for i in 0..c.size() {
            prop_assert_eq!(c.offset_of_index(i).unwrap(), i, "canonical {}", c);
        }
        let r = Reference::new(c.shape().tree(), c.stride().tree());
        prop_assert_eq!(r.colex_offsets, (0..c.size()).collect::<Vec<_>>());
    }

    #[test]
    fn compact_row_major_lists_storage_in_logical_order((s, d) in trees()) {
        let _ = d;
        let c = Layout::compact_row_major(Shape(s.clone())).unwrap();
        prop_assert_eq!(c.shape(), &Shape(s.clone()));
        prop_assert!(c.is_compact());
        prop_assert_eq!(c.try_offsets().unwrap(), (0..c.size()).collect::<Vec<_>>(), "layout {}", c);
        let r = Reference::new(c.shape().tree(), c.stride().tree());
        prop_assert_eq!(r.logical_offsets, (0..c.size()).collect::<Vec<_>>());
        if c.size() > 0 {
            prop_assert!(c.is_row_major_contiguous());
        }
    }

    #[test]
    fn prepend_mode_adds_a_slowest_batch_mode((s, d) in trees(), n in 0usize..4, bs in 0usize..30) {
        let l = layout_of(&s, &d);
        let b = l.prepend_mode(n, bs).unwrap();
        prop_assert_eq!(b.rank(), l.rank() + 1);
        prop_assert_eq!(b.size(), n * l.size());
        let inner = l.try_offsets().unwrap();
        let expect: Vec<usize> = (0..n).flat_map(|k| inner.iter().map(move |o| o + k * bs)).collect();
        prop_assert_eq!(b.try_offsets().unwrap(), expect);
    }

    #[test]
    fn wrapping_a_stride_leaf_breaks_congruence((s, d) in trees()) {
        // wrap the first stride leaf in a one-element tuple: no longer congruent
        fn wrap_first(t: &IntTuple, done: &mut bool) -> IntTuple {
            match t {
                IntTuple::Int(_) if !*done => {
                    *done = true;
                    IntTuple::Tuple(vec![t.clone()])
                }
                IntTuple::Int(_) => t.clone(),
                IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|c| wrap_first(c, done)).collect()),
            }
        }
        let mut done = false;
        let bad = wrap_first(&d, &mut done);
        prop_assume!(done);
        let e = Layout::new(Shape(s.clone()), Stride(bad)).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::Value);
    }

    #[test]
    fn a_negative_extent_anywhere_is_rejected((s, d) in trees(), which in 0usize..7, neg in 1i64..5) {
        let n = count_leaves(&s);
        prop_assume!(n > 0);
        let k = which % n;
        let mut i = 0;
        let bad = s.map_leaves(&mut |e| {
            let out = if i == k { -neg } else { e };
            i += 1;
            out
        });
        let e = Layout::new(Shape(bad), Stride(d.clone())).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::Value);
        prop_assert!(e.message().contains(&format!("-{neg}")), "{}", e);
    }
}

// ---------------------------------------------------------------------------------------------
// The examples.
// ---------------------------------------------------------------------------------------------

#[test]
fn exact_injectivity_examples() {
    let a = Layout::new(shape![3, 2], stride![2, 3]).unwrap();
    assert!(a.is_injective());
    assert_eq!(a.aliasing(), Aliasing::None);
    // offsets {0,2,4} + {0,3}: 0,2,4,3,5,7 -- injective though not "nested"
    assert_eq!(a.try_offsets().unwrap(), vec![0, 3, 2, 5, 4, 7]);
    assert_eq!(a.cosize(), 8);
    assert!(!a.is_compact());

    let b = Layout::new(shape![2, 2], stride![1, 1]).unwrap();
    assert!(!b.is_injective());
    assert_eq!(b.aliasing(), Aliasing::Other);

    let c = Layout::new(shape![4, 2], stride![0, 1]).unwrap();
    assert_eq!(c.aliasing(), Aliasing::Broadcast);
    assert!(!c.is_injective());
    assert_eq!(c.cosize(), 2);

    // stride 0 on an extent-1 mode aliases nothing
    assert!(Layout::new(shape![1, 3], stride![0, 1])
        .unwrap()
        .is_injective());
    // an empty layout is injective and needs no storage
    let e = Layout::new(shape![0, 3], stride![5, 0]).unwrap();
    assert_eq!((e.size(), e.cosize(), e.aliasing()), (0, 0, Aliasing::None));
    // interleaved collision that only brute force finds: {0,3,6} + {0,2,4,6} hits 6 twice
    let f = Layout::new(shape![3, 4], stride![3, 2]).unwrap();
    assert_eq!(f.aliasing(), Aliasing::Other);
    // injective despite overlapping spans: {0,2} + {0,1}*... 2 x 2 with strides 2, 1 -> 0,2,1,3
    assert!(Layout::new(shape![2, 2], stride![2, 1])
        .unwrap()
        .is_compact());
    // broadcast inside a nested mode
    assert_eq!(
        Layout::new(shape![2, [4, 3]], stride![1, [0, 2]])
            .unwrap()
            .aliasing(),
        Aliasing::Broadcast
    );
    // stride-0 mode plus a real collision is Other, not Broadcast
    assert_eq!(
        Layout::new(shape![2, 2, 2], stride![0, 1, 1])
            .unwrap()
            .aliasing(),
        Aliasing::Other
    );
}

#[test]
fn canonical_examples() {
    let a = Layout::canonical(shape![4, 2]).unwrap();
    assert_eq!(a.stride(), &stride![1, 4]);
    assert_eq!(a.to_string(), "(4,2):(1,4)");
    let b = Layout::canonical(shape![2, [4, 3]]).unwrap();
    assert_eq!(b.stride(), &stride![1, [2, 8]]);
    assert_eq!(b.cosize(), 24);
    // a bare leaf shape
    let c = Layout::canonical(Shape(IntTuple::Int(5))).unwrap();
    assert_eq!(c.stride(), &Stride(IntTuple::Int(1)));
}

#[test]
fn compact_row_major_examples() {
    assert_eq!(
        Layout::compact_row_major(shape![4, 2]).unwrap().stride(),
        &stride![2, 1]
    );
    assert_eq!(
        Layout::compact_row_major(shape![2, [4, 3]])
            .unwrap()
            .stride(),
        &stride![12, [1, 4]]
    );
    assert_eq!(
        Layout::row_major(&[2, 3, 4]).unwrap().to_string(),
        "(2,3,4):(12,4,1)"
    );
    assert_eq!(Layout::row_major(&[]).unwrap().size(), 1);
}

#[test]
fn coordinate_examples() {
    let l = Layout::new(shape![2, [2, 3]], stride![100, [1, 10]]).unwrap();
    assert_eq!(
        l.try_offsets().unwrap(),
        vec![0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121]
    );
    // colexicographic: index 1 advances mode 0 first
    assert_eq!(l.offset_of_index(1).unwrap(), 100);
    assert_eq!(l.offset_of_index(2).unwrap(), 1);
    assert_eq!(l.offset_of_top(&[1, 3]).unwrap(), 111);
    assert_eq!(l.offset_of_logical(9).unwrap(), 111);
    let c = IntTuple::from(vec![IntTuple::from(1), IntTuple::from(vec![1, 2])]);
    assert_eq!(l.offset_of_coord(&c).unwrap(), 121);
    // a tuple coordinate of the wrong arity
    let bad = IntTuple::from(vec![1, 2, 3]);
    assert_eq!(
        l.offset_of_coord(&bad).unwrap_err().kind(),
        ErrorKind::Value
    );
    // a tuple where the shape has a leaf
    let bad = IntTuple::from(vec![IntTuple::from(vec![0, 0]), IntTuple::from(0)]);
    assert_eq!(
        l.offset_of_coord(&bad).unwrap_err().kind(),
        ErrorKind::Value
    );
}

#[test]
fn bad_trees_are_value_errors_that_name_the_trees() {
    let e = Layout::new(shape![2, 3], stride![1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.message().contains("(2,3)") && e.message().contains("(1)"),
        "{e}"
    );
    let e = Layout::new(shape![2, [4, 3]], stride![1, 2, 8]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = Layout::new(shape![2, [4, 3]], stride![1, [2, [8]]]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = Layout::new(shape![2, -3], stride![1, 2]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("-3"), "{e}");
    let e = Layout::new(shape![[2, -1]], stride![[1, 2]]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = Layout::new(shape![2], stride![-4]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    // size overflow is a Value error, not a panic
    let e = Layout::new(shape![1i64 << 40, 1i64 << 40], stride![1, 1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let e = Layout::new(shape![2], stride![i64::MAX]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    // mode() out of range
    let l = Layout::new(shape![2, 3], stride![3, 1]).unwrap();
    assert_eq!(l.mode(2).unwrap_err().kind(), ErrorKind::Value);
}

/// The generator reaches every interesting class, so the properties above are not vacuous.
#[test]
fn generator_covers_every_class() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = trees();
    let (mut none, mut broadcast, mut other, mut deep, mut empty, mut big, mut bare) =
        (0, 0, 0, 0, 0, 0, 0);
    for _ in 0..2000 {
        let (s, d) = strategy.new_tree(&mut runner).unwrap().current();
        let l = layout_of(&s, &d);
        match l.aliasing() {
            Aliasing::None => none += 1,
            Aliasing::Broadcast => broadcast += 1,
            Aliasing::Other => other += 1,
        }
        deep += usize::from(l.depth() == 3);
        empty += usize::from(l.size() == 0);
        big += usize::from(l.size() >= 54);
        bare += usize::from(matches!(s, IntTuple::Int(_)));
    }
    for (name, n) in [
        ("injective", none),
        ("broadcast", broadcast),
        ("other aliasing", other),
        ("depth 3", deep),
        ("empty", empty),
        ("size >= 54", big),
        ("bare leaf", bare),
    ] {
        assert!(n >= 20, "only {n} of 2000 generated layouts are {name}");
    }
    eprintln!("none {none} broadcast {broadcast} other {other} deep {deep} empty {empty} big {big} bare {bare}");
}

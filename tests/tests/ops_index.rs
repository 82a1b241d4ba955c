//! The layout and indexing ops (`concat`, `stack`, `index_select`, `gather`, `scatter_add`,
//! `embedding`): forward values against plain loops over random shapes, every VJP against
//! central differences on dense, strided and broadcast inputs with repeated indices, carrier
//! classes, and bad input (bad axis, out-of-range index, wrong index dtype, mismatched shapes)
//! that is an error of the right kind and changes nothing.

mod spec_support;

use autograd_core::ops::{concat, embedding, gather, index_select, scatter_add, stack};
use autograd_core::{
    gradcheck, CpuCarrier, DType, ErrorKind, GradcheckOptions, Layout, Shape, Tensor,
};
use autograd_tests::{broadcast_rows, coords, grad_vals, noise, strided, t, vals};
use proptest::prelude::*;
use spec_support::{expect_err, on_test_carrier, tc};

fn position(c: &[usize], dims: &[usize]) -> usize {
    c.iter().zip(dims).fold(0, |p, (&ci, &d)| p * d + ci)
}

fn ids(values: &[i32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), Shape::from(dims.to_vec())).unwrap()
}

fn check(f: impl Fn(&[Tensor]) -> autograd_core::Result<Tensor>, inputs: &[Tensor], what: &str) {
    gradcheck(f, inputs, GradcheckOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Dims, an axis, and per-piece extents along it.
fn pieces() -> impl Strategy<Value = (Vec<usize>, usize, Vec<usize>, u64)> {
    (
        prop::collection::vec(1usize..4, 1..4),
        0usize..3,
        prop::collection::vec(0usize..4, 1..4),
        0u64..1000,
    )
        .prop_map(|(dims, axis, extents, seed)| {
            let axis = axis % dims.len();
            (dims, axis, extents, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn concat_and_stack_match_plain_loops_and_central_differences(
        (dims, axis, extents, seed) in pieces()
    ) {
        // concat: piece i has extent extents[i] on axis
        let shapes: Vec<Vec<usize>> = extents.iter().map(|&e| {
            let mut d = dims.clone();
            d[axis] = e;
            d
        }).collect();
        let values: Vec<Vec<f32>> = shapes.iter().enumerate()
            .map(|(i, d)| noise(d.iter().product(), seed + i as u64)).collect();
        let mut out_dims = dims.clone();
        out_dims[axis] = extents.iter().sum();
        let mut want = vec![0.0f32; out_dims.iter().product()];
        let mut start = 0;
        for (v, d) in values.iter().zip(&shapes) {
            for (p, &x) in v.iter().enumerate() {
                let mut c = coords(p, d);
                c[axis] += start;
                want[position(&c, &out_dims)] = x;
            }
            start += d[axis];
        }
        // odd pieces strided, the first on the test carrier
        let xs: Vec<Tensor> = values.iter().zip(&shapes).enumerate().map(|(i, (v, d))| {
            match i % 2 { 0 => t(v, d), _ => strided(v, d) }
        }).collect();
        let y = concat(&xs, axis).unwrap();
        prop_assert_eq!(y.dims(), out_dims.clone());
        prop_assert_eq!(vals(&y), want);
        check(|v| concat(v, axis), &xs, "concat");
        let on_tc: Vec<Tensor> = values.iter().zip(&shapes).map(|(v, d)| tc(v, d)).collect();
        prop_assert!(on_test_carrier(&concat(&on_tc, axis).unwrap()));

        // stack: every piece of shape dims, new axis at 0..=rank
        let at = seed as usize % (dims.len() + 1);
        let same: Vec<Vec<f32>> = (0..extents.len()).map(|i| noise(dims.iter().product(), seed * 7 + i as u64)).collect();
        let xs: Vec<Tensor> = same.iter().enumerate()
            .map(|(i, v)| if i.is_multiple_of(2) { strided(v, &dims) } else { t(v, &dims) }).collect();
        let y = stack(&xs, at).unwrap();
        let mut sdims = dims.clone();
        sdims.insert(at, xs.len());
        prop_assert_eq!(y.dims(), sdims.clone());
        let got = vals(&y);
        for (i, v) in same.iter().enumerate() {
            for (p, &x) in v.iter().enumerate() {
                let mut c = coords(p, &dims);
                c.insert(at, i);
                prop_assert_eq!(got[position(&c, &sdims)], x);
            }
        }
        check(|v| stack(v, at), &xs, "stack");
    }

    #[test]
    fn index_select_gather_and_scatter_add_match_loops_and_central_differences(
        dims in prop::collection::vec(1usize..4, 1..4),
        axis in 0usize..3,
        picks in prop::collection::vec(0usize..100, 1..6),
        seed in 0u64..1000,
    ) {
        let axis = axis % dims.len();
        let n = dims[axis];
        let values = noise(dims.iter().product(), seed);

        // index_select with repeats
        let idx: Vec<i32> = picks.iter().map(|&p| (p % n) as i32).collect();
        let it = ids(&idx, &[idx.len()]);
        let mut odims = dims.clone();
        odims[axis] = idx.len();
        let want: Vec<f32> = (0..odims.iter().product()).map(|p| {
            let mut c = coords(p, &odims);
            c[axis] = idx[c[axis]] as usize;
            values[position(&c, &dims)]
        }).collect();
        for x in [t(&values, &dims), strided(&values, &dims)] {
            prop_assert_eq!(vals(&index_select(&x, axis, &it).unwrap()), want.clone());
            check(|v| index_select(&v[0], axis, &it), &[x], "index_select");
        }

        // gather: indices of the input's shape with the axis extent from picks
        let mut gdims = dims.clone();
        gdims[axis] = picks.len().min(4);
        let gsize: usize = gdims.iter().product();
        let gidx: Vec<i32> = (0..gsize).map(|p| (picks[p % picks.len()].wrapping_add(p) % n) as i32).collect();
        let gt = ids(&gidx, &gdims);
        let want: Vec<f32> = (0..gsize).map(|p| {
            let mut c = coords(p, &gdims);
            c[axis] = gidx[p] as usize;
            values[position(&c, &dims)]
        }).collect();
        for x in [t(&values, &dims), strided(&values, &dims)] {
            prop_assert_eq!(vals(&gather(&x, axis, &gt).unwrap()), want.clone());
            check(|v| gather(&v[0], axis, &gt), &[x], "gather");
        }

        // scatter_add: src of the indices' shape, repeated targets add up
        let src = noise(gsize, seed + 1);
        let mut want = values.clone();
        for (p, &s) in src.iter().enumerate() {
            let mut c = coords(p, &gdims);
            c[axis] = gidx[p] as usize;
            want[position(&c, &dims)] += s;
        }
        let got = vals(&scatter_add(&strided(&values, &dims), axis, &gt, &t(&src, &gdims)).unwrap());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() < 1e-5);
        }
        check(|v| scatter_add(&v[0], axis, &gt, &v[1]), &[t(&values, &dims), strided(&src, &gdims)], "scatter_add");
    }

    #[test]
    fn embedding_matches_a_row_lookup_and_scatter_adds_repeated_rows(
        vocab in 1usize..5, width in 1usize..4,
        picks in prop::collection::vec(0usize..100, 1..7), seed in 0u64..1000,
    ) {
        let w = noise(vocab * width, seed);
        let idx: Vec<i32> = picks.iter().map(|&p| (p % vocab) as i32).collect();
        let id_dims = if idx.len().is_multiple_of(2) { vec![2, idx.len() / 2] } else { vec![idx.len()] };
        let it = ids(&idx, &id_dims);
        let y = embedding(&t(&w, &[vocab, width]), &it).unwrap();
        let mut ydims = id_dims.clone();
        ydims.push(width);
        prop_assert_eq!(y.dims(), ydims);
        let want: Vec<f32> = idx.iter().flat_map(|&i| w[i as usize * width..(i as usize + 1) * width].to_vec()).collect();
        prop_assert_eq!(vals(&y), want);
        check(|v| embedding(&v[0], &it), &[strided(&w, &[vocab, width])], "embedding");
    }
}

#[test]
fn repeated_ids_sum_their_rows_gradients() {
    let w = t(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
    let y = w.embedding(&ids(&[2, 0, 2, 2], &[4])).unwrap();
    y.backward_with(
        Some(&t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[4, 2])),
        false,
    )
    .unwrap();
    assert_eq!(grad_vals(&w).unwrap(), [3.0, 4.0, 0.0, 0.0, 13.0, 16.0]);

    let a = t(&[1.0, 2.0, 3.0], &[3]);
    let s = a.index_select(0, &ids(&[1, 1, 0], &[3])).unwrap();
    assert_eq!(vals(&s), [2.0, 2.0, 1.0]);
    s.backward_with(Some(&t(&[1.0, 10.0, 100.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&a).unwrap(), [100.0, 11.0, 0.0]);

    let base = t(&[0.0; 3], &[3]);
    let src = t(&[1.0, 2.0, 3.0], &[3]);
    let y = base.scatter_add(0, &ids(&[2, 2, 0], &[3]), &src).unwrap();
    assert_eq!(vals(&y), [3.0, 0.0, 3.0]);
    y.backward_with(Some(&t(&[5.0, 6.0, 7.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&base).unwrap(), [5.0, 6.0, 7.0]);
    assert_eq!(grad_vals(&src).unwrap(), [7.0, 7.0, 5.0]);
}

#[test]
fn broadcast_inputs_get_per_slot_gradients() {
    // a [3, 2] stride-0 table: every row aliases the same two slots
    let row = [0.5f32, -1.5];
    let it = ids(&[0, 2, 2, 1], &[4]);
    check(
        |v| index_select(&v[0], 0, &it),
        &[broadcast_rows(&row, 3)],
        "index_select",
    );
    check(
        |v| embedding(&v[0], &it),
        &[broadcast_rows(&row, 3)],
        "embedding",
    );
    check(
        |v| concat(&[v[0].clone(), v[1].clone()], 0),
        &[broadcast_rows(&row, 3), t(&row, &[1, 2])],
        "concat",
    );
    check(
        |v| stack(&[v[0].clone(), v[0].clone()], 1),
        &[broadcast_rows(&row, 2)],
        "stack",
    );
    let gt = ids(&[1, 0, 1, 1], &[2, 2]);
    check(
        |v| gather(&v[0], 1, &gt),
        &[broadcast_rows(&row, 2)],
        "gather",
    );
    check(
        |v| scatter_add(&v[0], 1, &gt, &v[1]),
        &[t(&[0.0; 4], &[2, 2]), broadcast_rows(&row, 2)],
        "scatter_add",
    );
}

#[test]
fn results_stay_in_the_first_input_carrier_class_and_int_results_record_nothing() {
    let x = tc(&noise(6, 2), &[3, 2]);
    let i = ids(&[2, 0], &[2]);
    for y in [
        x.index_select(0, &i).unwrap(),
        x.gather(0, &ids(&[1, 2], &[1, 2])).unwrap(),
        x.scatter_add(0, &ids(&[1, 2], &[1, 2]), &t(&[1.0, 1.0], &[1, 2]))
            .unwrap(),
        x.embedding(&i).unwrap(),
        Tensor::stack(&[x.clone(), x.clone()], 0).unwrap(),
        Tensor::concat(&[x.clone(), x.clone()], 1).unwrap(),
    ] {
        assert!(on_test_carrier(&y));
        assert!(y.autograd_ctx().is_some());
    }
    let ints = concat(&[i.clone(), i.clone()], 0).unwrap();
    assert_eq!(ints.dtype(), &DType::Int32);
    assert_eq!(ints.values::<i32>().unwrap(), [2, 0, 2, 0]);
    assert!(ints.autograd_ctx().is_none());
}

#[test]
fn bad_input_is_an_error_of_the_right_kind_and_changes_nothing() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let version = x.carrier().unwrap().version();
    // out-of-range and negative indices name the index, the axis and the extent
    expect_err(
        index_select(&x, 0, &ids(&[0, 3], &[2])),
        ErrorKind::Value,
        &["index 3", "axis 0", "extent 3"],
    );
    expect_err(
        index_select(&x, 1, &ids(&[-1], &[1])),
        ErrorKind::Value,
        &["index -1", "axis 1", "extent 2"],
    );
    expect_err(
        gather(&x, 1, &ids(&[0, 2], &[1, 2])),
        ErrorKind::Value,
        &["index 2", "axis 1", "extent 2"],
    );
    expect_err(
        scatter_add(&x, 0, &ids(&[5, 0], &[1, 2]), &t(&[1.0, 1.0], &[1, 2])),
        ErrorKind::Value,
        &["index 5", "axis 0", "extent 3"],
    );
    expect_err(
        embedding(&x, &ids(&[1, 3], &[2])),
        ErrorKind::Value,
        &["index 3", "extent 3"],
    );
    // bad axes
    expect_err(
        index_select(&x, 2, &ids(&[0], &[1])),
        ErrorKind::Value,
        &["axis 2"],
    );
    expect_err(
        gather(&x, 4, &ids(&[0, 0], &[1, 2])),
        ErrorKind::Value,
        &["axis 4"],
    );
    expect_err(
        concat(&[x.clone(), x.clone()], 2),
        ErrorKind::Value,
        &["axis 2"],
    );
    expect_err(
        stack(&[x.clone(), x.clone()], 3),
        ErrorKind::Value,
        &["axis 3"],
    );
    // wrong index dtype
    let float_ids = t(&[0.0, 1.0], &[2]);
    expect_err(index_select(&x, 0, &float_ids), ErrorKind::Type, &["Int32"]);
    expect_err(embedding(&x, &float_ids), ErrorKind::Type, &["Int32"]);
    expect_err(
        gather(&x, 0, &t(&[0.0, 1.0], &[1, 2])),
        ErrorKind::Type,
        &["Int32"],
    );
    // mismatched shapes and dtypes
    expect_err(
        concat(
            &[x.clone(), t(&[1.0; 4], &[2, 2]), t(&[1.0; 3], &[3, 1])],
            0,
        ),
        ErrorKind::Value,
        &["tensor 2"],
    );
    expect_err(
        concat(&[x.clone(), t(&[1.0; 3], &[3])], 0),
        ErrorKind::Value,
        &["tensor 1"],
    );
    expect_err(
        concat(&[x.clone(), ids(&[1, 2], &[1, 2])], 0),
        ErrorKind::Type,
        &["dtype"],
    );
    expect_err(concat(&[], 0), ErrorKind::Value, &["at least one"]);
    expect_err(
        stack(&[x.clone(), t(&[1.0; 4], &[2, 2])], 0),
        ErrorKind::Value,
        &["tensor 1"],
    );
    expect_err(
        gather(&x, 0, &ids(&[0, 0, 0], &[3])),
        ErrorKind::Value,
        &["axes"],
    );
    expect_err(
        gather(&x, 0, &ids(&[0, 0, 0], &[1, 3])),
        ErrorKind::Value,
        &["extent 3"],
    );
    expect_err(
        index_select(&x, 0, &ids(&[0, 0], &[1, 2])),
        ErrorKind::Value,
        &["one axis"],
    );
    expect_err(
        scatter_add(&x, 0, &ids(&[0, 0], &[1, 2]), &t(&[1.0], &[1, 1])),
        ErrorKind::Value,
        &["do not fit"],
    );
    expect_err(
        embedding(&t(&[1.0; 3], &[3]), &ids(&[0], &[1])),
        ErrorKind::Value,
        &["[V, D]"],
    );
    assert_eq!(vals(&x), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(x.carrier().unwrap().version(), version);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn nested_modes_index_as_one_axis_and_gradients_keep_the_nested_shape() {
    // shape ((2,2),3): the first top-level axis has extent 4
    let layout = Layout::compact_row_major(autograd_core::shape![[2, 2], 3]).unwrap();
    let values = noise(12, 4);
    let x = Tensor::from_parts(CpuCarrier::from_vec(values.clone()), layout, 0).unwrap();
    assert_eq!(x.dims(), [4, 3]);
    let it = ids(&[3, 0, 3], &[3]);
    let y = index_select(&x, 0, &it).unwrap();
    let want: Vec<f32> = [3, 0, 3]
        .iter()
        .flat_map(|&r| values[r * 3..r * 3 + 3].to_vec())
        .collect();
    assert_eq!(vals(&y), want);
    y.backward_with(Some(&t(&[1.0; 9], &[3, 3])), false)
        .unwrap();
    let g = x.grad().unwrap().unwrap();
    assert_eq!(g.shape(), x.shape());
    assert_eq!(vals(&g), [[1.0; 3], [0.0; 3], [0.0; 3], [2.0; 3]].concat());
    check(
        |v| index_select(&v[0], 0, &it),
        std::slice::from_ref(&x),
        "index_select",
    );
    check(
        |v| concat(&[v[0].clone(), v[0].clone()], 1),
        std::slice::from_ref(&x),
        "concat",
    );
}

#[test]
fn scatter_add_of_integers_wraps_as_the_elementwise_ops_do() {
    let a = Tensor::from_vec(vec![i32::MAX, 5], Shape::from(vec![2usize])).unwrap();
    let src = Tensor::from_vec(vec![1i32, 2], Shape::from(vec![2usize])).unwrap();
    let y = scatter_add(&a, 0, &ids(&[0, 0], &[2]), &src).unwrap();
    assert_eq!(
        y.values::<i32>().unwrap(),
        vec![i32::MIN.wrapping_add(2), 5]
    );
    let a = Tensor::from_vec(vec![i64::MAX], Shape::from(vec![1usize])).unwrap();
    let src = Tensor::from_vec(vec![1i64], Shape::from(vec![1usize])).unwrap();
    let y = scatter_add(&a, 0, &ids(&[0], &[1]), &src).unwrap();
    assert_eq!(y.values::<i64>().unwrap(), vec![i64::MIN]);
}

#[test]
fn scatter_add_reads_a_tensor_and_a_view_of_it_together() {
    // src is a view of a's storage: one carrier, read under one lock
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let src = a.narrow(0, 2, 2).unwrap();
    let y = scatter_add(&a, 0, &ids(&[0, 1], &[2]), &src).unwrap();
    assert_eq!(vals(&y), vec![4.0, 6.0, 3.0, 4.0]);
}

#[test]
fn a_concat_whose_joined_extent_overflows_is_a_value_error() {
    let huge = t(&[1.0], &[1]).broadcast_to(&[1usize << 62]).unwrap();
    let parts = vec![huge.clone(), huge.clone(), huge.clone(), huge];
    expect_err(concat(&parts, 0), ErrorKind::Value, &["overflows"]);
}

#[test]
fn index_ops_on_an_unallocatable_broadcast_are_value_errors() {
    // a [2^40, 1] stride-0 table: its elements cannot be copied out, nor its gradient made
    let table = t(&[1.0], &[1, 1]).broadcast_to(&[1usize << 40, 1]).unwrap();
    let id = ids(&[0], &[1]);
    expect_err(
        embedding(&table, &id),
        ErrorKind::Value,
        &["cannot allocate"],
    );
    expect_err(
        index_select(&table, 0, &id),
        ErrorKind::Value,
        &["cannot allocate"],
    );
    expect_err(
        gather(&table, 0, &ids(&[0], &[1, 1])),
        ErrorKind::Value,
        &["cannot allocate"],
    );
}

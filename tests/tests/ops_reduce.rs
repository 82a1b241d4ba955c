//! The reductions (`sum_axes`, `mean`, `mean_axes`, `max_axes`, `min_axes`, `var_axes`,
//! `argmax`, `argmin`): forward values against plain loops over random shapes and axis sets,
//! every VJP against central differences on dense, strided (column-major, offset) and broadcast
//! (stride-0) inputs, tie rules, carrier classes, and bad input that changes nothing.

mod spec_support;

use autograd_core::ops::{
    argmax, argmin, max_axes, mean, mean_axes, min_axes, sum, sum_axes, var_axes,
};
use autograd_core::{
    gradcheck, CpuCarrier, DType, ErrorKind, GradcheckOptions, Layout, Result, Tensor,
};
use autograd_tests::{broadcast_rows, coords, grad_vals, noise, strided, t, vals};
use proptest::prelude::*;
use spec_support::{expect_err, on_test_carrier, tc};

/// `n` distinct values at least 0.1 apart, in a seed-dependent order (no ties for extrema).
fn distinct(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed as usize) % n) as f32 * 0.1 - 0.5)
        .collect()
}

/// Per kept position (row-major), `f` of its group's values in logical order.
fn reference(x: &[f32], dims: &[usize], axes: &[usize], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let kept: Vec<usize> = (0..dims.len()).filter(|d| !axes.contains(d)).collect();
    let out_n: usize = kept.iter().map(|&d| dims[d]).product();
    let mut groups = vec![Vec::new(); out_n];
    for (p, &v) in x.iter().enumerate() {
        let c = coords(p, dims);
        let k = kept.iter().fold(0, |k, &d| k * dims[d] + c[d]);
        groups[k].push(f64::from(v));
    }
    groups.iter().map(|g| f(g)).collect()
}

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

fn sum_of(g: &[f64]) -> f64 {
    g.iter().sum()
}
fn mean_of(g: &[f64]) -> f64 {
    sum_of(g) / g.len() as f64
}
fn var_of(g: &[f64], correction: usize) -> f64 {
    let m = mean_of(g);
    g.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (g.len() - correction) as f64
}
fn max_of(g: &[f64]) -> f64 {
    g.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}
fn min_of(g: &[f64]) -> f64 {
    g.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The result extents of reducing `axes` of `dims`.
fn out_dims(dims: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    (0..dims.len())
        .filter_map(|d| match (axes.contains(&d), keepdim) {
            (false, _) => Some(dims[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Checks every reduction's forward values on `x` (holding `values`) against the loops.
fn check_forward(x: &Tensor, values: &[f32], dims: &[usize], axes: &[usize], keepdim: bool) {
    let want_dims = out_dims(dims, axes, keepdim);
    let r: usize = axes.iter().map(|&a| dims[a]).product();
    let s = sum_axes(x, axes, keepdim).unwrap();
    assert_eq!(s.dims(), want_dims);
    close(
        &vals(&s),
        &reference(values, dims, axes, sum_of),
        "sum_axes",
    );
    close(
        &vals(&mean_axes(x, axes, keepdim).unwrap()),
        &reference(values, dims, axes, mean_of),
        "mean_axes",
    );
    close(
        &vals(&max_axes(x, axes, keepdim).unwrap()),
        &reference(values, dims, axes, max_of),
        "max_axes",
    );
    close(
        &vals(&min_axes(x, axes, keepdim).unwrap()),
        &reference(values, dims, axes, min_of),
        "min_axes",
    );
    close(
        &vals(&var_axes(x, axes, keepdim, 0).unwrap()),
        &reference(values, dims, axes, |g| var_of(g, 0)),
        "var_axes(correction 0)",
    );
    if r > 1 {
        close(
            &vals(&var_axes(x, axes, keepdim, 1).unwrap()),
            &reference(values, dims, axes, |g| var_of(g, 1)),
            "var_axes(correction 1)",
        );
    }
}

/// Checks every reduction's VJP on `x` with central differences.
fn check_grads(x: &Tensor, axes: &[usize], keepdim: bool, correction: usize) {
    let opts = GradcheckOptions::default();
    let run = |f: &dyn Fn(&Tensor) -> Result<Tensor>, what: &str| {
        gradcheck(|v: &[Tensor]| f(&v[0]), std::slice::from_ref(x), opts).unwrap_or_else(|e| {
            panic!("{what} on {:?} over {axes:?}: {e}", x.layout().to_string())
        });
    };
    run(&|a| sum_axes(a, axes, keepdim), "sum_axes");
    run(&|a| mean_axes(a, axes, keepdim), "mean_axes");
    run(&|a| max_axes(a, axes, keepdim), "max_axes");
    run(&|a| min_axes(a, axes, keepdim), "min_axes");
    run(&|a| var_axes(a, axes, keepdim, correction), "var_axes");
}

fn shape_and_axes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, bool, u64)> {
    (
        prop::collection::vec(1usize..4, 1..4),
        prop::collection::vec(any::<bool>(), 3),
        any::<bool>(),
        0u64..1000,
    )
        .prop_map(|(dims, pick, keepdim, seed)| {
            let axes = (0..dims.len()).filter(|&d| pick[d]).collect();
            (dims, axes, keepdim, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn forward_matches_plain_loops_on_dense_and_strided_inputs(
        (dims, axes, keepdim, seed) in shape_and_axes()
    ) {
        let n: usize = dims.iter().product();
        let values = noise(n, seed);
        check_forward(&t(&values, &dims), &values, &dims, &axes, keepdim);
        check_forward(&strided(&values, &dims), &values, &dims, &axes, keepdim);
        check_forward(&tc(&values, &dims), &values, &dims, &axes, keepdim);
    }

    #[test]
    fn every_reduction_vjp_matches_central_differences(
        (dims, axes, keepdim, seed) in shape_and_axes()
    ) {
        let n: usize = dims.iter().product();
        let r: usize = axes.iter().map(|&a| dims[a]).product();
        let correction = usize::from(r > 1);
        // distinct values: the extrema have no ties, so their derivatives exist
        let values = distinct(n, seed);
        check_grads(&t(&values, &dims), &axes, keepdim, correction);
        check_grads(&strided(&values, &dims), &axes, keepdim, correction);
    }

    #[test]
    fn broadcast_inputs_get_per_slot_gradients(
        rows in 1usize..4, cols in 1usize..4, axis in 0usize..3, keepdim in any::<bool>(), seed in 0u64..1000
    ) {
        // reducing over the stride-0 axis makes every group a tie: the even split must still
        // add up to the slot's derivative
        let axes: Vec<usize> = match axis { 0 => vec![0], 1 => vec![1], _ => vec![0, 1] };
        let x = broadcast_rows(&distinct(cols, seed), rows);
        let r: usize = axes.iter().map(|&a| [rows, cols][a]).product();
        check_grads(&x, &axes, keepdim, usize::from(r > 1));
        let values = vals(&x);
        check_forward(&x, &values, &[rows, cols], &axes, keepdim);
    }
}

#[test]
fn mean_is_a_one_element_tensor_like_sum() {
    let x = t(&[1.0, 2.0, 3.0, 6.0], &[2, 2]);
    let m = mean(&x).unwrap();
    assert_eq!(
        m.layout().to_string(),
        sum(&x).unwrap().layout().to_string()
    );
    assert_eq!(vals(&m), [3.0]);
    m.backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [0.25; 4]);
    gradcheck(
        |v: &[Tensor]| mean(&v[0]),
        &[strided(&noise(6, 3), &[2, 3])],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn max_splits_its_gradient_evenly_among_ties() {
    let x = t(&[1.0, 3.0, 3.0, 0.0, 2.0, 5.0, 5.0, 5.0], &[2, 4]);
    let y = max_axes(&x, &[1], false).unwrap();
    assert_eq!(vals(&y), [3.0, 5.0]);
    y.backward_with(Some(&t(&[1.0, 3.0], &[2])), false).unwrap();
    assert_eq!(
        grad_vals(&x).unwrap(),
        [0.0, 0.5, 0.5, 0.0, 0.0, 1.0, 1.0, 1.0]
    );
    let z = t(&[2.0, -1.0, -1.0], &[3]);
    let m = min_axes(&z, &[0], true).unwrap();
    assert_eq!(m.dims(), [1]);
    m.backward().unwrap();
    assert_eq!(grad_vals(&z).unwrap(), [0.0, 0.5, 0.5]);
}

#[test]
fn argmax_and_argmin_give_the_first_index_of_a_tie_as_int32() {
    let x = t(&[1.0, 7.0, 7.0, 0.0, 4.0, 4.0, 9.0, 4.0], &[2, 4]);
    let a = argmax(&x, 1, false).unwrap();
    assert_eq!(a.dtype(), &DType::Int32);
    assert!(
        a.autograd_ctx().is_none(),
        "an Int32 result records no node"
    );
    assert_eq!(a.values::<i32>().unwrap(), [1, 2]);
    assert_eq!(
        argmin(&x, 1, false).unwrap().values::<i32>().unwrap(),
        [3, 0]
    );
    let col = argmax(&x, 0, true).unwrap();
    assert_eq!(col.dims(), [1, 4]);
    assert_eq!(col.values::<i32>().unwrap(), [1, 0, 1, 1]);
    // the transpose reads the same elements
    let tr = strided(&[1.0, 7.0, 7.0, 0.0, 4.0, 4.0, 9.0, 4.0], &[2, 4]);
    assert_eq!(
        tr.argmax(1, false).unwrap().values::<i32>().unwrap(),
        [1, 2]
    );
    // integer inputs and a NaN (the largest, first occurrence wins)
    let ints = Tensor::from_vec(vec![3i32, 9, 9, 1], autograd_core::shape![4]).unwrap();
    assert_eq!(ints.argmax(0, false).unwrap().values::<i32>().unwrap(), [1]);
    let nan = t(&[1.0, f32::NAN, 5.0, f32::NAN], &[4]);
    assert_eq!(nan.argmax(0, false).unwrap().values::<i32>().unwrap(), [1]);
    assert!(vals(&nan.max_axes(&[0], false).unwrap())[0].is_nan());
}

#[test]
fn method_forms_match_the_functions() {
    let x = t(&noise(12, 9), &[3, 4]);
    assert_eq!(
        vals(&x.sum_axes(&[1], true).unwrap()),
        vals(&sum_axes(&x, &[1], true).unwrap())
    );
    assert_eq!(x.sum_axes(&[1], true).unwrap().dims(), [3, 1]);
    assert_eq!(
        vals(&x.mean_axes(&[0], false).unwrap()),
        vals(&mean_axes(&x, &[0], false).unwrap())
    );
    assert_eq!(
        vals(&x.max_axes(&[0, 1], false).unwrap()),
        vals(&max_axes(&x, &[0, 1], false).unwrap())
    );
    assert_eq!(
        vals(&x.min_axes(&[1], false).unwrap()),
        vals(&min_axes(&x, &[1], false).unwrap())
    );
    assert_eq!(
        vals(&x.var_axes(&[1], false, 1).unwrap()),
        vals(&var_axes(&x, &[1], false, 1).unwrap())
    );
    assert_eq!(vals(&x.sum().unwrap()), vals(&sum(&x).unwrap()));
    assert_eq!(vals(&x.mean().unwrap()), vals(&mean(&x).unwrap()));
    assert_eq!(
        x.argmin(1, false).unwrap().values::<i32>().unwrap(),
        argmin(&x, 1, false).unwrap().values::<i32>().unwrap()
    );
}

#[test]
fn results_and_gradients_stay_in_the_input_carrier_class() {
    let x = tc(&noise(6, 1), &[2, 3]);
    for y in [
        sum_axes(&x, &[0], false).unwrap(),
        mean_axes(&x, &[1], true).unwrap(),
        max_axes(&x, &[1], false).unwrap(),
        var_axes(&x, &[1], false, 1).unwrap(),
    ] {
        assert!(on_test_carrier(&y));
        let g = autograd_core::grad(
            &y,
            &[&x],
            &y.f32_like(vec![1.0; y.size()]).unwrap(),
            autograd_core::GradOptions::default(),
        )
        .unwrap();
        assert!(on_test_carrier(g[0].as_ref().unwrap()));
    }
    assert!(on_test_carrier(&argmax(&x, 1, false).unwrap()));
}

#[test]
fn var_with_too_few_elements_divides_by_zero_as_pytorch_does() {
    let x = t(&[2.0, 4.0], &[2, 1]);
    assert!(vals(&var_axes(&x, &[1], false, 1).unwrap())
        .iter()
        .all(|v| v.is_nan()));
    assert_eq!(vals(&var_axes(&x, &[0], false, 1).unwrap()), [2.0]);
    assert_eq!(vals(&var_axes(&x, &[0], false, 0).unwrap()), [1.0]);
}

#[test]
fn bad_input_is_an_error_of_the_right_kind_and_changes_nothing() {
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let version = x.carrier().unwrap().version();
    expect_err(sum_axes(&x, &[2], false), ErrorKind::Value, &["axis 2"]);
    expect_err(mean_axes(&x, &[0, 0], false), ErrorKind::Value, &["twice"]);
    expect_err(max_axes(&x, &[5], true), ErrorKind::Value, &["axis 5"]);
    expect_err(var_axes(&x, &[3], true, 1), ErrorKind::Value, &["axis 3"]);
    expect_err(argmax(&x, 2, false), ErrorKind::Value, &["axis 2"]);
    expect_err(argmin(&x, 7, true), ErrorKind::Value, &["axis 7"]);
    let ints = Tensor::from_vec(vec![1i32, 2], autograd_core::shape![2]).unwrap();
    expect_err(sum_axes(&ints, &[0], false), ErrorKind::Type, &["Float32"]);
    expect_err(max_axes(&ints, &[0], false), ErrorKind::Type, &["Float32"]);
    let bools = Tensor::from_vec(vec![true, false], autograd_core::shape![2]).unwrap();
    expect_err(argmax(&bools, 0, false), ErrorKind::Type, &["Bool"]);
    let empty = t(&[], &[2, 0]);
    expect_err(max_axes(&empty, &[1], false), ErrorKind::Value, &["empty"]);
    expect_err(argmax(&empty, 1, false), ErrorKind::Value, &["empty"]);
    assert_eq!(vals(&sum_axes(&empty, &[1], false).unwrap()), [0.0, 0.0]);
    assert_eq!(vals(&x), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(x.carrier().unwrap().version(), version);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn a_nested_mode_reduces_as_one_axis_and_gets_a_gradient_of_its_own_shape() {
    // shape (2,(2,3)): two top-level axes of extents 2 and 6
    let layout = Layout::compact_row_major(autograd_core::shape![2, [2, 3]]).unwrap();
    let values = noise(12, 11);
    let x = Tensor::from_parts(CpuCarrier::from_vec(values.clone()), layout, 0).unwrap();
    assert_eq!(x.dims(), [2, 6]);
    check_forward(&x, &values, &[2, 6], &[1], false);
    check_forward(&x, &values, &[2, 6], &[0], true);
    check_grads(&x, &[1], true, 1);
    check_grads(&x, &[0, 1], false, 1);
    let y = sum_axes(&x, &[1], false).unwrap();
    y.backward_with(Some(&t(&[1.0, 2.0], &[2])), false).unwrap();
    let g = x.grad().unwrap().unwrap();
    assert_eq!(g.shape(), x.shape());
    assert_eq!(vals(&g), [[1.0; 6], [2.0; 6]].concat());
}

#[test]
fn an_empty_axis_list_reduces_nothing() {
    let x = t(&[1.0, -2.0, 3.0], &[3]);
    assert_eq!(vals(&sum_axes(&x, &[], false).unwrap()), [1.0, -2.0, 3.0]);
    assert_eq!(vals(&max_axes(&x, &[], true).unwrap()), [1.0, -2.0, 3.0]);
    check_grads(&x, &[], false, 0);
}

#[test]
fn a_nan_extremum_sends_its_gradient_to_the_nan_elements() {
    // PyTorch's max(): the NaN positions attain the NaN maximum and share the cotangent
    let x = t(&[1.0, f32::NAN, 3.0, f32::NAN], &[4]);
    let y = max_axes(&x, &[0], true).unwrap();
    y.backward_with(Some(&t(&[2.0], &[1])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![0.0, 1.0, 0.0, 1.0]));
    let z = t(&[f32::NAN, -1.0], &[2]);
    min_axes(&z, &[0], true).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&z), Some(vec![1.0, 0.0]));
}

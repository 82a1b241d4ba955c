//! The network ops (`softmax`, `log_softmax`, `layer_norm` and `LayerNorm`, `cross_entropy`,
//! `nll_loss`, `mse_loss`, `dropout`): forward values against known values and plain f64 loops
//! over random shapes, every VJP (with layer_norm's weight and bias and each cross-entropy
//! option) against central differences on dense, column-major, padded (sliced) and broadcast
//! inputs and along axes other than the last, the parallel row path, dropout's mask statistics
//! and determinism, and bad input that changes nothing.

mod elementwise_support;
mod spec_support;

use autograd_core::{
    grad, gradcheck, DType, ErrorKind, GradOptions, GradcheckOptions, Layout, Result, Rng, Shape,
    Stride, Tensor, VersionSnapshot,
};
use autograd_core::{Buffer, CpuCarrier, ErrorKind::Type, ErrorKind::Value};
use autograd_ops::{
    cross_entropy, dropout, layer_norm, log_softmax, mse_loss, nll_loss, softmax,
    CrossEntropyOptions, LayerNorm,
};
use autograd_tests::{column_major_storage, coords, grad_vals, kind, noise, strided, t, vals};
use elementwise_support::{assert_close, leaf, KINDS};
use proptest::prelude::*;
use spec_support::{on_test_carrier, TestCarrier};

// ---------------------------------------------------------------------------------------------
// inputs and references

/// `values` (row-major over `dims`) stored row-major with two padding elements after every
/// last-axis run, at offset 3: a sliced, non-contiguous leaf.
fn padded(values: &[f32], dims: &[usize]) -> Tensor {
    let last = *dims.last().unwrap();
    let pitch = last + 2;
    let rows = values.len() / last.max(1);
    let mut storage = vec![f32::NAN; 3 + rows * pitch];
    for r in 0..rows {
        storage[3 + r * pitch..3 + r * pitch + last].copy_from_slice(&values[r * last..][..last]);
    }
    let mut stride = vec![1usize; dims.len()];
    if dims.len() >= 2 {
        stride[dims.len() - 2] = pitch;
        for i in (0..dims.len() - 2).rev() {
            stride[i] = stride[i + 1] * dims[i + 1];
        }
    }
    let layout = Layout::new(Shape::from(dims.to_vec()), Stride::from(stride)).unwrap();
    Tensor::from_parts(CpuCarrier::from_vec(storage), layout, 3).unwrap()
}

/// `values` (row-major over `dims`) stored column-major at offset 1 on a [`TestCarrier`]: a
/// strided tensor on a carrier the kernel layer cannot borrow from (it reads a compact copy).
fn strided_on_test_carrier(values: &[f32], dims: &[usize]) -> Tensor {
    let (storage, layout) = column_major_storage(values, dims);
    let (carrier, _) = TestCarrier::shared(Buffer::F32(storage));
    Tensor::from_parts(carrier, layout, 1).unwrap()
}

/// The same logical values as a dense, a column-major (transposed, offset) and a padded leaf,
/// and a column-major one on a test carrier.
fn layouts(values: &[f32], dims: &[usize]) -> Vec<(&'static str, Tensor)> {
    vec![
        ("dense", t(values, dims)),
        ("column-major", strided(values, dims)),
        ("padded", padded(values, dims)),
        ("test carrier", strided_on_test_carrier(values, dims)),
    ]
}

/// Row-major positions of the rows along `axis` of `dims`: one `Vec` of positions per row.
fn rows_along(dims: &[usize], axis: usize) -> Vec<Vec<usize>> {
    let total: usize = dims.iter().product();
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for p in 0..total {
        let mut c = coords(p, dims);
        c[axis] = 0;
        let id = *seen.entry(c).or_insert_with(|| {
            rows.push(Vec::new());
            rows.len() - 1
        });
        rows[id].push(p);
    }
    rows
}

/// Softmax (or log-softmax) along `axis` by plain loops in f64.
fn softmax_ref(x: &[f32], dims: &[usize], axis: usize, log: bool) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for r in rows_along(dims, axis) {
        let m = r.iter().map(|&p| f64::from(x[p])).fold(f64::MIN, f64::max);
        let s: f64 = r.iter().map(|&p| (f64::from(x[p]) - m).exp()).sum();
        for &p in &r {
            let z = f64::from(x[p]) - m;
            out[p] = if log { z - s.ln() } else { z.exp() / s };
        }
    }
    out
}

/// Layer norm over the last `k` axes by plain loops in f64.
fn layer_norm_ref(x: &[f32], n: usize, w: Option<&[f32]>, b: Option<&[f32]>, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for r in x.chunks(n) {
        let mu = r.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
        let var = r.iter().map(|&v| (f64::from(v) - mu).powi(2)).sum::<f64>() / n as f64;
        for (j, &v) in r.iter().enumerate() {
            let y = (f64::from(v) - mu) / (var + eps).sqrt();
            out.push(y * w.map_or(1.0, |w| f64::from(w[j])) + b.map_or(0.0, |b| f64::from(b[j])));
        }
    }
    out
}

/// Cross-entropy of `[N, C, d...]` logits (row-major `x`) by plain loops in f64, PyTorch's
/// definition: mean over non-ignored rows of `(1 - eps) (-logp_t) + eps mean_c(-logp_c)`.
fn cross_entropy_ref(x: &[f32], dims: &[usize], targets: &[i32], opts: CrossEntropyOptions) -> f64 {
    let logp = softmax_ref(x, dims, 1, true);
    let c = dims[1];
    let eps = f64::from(opts.label_smoothing);
    let (mut total, mut count) = (0.0, 0);
    for (k, r) in rows_along(dims, 1).iter().enumerate() {
        if opts.ignore_index == Some(targets[k]) {
            continue;
        }
        count += 1;
        let nll = -logp[r[targets[k] as usize]];
        let smooth = -r.iter().map(|&p| logp[p]).sum::<f64>() / c as f64;
        total += (1.0 - eps) * nll + eps * smooth;
    }
    total / f64::from(count)
}

fn ints(values: &[i32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), Shape::from(dims.to_vec())).unwrap()
}

fn check(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], what: &str) {
    if let Err(e) = gradcheck(f, inputs, GradcheckOptions::default()) {
        panic!("{what}: {e}");
    }
}

fn one(t: &Tensor) -> f32 {
    let v = vals(t);
    assert_eq!(v.len(), 1, "a one-element loss");
    v[0]
}

fn near(got: f32, want: f64, what: &str) {
    assert!(
        (f64::from(got) - want).abs() <= 1e-5 * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

/// Random dims of rank 1..=3 with extents 1..=4, and an axis below the rank.
fn dims_and_axis() -> impl Strategy<Value = (Vec<usize>, usize, u64)> {
    (
        prop::collection::vec(1usize..5, 1..4),
        0usize..3,
        0u64..1000,
    )
        .prop_map(|(dims, a, seed)| {
            let axis = a % dims.len();
            (dims, axis, seed)
        })
}

// ---------------------------------------------------------------------------------------------
// softmax and log_softmax

#[test]
fn softmax_of_one_two_three_has_the_known_values_and_is_stable_for_large_logits() {
    let want = [
        0.090_030_573_170_380_46,
        0.244_728_471_054_797_64,
        0.665_240_955_774_821_9,
    ];
    let want_log = [
        -2.407_605_964_444_38,
        -1.407_605_964_444_38,
        -0.407_605_964_444_38,
    ];
    for shift in [0.0f32, 1000.0, -1000.0] {
        let x = t(&[1.0 + shift, 2.0 + shift, 3.0 + shift], &[3]);
        assert_close(&vals(&softmax(&x, 0).unwrap()), &want, 1e-6, "softmax");
        assert_close(
            &vals(&log_softmax(&x, 0).unwrap()),
            &want_log,
            1e-6,
            "log_softmax",
        );
    }
    // a -inf logit gets probability 0 (log-probability -inf), not NaN
    let y = vals(&log_softmax(&t(&[0.0, f32::NEG_INFINITY], &[2]), 0).unwrap());
    assert_eq!(y, [0.0, f32::NEG_INFINITY]);
    let x = t(&[1.0, 2.0, 3.0], &[1, 3]);
    let y = softmax(&x, 1).unwrap();
    assert_eq!(y.autograd_ctx().unwrap().name(), "softmax");
    assert_eq!(y.dims(), [1, 3]);
}

#[test]
fn softmax_takes_float64_without_a_node_and_refuses_other_dtypes_and_axes() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], autograd_core::shape![3]).unwrap();
    let y = softmax(&x, 0).unwrap();
    assert_eq!(y.dtype(), &DType::Float64);
    assert!(y.autograd_ctx().is_none());
    let v = y.values::<f64>().unwrap();
    assert!((v[2] - 0.665_240_955_774_821_9).abs() < 1e-15);
    let l = log_softmax(&x, 0).unwrap().values::<f64>().unwrap();
    assert!((l[0] + 2.407_605_964_444_38).abs() < 1e-14);
    let i = ints(&[1, 2], &[2]);
    assert_eq!(kind(softmax(&i, 0)), Type);
    assert_eq!(kind(log_softmax(&i, 0)), Type);
    assert_eq!(kind(softmax(&t(&[1.0; 6], &[2, 3]), 2)), Value);
    assert_eq!(kind(log_softmax(&t(&[1.0; 6], &[2, 3]), 5)), Value);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn softmax_forward_matches_plain_loops_on_every_layout_and_axis((dims, axis, seed) in dims_and_axis()) {
        let n: usize = dims.iter().product();
        let values: Vec<f32> = noise(n, seed).iter().map(|v| 4.0 * v).collect();
        for (name, x) in layouts(&values, &dims) {
            for log in [false, true] {
                let y = if log { log_softmax(&x, axis) } else { softmax(&x, axis) }.unwrap();
                prop_assert_eq!(y.dims(), dims.clone());
                prop_assert_eq!(on_test_carrier(&y), on_test_carrier(&x), "the result lives in the input's carrier class");
                assert_close(&vals(&y), &softmax_ref(&values, &dims, axis, log), 2e-6,
                    &format!("log={log} {name} {dims:?} axis {axis}"));
            }
        }
    }

    #[test]
    fn softmax_and_log_softmax_vjps_match_central_differences((dims, axis, seed) in dims_and_axis()) {
        let n: usize = dims.iter().product();
        let values: Vec<f32> = noise(n, seed).iter().map(|v| 2.0 * v).collect();
        for (name, x) in layouts(&values, &dims) {
            check(|v| softmax(&v[0], axis), std::slice::from_ref(&x), &format!("softmax {name} {dims:?} axis {axis}"));
            check(|v| log_softmax(&v[0], axis), &[x], &format!("log_softmax {name} {dims:?} axis {axis}"));
        }
    }

    #[test]
    fn softmax_vjps_hold_on_transposed_sliced_and_broadcast_matrices(
        r in 1usize..4, c in 1usize..5, k in 0usize..4, axis in 0usize..2, seed in 0u64..1000
    ) {
        let x = leaf(&noise(r * c, seed), r, c, KINDS[k]);
        let want = softmax_ref(&vals(&x), &[r, c], axis, false);
        assert_close(&vals(&softmax(&x, axis).unwrap()), &want, 2e-6, "softmax");
        check(|v| softmax(&v[0], axis), std::slice::from_ref(&x), &format!("softmax {:?}", KINDS[k]));
        check(|v| log_softmax(&v[0], axis), &[x], &format!("log_softmax {:?}", KINDS[k]));
    }
}

#[test]
fn large_softmax_rows_take_the_parallel_path_along_every_axis() {
    let dims = [64, 40, 24];
    let n: usize = dims.iter().product();
    let values: Vec<f32> = noise(n, 5).iter().map(|v| 3.0 * v).collect();
    for (name, x) in layouts(&values, &dims) {
        for axis in 0..3 {
            for log in [false, true] {
                let y = if log {
                    log_softmax(&x, axis)
                } else {
                    softmax(&x, axis)
                }
                .unwrap();
                let want = softmax_ref(&values, &dims, axis, log);
                assert_close(
                    &vals(&y),
                    &want,
                    2e-6,
                    &format!("log={log} {name} axis {axis}"),
                );
                // the VJP of a one-hot-free cotangent: the parallel backward against the formula
                let g = noise(n, 11);
                let gt = t(&g, &dims);
                let dx = grad(&y, &[&x], &gt, GradOptions::default()).unwrap()[0]
                    .clone()
                    .unwrap();
                let yv: Vec<f64> = vals(&y).iter().map(|&v| f64::from(v)).collect();
                let mut expect = vec![0.0; n];
                for r in rows_along(&dims, axis) {
                    let (dot, sum): (f64, f64) = r.iter().fold((0.0, 0.0), |(d, s), &p| {
                        (d + f64::from(g[p]) * yv[p], s + f64::from(g[p]))
                    });
                    for &p in &r {
                        expect[p] = if log {
                            f64::from(g[p]) - yv[p].exp() * sum
                        } else {
                            yv[p] * (f64::from(g[p]) - dot)
                        };
                    }
                }
                assert_close(
                    &vals(&dx),
                    &expect,
                    1e-4,
                    &format!("vjp log={log} {name} axis {axis}"),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// layer_norm and LayerNorm

#[test]
fn layer_norm_of_a_known_row() {
    // mean 2.5, variance 1.25: (x - 2.5) / sqrt(1.25)
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[1, 4]);
    let y = layer_norm(&x, &[4], None, None, 0.0).unwrap();
    let s = 1.0 / 1.25f64.sqrt();
    assert_close(
        &vals(&y),
        &[-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s],
        1e-6,
        "plain",
    );
    let w = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let b = t(&[0.5, 0.0, -0.5, 1.0], &[4]);
    let y = layer_norm(&x, &[4], Some(&w), Some(&b), 0.0).unwrap();
    assert_close(
        &vals(&y),
        &[-1.5 * s + 0.5, -s, 1.5 * s - 0.5, 6.0 * s + 1.0],
        1e-6,
        "affine",
    );
    // eps joins the variance: sqrt(1.25 + 0.75) = sqrt 2
    let y = layer_norm(&x, &[4], None, None, 0.75).unwrap();
    let s = 1.0 / 2f64.sqrt();
    assert_close(
        &vals(&y),
        &[-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s],
        1e-6,
        "eps",
    );
    assert_eq!(y.autograd_ctx().unwrap().name(), "layer_norm");
    // the residuals are one mean and one rstd per row
    let ctx = y.autograd_ctx().unwrap().context();
    assert_eq!(ctx.iter().map(Tensor::size).collect::<Vec<_>>(), [1, 1]);
}

/// Random dims of rank 1..=3, a count of trailing axes 1..=rank, and affine flags.
fn layer_norm_case() -> impl Strategy<Value = (Vec<usize>, usize, bool, bool, u64)> {
    (
        prop::collection::vec(1usize..5, 1..4),
        1usize..4,
        any::<bool>(),
        any::<bool>(),
        0u64..1000,
    )
        .prop_map(|(dims, k, w, b, seed)| {
            let k = 1 + (k - 1) % dims.len();
            (dims, k, w, b, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn layer_norm_forward_matches_plain_loops((dims, k, with_w, with_b, seed) in layer_norm_case()) {
        let total: usize = dims.iter().product();
        let shape = dims[dims.len() - k..].to_vec();
        let n: usize = shape.iter().product();
        let values = noise(total, seed);
        let w = noise(n, seed + 1);
        let b = noise(n, seed + 2);
        let want = layer_norm_ref(&values, n, with_w.then_some(&w[..]), with_b.then_some(&b[..]), 1e-5);
        for (name, x) in layouts(&values, &dims) {
            for (pname, wt, bt) in [("dense", t(&w, &shape), t(&b, &shape)), ("strided", strided(&w, &shape), padded(&b, &shape))] {
                let y = layer_norm(&x, &shape, with_w.then_some(&wt), with_b.then_some(&bt), 1e-5).unwrap();
                prop_assert_eq!(y.dims(), dims.clone());
                assert_close(&vals(&y), &want, 1e-4, &format!("{name} x, {pname} params, {dims:?} over {shape:?}"));
            }
        }
    }

    #[test]
    fn layer_norm_vjps_for_input_weight_and_bias_match_central_differences(
        (dims, k, _w, _b, seed) in layer_norm_case()
    ) {
        let total: usize = dims.iter().product();
        let shape = dims[dims.len() - k..].to_vec();
        let n: usize = shape.iter().product();
        let values: Vec<f32> = noise(total, seed).iter().map(|v| 2.0 * v).collect();
        // eps keeps 1 / sqrt(var + eps) moderate, so central differences stay accurate
        let eps = 0.1;
        for (name, x) in layouts(&values, &dims) {
            let w = strided(&noise(n, seed + 1), &shape);
            let b = padded(&noise(n, seed + 2), &shape);
            check(|v| layer_norm(&v[0], &shape, Some(&v[1]), Some(&v[2]), eps),
                &[x.clone(), w, b], &format!("affine {name} {dims:?} over {shape:?}"));
            check(|v| layer_norm(&v[0], &shape, None, None, eps),
                &[x], &format!("plain {name} {dims:?} over {shape:?}"));
        }
    }

    #[test]
    fn layer_norm_vjp_holds_on_transposed_sliced_and_broadcast_matrices(
        r in 1usize..4, c in 2usize..5, k in 0usize..4, seed in 0u64..1000
    ) {
        let x = leaf(&noise(r * c, seed), r, c, KINDS[k]);
        let w = t(&noise(c, seed + 1), &[c]);
        let b = t(&noise(c, seed + 2), &[c]);
        check(|v| layer_norm(&v[0], &[c], Some(&v[1]), Some(&v[2]), 0.1), &[x, w, b],
            &format!("{:?}", KINDS[k]));
    }
}

#[test]
fn layer_norm_computes_only_the_wanted_gradients_and_they_agree_with_backward() {
    let x = t(&noise(12, 1), &[3, 4]);
    let w = t(&noise(4, 2), &[4]);
    let b = t(&noise(4, 3), &[4]);
    let y = layer_norm(&x, &[4], Some(&w), Some(&b), 1e-5).unwrap();
    let g = t(&noise(12, 4), &[3, 4]);
    // gradients of the given inputs, the graph kept for the next call
    let kept = |of: &[&Tensor]| {
        let keep = GradOptions {
            retain_graph: true,
            ..GradOptions::default()
        };
        grad(&y, of, &g, keep).unwrap()
    };
    let full = kept(&[&x, &w, &b]);
    let only_w = kept(&[&w]);
    assert_eq!(
        vals(full[1].as_ref().unwrap()),
        vals(only_w[0].as_ref().unwrap())
    );
    // dx alone (one pass) and beside dw and db (the fused pass) are the same bits
    let only_x = kept(&[&x]);
    assert_eq!(
        vals(full[0].as_ref().unwrap()),
        vals(only_x[0].as_ref().unwrap())
    );
    let only_b = grad(&y, &[&b], &g, GradOptions::default()).unwrap();
    assert_eq!(
        vals(full[2].as_ref().unwrap()),
        vals(only_b[0].as_ref().unwrap())
    );
    // db is the column sum of g
    let gv = noise(12, 4);
    let want: Vec<f64> = (0..4)
        .map(|j| (0..3).map(|i| f64::from(gv[i * 4 + j])).sum())
        .collect();
    assert_close(&vals(full[2].as_ref().unwrap()), &want, 1e-6, "db");
}

#[test]
fn large_layer_norm_takes_the_parallel_path() {
    let (rows, n) = (300, 160);
    let values = noise(rows * n, 9);
    let w = noise(n, 10);
    let b = noise(n, 11);
    let want = layer_norm_ref(&values, n, Some(&w), Some(&b), 1e-5);
    for (name, x) in layouts(&values, &[rows, n]) {
        let (wt, bt) = (t(&w, &[n]), t(&b, &[n]));
        let y = layer_norm(&x, &[n], Some(&wt), Some(&bt), 1e-5).unwrap();
        assert_close(&vals(&y), &want, 1e-4, name);
        // db = column sums of the cotangent, dw = column sums of g * xhat
        let g = noise(rows * n, 12);
        let gs = grad(
            &y,
            &[&x, &wt, &bt],
            &t(&g, &[rows, n]),
            GradOptions::default(),
        )
        .unwrap();
        let xhat = layer_norm_ref(&values, n, None, None, 1e-5);
        let db: Vec<f64> = (0..n)
            .map(|j| (0..rows).map(|i| f64::from(g[i * n + j])).sum())
            .collect();
        let dw: Vec<f64> = (0..n)
            .map(|j| {
                (0..rows)
                    .map(|i| f64::from(g[i * n + j]) * xhat[i * n + j])
                    .sum()
            })
            .collect();
        assert_close(&vals(gs[2].as_ref().unwrap()), &db, 1e-4, "db");
        assert_close(&vals(gs[1].as_ref().unwrap()), &dw, 1e-3, "dw");
        assert_eq!(gs[0].as_ref().unwrap().dims(), [rows, n]);
    }
}

#[test]
fn layer_norm_refuses_bad_arguments_and_changes_nothing() {
    let x = t(&noise(6, 1), &[2, 3]);
    let w = t(&[1.0; 3], &[3]);
    let before = VersionSnapshot::of(&x);
    assert_eq!(kind(layer_norm(&x, &[2], None, None, 1e-5)), Value);
    assert_eq!(kind(layer_norm(&x, &[], None, None, 1e-5)), Value);
    assert_eq!(kind(layer_norm(&x, &[1, 2, 3], None, None, 1e-5)), Value);
    assert_eq!(
        kind(layer_norm(&x, &[3], Some(&t(&[1.0; 2], &[2])), None, 1e-5)),
        Value
    );
    assert_eq!(
        kind(layer_norm(
            &x,
            &[3],
            Some(&w),
            Some(&t(&[1.0; 6], &[2, 3])),
            1e-5
        )),
        Value
    );
    assert_eq!(kind(layer_norm(&x, &[3], None, None, -1.0)), Value);
    assert_eq!(kind(layer_norm(&x, &[3], None, None, f32::NAN)), Value);
    assert_eq!(
        kind(layer_norm(&ints(&[1, 2, 3], &[3]), &[3], None, None, 1e-5)),
        Type
    );
    assert_eq!(
        kind(layer_norm(
            &x,
            &[3],
            Some(&ints(&[1, 1, 1], &[3])),
            None,
            1e-5
        )),
        Type
    );
    assert_eq!(VersionSnapshot::of(&x), before);
    assert!(x.grad().unwrap().is_none() && w.grad().unwrap().is_none());
}

#[test]
fn the_layer_norm_layer_owns_ones_and_zeros_and_collects_their_gradients() {
    let ln = LayerNorm::new(&[2, 3], 1e-5).unwrap();
    let ps = ln.parameters();
    assert_eq!(ps.len(), 2);
    assert!(ps[0].same_tensor(ln.weight()) && ps[1].same_tensor(ln.bias()));
    assert_eq!(vals(&ps[0]), [1.0; 6]);
    assert_eq!(vals(&ps[1]), [0.0; 6]);
    assert_eq!(ps[0].dims(), [2, 3]);
    assert!(ps
        .iter()
        .all(|p| p.is_differentiable() && p.autograd_ctx().is_none()));
    let values = noise(12, 3);
    let x = t(&values, &[2, 2, 3]);
    let y = ln.forward(&x).unwrap();
    assert_close(
        &vals(&y),
        &layer_norm_ref(&values, 6, None, None, 1e-5),
        1e-5,
        "forward",
    );
    autograd_ops::sum(&y).unwrap().backward().unwrap();
    // d sum(y) / d bias = the number of rows, through the handle the layer returned
    assert_eq!(grad_vals(&ps[1]).unwrap(), [2.0; 6]);
    assert!(grad_vals(&ps[0]).is_some() && grad_vals(&x).is_some());
    // updating a handle updates the layer
    ps[0].fill(2.0f32).unwrap();
    assert_eq!(vals(ln.weight()), [2.0; 6]);
    assert_eq!(kind(LayerNorm::new(&[], 1e-5)), Value);
    assert_eq!(kind(LayerNorm::new(&[3], -1.0)), Value);
}

// ---------------------------------------------------------------------------------------------
// cross_entropy and nll_loss

#[test]
fn cross_entropy_of_known_logits_as_pytorch_gives_it() {
    let logits = t(&[1.0, 2.0, 3.0, 1.0, 2.0, 3.0], &[2, 3]);
    let targets = ints(&[2, 0], &[2]);
    // lse = 3.40760596: row losses 0.40760596 and 2.40760596
    let plain = CrossEntropyOptions::default();
    let loss = cross_entropy(&logits, &targets, plain).unwrap();
    assert_eq!(loss.dims(), [1]);
    near(one(&loss), 1.407_605_964_444_38, "mean");
    // smoothing 0.1: (0.9 (lse - x_t) + 0.1 (lse - mean x)) per row
    let smooth = CrossEntropyOptions {
        label_smoothing: 0.1,
        ..plain
    };
    let want = (0.9 * 0.407_605_964_444_38
        + 0.1 * 1.407_605_964_444_38
        + 0.9 * 2.407_605_964_444_38
        + 0.1 * 1.407_605_964_444_38)
        / 2.0;
    near(
        one(&cross_entropy(&logits, &targets, smooth).unwrap()),
        want,
        "smoothed",
    );
    // ignoring the second row: the mean is over the first only
    let ignore = CrossEntropyOptions {
        ignore_index: Some(-100),
        ..plain
    };
    let loss = cross_entropy(&logits, &ints(&[2, -100], &[2]), ignore).unwrap();
    near(one(&loss), 0.407_605_964_444_38, "ignored");
    loss.backward().unwrap();
    // (softmax - onehot) / 1 on the counted row, 0 on the ignored one
    assert_close(
        &grad_vals(&logits).unwrap(),
        &[
            0.090_030_573_170_380_46,
            0.244_728_471_054_797_64,
            0.665_240_955_774_821_9 - 1.0,
            0.0,
            0.0,
            0.0,
        ],
        1e-6,
        "gradient",
    );
    // every row ignored: NaN, as PyTorch's 0 / 0, and a zero gradient
    let x = t(&[1.0, 2.0], &[1, 2]);
    let loss = cross_entropy(&x, &ints(&[-100], &[1]), ignore).unwrap();
    assert!(one(&loss).is_nan());
    loss.backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [0.0, 0.0]);
    // the residual is one log-sum-exp per row, not the [N, C] log-probabilities
    let loss = cross_entropy(&logits, &targets, plain).unwrap();
    let ctx = loss.autograd_ctx().unwrap().context();
    assert_eq!(ctx.iter().map(Tensor::size).sum::<usize>(), 2);
}

/// Logits `[N, C, d...]`, targets with some equal to -1 when ignoring, and options.
fn ce_case() -> impl Strategy<Value = (Vec<usize>, Vec<i32>, CrossEntropyOptions, u64)> {
    (
        1usize..4,
        1usize..5,
        prop::collection::vec(1usize..3, 0..2),
        any::<bool>(),
        prop_oneof![Just(0.0f32), Just(0.1f32), Just(0.35f32)],
        0u64..1000,
    )
        .prop_map(|(n, c, rest, ignore, smoothing, seed)| {
            let mut dims = vec![n, c];
            dims.extend(rest);
            let rows: usize = dims.iter().product::<usize>() / c;
            let targets = (0..rows)
                .map(|k| {
                    let v = ((seed as usize + 7 * k) % (c + 1)) as i32;
                    if v == c as i32 {
                        if ignore {
                            -1
                        } else {
                            0
                        }
                    } else {
                        v
                    }
                })
                .collect();
            let opts = CrossEntropyOptions {
                ignore_index: ignore.then_some(-1),
                label_smoothing: smoothing,
            };
            (dims, targets, opts, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn cross_entropy_matches_plain_loops_and_its_vjp_central_differences(
        (dims, targets, opts, seed) in ce_case()
    ) {
        let total: usize = dims.iter().product();
        let values: Vec<f32> = noise(total, seed).iter().map(|v| 3.0 * v).collect();
        let mut tdims = dims.clone();
        tdims.remove(1);
        let tt = ints(&targets, &tdims);
        let want = cross_entropy_ref(&values, &dims, &targets, opts);
        for (name, x) in layouts(&values, &dims) {
            let loss = cross_entropy(&x, &tt, opts).unwrap();
            let got = one(&loss);
            if want.is_nan() {
                prop_assert!(got.is_nan());
                continue;
            }
            near(got, want, &format!("{name} {dims:?} {opts:?}"));
            check(|v| cross_entropy(&v[0], &tt, opts), &[x], &format!("{name} {dims:?} {opts:?}"));
        }
    }

    #[test]
    fn nll_loss_of_log_softmax_is_cross_entropy_in_value_and_gradient(
        (dims, targets, opts, seed) in ce_case()
    ) {
        let total: usize = dims.iter().product();
        let values = noise(total, seed);
        let mut tdims = dims.clone();
        tdims.remove(1);
        let tt = ints(&targets, &tdims);
        let plain = CrossEntropyOptions { label_smoothing: 0.0, ..opts };
        for (name, x) in layouts(&values, &dims) {
            let a = cross_entropy(&x, &tt, plain).unwrap();
            let b = nll_loss(&log_softmax(&x, 1).unwrap(), &tt, opts.ignore_index).unwrap();
            if one(&a).is_nan() {
                prop_assert!(one(&b).is_nan());
                continue;
            }
            near(one(&b), f64::from(one(&a)), name);
            let ga = grad(&a, &[&x], &t(&[1.0], &[1]), GradOptions::default()).unwrap();
            let gb = grad(&b, &[&x], &t(&[1.0], &[1]), GradOptions::default()).unwrap();
            let want: Vec<f64> = vals(ga[0].as_ref().unwrap()).iter().map(|&v| f64::from(v)).collect();
            assert_close(&vals(gb[0].as_ref().unwrap()), &want, 1e-5, name);
            // nll_loss on its own, on a non-contiguous leaf of log-probabilities
            let lp = strided(&vals(&log_softmax(&x, 1).unwrap()), &dims);
            check(|v| nll_loss(&v[0], &tt, opts.ignore_index), &[lp], &format!("nll {name} {dims:?}"));
        }
    }
}

#[test]
fn cross_entropy_vjp_holds_on_transposed_sliced_and_broadcast_logits() {
    let targets = ints(&[3, 0, 2], &[3]);
    for kind in KINDS {
        let x = leaf(&noise(12, 4), 3, 4, kind);
        for opts in [
            CrossEntropyOptions::default(),
            CrossEntropyOptions {
                ignore_index: Some(0),
                label_smoothing: 0.2,
            },
        ] {
            let want = cross_entropy_ref(&vals(&x), &[3, 4], &[3, 0, 2], opts);
            near(
                one(&cross_entropy(&x, &targets, opts).unwrap()),
                want,
                &format!("{kind:?}"),
            );
            check(
                |v| cross_entropy(&v[0], &targets, opts),
                std::slice::from_ref(&x),
                &format!("{kind:?} {opts:?}"),
            );
        }
    }
}

#[test]
fn large_cross_entropy_takes_the_parallel_path() {
    let (n, c) = (500, 100);
    let values: Vec<f32> = noise(n * c, 3).iter().map(|v| 5.0 * v).collect();
    let targets: Vec<i32> = (0..n).map(|k| ((k * 37) % c) as i32).collect();
    let tt = ints(&targets, &[n]);
    let opts = CrossEntropyOptions {
        ignore_index: Some(5),
        label_smoothing: 0.05,
    };
    let want = cross_entropy_ref(&values, &[n, c], &targets, opts);
    for (name, x) in layouts(&values, &[n, c]) {
        let loss = cross_entropy(&x, &tt, opts).unwrap();
        near(one(&loss), want, name);
        let g = grad(&loss, &[&x], &t(&[1.0], &[1]), GradOptions::default()).unwrap();
        let g = vals(g[0].as_ref().unwrap());
        let p = softmax_ref(&values, &[n, c], 1, false);
        let count = targets.iter().filter(|&&v| v != 5).count() as f64;
        let want: Vec<f64> = (0..n * c)
            .map(|i| {
                let (k, j) = (i / c, i % c);
                if targets[k] == 5 {
                    return 0.0;
                }
                let q = 0.05 / c as f64 + if j as i32 == targets[k] { 0.95 } else { 0.0 };
                (p[i] - q) / count
            })
            .collect();
        assert_close(&g, &want, 1e-5, name);
    }
}

#[test]
fn bad_targets_and_options_are_refused_and_change_nothing() {
    let x = t(&noise(6, 1), &[2, 3]);
    let good = ints(&[0, 2], &[2]);
    let loss = cross_entropy(&x, &good, CrossEntropyOptions::default()).unwrap();
    loss.backward().unwrap();
    let grad_before = grad_vals(&x).unwrap();
    let before = VersionSnapshot::of(&x);
    let plain = CrossEntropyOptions::default();
    let e = cross_entropy(&x, &ints(&[0, 3], &[2]), plain).unwrap_err();
    assert_eq!(e.kind(), Value);
    assert!(
        e.message().contains("target 3") && e.message().contains("position 1"),
        "{e}"
    );
    assert_eq!(kind(cross_entropy(&x, &ints(&[-1, 0], &[2]), plain)), Value);
    // ignore_index covers only its own value
    let ignore = CrossEntropyOptions {
        ignore_index: Some(-100),
        ..plain
    };
    assert_eq!(
        kind(cross_entropy(&x, &ints(&[-1, 0], &[2]), ignore)),
        Value
    );
    assert_eq!(
        kind(cross_entropy(&x, &ints(&[0, 1, 2], &[3]), plain)),
        Value
    );
    assert_eq!(
        kind(cross_entropy(&x, &ints(&[0, 1], &[2, 1]), plain)),
        Value
    );
    assert_eq!(
        kind(cross_entropy(&t(&[1.0; 3], &[3]), &ints(&[0], &[1]), plain)),
        Value
    );
    assert_eq!(kind(cross_entropy(&x, &t(&[0.0, 1.0], &[2]), plain)), Type);
    let f64s = Tensor::from_vec(vec![0.0f64; 6], autograd_core::shape![2, 3]).unwrap();
    assert_eq!(kind(cross_entropy(&f64s, &good, plain)), Type);
    for s in [-0.1f32, 1.5, f32::NAN] {
        let bad = CrossEntropyOptions {
            label_smoothing: s,
            ..plain
        };
        assert_eq!(kind(cross_entropy(&x, &good, bad)), Value);
    }
    assert_eq!(kind(nll_loss(&x, &ints(&[0, 3], &[2]), None)), Value);
    assert_eq!(kind(nll_loss(&x, &ints(&[0, 1], &[1, 2]), None)), Value);
    assert_eq!(kind(nll_loss(&x, &t(&[0.0, 1.0], &[2]), None)), Type);
    assert_eq!(grad_vals(&x).unwrap(), grad_before);
    assert_eq!(VersionSnapshot::of(&x), before);
}

// ---------------------------------------------------------------------------------------------
// mse_loss

#[test]
fn mse_loss_has_known_values_gradients_and_errors() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[0.0, 2.0, 5.0, 1.0], &[2, 2]);
    // (1 + 0 + 4 + 9) / 4
    let loss = mse_loss(&a, &b).unwrap();
    assert_eq!(vals(&loss), [3.5]);
    loss.backward().unwrap();
    assert_eq!(grad_vals(&a).unwrap(), [0.5, 0.0, -1.0, 1.5]);
    assert_eq!(grad_vals(&b).unwrap(), [-0.5, 0.0, 1.0, -1.5]);
    assert_eq!(kind(mse_loss(&a, &t(&[1.0; 4], &[4]))), Value);
    assert_eq!(kind(mse_loss(&a, &ints(&[1; 4], &[2, 2]))), Type);
    assert_eq!(grad_vals(&a).unwrap(), [0.5, 0.0, -1.0, 1.5]);
    // only the wanted gradient
    let loss = mse_loss(&a, &b).unwrap();
    let g = grad(&loss, &[&b], &t(&[1.0], &[1]), GradOptions::default()).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [-0.5, 0.0, 1.0, -1.5]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn mse_loss_vjp_matches_central_differences(r in 1usize..4, c in 1usize..5, k in 0usize..4, seed in 0u64..1000) {
        let a = leaf(&noise(r * c, seed), r, c, KINDS[k]);
        let b = strided(&noise(r * c, seed + 1), &[r, c]);
        let (av, bv) = (vals(&a), vals(&b));
        let want = av.iter().zip(&bv).map(|(x, y)| f64::from(x - y).powi(2)).sum::<f64>() / (r * c) as f64;
        near(one(&mse_loss(&a, &b).unwrap()), want, "mse");
        check(|v| mse_loss(&v[0], &v[1]), &[a, b], &format!("{:?}", KINDS[k]));
    }
}

// ---------------------------------------------------------------------------------------------
// dropout

#[test]
fn dropout_keeps_about_one_minus_p_scaled_and_is_deterministic_per_seed() {
    let n = 100_000;
    let x = t(&vec![1.0; n], &[n / 100, 100]);
    for p in [0.1f32, 0.3, 0.5, 0.9] {
        let y = vals(&dropout(&x, p, true, &mut Rng::new(42)).unwrap());
        let scale = 1.0 / (1.0 - p);
        assert!(
            y.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6),
            "p = {p}"
        );
        let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
        // the standard deviation of the kept fraction is below 0.0016: allow five of them
        assert!(
            (kept - f64::from(1.0 - p)).abs() < 0.008,
            "p = {p}: kept {kept}"
        );
        // the mean is preserved in expectation
        let mean = y.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
        assert!(
            (mean - 1.0).abs() < 0.05 * f64::from(scale),
            "p = {p}: mean {mean}"
        );
        // the same seed gives the same mask, another seed another
        assert_eq!(y, vals(&dropout(&x, p, true, &mut Rng::new(42)).unwrap()));
        assert_ne!(y, vals(&dropout(&x, p, true, &mut Rng::new(43)).unwrap()));
    }
    // one generator advances: two calls give two masks
    let mut rng = Rng::new(7);
    let a = vals(&dropout(&x, 0.5, true, &mut rng).unwrap());
    let b = vals(&dropout(&x, 0.5, true, &mut rng).unwrap());
    assert_ne!(a, b);
}

#[test]
fn dropout_gradient_is_the_mask_scale() {
    let values = noise(40, 3);
    for (name, x) in layouts(&values, &[5, 8]) {
        let y = dropout(&x, 0.4, true, &mut Rng::new(9)).unwrap();
        assert_eq!(y.autograd_ctx().unwrap().name(), "apply_mask");
        let yv = vals(&y);
        autograd_ops::sum(&y).unwrap().backward().unwrap();
        let g = grad_vals(&x).unwrap();
        for ((&gi, &yi), &xi) in g.iter().zip(&yv).zip(&values) {
            let want = if yi == 0.0 { 0.0 } else { 1.0 / 0.6 };
            assert!(
                (gi - want).abs() < 1e-6,
                "{name}: grad {gi}, y {yi}, x {xi}"
            );
        }
        check(|v| dropout(&v[0], 0.4, true, &mut Rng::new(9)), &[x], name);
    }
}

#[test]
fn dropout_is_the_identity_when_not_training_and_zeros_at_p_one() {
    let x = t(&noise(6, 1), &[2, 3]);
    let mut rng = Rng::new(3);
    let y = dropout(&x, 0.5, false, &mut rng).unwrap();
    assert!(y.same_tensor(&x), "not training: the input itself");
    let y = dropout(&x, 0.0, true, &mut rng).unwrap();
    assert!(y.same_tensor(&x), "p = 0: the input itself");
    // neither advanced the generator
    assert_eq!(rng.next_u64(), Rng::new(3).next_u64());
    let z = dropout(&x, 1.0, true, &mut Rng::new(3)).unwrap();
    assert_eq!(vals(&z), [0.0; 6]);
    autograd_ops::sum(&z).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&x).unwrap(), [0.0; 6]);
}

#[test]
fn dropout_refuses_bad_probabilities_and_dtypes_and_changes_nothing() {
    let x = t(&noise(6, 1), &[2, 3]);
    let mut rng = Rng::new(5);
    for p in [-0.1f32, 1.5, f32::NAN, f32::INFINITY] {
        for training in [true, false] {
            assert_eq!(
                kind(dropout(&x, p, training, &mut rng)),
                ErrorKind::Value,
                "p = {p}"
            );
        }
    }
    assert_eq!(
        kind(dropout(&ints(&[1, 2], &[2]), 0.5, true, &mut rng)),
        ErrorKind::Type
    );
    assert_eq!(
        rng.next_u64(),
        Rng::new(5).next_u64(),
        "the generator did not move"
    );
    assert!(x.grad().unwrap().is_none());
}

// ---------------------------------------------------------------------------------------------
// empty tensors

#[test]
fn empty_tensors_give_empty_results_or_nan_means_without_panicking() {
    for dims in [[0usize, 3], [2, 0]] {
        let x = t(&[], &dims);
        for axis in 0..2 {
            assert_eq!(softmax(&x, axis).unwrap().dims(), dims);
            assert_eq!(log_softmax(&x, axis).unwrap().dims(), dims);
        }
        assert_eq!(
            layer_norm(&x, &dims[1..], None, None, 1e-5).unwrap().dims(),
            dims
        );
        assert!(one(&mse_loss(&x, &t(&[], &dims)).unwrap()).is_nan());
        assert_eq!(
            dropout(&x, 0.5, true, &mut Rng::new(1)).unwrap().dims(),
            dims
        );
    }
    // no rows: the mean over zero rows is NaN, as PyTorch's
    let x = t(&[], &[0, 3]);
    let loss = cross_entropy(&x, &ints(&[], &[0]), CrossEntropyOptions::default()).unwrap();
    assert!(one(&loss).is_nan());
    loss.backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().dims(), [0, 3]);
    let y = softmax(&x, 1).unwrap();
    autograd_ops::sum(&y).unwrap().backward().unwrap();
}

#[test]
fn a_minus_infinity_logit_off_the_target_costs_nothing_without_smoothing() {
    // PyTorch: cross_entropy([[0, -inf]], [0]) = 0, gradient [0, 0]
    let logits = t(&[0.0, f32::NEG_INFINITY], &[1, 2]);
    let targets = ints(&[0], &[1]);
    let loss = cross_entropy(&logits, &targets, CrossEntropyOptions::default()).unwrap();
    assert_eq!(one(&loss), 0.0);
    loss.backward().unwrap();
    assert_eq!(grad_vals(&logits), Some(vec![0.0, 0.0]));
    // with smoothing the -inf logit is in the smoothed target: the loss is +inf, as in PyTorch
    let logits = t(&[0.0, f32::NEG_INFINITY], &[1, 2]);
    let smooth = CrossEntropyOptions {
        label_smoothing: 0.1,
        ..CrossEntropyOptions::default()
    };
    let loss = cross_entropy(&logits, &targets, smooth).unwrap();
    assert_eq!(one(&loss), f32::INFINITY);
}

#[test]
fn the_cross_entropy_gradient_keeps_its_precision_for_large_logits() {
    // softmax([b, b + 0.5]) - onehot(0) = [sigmoid(-0.5) - 1, sigmoid(0.5)] = [-s, s] for
    // any b; a log-sum-exp rounded to f32 at b = 1e4 is off by ~5e-4, which the old VJP carried
    let s = 1.0 / (1.0 + (-0.5f64).exp());
    for b in [0.0f32, 100.0, 1e4, -3e4] {
        let logits = t(&[b, b + 0.5], &[1, 2]);
        let targets = ints(&[0], &[1]);
        let loss = cross_entropy(&logits, &targets, CrossEntropyOptions::default()).unwrap();
        loss.backward().unwrap();
        let g = grad_vals(&logits).unwrap();
        let want = [-s, s];
        for (got, want) in g.iter().zip(want) {
            assert!(
                (f64::from(*got) - want).abs() < 1e-6,
                "b = {b}: gradient {g:?}, want {want}"
            );
        }
    }
}

#[test]
fn layer_norm_of_a_constant_row_is_exactly_zero() {
    // its mean is exact however long the row is (a plain f32 sum was off by a few ulps, which
    // 1 / sqrt(eps) magnified to 6e-4)
    for (c, n) in [(7.7f32, 256), (3.3, 768), (-2.9, 4096)] {
        let x = Tensor::from_vec(vec![c; n], Shape::from(vec![1, n])).unwrap();
        let y = layer_norm(&x, &[n], None, None, 1e-5).unwrap();
        assert!(vals(&y).iter().all(|&v| v == 0.0), "{c} x {n}");
    }
}

#[test]
fn label_smoothing_keeps_its_precision_for_logits_far_from_zero() {
    let dims = [4, 10];
    let targets = [0, 7, 4, 1];
    let opts = CrossEntropyOptions {
        label_smoothing: 0.1,
        ..CrossEntropyOptions::default()
    };
    for offset in [1e3f32, 1e4, 1e5] {
        let x: Vec<f32> = noise(40, 3).iter().map(|v| 2.0 * v + offset).collect();
        let got = one(&cross_entropy(&t(&x, &dims), &ints(&targets, &[4]), opts).unwrap());
        let want = cross_entropy_ref(&x, &dims, &targets, opts);
        assert!(
            (f64::from(got) - want).abs() <= 2e-7 * want.abs(),
            "offset {offset}: got {got}, want {want}"
        );
    }
}

#[test]
fn mse_loss_takes_equal_extents_under_different_shape_trees() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 4.0], 3usize).unwrap();
    let b = t(&[0.0, 4.0, 4.0], &[3]);
    let loss = mse_loss(&a, &b).unwrap();
    near(one(&loss), 5.0 / 3.0, "mse");
    loss.backward().unwrap();
    let (ga, gb) = (a.grad().unwrap().unwrap(), b.grad().unwrap().unwrap());
    assert_eq!(ga.shape(), a.shape());
    assert_eq!(gb.shape(), b.shape());
    let want = [2.0 / 3.0, -4.0 / 3.0, 0.0];
    for (g, w) in vals(&ga).iter().zip(want) {
        near(*g, w, "da");
    }
    assert_eq!(kind(mse_loss(&a, &t(&[0.0; 4], &[4]))), Value);
}

//! Causal scaled-dot-product attention (issue 12 §2): the materialised form (context and
//! probabilities, both differentiable) and the flash-style form (context only, per-row
//! statistics), against plain loops, against each other in values and gradients on shapes
//! whose T is not a multiple of the 32-row block, by central differences, on strided inputs,
//! for causality, and for bad input that changes nothing.

use autograd_core::ops::{add, mul, sum};
use autograd_core::{
    grad, gradcheck, graph_bytes, ErrorKind, GradOptions, GradcheckOptions, Result, Tensor,
};
use autograd_ops::{causal_attention, flash_causal_attention};
use autograd_tests::{close, noise, strided, t, vals};
use proptest::prelude::*;

/// Plain loops in f64: the context `[B, H, T, D]` and the probabilities `[B, H, T, T]` of
/// row-major q, k, v.
fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: [usize; 4],
    scale: f64,
) -> (Vec<f32>, Vec<f32>) {
    let [b, h, n, d] = dims;
    let mut o = vec![0.0f32; b * h * n * d];
    let mut p = vec![0.0f32; b * h * n * n];
    for head in 0..b * h {
        let at = |x: &[f32], r: usize, c: usize| f64::from(x[(head * n + r) * d + c]);
        for r in 0..n {
            let s: Vec<f64> = (0..=r)
                .map(|c| scale * (0..d).map(|x| at(q, r, x) * at(k, c, x)).sum::<f64>())
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|s| (s - m).exp()).collect();
            let total: f64 = e.iter().sum();
            for (c, e) in e.iter().enumerate() {
                p[(head * n + r) * n + c] = (e / total) as f32;
            }
            for x in 0..d {
                let y: f64 = e.iter().enumerate().map(|(c, e)| e * at(v, c, x)).sum();
                o[(head * n + r) * d + x] = (y / total) as f32;
            }
        }
    }
    (o, p)
}

/// Random q, k, v leaves of `dims`.
fn qkv(dims: [usize; 4], seed: u64) -> [Tensor; 3] {
    let n = dims.iter().product();
    [0, 1, 2].map(|i| t(&noise(n, seed * 3 + i), &dims))
}

/// The gradients of q, k and v of `output` for `cotangent`.
fn grads(output: &Tensor, inputs: &[Tensor; 3], cotangent: &Tensor) -> Vec<Vec<f32>> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    grad(output, &refs, cotangent, GradOptions::default())
        .unwrap()
        .iter()
        .map(|g| vals(g.as_ref().expect("a gradient")))
        .collect()
}

#[test]
fn both_forms_match_plain_loops() {
    // T = 70 spans two blocks (the second ragged); D = 37 has a ragged register tile
    for (dims, scale) in [
        ([2, 3, 70, 37], None),
        ([1, 2, 5, 4], Some(0.7)),
        ([1, 1, 1, 3], None),
        ([1, 1, 130, 32], Some(0.25)),
    ] {
        let [q, k, v] = qkv(dims, 1);
        let s = scale.map_or(1.0 / (dims[3] as f64).sqrt(), f64::from);
        let (want_o, want_p) = reference(&vals(&q), &vals(&k), &vals(&v), dims, s);
        let (o, p) = causal_attention(&q, &k, &v, scale).unwrap();
        assert_eq!(o.dims(), dims);
        assert_eq!(p.dims(), [dims[0], dims[1], dims[2], dims[2]]);
        close("materialised context", &vals(&o), &want_o, 1e-5);
        close("probabilities", &vals(&p), &want_p, 1e-5);
        let f = flash_causal_attention(&q, &k, &v, scale).unwrap();
        assert_eq!(f.dims(), dims);
        close("flash context", &vals(&f), &want_o, 1e-5);
    }
}

#[test]
fn probabilities_are_causal_rows_that_sum_to_one() {
    let [q, k, v] = qkv([2, 2, 75, 8], 2);
    let (_, p) = causal_attention(&q, &k, &v, None).unwrap();
    let p = vals(&p);
    for (i, row) in p.chunks(75).enumerate() {
        let r = i % 75;
        assert!(row[r + 1..].iter().all(|&x| x == 0.0), "row {i}");
        assert!(row[..=r].iter().all(|&x| x > 0.0), "row {i}");
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "row {i}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn the_forms_agree_in_values_and_gradients(
        b in 1usize..3,
        h in 1usize..3,
        n in 1usize..150,
        d in 1usize..40,
        seed in 0u64..1000,
    ) {
        let dims = [b, h, n, d];
        let inputs = qkv(dims, seed);
        let [q, k, v] = &inputs;
        let (o, _) = causal_attention(q, k, v, None).unwrap();
        let f = flash_causal_attention(q, k, v, None).unwrap();
        close("contexts", &vals(&f), &vals(&o), 1e-5);
        let cotangent = t(&noise(o.size(), seed + 7), &dims);
        let gm = grads(&o, &inputs, &cotangent);
        let gf = grads(&f, &inputs, &cotangent);
        for (name, (a, b)) in ["q", "k", "v"].iter().zip(gf.iter().zip(&gm)) {
            close(name, a, b, 1e-5);
        }
    }
}

#[test]
fn gradcheck_of_the_flash_form() {
    let inputs = qkv([1, 2, 5, 3], 3);
    gradcheck(
        |x| flash_causal_attention(&x[0], &x[1], &x[2], None),
        &inputs,
        GradcheckOptions::default(),
    )
    .unwrap();
    // a scale of its own, and two blocks
    let inputs = qkv([1, 1, 67, 2], 4);
    gradcheck(
        |x| flash_causal_attention(&x[0], &x[1], &x[2], Some(0.8)),
        &inputs,
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn gradcheck_of_the_materialised_form_through_each_output_and_both() {
    let inputs = qkv([1, 2, 5, 3], 5);
    let context = |x: &[Tensor]| Ok(causal_attention(&x[0], &x[1], &x[2], None)?.0);
    let probabilities = |x: &[Tensor]| Ok(causal_attention(&x[0], &x[1], &x[2], None)?.1);
    let w = t(&noise(50, 9), &[1, 2, 5, 5]);
    let both = |x: &[Tensor]| -> Result<Tensor> {
        let (o, p) = causal_attention(&x[0], &x[1], &x[2], Some(0.9))?;
        add(&sum(&mul(&o, &o)?)?, &sum(&mul(&p, &w)?)?)
    };
    for f in [
        &context as &dyn Fn(&[Tensor]) -> Result<Tensor>,
        &probabilities,
        &both,
    ] {
        gradcheck(f, &inputs, GradcheckOptions::default()).unwrap();
    }
    // two blocks, through the probabilities
    let inputs = qkv([1, 1, 66, 2], 6);
    gradcheck(probabilities, &inputs, GradcheckOptions::default()).unwrap();
}

#[test]
fn a_gradient_into_the_probabilities_alone_reaches_q_and_k_but_not_v() {
    let dims = [1, 2, 9, 4];
    let inputs = qkv(dims, 8);
    let [q, k, v] = &inputs;
    let (_, p) = causal_attention(q, k, v, None).unwrap();
    let g = grads(&p, &inputs, &t(&noise(p.size(), 3), &p.dims()));
    assert!(g[0].iter().any(|&x| x != 0.0));
    assert!(g[1].iter().any(|&x| x != 0.0));
    assert!(g[2].iter().all(|&x| x == 0.0));
}

#[test]
fn strided_inputs_give_the_values_and_gradients_of_compact_ones() {
    // q laid out as [B, T, H, D] and transposed to [B, H, T, D]; k column-major at an offset
    let dims = [2, 3, 70, 5];
    let [q, k, v] = qkv(dims, 10);
    let qv = vals(&q);
    let mut bthd = vec![0.0f32; qv.len()];
    let [b, h, n, d] = dims;
    for (p, &x) in qv.iter().enumerate() {
        let (bi, hi, ti, di) = (p / (h * n * d), p / (n * d) % h, p / d % n, p % d);
        bthd[((bi * n + ti) * h + hi) * d + di] = x;
    }
    let q_view = t(&bthd, &[b, n, h, d]).transpose(1, 2).unwrap().detach();
    assert!(!q_view.layout().is_row_major_contiguous());
    assert_eq!(vals(&q_view), qv);
    let k_view = strided(&vals(&k), &dims);
    let cotangent = t(&noise(q.size(), 4), &dims);
    let compact = [q.clone(), k.clone(), v.clone()];
    let views = [q_view, k_view, v.clone()];
    let (o, _) = causal_attention(&q, &k, &v, None).unwrap();
    let want = grads(&o, &compact, &cotangent);
    let (o2, _) = causal_attention(&views[0], &views[1], &views[2], None).unwrap();
    assert_eq!(vals(&o2), vals(&o));
    let f = flash_causal_attention(&views[0], &views[1], &views[2], None).unwrap();
    close("flash on views", &vals(&f), &vals(&o), 1e-5);
    for got in [
        grads(&o2, &views, &cotangent),
        grads(&f, &views, &cotangent),
    ] {
        for (name, (a, b)) in ["q", "k", "v"].iter().zip(got.iter().zip(&want)) {
            close(name, a, b, 1e-5);
        }
    }
}

#[test]
fn a_later_position_does_not_change_earlier_outputs() {
    let dims = [1, 2, 80, 6];
    let [q, k, v] = qkv(dims, 12);
    let later = 70;
    let bump = |x: &Tensor| {
        let mut values = vals(x);
        for head in 0..2 {
            for c in 0..6 {
                values[(head * 80 + later) * 6 + c] += 3.0;
            }
        }
        t(&values, &dims)
    };
    let (v2, k2) = (bump(&v), bump(&k));
    let earlier = |o: &Tensor| -> Vec<f32> {
        let o = vals(o);
        (0..2)
            .flat_map(|head| o[head * 80 * 6..(head * 80 + later) * 6].to_vec())
            .collect()
    };
    let base_m = causal_attention(&q, &k, &v, None).unwrap().0;
    let base_f = flash_causal_attention(&q, &k, &v, None).unwrap();
    for (kk, vv) in [(&k, &v2), (&k2, &v)] {
        let m = causal_attention(&q, kk, vv, None).unwrap().0;
        let f = flash_causal_attention(&q, kk, vv, None).unwrap();
        assert_eq!(earlier(&m), earlier(&base_m));
        assert_eq!(earlier(&f), earlier(&base_f));
        assert_ne!(vals(&m), vals(&base_m));
    }
}

/// q, k, v, the scale, and the error kind and words expected.
type Case<'a> = (
    &'a Tensor,
    &'a Tensor,
    &'a Tensor,
    Option<f32>,
    ErrorKind,
    &'a str,
);

#[test]
fn bad_input_is_an_error_of_the_right_kind_and_changes_nothing() {
    let [q, k, v] = qkv([1, 2, 3, 4], 13);
    let versions = || [&q, &k, &v].map(|x| x.carrier().unwrap().version());
    let before = versions();
    let rank3 = t(&noise(24, 1), &[2, 3, 4]);
    let other = t(&noise(32, 1), &[1, 2, 4, 4]);
    let ints = Tensor::from_vec(vec![1i32; 24], autograd_core::shape![1, 2, 3, 4]).unwrap();
    let no_features = t(&[], &[1, 2, 3, 0]);
    let cases: [Case<'_>; 7] = [
        (&rank3, &k, &v, None, ErrorKind::Value, "four axes"),
        (&q, &other, &v, None, ErrorKind::Value, "one shape"),
        (&q, &k, &other, None, ErrorKind::Value, "one shape"),
        (&q, &ints, &v, None, ErrorKind::Type, "Float32"),
        (&q, &k, &v, Some(f32::NAN), ErrorKind::Value, "not finite"),
        (
            &q,
            &k,
            &v,
            Some(f32::INFINITY),
            ErrorKind::Value,
            "not finite",
        ),
        (
            &no_features,
            &no_features,
            &no_features,
            None,
            ErrorKind::Value,
            "empty",
        ),
    ];
    for (a, b, c, scale, kind, words) in cases {
        let e = causal_attention(a, b, c, scale).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.message().contains(words), "{e}");
        assert!(e.message().contains("causal_attention"), "{e}");
        let e = flash_causal_attention(a, b, c, scale).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.message().contains(words), "{e}");
    }
    assert_eq!(versions(), before);
    for x in [&q, &k, &v] {
        assert!(x.grad().unwrap().is_none());
        assert!(x.autograd_ctx().is_none());
    }
}

#[test]
fn empty_batches_and_sequences_give_empty_results() {
    for dims in [[0, 2, 3, 4], [1, 2, 0, 4]] {
        let [q, k, v] = qkv(dims, 14);
        let (o, p) = causal_attention(&q, &k, &v, None).unwrap();
        assert_eq!((o.size(), p.size()), (0, 0));
        assert_eq!(o.dims(), dims);
        assert_eq!(
            flash_causal_attention(&q, &k, &v, None).unwrap().dims(),
            dims
        );
    }
}

#[test]
fn the_flash_form_keeps_row_statistics_where_the_materialised_form_keeps_probabilities() {
    // W8's shape: what each form holds between forward and backward
    let dims = [8, 4, 256, 32];
    let [b, h, n, d] = dims;
    let [q, k, v] = qkv(dims, 16);
    let f = flash_causal_attention(&q, &k, &v, None).unwrap();
    let (o, p) = causal_attention(&q, &k, &v, None).unwrap();
    let (flash, materialised) = (graph_bytes(&f).unwrap(), graph_bytes(&o).unwrap());
    assert_eq!(
        graph_bytes(&p).unwrap(),
        materialised,
        "one node for both outputs"
    );
    // q, k, v and the context (B·H·T·D floats each), plus one logsumexp per row
    let context = b * h * n * d * 4;
    assert_eq!(flash, 4 * context + b * h * n * 4);
    // q, k, v, the context and the probabilities (B·H·T² floats)
    assert_eq!(materialised, 4 * context + b * h * n * n * 4);
    assert_eq!(materialised - flash, b * h * n * (n - 1) * 4);
    sum(&f).unwrap().backward().unwrap();
    assert_eq!(
        graph_bytes(&f).unwrap(),
        0,
        "a released graph holds nothing"
    );
}

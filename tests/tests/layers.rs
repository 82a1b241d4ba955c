//! Layers and initialisation (issue 12 §3): PyTorch's bounds and statistics from a seeded
//! generator, determinism per seed, `Linear` against a plain loop with gradients checked by
//! hand and by finite differences, `Embedding` accumulating the gradient of repeated ids.

use autograd_core::ops::{mul, sum};
use autograd_core::{gradcheck, shape, DType, ErrorKind, GradcheckOptions, Rng, Tensor};
use autograd_ops::init::{fan_in_and_fan_out, kaiming_uniform, normal, uniform, xavier_uniform};
use autograd_ops::{Embedding, Linear};
use autograd_tests::{grad_vals, kind, noise, t, vals};

/// `(min, max, mean, variance)` of the values.
fn stats(v: &[f32]) -> (f64, f64, f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    let min = v.iter().copied().fold(f32::INFINITY, f32::min);
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    (f64::from(min), f64::from(max), mean, var)
}

/// Uniform `U(-b, b)` values: inside the bound, reaching near it, mean 0 and variance b²/3.
#[track_caller]
fn assert_symmetric_uniform(v: &[f32], b: f64) {
    let (min, max, mean, var) = stats(v);
    assert!(min >= -b && max <= b, "[{min}, {max}] outside ±{b}");
    assert!(
        min < -0.95 * b && max > 0.95 * b,
        "[{min}, {max}] does not fill ±{b}"
    );
    assert!(mean.abs() < 0.05 * b, "mean {mean} for bound {b}");
    let want = b * b / 3.0;
    assert!(
        (var - want).abs() < 0.06 * want,
        "variance {var}, want {want}"
    );
}

// ---- init ----------------------------------------------------------------------------

#[test]
fn fans_follow_pytorch() {
    assert_eq!(fan_in_and_fan_out(&[50, 100]).unwrap(), (100, 50));
    // a convolution weight [out, in, kh, kw]: the receptive field multiplies both
    assert_eq!(fan_in_and_fan_out(&[4, 3, 5, 5]).unwrap(), (75, 100));
    assert_eq!(kind(fan_in_and_fan_out(&[7])), ErrorKind::Value);
}

#[test]
fn kaiming_uniform_has_pytorch_bound() {
    let mut rng = Rng::new(1);
    // a = sqrt(5): bound = 1 / sqrt(fan_in)
    let w = kaiming_uniform(shape![64, 100], 5f32.sqrt(), &mut rng).unwrap();
    assert_eq!(w.dims(), [64, 100]);
    assert_symmetric_uniform(&vals(&w), 0.1);
    // a = 0 (ReLU): bound = sqrt(6 / fan_in)
    let w = kaiming_uniform(shape![64, 150], 0.0, &mut rng).unwrap();
    assert_symmetric_uniform(&vals(&w), (6.0f64 / 150.0).sqrt());
    assert_eq!(
        kind(kaiming_uniform(shape![5], 0.0, &mut rng)),
        ErrorKind::Value
    );
}

#[test]
fn xavier_uniform_has_pytorch_bound() {
    let w = xavier_uniform(shape![60, 40], 2.0, &mut Rng::new(2)).unwrap();
    assert_symmetric_uniform(&vals(&w), 2.0 * (6.0f64 / 100.0).sqrt());
}

#[test]
fn uniform_and_normal_have_their_statistics() {
    let mut rng = Rng::new(3);
    let u = vals(&uniform(shape![20000], -1.0, 3.0, &mut rng).unwrap());
    let (min, max, mean, var) = stats(&u);
    assert!(min >= -1.0 && max < 3.0);
    assert!((mean - 1.0).abs() < 0.03 && (var - 16.0 / 12.0).abs() < 0.05);
    let n = vals(&normal(shape![20000], 2.0, 0.5, &mut rng).unwrap());
    let (_, _, mean, var) = stats(&n);
    assert!((mean - 2.0).abs() < 0.02, "mean {mean}");
    assert!((var.sqrt() - 0.5).abs() < 0.02, "std {}", var.sqrt());
    assert_eq!(
        kind(uniform(shape![2], 1.0, 0.0, &mut rng)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(normal(shape![2], 0.0, -1.0, &mut rng)),
        ErrorKind::Value
    );
}

#[test]
fn initialisation_is_determined_by_the_seed() {
    let draw = |seed| {
        let mut rng = Rng::new(seed);
        let l = Linear::new(5, 4, true, &mut rng).unwrap();
        let e = Embedding::new(6, 3, &mut rng).unwrap();
        [vals(l.weight()), vals(l.bias().unwrap()), vals(e.weight())]
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
}

#[test]
fn empty_weights_initialise_to_empty_tensors() {
    let mut rng = Rng::new(4);
    assert_eq!(
        kaiming_uniform(shape![3, 0], 0.0, &mut rng).unwrap().size(),
        0
    );
    let l = Linear::new(0, 3, true, &mut rng).unwrap();
    assert_eq!(l.weight().dims(), [3, 0]);
    // PyTorch's bias bound is 0 when fan_in is 0
    assert_eq!(vals(l.bias().unwrap()), [0.0; 3]);
    let y = l
        .forward(&Tensor::zeros(shape![2, 0], &DType::Float32).unwrap())
        .unwrap();
    assert_eq!(vals(&y), [0.0; 6]);
}

// ---- Linear --------------------------------------------------------------------------

#[test]
fn linear_is_initialised_as_pytorch() {
    let l = Linear::new(100, 80, true, &mut Rng::new(5)).unwrap();
    assert_eq!((l.in_features(), l.out_features()), (100, 80));
    assert_eq!(l.weight().dims(), [80, 100]);
    assert_symmetric_uniform(&vals(l.weight()), 0.1);
    assert_eq!(l.bias().unwrap().dims(), [80]);
    // the bias is U(-1/sqrt(fan_in), 1/sqrt(fan_in)) too: enough of it to see the distribution
    let wide = Linear::new(100, 4000, true, &mut Rng::new(6)).unwrap();
    assert_symmetric_uniform(&vals(wide.bias().unwrap()), 0.1);
    assert!(l.weight().autograd_ctx().is_none() && l.weight().is_differentiable());
    let no_bias = Linear::new(4, 2, false, &mut Rng::new(5)).unwrap();
    assert!(no_bias.bias().is_none());
    assert_eq!(no_bias.parameters().len(), 1);
}

/// `x · wᵀ + b` by plain loops over row-major `[rows, in]`, `[out, in]` and `[out]`.
fn linear_reference(x: &[f32], w: &[f32], b: Option<&[f32]>, inp: usize, out: usize) -> Vec<f32> {
    let rows = x.len() / inp;
    let mut y = Vec::with_capacity(rows * out);
    for r in 0..rows {
        for o in 0..out {
            let mut acc = b.map_or(0.0, |b| f64::from(b[o]));
            for i in 0..inp {
                acc += f64::from(x[r * inp + i]) * f64::from(w[o * inp + i]);
            }
            y.push(acc as f32);
        }
    }
    y
}

#[test]
fn linear_forward_matches_a_plain_loop_on_batched_input() {
    let (inp, out) = (3, 4);
    let l = Linear::new(inp, out, true, &mut Rng::new(6)).unwrap();
    let xv = noise(2 * 5 * inp, 9);
    let y = l.forward(&t(&xv, &[2, 5, inp])).unwrap();
    assert_eq!(y.dims(), [2, 5, out]);
    let want = linear_reference(
        &xv,
        &vals(l.weight()),
        Some(&vals(l.bias().unwrap())),
        inp,
        out,
    );
    for (g, w) in vals(&y).iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
    }
    let no_bias = Linear::from_parameters(l.weight().clone(), None).unwrap();
    let want = linear_reference(&xv, &vals(l.weight()), None, inp, out);
    let got = vals(&no_bias.forward(&t(&xv, &[10, inp])).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
    }
}

#[test]
fn linear_gradients_reach_weight_and_bias() {
    // loss = sum(x · wᵀ + b): dW[o, i] = sum_r x[r, i], db[o] = rows.
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[0.5, -0.5], &[2]);
    let l = Linear::from_parameters(w, Some(b)).unwrap();
    let x = t(&[1.0, 2.0, 3.0, 10.0, 20.0, 30.0], &[2, 3]);
    sum(&l.forward(&x).unwrap()).unwrap().backward().unwrap();
    assert_eq!(
        grad_vals(l.weight()),
        Some(vec![11.0, 22.0, 33.0, 11.0, 22.0, 33.0])
    );
    assert_eq!(grad_vals(l.bias().unwrap()), Some(vec![2.0, 2.0]));
    // The handles parameters() gives share `.grad` with the layer's own.
    let ps = l.parameters();
    assert!(ps[0].same_tensor(l.weight()) && ps[1].same_tensor(l.bias().unwrap()));
}

#[test]
fn linear_passes_gradcheck_in_input_weight_and_bias() {
    let mut rng = Rng::new(10);
    let l = Linear::new(4, 3, true, &mut rng).unwrap();
    let x = Tensor::randn(shape![2, 4], &mut rng).unwrap();
    let inputs = [x, l.weight().clone(), l.bias().unwrap().clone()];
    let f = |xs: &[Tensor]| {
        Linear::from_parameters(xs[1].clone(), Some(xs[2].clone()))?.forward(&xs[0])
    };
    let report = gradcheck(f, &inputs, GradcheckOptions::default()).unwrap();
    assert_eq!(report.slots_checked, 8 + 12 + 3);
}

#[test]
fn linear_from_parameters_checks_them() {
    let w = t(&[1.0; 6], &[2, 3]);
    assert_eq!(
        kind(Linear::from_parameters(w.clone(), Some(t(&[1.0; 3], &[3])))),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Linear::from_parameters(t(&[1.0; 6], &[6]), None)),
        ErrorKind::Value
    );
    let ints = Tensor::from_vec(vec![1i32; 6], shape![2, 3]).unwrap();
    assert_eq!(kind(Linear::from_parameters(ints, None)), ErrorKind::Type);
}

// ---- Embedding -------------------------------------------------------------------------

#[test]
fn embedding_is_standard_normal() {
    let e = Embedding::new(200, 100, &mut Rng::new(11)).unwrap();
    assert_eq!((e.num_embeddings(), e.embedding_dim()), (200, 100));
    let (_, _, mean, var) = stats(&vals(e.weight()));
    assert!(
        mean.abs() < 0.02 && (var - 1.0).abs() < 0.03,
        "N({mean}, {var})"
    );
}

#[test]
fn embedding_looks_up_rows_and_repeated_ids_accumulate() {
    let w = t(&[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5], &[4, 2]);
    let e = Embedding::from_weight(w).unwrap();
    let ids = Tensor::from_vec(vec![1i32, 3, 1, 1], shape![2, 2]).unwrap();
    let y = e.forward(&ids).unwrap();
    assert_eq!(y.dims(), [2, 2, 2]);
    assert_eq!(vals(&y), [1.0, 1.5, 3.0, 3.5, 1.0, 1.5, 1.0, 1.5]);
    // loss = sum(y * c): row 1 gets the sum of its three occurrences' c rows
    let c = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[2, 2, 2]);
    sum(&mul(&y, &c).unwrap()).unwrap().backward().unwrap();
    assert_eq!(
        grad_vals(e.weight()),
        Some(vec![0.0, 0.0, 13.0, 16.0, 0.0, 0.0, 3.0, 4.0])
    );
    assert!(e.parameters()[0].same_tensor(e.weight()));
}

#[test]
fn embedding_from_weight_checks_it() {
    assert_eq!(
        kind(Embedding::from_weight(t(&[1.0; 4], &[4]))),
        ErrorKind::Value
    );
    let ints = Tensor::from_vec(vec![1i32; 4], shape![2, 2]).unwrap();
    assert_eq!(kind(Embedding::from_weight(ints)), ErrorKind::Type);
}

#[test]
fn initialising_an_unallocatable_shape_is_a_value_error_not_an_abort() {
    let mut rng = Rng::new(0);
    let too_big = |r: autograd_core::Result<Tensor>| {
        let e = r.expect_err("no buffer of that size exists");
        assert_eq!(e.kind(), ErrorKind::Value, "{e}");
        assert!(e.to_string().contains("cannot allocate"), "{e}");
    };
    too_big(uniform(shape![1i64 << 40], -1.0, 1.0, &mut rng));
    too_big(normal(shape![1i64 << 40], 0.0, 1.0, &mut rng));
    too_big(kaiming_uniform(
        shape![1i64 << 20, 1i64 << 20],
        5f32.sqrt(),
        &mut rng,
    ));
    let broadcast = Tensor::scalar(1.0).broadcast_to(&[1usize << 40]).unwrap();
    too_big(broadcast.rand_like(&mut rng));
    too_big(broadcast.randn_like(&mut rng));
}

#[test]
fn fans_that_overflow_are_a_value_error() {
    assert_eq!(fan_in_and_fan_out(&[4, 3, 5, 2]).unwrap(), (30, 40));
    let e = fan_in_and_fan_out(&[1, 1 << 33, 1 << 33]).expect_err("2^66 does not fit");
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
}

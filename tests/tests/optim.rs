//! Optimizers (issue 12 §4): SGD and AdamW steps against hand-computed and plain-loop values,
//! `step` against `step_with`, the stale-graph refusal after a step (the spec's scenario
//! "complete a traversal before mutating parameters"), validation before any change,
//! `zero_grad`, and clipping by global norm.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::ops::{add, mean, mul, sub, sum};
use autograd_core::{grad, ErrorKind, GradOptions, Rng, Tensor};
use autograd_ops::{
    clip_grad_norm, clip_grad_norm_of, AdamW, AdamWConfig, Linear, Optimizer, Sgd, SgdConfig,
};
use autograd_tests::{grad_vals, noise, strided, t, vals};
use spec_support::{expect_err, on_test_carrier, refuse_writes, tc};

fn version(p: &Tensor) -> u64 {
    p.carrier().unwrap().version()
}

#[track_caller]
fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(*g) - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: {g} vs {w} (all: {got:?} vs {want:?})"
        );
    }
}

/// The gradients of `loss = sum(c * p)` are `c`: a graph whose gradient is known exactly.
fn linear_loss(p: &Tensor, c: &[f32]) -> Tensor {
    sum(&mul(p, &t(c, &p.dims())).unwrap()).unwrap()
}

// ---- SGD -------------------------------------------------------------------------------

#[test]
fn sgd_with_momentum_and_weight_decay_matches_hand_values_over_three_steps() {
    let p = t(&[1.0, -2.0], &[2]);
    let g = t(&[0.5, 1.0], &[2]);
    let config = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        weight_decay: 0.1,
        ..SgdConfig::default()
    };
    let mut opt = Sgd::new(vec![p.clone()], config).unwrap();
    // Step 1: d = g + 0.1 p = [0.6, 0.8]; buf = d; p -= 0.1 buf            -> [0.94, -2.08]
    // Step 2: d = [0.594, 0.792]; buf = 0.9 [0.6, 0.8] + d = [1.134, 1.512] -> [0.8266, -2.2312]
    // Step 3: d = [0.58266, 0.77688]; buf = 0.9 buf + d = [1.60326, 2.13768]
    //                                                     -> [0.666274, -2.444968]
    let want = [[0.94, -2.08], [0.8266, -2.2312], [0.666_274, -2.444_968]];
    let bufs = [[0.6, 0.8], [1.134, 1.512], [1.603_26, 2.137_68]];
    for (w, b) in want.iter().zip(&bufs) {
        opt.step_with(&[Some(g.clone())]).unwrap();
        close(&vals(&p), w, 1e-6);
        close(opt.momentum_buffer(0).unwrap(), b, 1e-6);
    }
}

/// PyTorch's SGD in f64 over the steps' gradients, one parameter.
fn sgd_reference(p0: &[f32], grads: &[Vec<f32>], c: SgdConfig) -> Vec<f64> {
    let (lr, mu, damp, wd) = (
        f64::from(c.lr),
        f64::from(c.momentum),
        f64::from(c.dampening),
        f64::from(c.weight_decay),
    );
    let mut p: Vec<f64> = p0.iter().map(|&x| f64::from(x)).collect();
    let mut buf: Option<Vec<f64>> = None;
    for g in grads {
        let d: Vec<f64> = g
            .iter()
            .zip(&p)
            .map(|(&g, &p)| f64::from(g) + wd * p)
            .collect();
        let step = if mu == 0.0 {
            d
        } else {
            let b = match buf.take() {
                None => d.clone(),
                Some(b) => b
                    .iter()
                    .zip(&d)
                    .map(|(b, d)| mu * b + (1.0 - damp) * d)
                    .collect(),
            };
            let s = if c.nesterov {
                d.iter().zip(&b).map(|(d, b)| d + mu * b).collect()
            } else {
                b.clone()
            };
            buf = Some(b);
            s
        };
        for (p, s) in p.iter_mut().zip(step) {
            *p -= lr * s;
        }
    }
    p
}

#[test]
fn sgd_nesterov_dampening_and_plain_match_the_reference() {
    let configs = [
        SgdConfig {
            lr: 0.05,
            ..SgdConfig::default()
        },
        SgdConfig {
            lr: 0.05,
            momentum: 0.8,
            dampening: 0.3,
            weight_decay: 0.02,
            nesterov: false,
        },
        SgdConfig {
            lr: 0.05,
            momentum: 0.8,
            dampening: 0.0,
            weight_decay: 0.02,
            nesterov: true,
        },
    ];
    for config in configs {
        let p0 = noise(12, 1);
        let grads: Vec<Vec<f32>> = (0..4).map(|k| noise(12, 10 + k)).collect();
        let p = t(&p0, &[3, 4]);
        let mut opt = Sgd::new(vec![p.clone()], config).unwrap();
        for g in &grads {
            opt.step_with(&[Some(t(g, &[3, 4]))]).unwrap();
        }
        close(&vals(&p), &sgd_reference(&p0, &grads, config), 1e-6);
    }
}

// ---- AdamW -----------------------------------------------------------------------------

/// PyTorch's AdamW in f64 over the steps' gradients, one parameter.
fn adamw_reference(p0: &[f32], grads: &[Vec<f32>], c: AdamWConfig) -> Vec<f64> {
    let (lr, b1, b2, eps, wd) = (
        f64::from(c.lr),
        f64::from(c.betas.0),
        f64::from(c.betas.1),
        f64::from(c.eps),
        f64::from(c.weight_decay),
    );
    let mut p: Vec<f64> = p0.iter().map(|&x| f64::from(x)).collect();
    let mut m = vec![0.0; p.len()];
    let mut v = vec![0.0; p.len()];
    for (step, g) in grads.iter().enumerate() {
        let t = (step + 1) as i32;
        for i in 0..p.len() {
            let g = f64::from(g[i]);
            p[i] *= 1.0 - lr * wd;
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            let m_hat = m[i] / (1.0 - b1.powi(t));
            let v_hat = v[i] / (1.0 - b2.powi(t));
            p[i] -= lr * m_hat / (v_hat.sqrt() + eps);
        }
    }
    p
}

#[test]
fn adamw_matches_a_plain_loop_reference_over_three_steps() {
    let config = AdamWConfig {
        lr: 0.01,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: 0.1,
    };
    // 6 elements run the update's scalar loop; 37 and 1,000 its vector loop and its tail
    for n in [6, 37, 1000] {
        let p0 = noise(n, 3);
        let grads: Vec<Vec<f32>> = (0..3).map(|k| noise(n, 20 + k)).collect();
        let p = t(&p0, &[n]);
        let mut opt = AdamW::new(vec![p.clone()], config).unwrap();
        for g in &grads {
            opt.step_with(&[Some(t(g, &[n]))]).unwrap();
        }
        assert_eq!(opt.steps(0), 3);
        close(&vals(&p), &adamw_reference(&p0, &grads, config), 1e-6);
    }
}

#[test]
fn adamw_first_step_moves_each_element_by_lr_as_bias_correction_promises() {
    // t = 1: m_hat = g, v_hat = g², so p -= lr * g / (|g| + eps): a step of lr against sign(g).
    let p = t(&[1.0, 1.0, 1.0], &[3]);
    let config = AdamWConfig {
        lr: 0.5,
        weight_decay: 0.0,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::new(vec![p.clone()], config).unwrap();
    opt.step_with(&[Some(t(&[3.0, -0.002, 100.0], &[3]))])
        .unwrap();
    close(&vals(&p), &[0.5, 1.5, 0.5], 1e-5);
}

#[test]
fn a_parameter_large_enough_to_split_across_threads_updates_like_a_small_one() {
    let n = 2 * autograd_core::kernel::PARALLEL_THRESHOLD + 77;
    let p0 = noise(n, 5);
    let grads: Vec<Vec<f32>> = (0..2).map(|k| noise(n, 40 + k)).collect();
    let config = AdamWConfig::default();
    let p = t(&p0, &[n]);
    let mut opt = AdamW::new(vec![p.clone()], config).unwrap();
    for g in &grads {
        opt.step_with(&[Some(t(g, &[n]))]).unwrap();
    }
    close(&vals(&p), &adamw_reference(&p0, &grads, config), 1e-6);
}

// ---- step, step_with, zero_grad -------------------------------------------------------

#[test]
fn step_from_grad_and_step_with_functional_gradients_agree() {
    let make = || (t(&noise(6, 7), &[2, 3]), t(&noise(3, 8), &[3]));
    let c = [noise(6, 9), noise(3, 10)];
    let loss_of = |w: &Tensor, b: &Tensor| {
        let lw = linear_loss(w, &c[0]);
        let lb = linear_loss(b, &c[1]);
        add(&mul(&lw, &lw).unwrap(), &lb).unwrap()
    };
    for adam in [false, true] {
        let (w1, b1) = make();
        let (w2, b2) = make();
        let new = |ps: Vec<Tensor>| -> Box<dyn Optimizer> {
            if adam {
                Box::new(AdamW::new(ps, AdamWConfig::default()).unwrap())
            } else {
                let config = SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    ..SgdConfig::default()
                };
                Box::new(Sgd::new(ps, config).unwrap())
            }
        };
        let mut o1 = new(vec![w1.clone(), b1.clone()]);
        let mut o2 = new(vec![w2.clone(), b2.clone()]);
        for _ in 0..3 {
            o1.zero_grad().unwrap();
            loss_of(&w1, &b1).backward().unwrap();
            o1.step().unwrap();
            let loss = loss_of(&w2, &b2);
            let grads = grad(
                &loss,
                &[&w2, &b2],
                &Tensor::scalar(1.0),
                GradOptions::default(),
            )
            .unwrap();
            o2.step_with(&grads).unwrap();
        }
        assert_eq!(vals(&w1), vals(&w2));
        assert_eq!(vals(&b1), vals(&b2));
        assert_eq!(grad_vals(&w2), None, "functional grad leaves .grad alone");
    }
}

#[test]
fn zero_grad_clears_every_parameter_grad() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0], &[1]));
    let opt = Sgd::new(vec![a.clone(), b.clone()], SgdConfig::default()).unwrap();
    add(&sum(&a).unwrap(), &b).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&a), Some(vec![1.0, 1.0]));
    opt.zero_grad().unwrap();
    assert_eq!(grad_vals(&a), None);
    assert_eq!(grad_vals(&b), None);
    assert_eq!(opt.params().len(), 2);
}

#[test]
fn a_missing_gradient_skips_its_parameter_and_its_state() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0], &[1]));
    let mut opt = AdamW::new(vec![a.clone(), b.clone()], AdamWConfig::default()).unwrap();
    let vb = version(&b);
    sum(&a).unwrap().backward().unwrap();
    assert_eq!(grad_vals(&b), None);
    opt.step().unwrap();
    assert_eq!(vals(&b), [3.0]);
    assert_eq!(version(&b), vb, "a skipped parameter is not written");
    assert_eq!((opt.steps(0), opt.steps(1)), (1, 0));
    assert_ne!(vals(&a), [1.0, 2.0]);
}

// ---- versions and the stale-graph refusal ----------------------------------------------

#[test]
fn backward_rejects_storage_modified_after_the_forward_pass__complete_a_traversal_before_mutating_parameters(
) {
    for adam in [false, true] {
        let mut rng = Rng::new(1);
        let layer = Linear::new(3, 2, true, &mut rng).unwrap();
        let x = Tensor::randn(autograd_core::shape![4, 3], &mut rng).unwrap();
        let params = layer.parameters();
        let mut opt: Box<dyn Optimizer> = if adam {
            Box::new(AdamW::new(params, AdamWConfig::default()).unwrap())
        } else {
            Box::new(Sgd::new(params, SgdConfig::default()).unwrap())
        };
        let y = layer.forward(&x).unwrap();
        let loss = mean(&mul(&y, &y).unwrap()).unwrap();
        let kept = mean(&layer.forward(&x).unwrap()).unwrap();
        // The traversal completes before the mutation and accumulates parameter gradients.
        loss.backward().unwrap();
        let w = layer.weight().clone();
        let before = vals(&w);
        let versions = (version(&w), version(layer.bias().unwrap()));
        opt.step().unwrap();
        assert_ne!(vals(&w), before);
        assert_eq!(
            (version(&w), version(layer.bias().unwrap())),
            (versions.0 + 1, versions.1 + 1),
            "one step bumps each updated parameter's version once"
        );
        // A graph built before the step is no longer traversable; nothing changes.
        let grads = (grad_vals(&w), grad_vals(layer.bias().unwrap()));
        expect_err(
            kept.backward(),
            ErrorKind::Runtime,
            &["in-place modification"],
        );
        assert_eq!((grad_vals(&w), grad_vals(layer.bias().unwrap())), grads);
        // A fresh forward pass after the step is.
        opt.zero_grad().unwrap();
        mean(&layer.forward(&x).unwrap())
            .unwrap()
            .backward()
            .unwrap();
        assert!(grad_vals(&w).is_some());
    }
}

#[test]
fn a_step_runs_with_graph_construction_disabled_and_restores_it() {
    let p = t(&[1.0, 2.0], &[2]);
    let mut opt = Sgd::new(vec![p.clone()], SgdConfig::default()).unwrap();
    opt.step_with(&[Some(t(&[1.0, 1.0], &[2]))]).unwrap();
    assert!(autograd_core::is_grad_enabled());
    assert!(p.autograd_ctx().is_none(), "the parameter stays a leaf");
}

// ---- validation before any change ------------------------------------------------------

#[test]
fn a_bad_gradient_changes_no_parameter_and_no_state() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0, 5.0], &[3]));
    let config = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        ..SgdConfig::default()
    };
    let mut opt = Sgd::new(vec![a.clone(), b.clone()], config).unwrap();
    let versions = (version(&a), version(&b));
    let good = t(&[1.0, 1.0], &[2]);
    // The first gradient is fine; the second has the wrong shape: nothing moves.
    expect_err(
        opt.step_with(&[Some(good.clone()), Some(t(&[1.0, 1.0], &[2]))]),
        ErrorKind::Value,
        &["gradient of parameter 1", "shape"],
    );
    // A gradient that is not Float32.
    let ints = Tensor::from_vec(vec![1i32, 1, 1], autograd_core::shape![3]).unwrap();
    expect_err(
        opt.step_with(&[Some(good.clone()), Some(ints)]),
        ErrorKind::Type,
        &["gradient of parameter 1", "Float32"],
    );
    // The wrong count.
    expect_err(
        opt.step_with(&[Some(good.clone())]),
        ErrorKind::Value,
        &["1 for 2 parameters"],
    );
    assert_eq!(vals(&a), [1.0, 2.0]);
    assert_eq!(vals(&b), [3.0, 4.0, 5.0]);
    assert_eq!((version(&a), version(&b)), versions);
    assert!(
        opt.momentum_buffer(0).is_none(),
        "no momentum state was made"
    );
    // A `.grad` of the wrong shape cannot be assigned in the first place.
    expect_err(
        a.set_grad(Some(t(&[1.0], &[1]))),
        ErrorKind::Value,
        &["shape"],
    );
}

#[test]
fn optimizers_refuse_parameters_they_cannot_update_in_place() {
    let p = t(&[1.0, 2.0], &[2]);
    let derived = mul(&p, &p).unwrap();
    expect_err(
        Sgd::new(vec![derived], SgdConfig::default()),
        ErrorKind::Value,
        &["not a leaf"],
    );
    let ints = Tensor::from_vec(vec![1i32, 2], autograd_core::shape![2]).unwrap();
    expect_err(
        AdamW::new(vec![ints], AdamWConfig::default()),
        ErrorKind::Type,
        &["Float32"],
    );
    expect_err(
        Sgd::new(vec![p.clone(), p.clone()], SgdConfig::default()),
        ErrorKind::Value,
        &["same tensor"],
    );
    let broadcast = autograd_tests::broadcast_rows(&[1.0, 2.0], 3);
    expect_err(
        Sgd::new(vec![broadcast], SgdConfig::default()),
        ErrorKind::Value,
        &["in-place update is ambiguous"],
    );
}

#[test]
fn invalid_hyperparameters_are_value_errors() {
    let p = || vec![t(&[1.0], &[1])];
    let sgd = |c: SgdConfig| Sgd::new(p(), c).map(|_| ());
    let adamw = |c: AdamWConfig| AdamW::new(p(), c).map(|_| ());
    for r in [
        sgd(SgdConfig {
            lr: -1.0,
            ..SgdConfig::default()
        }),
        sgd(SgdConfig {
            nesterov: true,
            ..SgdConfig::default()
        }),
        sgd(SgdConfig {
            momentum: 0.9,
            dampening: 0.1,
            nesterov: true,
            ..SgdConfig::default()
        }),
        adamw(AdamWConfig {
            betas: (0.9, 1.0),
            ..AdamWConfig::default()
        }),
        adamw(AdamWConfig {
            eps: f32::NAN,
            ..AdamWConfig::default()
        }),
        adamw(AdamWConfig {
            weight_decay: -0.1,
            ..AdamWConfig::default()
        }),
    ] {
        expect_err(r, ErrorKind::Value, &[]);
    }
    let mut opt = Sgd::new(p(), SgdConfig::default()).unwrap();
    opt.set_lr(0.5).unwrap();
    assert_eq!(opt.lr(), 0.5);
    expect_err(
        opt.set_lr(f32::INFINITY),
        ErrorKind::Value,
        &["learning rate"],
    );
    assert_eq!(opt.lr(), 0.5);
}

// ---- parameters in other storage -------------------------------------------------------

#[test]
fn a_strided_parameter_is_updated_in_logical_order_and_its_padding_untouched() {
    let p0 = noise(6, 11);
    let g = noise(6, 12);
    let config = AdamWConfig::default();
    // column-major [2, 3] at offset 1 of a NaN-padded carrier
    let p = strided(&p0, &[2, 3]);
    let mut opt = AdamW::new(vec![p.clone()], config).unwrap();
    let v = version(&p);
    opt.step_with(&[Some(t(&g, &[2, 3]))]).unwrap();
    close(&vals(&p), &adamw_reference(&p0, &[g], config), 1e-6);
    assert_eq!(version(&p), v + 1);
    let storage = autograd_core::kernel::read::<f32, _>(&p, |e| e.storage().0.to_vec()).unwrap();
    assert!(storage[0].is_nan(), "the slot before the layout's origin");
    // A strided gradient is read in logical order too.
    let q = t(&p0, &[2, 3]);
    let mut opt = Sgd::new(
        vec![q.clone()],
        SgdConfig {
            lr: 1.0,
            ..SgdConfig::default()
        },
    )
    .unwrap();
    opt.step_with(&[Some(strided(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]))])
        .unwrap();
    let want: Vec<f64> = p0
        .iter()
        .zip(1..)
        .map(|(&x, k)| f64::from(x) - f64::from(k))
        .collect();
    close(&vals(&q), &want, 1e-6);
}

#[test]
fn a_parameter_on_another_carrier_class_is_updated_through_its_public_copy() {
    let p0 = noise(4, 13);
    let g = noise(4, 14);
    let config = SgdConfig {
        lr: 0.1,
        momentum: 0.5,
        weight_decay: 0.1,
        ..SgdConfig::default()
    };
    let p = tc(&p0, &[4]);
    let mut opt = Sgd::new(vec![p.clone()], config).unwrap();
    let v = version(&p);
    opt.step_with(&[Some(t(&g, &[4]))]).unwrap();
    assert!(on_test_carrier(&p));
    assert_eq!(version(&p), v + 1);
    close(&vals(&p), &sgd_reference(&p0, &[g], config), 1e-6);
}

// ---- clipping ------------------------------------------------------------------------

#[test]
fn clip_grad_norm_scales_to_max_norm_and_returns_the_norm_before() {
    let (a, b, c) = (t(&[0.0, 0.0], &[2]), t(&[0.0], &[1]), t(&[0.0], &[1]));
    a.set_grad(Some(t(&[3.0, 4.0], &[2]))).unwrap();
    b.set_grad(Some(t(&[12.0], &[1]))).unwrap();
    // c has no .grad: skipped. The norm is sqrt(9 + 16 + 144) = 13.
    let params = [a.clone(), b.clone(), c.clone()];
    let norm = clip_grad_norm(&params, 6.5).unwrap();
    assert_eq!(norm, 13.0);
    let f = 6.5 / (13.0 + 1e-6);
    close(&grad_vals(&a).unwrap(), &[3.0 * f, 4.0 * f], 1e-7);
    close(&grad_vals(&b).unwrap(), &[12.0 * f], 1e-7);
    assert_eq!(grad_vals(&c), None);
    // Now below the maximum (6.5 - tiny): untouched, and the norm is reported.
    let again = clip_grad_norm(&params, 100.0).unwrap();
    assert!((f64::from(again) - 6.5).abs() < 1e-5);
    close(&grad_vals(&a).unwrap(), &[3.0 * f, 4.0 * f], 1e-7);
    expect_err(
        clip_grad_norm(&params, -1.0),
        ErrorKind::Value,
        &["max_norm"],
    );
}

#[test]
fn clip_grad_norm_of_functional_gradients_scales_them_in_place() {
    let w = t(&[1.0, 2.0], &[2]);
    let loss = linear_loss(&w, &[30.0, 40.0]);
    let grads = grad(&loss, &[&w], &Tensor::scalar(1.0), GradOptions::default()).unwrap();
    let norm = clip_grad_norm_of(&grads, 5.0).unwrap();
    assert_eq!(norm, 50.0);
    close(&vals(grads[0].as_ref().unwrap()), &[3.0, 4.0], 1e-6);
    assert_eq!(clip_grad_norm_of(&[None], 1.0).unwrap(), 0.0);
    let ints = Tensor::from_vec(vec![1i32], autograd_core::shape![1]).unwrap();
    expect_err(
        clip_grad_norm_of(&[Some(t(&[10.0], &[1])), Some(ints)], 1.0),
        ErrorKind::Type,
        &["Float32"],
    );
    // validated before scaling: the first gradient is untouched by the failed call
    let first = t(&[10.0], &[1]);
    let _ = clip_grad_norm_of(
        &[
            Some(first.clone()),
            Some(autograd_tests::broadcast_rows(&[1.0], 2)),
        ],
        1.0,
    );
    assert_eq!(vals(&first), [10.0]);
}

// ---- end to end ------------------------------------------------------------------------

/// A regression problem `y = x · w* + b*` with 64 samples of 3 features.
fn regression_data() -> (Tensor, Tensor) {
    let x = noise(64 * 3, 21);
    let (w, b) = ([0.5f32, -1.5, 2.0], 0.3f32);
    let y: Vec<f32> = x
        .chunks(3)
        .map(|r| r.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() + b)
        .collect();
    (t(&x, &[64, 3]), t(&y, &[64, 1]))
}

fn mse(layer: &Linear, x: &Tensor, y: &Tensor) -> Tensor {
    let d = sub(&layer.forward(x).unwrap(), y).unwrap();
    mean(&mul(&d, &d).unwrap()).unwrap()
}

fn train(opt: &mut dyn Optimizer, layer: &Linear, steps: usize) -> (f32, f32) {
    let (x, y) = regression_data();
    let first = mse(layer, &x, &y).values::<f32>().unwrap()[0];
    for _ in 0..steps {
        opt.zero_grad().unwrap();
        mse(layer, &x, &y).backward().unwrap();
        opt.step().unwrap();
    }
    (first, mse(layer, &x, &y).values::<f32>().unwrap()[0])
}

#[test]
fn linear_regression_trained_by_sgd_reaches_a_small_loss() {
    let layer = Linear::new(3, 1, true, &mut Rng::new(3)).unwrap();
    let config = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        ..SgdConfig::default()
    };
    let mut opt = Sgd::new(layer.parameters(), config).unwrap();
    let (first, last) = train(&mut opt, &layer, 200);
    assert!(
        first > 0.5,
        "the problem starts far from the optimum: {first}"
    );
    assert!(last < 1e-6, "SGD loss {first} -> {last}");
}

#[test]
fn linear_regression_trained_by_adamw_reaches_a_small_loss() {
    let layer = Linear::new(3, 1, true, &mut Rng::new(4)).unwrap();
    let config = AdamWConfig {
        lr: 0.05,
        weight_decay: 0.0,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::new(layer.parameters(), config).unwrap();
    let (first, last) = train(&mut opt, &layer, 400);
    assert!(
        first > 0.5,
        "the problem starts far from the optimum: {first}"
    );
    assert!(last < 1e-4, "AdamW loss {first} -> {last}");
}

// ---- PyTorch's own values --------------------------------------------------------------

/// What PyTorch 2.15 (CPU, float32) gives for the same parameters, gradients and settings
/// (`torch.optim.AdamW`, `torch.optim.SGD(nesterov=True)`, `clip_grad_norm_`), printed once
/// from a short script and kept here.
#[test]
fn steps_match_values_pytorch_printed() {
    let p0 = [0.5f32, -1.0, 2.0, 0.0];
    let grads = [
        [0.1f32, -0.2, 0.3, 0.0],
        [1.0, 0.5, -2.0, 0.25],
        [-0.3, 0.7, 0.01, -1.5],
    ];
    let p = t(&p0, &[4]);
    let config = AdamWConfig {
        lr: 0.01,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: 0.1,
    };
    let mut opt = AdamW::new(vec![p.clone()], config).unwrap();
    let torch = [
        [0.489_500_016, -0.989_000_022, 1.988_000_035, 0.0],
        [
            0.480_957_478,
            -0.992_425_978,
            1.992_364_049,
            -0.007_424_597_2,
        ],
        [
            0.476_328_045,
            -0.998_562_813,
            1.995_261_312,
            -0.002_084_508_5,
        ],
    ];
    for (g, want) in grads.iter().zip(&torch) {
        opt.step_with(&[Some(t(g, &[4]))]).unwrap();
        close(&vals(&p), want, 1e-6);
    }
    let q = t(&p0, &[4]);
    let config = SgdConfig {
        lr: 0.05,
        momentum: 0.8,
        dampening: 0.0,
        weight_decay: 0.02,
        nesterov: true,
    };
    let mut opt = Sgd::new(vec![q.clone()], config).unwrap();
    for g in &grads {
        opt.step_with(&[Some(t(g, &[4]))]).unwrap();
    }
    close(
        &vals(&q),
        &[0.386_855_930, -1.087_306_857, 2.184_267_759, 0.104_540_512],
        1e-6,
    );
    let (a, b) = (t(&[0.0, 0.0], &[2]), t(&[0.0], &[1]));
    a.set_grad(Some(t(&[3.0, 4.0], &[2]))).unwrap();
    b.set_grad(Some(t(&[12.0], &[1]))).unwrap();
    assert_eq!(clip_grad_norm(&[a.clone(), b.clone()], 6.5).unwrap(), 13.0);
    close(
        &grad_vals(&a).unwrap(),
        &[1.499_999_881, 1.999_999_881],
        1e-7,
    );
    close(&grad_vals(&b).unwrap(), &[5.999_999_523], 1e-7);
}

#[test]
fn a_gradient_sharing_the_parameters_storage_is_read_before_the_write() {
    // grad = the parameter itself: p -= 0.5 p
    let p = t(&[2.0, -4.0], &[2]);
    let config = SgdConfig {
        lr: 0.5,
        ..SgdConfig::default()
    };
    let mut opt = Sgd::new(vec![p.clone()], config).unwrap();
    opt.step_with(&[Some(p.clone())]).unwrap();
    assert_eq!(vals(&p), [1.0, -2.0]);
}

#[test]
fn a_step_a_carrier_refuses_changes_no_parameter_and_no_state() {
    let cpu = t(&[1.0, 2.0], &[2]);
    let (a, b) = (tc(&[3.0, 4.0], &[2]), tc(&[5.0, 6.0], &[2]));
    let params = vec![cpu.clone(), a.clone(), b.clone()];
    let g = || vec![Some(t(&[1.0, -1.0], &[2])); 3];
    let cfg = AdamWConfig {
        lr: 0.1,
        weight_decay: 0.0,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::new(params.clone(), cfg).unwrap();
    let mut twin = AdamW::new(params.iter().map(|p| t(&vals(p), &[2])).collect(), cfg).unwrap();
    opt.step_with(&g()).unwrap();
    twin.step_with(&g()).unwrap();
    // b refuses: cpu and a (stepped before it) get their values and moments back, b its moments
    refuse_writes(&b, true);
    let before: Vec<Vec<f32>> = params.iter().map(vals).collect();
    expect_err(
        opt.step_with(&g()),
        ErrorKind::Runtime,
        &[
            "refuses writes",
            "every parameter and its state were restored",
        ],
    );
    assert_eq!(params.iter().map(vals).collect::<Vec<_>>(), before);
    assert_eq!((opt.steps(0), opt.steps(1), opt.steps(2)), (1, 1, 1));
    // the next step is the second step of a run that never failed
    refuse_writes(&b, false);
    opt.step_with(&g()).unwrap();
    twin.step_with(&g()).unwrap();
    for (p, q) in params.iter().zip(twin.params()) {
        assert_eq!(vals(p), vals(q));
    }

    // SGD's momentum buffers likewise
    let (a, b) = (tc(&[3.0, 4.0], &[2]), tc(&[5.0, 6.0], &[2]));
    let mut sgd = Sgd::new(
        vec![a.clone(), b.clone()],
        SgdConfig {
            lr: 0.1,
            momentum: 0.9,
            ..SgdConfig::default()
        },
    )
    .unwrap();
    let g2 = || vec![Some(t(&[1.0, -1.0], &[2])); 2];
    sgd.step_with(&g2()).unwrap();
    refuse_writes(&b, true);
    assert!(sgd.step_with(&g2()).is_err());
    assert_eq!(sgd.momentum_buffer(0), Some(&[1.0f32, -1.0][..]));
    assert_eq!(sgd.momentum_buffer(1), Some(&[1.0f32, -1.0][..]));
    assert_eq!(vals(&a), [2.9, 4.1]);
}

#[test]
fn clipping_a_gradient_a_carrier_refuses_scales_nothing() {
    // norm sqrt(30^2 + 40^2) = 50; a is scaled before b refuses, then restored
    let cpu = t(&[30.0, 0.0], &[2]);
    let (a, b) = (tc(&[0.0, 40.0], &[2]), tc(&[0.0, 0.0], &[2]));
    refuse_writes(&b, true);
    let grads = [Some(cpu.clone()), Some(a.clone()), Some(b.clone())];
    expect_err(
        clip_grad_norm_of(&grads, 5.0),
        ErrorKind::Runtime,
        &["refuses writes", "were restored"],
    );
    assert_eq!(vals(&cpu), [30.0, 0.0]);
    assert_eq!(vals(&a), [0.0, 40.0]);
    refuse_writes(&b, false);
    assert_eq!(clip_grad_norm_of(&grads, 5.0).unwrap(), 50.0);
    assert_eq!(vals(&cpu), [3.0, 0.0]);
    assert_eq!(vals(&a), [0.0, 4.0]);
}

#[test]
fn clipping_finite_gradients_whose_norm_overflows_f32_still_clips() {
    let g = t(&[3.0e38, 3.0e38], &[2]);
    let norm = clip_grad_norm_of(&[Some(g.clone())], 1.0).unwrap();
    assert!(norm.is_infinite(), "the norm 4.2e38 is past f32::MAX");
    let v = vals(&g);
    let clipped = (f64::from(v[0]).powi(2) + f64::from(v[1]).powi(2)).sqrt();
    assert!((clipped - 1.0).abs() < 1e-5, "{v:?}");
}

#[test]
fn an_optimizer_of_no_parameters_is_refused() {
    expect_err(
        Sgd::new(Vec::new(), SgdConfig::default()),
        ErrorKind::Value,
        &["empty"],
    );
    expect_err(
        AdamW::new(Vec::new(), AdamWConfig::default()),
        ErrorKind::Value,
        &["empty"],
    );
}

#[test]
fn parameters_step_in_index_order_when_another_carrier_class_takes_part() {
    // p1's gradient is p0 itself: it is read after p0 stepped, as with CPU parameters alone
    for p1 in [t(&[10.0, 10.0], &[2]), tc(&[10.0, 10.0], &[2])] {
        let p0 = t(&[2.0, -4.0], &[2]);
        let mut sgd = Sgd::new(
            vec![p0.clone(), p1.clone()],
            SgdConfig {
                lr: 0.5,
                ..SgdConfig::default()
            },
        )
        .unwrap();
        sgd.step_with(&[Some(p0.clone()), Some(p0.clone())])
            .unwrap();
        assert_eq!(vals(&p0), [1.0, -2.0]);
        assert_eq!(
            vals(&p1),
            [9.5, 11.0],
            "on the test carrier: {}",
            on_test_carrier(&p1)
        );
    }
}

#[test]
fn a_gradient_of_equal_extents_under_another_shape_tree_steps_its_parameter() {
    let p = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], 3usize).unwrap();
    let mut sgd = Sgd::new(
        vec![p.clone()],
        SgdConfig {
            lr: 0.5,
            ..SgdConfig::default()
        },
    )
    .unwrap();
    sgd.step_with(&[Some(t(&[2.0, 2.0, 2.0], &[3]))]).unwrap();
    assert_eq!(vals(&p), [0.0, 1.0, 2.0]);
    expect_err(
        sgd.step_with(&[Some(t(&[2.0; 4], &[4]))]),
        ErrorKind::Value,
        &["shape"],
    );
}

//! `batch_norm` and `group_norm` (issue 39) and their layers: forward values, gradients and
//! running statistics against the numbers PyTorch 2.15 prints (`tests/fixtures/pool/pool.txt`,
//! written by `gen_pool.py`), running statistics against hand-computed values, gradcheck on
//! contiguous and strided inputs and batch 1, `BatchNorm2d` in training and evaluation mode and
//! its state dict, and every error (which changes nothing).

mod pool_fixture;

use autograd_core::{gradcheck, shape, ErrorKind, GradcheckOptions, Tensor, VersionSnapshot};
use autograd_ops::{batch_norm, group_norm, BatchNorm2d, GroupNorm, Module};
use autograd_tests::{kind, noise, strided, t, vals};

use pool_fixture::{check, POOL};

#[test]
fn batch_and_group_norm_match_pytorch_values_gradients_and_running_statistics() {
    let lines: Vec<&str> = POOL
        .lines()
        .filter(|l| l.contains("|batch_norm|") || l.contains("|group_norm|"))
        .collect();
    assert_eq!(lines.len(), 8, "the fixture lost normalisation cases");
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() < 1e-5, "{got:?} vs {want:?}");
    }
}

#[test]
fn training_updates_the_running_statistics_in_place_with_the_unbiased_variance() {
    // one channel of [1, 2, 3, 6] and one of [0, 0, 4, 4]: means 3 and 2, biased variances 3.5
    // and 4, unbiased 14/3 and 16/3
    let x = t(&[1.0, 2.0, 0.0, 0.0, 3.0, 6.0, 4.0, 4.0], &[2, 2, 1, 2]);
    let mean = t(&[0.0, 1.0], &[2]);
    let var = t(&[1.0, 2.0], &[2]);
    let (m0, v0) = (VersionSnapshot::of(&mean), VersionSnapshot::of(&var));
    let y = batch_norm(&x, Some(&mean), Some(&var), None, None, true, 0.1, 0.0).unwrap();
    close(&vals(&mean), &[0.3, 0.9 + 0.2]);
    close(
        &vals(&var),
        &[0.9 + 0.1 * 14.0 / 3.0, 1.8 + 0.1 * 16.0 / 3.0],
    );
    assert_ne!(VersionSnapshot::of(&mean), m0);
    assert_ne!(VersionSnapshot::of(&var), v0);
    // normalised by the batch's biased variance
    let r0 = 1.0 / 3.5f32.sqrt();
    close(
        &vals(&y),
        &[-2.0 * r0, -r0, -1.0, -1.0, 0.0, 3.0 * r0, 1.0, 1.0],
    );
    // a second step blends again: new = 0.9 old + 0.1 batch
    batch_norm(&x, Some(&mean), Some(&var), None, None, true, 0.1, 0.0).unwrap();
    close(&vals(&mean), &[0.9 * 0.3 + 0.3, 0.9 * 1.1 + 0.2]);
    // momentum 1 takes the batch's statistics
    batch_norm(&x, Some(&mean), Some(&var), None, None, true, 1.0, 0.0).unwrap();
    close(&vals(&mean), &[3.0, 2.0]);
    close(&vals(&var), &[14.0 / 3.0, 16.0 / 3.0]);
}

#[test]
fn evaluation_normalises_by_the_running_statistics_and_leaves_them_alone() {
    let x = t(&[1.0, 2.0, 0.0, 0.0, 3.0, 6.0, 4.0, 4.0], &[2, 2, 2]);
    let (mean, var) = (t(&[1.0, -1.0], &[2]), t(&[4.0, 0.25], &[2]));
    let (w, b) = (t(&[2.0, 1.0], &[2]), t(&[0.5, 0.0], &[2]));
    let before = (VersionSnapshot::of(&mean), VersionSnapshot::of(&var));
    let y = batch_norm(
        &x,
        Some(&mean),
        Some(&var),
        Some(&w),
        Some(&b),
        false,
        0.1,
        0.0,
    )
    .unwrap();
    // channel 0: (x - 1) / 2 * 2 + 0.5; channel 1: (x + 1) / 0.5
    close(&vals(&y), &[0.5, 1.5, 2.0, 2.0, 2.5, 5.5, 10.0, 10.0]);
    assert_eq!(vals(&mean), [1.0, -1.0]);
    assert_eq!(
        (VersionSnapshot::of(&mean), VersionSnapshot::of(&var)),
        before
    );
    // the gradient is g w / sqrt(var + eps) per channel
    y.backward_with(Some(&y.f32_like(vec![1.0; 8]).unwrap()), false)
        .unwrap();
    close(
        &vals(&x.grad().unwrap().unwrap()),
        &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0],
    );
}

#[test]
fn batch_and_group_norm_pass_gradcheck_for_input_weight_and_bias() {
    let opts = GradcheckOptions {
        atol: 2e-3,
        rtol: 2e-2,
        ..GradcheckOptions::default()
    };
    for (seed, dims) in [
        (1, vec![3, 4, 3, 2]),
        (2, vec![1, 2, 3, 3]),
        (3, vec![5, 3]),
    ] {
        let n: usize = dims.iter().product();
        let c = dims[1];
        let values: Vec<f32> = noise(n, seed).iter().map(|v| 2.0 * v + 0.3).collect();
        let w = t(
            &noise(c, seed + 10)
                .iter()
                .map(|v| v + 1.5)
                .collect::<Vec<_>>(),
            &[c],
        );
        let b = t(&noise(c, seed + 20), &[c]);
        let (rm, rv) = (t(&noise(c, seed + 30), &[c]), t(&vec![0.7; c], &[c]));
        for x in [t(&values, &dims), strided(&values, &dims)] {
            let inputs = [x, w.clone(), b.clone()];
            for training in [true, false] {
                let (m, v) = if training {
                    (None, None)
                } else {
                    (Some(&rm), Some(&rv))
                };
                let report = gradcheck(
                    |xs| {
                        batch_norm(
                            &xs[0],
                            m,
                            v,
                            Some(&xs[1]),
                            Some(&xs[2]),
                            training,
                            0.1,
                            1e-5,
                        )
                    },
                    &inputs,
                    opts,
                )
                .unwrap();
                assert_eq!(report.slots_checked, n + 2 * c);
            }
            let report = gradcheck(
                |xs| batch_norm(&xs[0], None, None, None, None, true, 0.1, 1e-5),
                &inputs[..1],
                opts,
            )
            .unwrap();
            assert_eq!(report.slots_checked, n);
            if c % 2 == 0 {
                let report = gradcheck(
                    |xs| group_norm(&xs[0], 2, Some(&xs[1]), Some(&xs[2]), 1e-5),
                    &inputs,
                    opts,
                )
                .unwrap();
                assert_eq!(report.slots_checked, n + 2 * c);
            }
            let report = gradcheck(
                |xs| group_norm(&xs[0], c, None, None, 1e-5),
                &inputs[..1],
                opts,
            )
            .unwrap();
            assert_eq!(report.slots_checked, n);
        }
    }
}

#[test]
fn group_norm_normalises_each_samples_groups_as_a_plain_loop() {
    let (n, c, s, groups) = (2, 6, 5, 3);
    let x = noise(n * c * s, 9);
    let w = noise(c, 10);
    let b = noise(c, 11);
    let y = vals(
        &group_norm(
            &t(&x, &[n, c, s]),
            groups,
            Some(&t(&w, &[c])),
            Some(&t(&b, &[c])),
            1e-5,
        )
        .unwrap(),
    );
    let per = c / groups * s;
    for k in 0..n * groups {
        let part = &x[k * per..(k + 1) * per];
        let mean = part.iter().sum::<f32>() / per as f32;
        let var = part.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / per as f32;
        for (i, v) in part.iter().enumerate() {
            let ch = (k % groups) * (c / groups) + i / s;
            let want = (v - mean) / (var + 1e-5).sqrt() * w[ch] + b[ch];
            assert!((y[k * per + i] - want).abs() < 1e-5);
        }
    }
}

#[test]
fn batch_norm2d_trains_on_batch_statistics_and_evaluates_on_running_ones() {
    let mut bn = BatchNorm2d::new(3).unwrap();
    let dims = [4, 3, 2, 2];
    let x = t(
        &noise(48, 4)
            .iter()
            .map(|v| 3.0 * v + 1.0)
            .collect::<Vec<_>>(),
        &dims,
    );
    assert!(bn.is_training());
    let train = vals(&bn.forward(&x).unwrap());
    assert_eq!(
        vals(&train_reference(&x)),
        train,
        "training: the functional op on batch statistics"
    );
    assert_eq!(
        bn.num_batches_tracked().unwrap().values::<i64>().unwrap(),
        [1]
    );
    let (mean, var) = (
        vals(bn.running_mean().unwrap()),
        vals(bn.running_var().unwrap()),
    );
    assert!(mean.iter().all(|m| m.abs() > 0.0));
    bn.eval();
    assert!(!bn.is_training());
    let before = VersionSnapshot::of(bn.running_mean().unwrap());
    let eval = vals(&bn.forward(&x).unwrap());
    let want: Vec<f32> = vals(&x)
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let ch = i / 4 % 3;
            (v - mean[ch]) / (var[ch] + 1e-5).sqrt()
        })
        .collect();
    close(&eval, &want);
    assert_ne!(eval, train);
    assert_eq!(VersionSnapshot::of(bn.running_mean().unwrap()), before);
    assert_eq!(
        bn.num_batches_tracked().unwrap().values::<i64>().unwrap(),
        [1]
    );
    bn.train();
    bn.forward(&x).unwrap();
    assert_eq!(
        bn.num_batches_tracked().unwrap().values::<i64>().unwrap(),
        [2]
    );
    // without running statistics evaluation uses the batch's
    let mut plain = BatchNorm2d::with_options(3, 1e-5, 0.1, false, false).unwrap();
    plain.eval();
    assert_eq!(
        vals(&plain.forward(&x).unwrap()),
        vals(&train_reference(&x))
    );
    assert!(plain.named_tensors().is_empty());
}

/// `batch_norm` of `x` on its batch statistics with weight ones and bias zeros.
fn train_reference(x: &Tensor) -> Tensor {
    let c = x.dims()[1];
    let (w, b) = (t(&vec![1.0; c], &[c]), t(&vec![0.0; c], &[c]));
    batch_norm(x, None, None, Some(&w), Some(&b), true, 0.1, 1e-5).unwrap()
}

/// A model holding the normalisation layers.
#[derive(Module)]
struct Net {
    bn: BatchNorm2d,
    gn: GroupNorm,
}

#[test]
fn batch_norm2d_saves_pytorchs_names_and_initial_values() {
    let bn = BatchNorm2d::new(4).unwrap();
    let names: Vec<String> = bn.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    let buffers = bn.named_buffers();
    let names: Vec<&str> = buffers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["running_mean", "running_var", "num_batches_tracked"]
    );
    assert_eq!(vals(&buffers[0].1), [0.0; 4]);
    assert_eq!(vals(&buffers[1].1), [1.0; 4]);
    assert_eq!(buffers[2].1.values::<i64>().unwrap(), [0]);
    assert_eq!(vals(bn.weight().unwrap()), [1.0; 4]);
    assert_eq!(vals(bn.bias().unwrap()), [0.0; 4]);
    assert_eq!((bn.channels(), bn.eps(), bn.momentum()), (4, 1e-5, 0.1));
    // a model holding it names them under its field, and saves and loads them
    let net = Net {
        bn: BatchNorm2d::new(2).unwrap(),
        gn: GroupNorm::new(1, 2).unwrap(),
    };
    let all: Vec<String> = net.named_tensors().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(
        all,
        [
            "bn.weight",
            "bn.bias",
            "bn.running_mean",
            "bn.running_var",
            "bn.num_batches_tracked",
            "gn.weight",
            "gn.bias"
        ]
    );
    let x = t(&noise(16, 8), &[2, 2, 2, 2]);
    net.bn.forward(&x).unwrap();
    let dir = std::env::temp_dir().join(format!("pool39_bn_{}.safetensors", std::process::id()));
    net.save(&dir).unwrap();
    let mut fresh = Net {
        bn: BatchNorm2d::new(2).unwrap(),
        gn: GroupNorm::new(1, 2).unwrap(),
    };
    fresh.load(&dir).unwrap();
    std::fs::remove_file(&dir).ok();
    assert_eq!(
        vals(fresh.bn.running_mean().unwrap()),
        vals(net.bn.running_mean().unwrap())
    );
    assert_eq!(
        fresh
            .bn
            .num_batches_tracked()
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [1]
    );
}

#[test]
fn bad_inputs_are_errors_of_the_right_kind_that_change_nothing() {
    let x = t(&noise(24, 2), &[2, 3, 4]);
    let (mean, var) = (t(&[0.5, 0.5, 0.5], &[3]), t(&[2.0, 2.0, 2.0], &[3]));
    let snap = || {
        (
            VersionSnapshot::of(&mean),
            VersionSnapshot::of(&var),
            vals(&mean),
            vals(&var),
        )
    };
    let before = snap();
    let short = t(&[1.0, 1.0], &[2]);
    // running statistics, weight or bias of the wrong shape
    let e = batch_norm(&x, Some(&short), Some(&var), None, None, true, 0.1, 1e-5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.to_string().contains("[3]") && e.to_string().contains("[2]"),
        "{e}"
    );
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&mean),
            Some(&short),
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&mean),
            Some(&var),
            Some(&short),
            None,
            true,
            0.1,
            1e-5
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&mean),
            Some(&var),
            None,
            Some(&short),
            false,
            0.1,
            1e-5
        )),
        ErrorKind::Value
    );
    // one running statistic alone, evaluation without them, one value per channel
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&mean),
            None,
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(batch_norm(&x, None, None, None, None, false, 0.1, 1e-5)),
        ErrorKind::Value
    );
    let single = t(&[1.0, 2.0, 3.0], &[1, 3]);
    let e = batch_norm(
        &single,
        Some(&mean),
        Some(&var),
        None,
        None,
        true,
        0.1,
        1e-5,
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("[1, 3]"), "{e}");
    // ranks, eps, momentum
    let flat = t(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!(
        kind(batch_norm(
            &flat,
            Some(&mean),
            Some(&var),
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(group_norm(&flat, 1, None, None, 1e-5)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&mean),
            Some(&var),
            None,
            None,
            true,
            0.1,
            -1.0
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&mean),
            Some(&var),
            None,
            None,
            true,
            f32::NAN,
            1e-5
        )),
        ErrorKind::Value
    );
    // dtypes
    let ints = Tensor::from_vec((0..24).collect::<Vec<i32>>(), shape![2, 3, 4]).unwrap();
    assert_eq!(
        kind(batch_norm(
            &ints,
            Some(&mean),
            Some(&var),
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        ErrorKind::Type
    );
    let int_stats = Tensor::from_vec(vec![0i32; 3], shape![3]).unwrap();
    assert_eq!(
        kind(batch_norm(
            &x,
            Some(&int_stats),
            Some(&var),
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        ErrorKind::Type
    );
    assert_eq!(
        kind(group_norm(&ints, 1, None, None, 1e-5)),
        ErrorKind::Type
    );
    assert_eq!(
        before,
        snap(),
        "a failed batch_norm changed the running statistics"
    );
    // group counts that do not divide the channels
    let e = group_norm(&x, 2, None, None, 1e-5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.to_string().contains('2') && e.to_string().contains('3'),
        "{e}"
    );
    assert_eq!(kind(group_norm(&x, 0, None, None, 1e-5)), ErrorKind::Value);
    assert_eq!(
        kind(group_norm(&x, 3, Some(&short), None, 1e-5)),
        ErrorKind::Value
    );
    assert_eq!(kind(GroupNorm::new(4, 6)), ErrorKind::Value);
    // the layers: wrong channels, rank, options
    let bn = BatchNorm2d::new(2).unwrap();
    let stats = (
        vals(bn.running_mean().unwrap()),
        bn.num_batches_tracked().unwrap().values::<i64>().unwrap(),
    );
    assert_eq!(
        kind(bn.forward(&t(&noise(24, 1), &[2, 3, 2, 2]))),
        ErrorKind::Value
    );
    assert_eq!(kind(bn.forward(&x)), ErrorKind::Value);
    assert_eq!(
        stats,
        (
            vals(bn.running_mean().unwrap()),
            bn.num_batches_tracked().unwrap().values::<i64>().unwrap()
        )
    );
    assert_eq!(kind(BatchNorm2d::new(0)), ErrorKind::Value);
    assert_eq!(
        kind(BatchNorm2d::with_options(2, 1e-5, 1.5, true, true)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(BatchNorm2d::with_options(2, -1.0, 0.1, true, true)),
        ErrorKind::Value
    );
}

#[test]
fn large_inputs_split_over_threads_agree_with_a_plain_loop() {
    let dims = [8, 4, 32, 32];
    let (c, s) = (4, 1024);
    let x = noise(dims.iter().product(), 17);
    let y =
        vals(&batch_norm(&strided(&x, &dims), None, None, None, None, true, 0.1, 1e-5).unwrap());
    for ch in 0..c {
        let of = |n: usize| &x[(n * c + ch) * s..(n * c + ch + 1) * s];
        let all: Vec<f64> = (0..8).flat_map(of).map(|&v| f64::from(v)).collect();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let var = all.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / all.len() as f64;
        for n in 0..8 {
            for (i, &v) in of(n).iter().enumerate() {
                let want = ((f64::from(v) - mean) / (var + 1e-5).sqrt()) as f32;
                assert!((y[(n * c + ch) * s + i] - want).abs() < 1e-4);
            }
        }
    }
    // the gradient of sum(y) through batch statistics is zero for x
    let xt = t(&x, &dims);
    let y = batch_norm(&xt, None, None, None, None, true, 0.1, 1e-5).unwrap();
    y.backward_with(Some(&y.f32_like(vec![1.0; y.size()]).unwrap()), false)
        .unwrap();
    assert!(vals(&xt.grad().unwrap().unwrap())
        .iter()
        .all(|g| g.abs() < 1e-4));
}

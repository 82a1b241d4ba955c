//! The losses of issue 38 item 5 with PyTorch's options (every reduction, class weights with
//! ignore_index and label smoothing, BCE and BCE with logits with weights, L1, smooth L1,
//! Huber, MSE, kl_div, cosine_similarity): forward values and gradients against the numbers
//! PyTorch 2.15 prints (`tests/fixtures/losses/losses.txt`, written by `gen_losses.py` beside
//! it) at edge values, gradcheck of every loss on contiguous and strided inputs, and errors
//! that leave everything as it was.

mod loss_fixture;

use autograd_core::{
    gradcheck, shape, ErrorKind, GradcheckOptions, Result, Tensor, VersionSnapshot,
};
use autograd_ops::{self as ops, CrossEntropyOptions, KlDivReduction, NllLossOptions, Reduction};
use autograd_tests::{kind, strided, t, vals};

use loss_fixture::{check, LOSSES};

#[test]
fn every_loss_matches_pytorch_forward_and_gradient_for_every_reduction_and_edge_value() {
    let lines: Vec<&str> = LOSSES
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("rms_norm") && !l.starts_with("embedding"))
        .collect();
    assert!(lines.len() >= 89, "the fixture lost cases: {}", lines.len());
    for op in [
        "|cross_entropy|",
        "|nll_loss|",
        "|binary_cross_entropy|",
        "|binary_cross_entropy_with_logits|",
        "|l1_loss|",
        "|mse_loss|",
        "|smooth_l1_loss|",
        "|huber_loss|",
        "|kl_div|",
        "|cosine_similarity|",
    ] {
        assert!(lines.iter().any(|l| l.contains(op)), "no case of {op}");
    }
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

type Loss = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

fn ints(v: &[i32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), autograd_core::Shape::from(dims)).unwrap()
}

/// Inputs away from every loss's kinks: logits, probabilities in (0, 1), targets, and
/// differences that stay off 0 and off beta/delta.
const LOGITS: [f32; 12] = [
    0.3, -1.2, 2.1, 0.7, -0.4, 1.6, -2.2, 0.9, 1.1, -0.8, 0.2, -1.5,
];
const PROBS: [f32; 12] = [
    0.2, 0.7, 0.45, 0.9, 0.15, 0.6, 0.35, 0.8, 0.55, 0.3, 0.65, 0.25,
];
const TARGETS: [f32; 12] = [0.1, 0.9, 0.3, 0.6, 0.0, 1.0, 0.5, 0.2, 0.8, 0.4, 0.7, 0.05];
const SHIFTED: [f32; 12] = [
    1.9, -2.6, 0.75, -0.35, 2.4, 0.15, -1.3, 2.2, -0.45, 1.45, -2.9, 0.6,
];

/// Every loss, each with its differentiable operands (`[3, 4]`), for every reduction.
fn losses() -> Vec<(String, Loss, Vec<[f32; 12]>)> {
    let mut all: Vec<(String, Loss, Vec<[f32; 12]>)> = Vec::new();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let w = t(&[0.5, 2.0, 1.0, 1.5], &[4]);
        let tt = ints(&[3, -100, 0], &[3]);
        let opts = CrossEntropyOptions {
            ignore_index: Some(-100),
            label_smoothing: 0.15,
        };
        let (w1, t1) = (w.clone(), tt.clone());
        all.push((
            format!("cross_entropy {r:?}"),
            Box::new(move |v| ops::cross_entropy_with(&v[0], &t1, Some(&w1), opts, r)),
            vec![LOGITS],
        ));
        let (w2, t2) = (w.clone(), tt.clone());
        let nll = NllLossOptions {
            ignore_index: Some(-100),
            reduction: r,
        };
        all.push((
            format!("nll_loss {r:?}"),
            Box::new(move |v| ops::nll_loss_with(&v[0], &t2, Some(&w2), nll)),
            vec![LOGITS],
        ));
        all.push((
            format!("binary_cross_entropy {r:?}"),
            Box::new(move |v| ops::binary_cross_entropy(&v[0], &v[1], Some(&v[2]), r)),
            vec![PROBS, TARGETS, PROBS],
        ));
        all.push((
            format!("binary_cross_entropy_with_logits {r:?}"),
            Box::new(move |v| {
                ops::binary_cross_entropy_with_logits(&v[0], &v[1], Some(&v[2]), Some(&v[3]), r)
            }),
            vec![LOGITS, TARGETS, PROBS, SHIFTED.map(f32::abs)],
        ));
        all.push((
            format!("l1_loss {r:?}"),
            Box::new(move |v| ops::l1_loss(&v[0], &v[1], r)),
            vec![SHIFTED, LOGITS],
        ));
        all.push((
            format!("mse_loss {r:?}"),
            Box::new(move |v| ops::mse_loss_with(&v[0], &v[1], r)),
            vec![SHIFTED, LOGITS],
        ));
        all.push((
            format!("smooth_l1_loss {r:?}"),
            Box::new(move |v| ops::smooth_l1_loss(&v[0], &v[1], 0.9, r)),
            vec![SHIFTED, LOGITS],
        ));
        all.push((
            format!("huber_loss {r:?}"),
            Box::new(move |v| ops::huber_loss(&v[0], &v[1], 1.7, r)),
            vec![SHIFTED, LOGITS],
        ));
        for (log_target, target) in [(false, PROBS), (true, LOGITS)] {
            all.push((
                format!("kl_div {r:?} log_target {log_target}"),
                Box::new(move |v| ops::kl_div(&v[0], &v[1], r.into(), log_target)),
                vec![LOGITS, target],
            ));
        }
        all.push((
            format!("kl_div batchmean {r:?}"),
            Box::new(move |v| ops::kl_div(&v[0], &v[1], KlDivReduction::BatchMean, false)),
            vec![LOGITS, PROBS],
        ));
    }
    all.push((
        "cosine_similarity".into(),
        Box::new(|v| ops::cosine_similarity(&v[0], &v[1], 1, 1e-8)),
        vec![LOGITS, SHIFTED],
    ));
    all.push((
        "cosine_similarity dim 0".into(),
        Box::new(|v| ops::cosine_similarity(&v[0], &v[1], 0, 1e-8)),
        vec![LOGITS, SHIFTED],
    ));
    all
}

#[test]
fn every_loss_passes_gradcheck_on_contiguous_and_strided_inputs() {
    for (name, loss, points) in losses() {
        for (layout, make) in [
            ("contiguous", t as fn(&[f32], &[usize]) -> Tensor),
            ("strided", strided),
        ] {
            let inputs: Vec<Tensor> = points.iter().map(|p| make(p, &[3, 4])).collect();
            let report = gradcheck(|v: &[Tensor]| loss(v), &inputs, GradcheckOptions::default());
            assert!(report.is_ok(), "{name} on {layout}: {report:?}");
        }
    }
}

#[test]
fn cosine_similarity_broadcasts_and_its_broadcast_operand_sums_its_gradient() {
    let a = t(&LOGITS, &[3, 4]);
    let b = t(&SHIFTED[..4], &[4]);
    let y = ops::cosine_similarity(&a, &b, 1, 1e-8).unwrap();
    assert_eq!(y.dims(), [3]);
    // a plain-loop reference of every row
    for (k, got) in vals(&y).iter().enumerate() {
        let row = &LOGITS[4 * k..4 * k + 4];
        let dot: f32 = row.iter().zip(&SHIFTED[..4]).map(|(x, y)| x * y).sum();
        let na = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        let nb = SHIFTED[..4].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((got - dot / (na * nb)).abs() < 1e-6, "row {k}");
    }
    let report = gradcheck(
        |v: &[Tensor]| ops::cosine_similarity(&v[0], &v[1], 1, 1e-8),
        &[a, b],
        GradcheckOptions::default(),
    );
    assert!(report.is_ok(), "{report:?}");
}

#[test]
fn the_old_signatures_are_the_mean_of_the_new_ones() {
    let x = t(&LOGITS, &[3, 4]);
    let tt = ints(&[1, 2, 0], &[3]);
    let opts = CrossEntropyOptions::default();
    let a = ops::cross_entropy(&x, &tt, opts).unwrap();
    let b = ops::cross_entropy_with(&x, &tt, None, opts, Reduction::Mean).unwrap();
    let rows = ops::cross_entropy_with(&x, &tt, None, opts, Reduction::None).unwrap();
    assert_eq!(vals(&a), vals(&b));
    let mean = vals(&rows).iter().sum::<f32>() / 3.0;
    assert!((vals(&a)[0] - mean).abs() < 1e-6);
    let lp = ops::log_softmax(&x, 1).unwrap();
    let n = ops::nll_loss(&lp, &tt, None).unwrap();
    assert!((vals(&n)[0] - vals(&a)[0]).abs() < 1e-6);
    let y = t(&SHIFTED, &[3, 4]);
    assert_eq!(
        vals(&ops::mse_loss(&x, &y).unwrap()),
        vals(&ops::mse_loss_with(&x, &y, Reduction::default()).unwrap())
    );
}

/// Asserts that a failed call left `x` as it was: its values, its version and no gradient.
fn unchanged(x: &Tensor, before: &VersionSnapshot, values: &[f32]) {
    assert_eq!(&VersionSnapshot::of(x), before);
    assert_eq!(vals(x), values);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn bad_operands_are_value_and_type_errors_that_change_nothing() {
    use ErrorKind::{Type, Value};
    let x = t(&LOGITS, &[3, 4]);
    let p = t(&PROBS, &[3, 4]);
    let before = VersionSnapshot::of(&x);
    let short = t(&LOGITS[..8], &[2, 4]);
    let doubles = Tensor::from_vec(vec![0.5f64; 12], shape![3, 4]).unwrap();
    let r = Reduction::Mean;
    // shape mismatches
    assert_eq!(kind(ops::l1_loss(&x, &short, r)), Value);
    assert_eq!(kind(ops::mse_loss_with(&x, &short, r)), Value);
    assert_eq!(kind(ops::smooth_l1_loss(&x, &short, 1.0, r)), Value);
    assert_eq!(kind(ops::huber_loss(&x, &short, 1.0, r)), Value);
    assert_eq!(kind(ops::binary_cross_entropy(&p, &short, None, r)), Value);
    assert_eq!(
        kind(ops::binary_cross_entropy_with_logits(
            &x, &short, None, None, r
        )),
        Value
    );
    assert_eq!(
        kind(ops::kl_div(&x, &short, KlDivReduction::Sum, false)),
        Value
    );
    assert_eq!(kind(ops::cosine_similarity(&x, &short, 1, 1e-8)), Value);
    assert_eq!(kind(ops::cosine_similarity(&x, &x, 2, 1e-8)), Value);
    // wrong dtypes
    assert_eq!(kind(ops::l1_loss(&x, &doubles, r)), Type);
    assert_eq!(kind(ops::binary_cross_entropy(&doubles, &p, None, r)), Type);
    assert_eq!(
        kind(ops::kl_div(&doubles, &x, KlDivReduction::Sum, true)),
        Type
    );
    assert_eq!(kind(ops::cosine_similarity(&x, &doubles, 1, 1e-8)), Type);
    // weights of the wrong length or dtype
    let tt = ints(&[1, 2, 0], &[3]);
    let (w3, w4d) = (
        t(&[1.0; 3], &[3]),
        Tensor::from_vec(vec![1.0f64; 4], shape![4]).unwrap(),
    );
    let opts = CrossEntropyOptions::default();
    assert_eq!(
        kind(ops::cross_entropy_with(&x, &tt, Some(&w3), opts, r)),
        Value
    );
    assert_eq!(
        kind(ops::cross_entropy_with(&x, &tt, Some(&w4d), opts, r)),
        Type
    );
    let nll = NllLossOptions::default();
    assert_eq!(kind(ops::nll_loss_with(&x, &tt, Some(&w3), nll)), Value);
    assert_eq!(kind(ops::binary_cross_entropy(&p, &p, Some(&w3), r)), Value);
    assert_eq!(
        kind(ops::binary_cross_entropy_with_logits(
            &x,
            &p,
            None,
            Some(&w3),
            r
        )),
        Value
    );
    assert_eq!(
        kind(ops::binary_cross_entropy_with_logits(
            &x,
            &p,
            Some(&w4d),
            None,
            r
        )),
        Type
    );
    // bad values: probabilities outside [0, 1], a negative beta, a zero delta, a bad eps
    let outside = t(&LOGITS, &[3, 4]);
    assert_eq!(
        kind(ops::binary_cross_entropy(&outside, &p, None, r)),
        Value
    );
    assert_eq!(kind(ops::smooth_l1_loss(&x, &p, -1.0, r)), Value);
    assert_eq!(kind(ops::huber_loss(&x, &p, 0.0, r)), Value);
    assert_eq!(kind(ops::cosine_similarity(&x, &p, 1, f32::NAN)), Value);
    unchanged(&x, &before, &LOGITS);
    // and the ops still run
    assert!(ops::binary_cross_entropy(&p, &p, None, r).is_ok());
}

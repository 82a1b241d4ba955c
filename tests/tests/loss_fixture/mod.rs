//! The fixture of `tests/fixtures/losses/` (PyTorch 2.15's losses, `rms_norm` and the embedding
//! lookup, written by
//! `gen_losses.py`) and the check of one of its lines, shared by `ops_losses.rs` and
//! `ops_norms.rs`.

use autograd_core::{grad, GradOptions, Result, Tensor};
use autograd_ops::{
    self as ops, CrossEntropyOptions, Embedding, EmbeddingOptions, KlDivReduction, NllLossOptions,
    Reduction,
};
use autograd_tests::fixture::{floats, mismatches, operand, Tolerance};
use autograd_tests::{t, vals};

/// PyTorch's numbers, one case a line (shared with `ops_norms.rs`).
pub const LOSSES: &str = include_str!("../../fixtures/losses/losses.txt");

/// The `key=value` words of a fixture's params field.
fn param<'a>(params: &'a str, key: &str) -> Option<&'a str> {
    params
        .split(' ')
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn number(params: &str, key: &str) -> f32 {
    param(params, key)
        .unwrap_or_else(|| panic!("a {key} param"))
        .parse()
        .expect("a number")
}

fn reduction(params: &str) -> Reduction {
    match param(params, "reduction") {
        Some("mean") => Reduction::Mean,
        Some("sum") => Reduction::Sum,
        Some("none") => Reduction::None,
        other => panic!("a reduction, got {other:?}"),
    }
}

/// Class targets written as floats.
fn classes(x: &Tensor) -> Tensor {
    let v: Vec<i32> = vals(x).iter().map(|&c| c as i32).collect();
    Tensor::from_vec(v, autograd_core::Shape::from(x.dims())).expect("targets")
}

/// Runs the fixture's op on our side; `x` holds the present operands in order.
fn run(op: &str, p: &str, x: &[Option<Tensor>]) -> Result<Tensor> {
    let a = x[0].as_ref().expect("an input");
    let b = x[1].as_ref();
    let (c, d) = (x[2].as_ref(), x[3].as_ref());
    let ignore = param(p, "ignore").map(|v| v.parse::<i32>().expect("an index"));
    match op {
        "cross_entropy" => {
            let options = CrossEntropyOptions {
                ignore_index: ignore,
                label_smoothing: number(p, "smoothing"),
            };
            let tt = classes(b.expect("targets"));
            ops::cross_entropy_with(a, &tt, c, options, reduction(p))
        }
        "nll_loss" => {
            let options = NllLossOptions {
                ignore_index: ignore,
                reduction: reduction(p),
            };
            ops::nll_loss_with(a, &classes(b.expect("targets")), c, options)
        }
        "binary_cross_entropy" => {
            ops::binary_cross_entropy(a, b.expect("a target"), c, reduction(p))
        }
        "binary_cross_entropy_with_logits" => {
            ops::binary_cross_entropy_with_logits(a, b.expect("a target"), c, d, reduction(p))
        }
        "l1_loss" => ops::l1_loss(a, b.expect("a target"), reduction(p)),
        "mse_loss" => ops::mse_loss_with(a, b.expect("a target"), reduction(p)),
        "smooth_l1_loss" => {
            ops::smooth_l1_loss(a, b.expect("a target"), number(p, "beta"), reduction(p))
        }
        "huber_loss" => ops::huber_loss(a, b.expect("a target"), number(p, "delta"), reduction(p)),
        "kl_div" => {
            let r = match param(p, "reduction") {
                Some("batchmean") => KlDivReduction::BatchMean,
                _ => reduction(p).into(),
            };
            ops::kl_div(a, b.expect("a target"), r, number(p, "log_target") != 0.0)
        }
        "cosine_similarity" => ops::cosine_similarity(
            a,
            b.expect("b"),
            number(p, "dim") as usize,
            number(p, "eps"),
        ),
        "rms_norm" => {
            let dims = a.dims();
            let k = number(p, "k") as usize;
            let eps = match param(p, "eps") {
                Some("none") => None,
                _ => Some(number(p, "eps")),
            };
            ops::rms_norm(a, &dims[dims.len() - k..], b, eps)
        }
        "embedding" => {
            let options = EmbeddingOptions {
                padding_idx: param(p, "padding").map(|v| v.parse().expect("a row")),
                max_norm: param(p, "max_norm").map(|_| number(p, "max_norm")),
                norm_type: param(p, "norm_type").map_or(2.0, |_| number(p, "norm_type")),
            };
            // the table holds the operand itself, so a renormalisation writes into it
            let table = Embedding::from_weight_with_options(a.clone(), options)?;
            table.forward(&classes(b.expect("ids")))
        }
        other => panic!("the fixture names an op this test does not know: {other}"),
    }
}

/// How close to PyTorch's values ours must be (NaN matching NaN, an infinity itself):
/// 2e-5 relative or 2e-6 absolute (the losses sum in another order than PyTorch).
const TOL: Tolerance = Tolerance {
    abs: 2e-6,
    rel: 2e-5,
};

/// Every difference between our forward value and gradients and PyTorch's on one line.
pub fn check(line: &str) -> Vec<String> {
    let f: Vec<&str> = line.split('|').collect();
    assert_eq!(f.len(), 13, "a fixture line has 13 fields: {line}");
    let (label, op, p) = (f[0], f[1], f[2]);
    let inputs: Vec<Option<Tensor>> = f[3..7]
        .iter()
        .map(|s| operand(s).map(|(dims, v)| t(&v, &dims)))
        .collect();
    let y = run(op, p, &inputs).unwrap_or_else(|e| panic!("{label}: {e}"));
    let (out_dims, out) = operand(f[8]).expect("an output");
    let mut wrong = mismatches(label, "output", &vals(&y), &out, TOL);
    if !out_dims.is_empty() && y.dims() != out_dims {
        wrong.push(format!(
            "{label}: dims {:?}, PyTorch {out_dims:?}",
            y.dims()
        ));
    }
    // the operands PyTorch differentiates, with their fields
    let wanted: Vec<(usize, &Tensor)> = (0..4)
        .filter(|&j| !f[9 + j].is_empty())
        .map(|j| (j, inputs[j].as_ref().expect("a differentiated operand")))
        .collect();
    let refs: Vec<&Tensor> = wanted.iter().map(|w| w.1).collect();
    let cot = t(&floats(f[7]), &y.dims());
    let grads = grad(&y, &refs, &cot, GradOptions::default()).expect("the gradient runs");
    for ((j, _), g) in wanted.iter().zip(&grads) {
        let theirs = floats(f[9 + j]);
        let ours = g.as_ref().map_or_else(|| vec![0.0; theirs.len()], vals);
        wrong.extend(mismatches(label, &format!("grad {j}"), &ours, &theirs, TOL));
    }
    wrong
}

//! The cases of `tests/fixtures/pool/pool.txt` (printed by `gen_pool.py` beside it with
//! PyTorch 2.15): each line runs our op on PyTorch's input and compares the forward values,
//! the indices, the gradients for PyTorch's cotangent and the running statistics after the
//! call. Shared by `ops_pool.rs` and `ops_batch_norm.rs`.

use autograd_core::{grad, GradOptions, Tensor};
use autograd_ops::{
    adaptive_avg_pool2d, avg_pool2d, batch_norm, group_norm, interpolate, max_pool2d_with_indices,
    Interpolation, Pool2dOptions,
};
use autograd_tests::fixture::{floats, mismatches, numbers, Tolerance};
use autograd_tests::{t, vals};

/// The fixture file.
pub const POOL: &str = include_str!("../../fixtures/pool/pool.txt");

/// Float32 agreement: a few ulps of the values involved.
const TOL: Tolerance = Tolerance {
    abs: 2e-5,
    rel: 2e-5,
};

/// The `key=value` parameter `key` of a case.
fn param<'a>(params: &'a str, key: &str) -> &'a str {
    params
        .split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("fixture params {params:?} lack {key}"))
}

fn pair(params: &str, key: &str) -> [usize; 2] {
    let v: Vec<usize> = param(params, key)
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    [v[0], v[1]]
}

fn flag(params: &str, key: &str) -> bool {
    param(params, key) == "1"
}

/// An optional per-channel tensor from a field (none when empty).
fn optional(field: &str) -> Option<Tensor> {
    (!field.is_empty()).then(|| {
        let v = floats(field);
        let n = v.len();
        t(&v, &[n])
    })
}

/// Every disagreement of our op with PyTorch on one fixture line (empty when it agrees).
pub fn check(line: &str) -> Vec<String> {
    let f: Vec<&str> = line.split('|').collect();
    let [label, op, params, dims, input, out_dims, output, cotangent, gx, idx, w, b, gw, gb, rm, rv, rm2, rv2] =
        f[..]
    else {
        panic!("a fixture line has 18 fields: {line}");
    };
    let x = t(&floats(input), &numbers::<usize>(dims));
    let (w, b) = (optional(w), optional(b));
    let (rm, rv) = (optional(rm), optional(rv));
    let mut wrong = Vec::new();
    let y = match op {
        "max_pool2d" => {
            let o = Pool2dOptions::new()
                .stride(pair(params, "s"))
                .padding(pair(params, "p"))
                .dilation(pair(params, "d"))
                .ceil_mode(flag(params, "ceil"));
            let (y, at) = max_pool2d_with_indices(&x, pair(params, "k"), &o).unwrap();
            if at.values::<i64>().unwrap() != numbers::<i64>(idx) {
                wrong.push(format!("{label}: indices differ"));
            }
            y
        }
        "avg_pool2d" => {
            let o = Pool2dOptions::new()
                .stride(pair(params, "s"))
                .padding(pair(params, "p"))
                .ceil_mode(flag(params, "ceil"))
                .count_include_pad(flag(params, "cip"));
            avg_pool2d(&x, pair(params, "k"), &o).unwrap()
        }
        "adaptive_avg_pool2d" => adaptive_avg_pool2d(&x, pair(params, "out")).unwrap(),
        "interpolate" => {
            let mode = match param(params, "mode") {
                "nearest" => Interpolation::Nearest,
                _ => Interpolation::Bilinear {
                    align_corners: flag(params, "ac"),
                },
            };
            interpolate(&x, pair(params, "size"), mode).unwrap()
        }
        "batch_norm" => batch_norm(
            &x,
            rm.as_ref(),
            rv.as_ref(),
            w.as_ref(),
            b.as_ref(),
            flag(params, "train"),
            param(params, "m").parse().unwrap(),
            param(params, "eps").parse().unwrap(),
        )
        .unwrap(),
        "group_norm" => group_norm(
            &x,
            param(params, "groups").parse().unwrap(),
            w.as_ref(),
            b.as_ref(),
            param(params, "eps").parse().unwrap(),
        )
        .unwrap(),
        other => panic!("unknown op {other}"),
    };
    assert_eq!(
        y.dims(),
        numbers::<usize>(out_dims),
        "{label}: output shape"
    );
    wrong.extend(mismatches(label, "output", &vals(&y), &floats(output), TOL));
    for (what, mine, theirs) in [("running_mean", &rm, rm2), ("running_var", &rv, rv2)] {
        if let Some(mine) = mine {
            wrong.extend(mismatches(label, what, &vals(mine), &floats(theirs), TOL));
        }
    }
    // gradients for PyTorch's cotangent, of x and of the affine parameters present
    let mut wrt: Vec<&Tensor> = vec![&x];
    wrt.extend(w.iter().chain(b.iter()));
    let g = t(&floats(cotangent), &y.dims());
    let grads = grad(&y, &wrt, &g, GradOptions::default()).unwrap();
    let want = [gx, gw, gb];
    for (k, (got, theirs)) in grads.iter().zip(want).enumerate() {
        let got = got.as_ref().expect("a gradient");
        let what = ["input grad", "weight grad", "bias grad"][k];
        // the norms' gradients subtract near-equal sums: a looser absolute tolerance
        let tol = Tolerance {
            abs: 2e-4,
            rel: 1e-3,
        };
        wrong.extend(mismatches(label, what, &vals(got), &floats(theirs), tol));
    }
    wrong
}

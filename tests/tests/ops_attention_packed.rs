//! Causal self-attention over a packed projection `[B, T, 3C]` (`flash_causal_attention_qkv`):
//! the values and gradients of `flash_causal_attention` on the three head views with the heads
//! merged back, on shapes whose T spans blocks raggedly, on a strided `qkv`, by central
//! differences, and bad input that is an error and changes nothing.

use autograd_core::{grad, gradcheck, ErrorKind, GradOptions, GradcheckOptions, Tensor};
use autograd_ops::{flash_causal_attention, flash_causal_attention_qkv, permute, reshape};
use autograd_tests::{close, kind, noise, t, vals};

/// The same attention composed from views: q, k and v narrowed from `qkv`, each viewed as
/// `[B, H, T, D]`, `flash_causal_attention`, and the heads merged back into `[B, T, C]`.
fn composed(qkv: &Tensor, heads: usize, scale: Option<f32>) -> Tensor {
    let dims = qkv.dims();
    let (b, n, c) = (dims[0], dims[1], dims[2] / 3);
    let part = |i: usize| {
        let x = qkv.narrow(2, i * c, c).unwrap();
        permute(
            &reshape(&x, &[b, n, heads, c / heads]).unwrap(),
            &[0, 2, 1, 3],
        )
        .unwrap()
    };
    let o = flash_causal_attention(&part(0), &part(1), &part(2), scale).unwrap();
    reshape(&permute(&o, &[0, 2, 1, 3]).unwrap(), &[b, n, c]).unwrap()
}

fn gradient(output: &Tensor, input: &Tensor, cotangent: &Tensor) -> Vec<f32> {
    let g = grad(output, &[input], cotangent, GradOptions::default()).unwrap();
    vals(g[0].as_ref().expect("a gradient"))
}

#[test]
fn values_and_gradients_match_the_composed_views() {
    // T = 70 spans a whole block and a ragged one; D = 5 and 3 are not whole vectors
    for (b, n, heads, d, scale) in [
        (2, 70, 3, 5, None),
        (1, 5, 1, 3, Some(0.7)),
        (3, 33, 4, 8, None),
    ] {
        let c = heads * d;
        let qkv = t(&noise(b * n * 3 * c, 5), &[b, n, 3 * c]);
        let got = flash_causal_attention_qkv(&qkv, heads, scale).unwrap();
        let want = composed(&qkv, heads, scale);
        assert_eq!(got.dims(), [b, n, c]);
        close("context", &vals(&got), &vals(&want), 1e-5);
        let cotangent = t(&noise(b * n * c, 6), &[b, n, c]);
        close(
            "gradient of qkv",
            &gradient(&got, &qkv, &cotangent),
            &gradient(&want, &qkv, &cotangent),
            1e-5,
        );
    }
}

#[test]
fn a_strided_qkv_and_cotangent_give_the_compact_results() {
    let (b, n, heads, d) = (2, 40, 2, 4);
    let c = heads * d;
    let values = noise(b * n * 3 * c, 7);
    let qkv = t(&values, &[b, n, 3 * c]);
    // the same values stored [3C, T, B] and viewed back as [B, T, 3C]
    let mut stored = vec![0.0f32; values.len()];
    for (p, &x) in values.iter().enumerate() {
        let (bi, ti, fi) = (p / (n * 3 * c), p / (3 * c) % n, p % (3 * c));
        stored[(fi * n + ti) * b + bi] = x;
    }
    let view = t(&stored, &[3 * c, n, b]);
    let view_t = permute(&view, &[2, 1, 0]).unwrap();
    assert!(!view_t.layout().is_row_major_contiguous());
    assert_eq!(vals(&view_t), values);
    let got = flash_causal_attention_qkv(&view_t, heads, None).unwrap();
    let want = flash_causal_attention_qkv(&qkv, heads, None).unwrap();
    assert_eq!(vals(&got), vals(&want));
    // the cotangent reaches the context as a transposed view (through a permute after it)
    let cotangent = t(&noise(b * n * c, 8), &[c * n * b]);
    let after = |o: &Tensor| reshape(&permute(o, &[2, 1, 0]).unwrap(), &[c * n * b]).unwrap();
    // the leaf holds the values as [3C, T, B]: its gradient is the compact one reordered so
    let compact = gradient(&after(&want), &qkv, &cotangent);
    let mut reordered = vec![0.0f32; compact.len()];
    for (p, &x) in compact.iter().enumerate() {
        let (bi, ti, fi) = (p / (n * 3 * c), p / (3 * c) % n, p % (3 * c));
        reordered[(fi * n + ti) * b + bi] = x;
    }
    close(
        "gradient through views",
        &gradient(&after(&got), &view, &cotangent),
        &reordered,
        1e-6,
    );
}

#[test]
fn gradcheck_of_the_packed_form() {
    let qkv = t(&noise(2 * 5 * 12, 9), &[2, 5, 12]);
    gradcheck(
        |x| flash_causal_attention_qkv(&x[0], 2, None),
        &[qkv],
        GradcheckOptions::default(),
    )
    .unwrap();
    // two blocks and a scale of its own
    let qkv = t(&noise(35 * 6, 10), &[1, 35, 6]);
    gradcheck(
        |x| flash_causal_attention_qkv(&x[0], 1, Some(0.5)),
        &[qkv],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn empty_batches_and_sequences_give_empty_results_and_gradients() {
    for dims in [[0usize, 4, 6], [2, 0, 6]] {
        let qkv = t(&[], &dims);
        let o = flash_causal_attention_qkv(&qkv, 2, None).unwrap();
        assert_eq!(o.dims(), [dims[0], dims[1], 2]);
        let g = gradient(&o, &qkv, &t(&[], &[dims[0], dims[1], 2]));
        assert!(g.is_empty());
    }
}

#[test]
fn bad_input_is_an_error_of_the_right_kind_and_changes_nothing() {
    let qkv = t(&noise(2 * 3 * 12, 11), &[2, 3, 12]);
    let before = vals(&qkv);
    // rank, no head, a width that is not 3 x heads x D, an empty width
    let flat = t(&before, &[72]);
    assert_eq!(
        kind(flash_causal_attention_qkv(&flat, 2, None)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(flash_causal_attention_qkv(&qkv, 0, None)),
        ErrorKind::Value
    );
    assert_eq!(
        kind(flash_causal_attention_qkv(&qkv, 3, None)),
        ErrorKind::Value
    );
    let narrow = t(&noise(2 * 3 * 10, 12), &[2, 3, 10]);
    assert_eq!(
        kind(flash_causal_attention_qkv(&narrow, 1, None)),
        ErrorKind::Value
    );
    let empty = t(&[], &[2, 3, 0]);
    assert_eq!(
        kind(flash_causal_attention_qkv(&empty, 1, None)),
        ErrorKind::Value
    );
    // a scale that is not finite; a dtype other than Float32
    assert_eq!(
        kind(flash_causal_attention_qkv(&qkv, 2, Some(f32::NAN))),
        ErrorKind::Value
    );
    let doubles = qkv.to_dtype(&autograd_core::DType::Float64).unwrap();
    assert_eq!(
        kind(flash_causal_attention_qkv(&doubles, 2, None)),
        ErrorKind::Type
    );
    assert_eq!(vals(&qkv), before);
    assert!(qkv.grad().unwrap().is_none());
}

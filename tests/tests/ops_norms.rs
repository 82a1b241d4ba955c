//! The normalisation and lookup layers of issue 38 item 6: `rms_norm` and the embedding lookup
//! against the numbers PyTorch 2.15 prints (`tests/fixtures/losses/losses.txt`, rows
//! `rms_norm_*` and `embedding_*`, written by `gen_losses.py`), against a plain loop, and by
//! gradcheck on contiguous and strided inputs; the `RmsNorm` module; `Embedding`'s padding row
//! and max-norm renormalisation; and errors that leave everything as it was.

mod loss_fixture;

use autograd_core::{
    gradcheck, shape, DType, ErrorKind, GradcheckOptions, Rng, Tensor, VersionSnapshot,
};
use autograd_ops::{rms_norm, Embedding, EmbeddingOptions, Module, RmsNorm};
use autograd_tests::{grad_vals, kind, noise, strided, t, vals};

use loss_fixture::{check, LOSSES};

#[test]
fn rms_norm_matches_pytorch_forward_and_gradient_with_and_without_weight_and_eps() {
    let lines: Vec<&str> = LOSSES
        .lines()
        .filter(|l| l.starts_with("rms_norm"))
        .collect();
    assert_eq!(lines.len(), 5, "the fixture lost rms_norm cases");
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn rms_norm_agrees_with_a_plain_loop() {
    let (rows, n) = (5, 6);
    let x = noise(rows * n, 3);
    let w = noise(n, 4);
    let y = vals(&rms_norm(&t(&x, &[rows, n]), &[n], Some(&t(&w, &[n])), Some(1e-5)).unwrap());
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let ms = row.iter().map(|v| f64::from(v * v)).sum::<f64>() / n as f64;
        let inv = 1.0 / (ms + 1e-5).sqrt();
        for c in 0..n {
            let want = f64::from(row[c]) * inv * f64::from(w[c]);
            assert!((f64::from(y[r * n + c]) - want).abs() < 1e-6, "[{r}, {c}]");
        }
    }
}

#[test]
fn rms_norm_passes_gradcheck_on_contiguous_and_strided_inputs() {
    let x = noise(24, 5);
    let w: Vec<f32> = noise(12, 6).iter().map(|v| v + 1.0).collect();
    for (layout, make) in [
        ("contiguous", t as fn(&[f32], &[usize]) -> Tensor),
        ("strided", strided),
    ] {
        let inputs = [make(&x, &[2, 3, 4]), make(&w, &[3, 4])];
        let report = gradcheck(
            |v: &[Tensor]| rms_norm(&v[0], &[3, 4], Some(&v[1]), Some(1e-5)),
            &inputs,
            GradcheckOptions::default(),
        );
        assert!(
            report.is_ok(),
            "rms_norm with a weight on {layout}: {report:?}"
        );
        let report = gradcheck(
            |v: &[Tensor]| rms_norm(&v[0], &[4], None, None),
            &inputs[..1],
            GradcheckOptions::default(),
        );
        assert!(
            report.is_ok(),
            "rms_norm without a weight on {layout}: {report:?}"
        );
    }
}

#[test]
fn rms_norm_layer_is_a_module_whose_weight_learns() {
    let norm = RmsNorm::new(&[4], Some(1e-6)).unwrap();
    let names: Vec<String> = norm
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["weight"]);
    assert_eq!(vals(norm.weight()), [1.0; 4]);
    let x = t(&noise(8, 7), &[2, 4]);
    let y = norm.forward(&x).unwrap();
    assert_eq!(
        vals(&y),
        vals(&rms_norm(&x, &[4], None, Some(1e-6)).unwrap())
    );
    autograd_ops::sum(&y).unwrap().backward().unwrap();
    let g = grad_vals(norm.weight()).expect("the weight's gradient");
    // d sum(x r w) / dw = sum over rows of x r
    let xh = vals(&rms_norm(&x, &[4], None, Some(1e-6)).unwrap());
    for c in 0..4 {
        assert!((g[c] - (xh[c] + xh[4 + c])).abs() < 1e-6, "column {c}");
    }
    assert_eq!(norm.parameters().len(), 1);
    assert_eq!(norm.normalized_shape(), [4]);
    assert_eq!(RmsNorm::new(&[4], None).unwrap().eps(), None);
}

#[test]
fn rms_norm_errors_are_value_and_type_errors_that_change_nothing() {
    use ErrorKind::{Type, Value};
    let x = t(&noise(8, 8), &[2, 4]);
    let before = VersionSnapshot::of(&x);
    assert_eq!(kind(rms_norm(&x, &[3], None, None)), Value);
    assert_eq!(kind(rms_norm(&x, &[], None, None)), Value);
    assert_eq!(
        kind(rms_norm(&x, &[4], Some(&t(&[1.0; 3], &[3])), None)),
        Value
    );
    assert_eq!(kind(rms_norm(&x, &[4], None, Some(-1.0))), Value);
    assert_eq!(kind(rms_norm(&x, &[4], None, Some(f32::NAN))), Value);
    let doubles = Tensor::from_vec(vec![1.0f64; 8], shape![2, 4]).unwrap();
    assert_eq!(kind(rms_norm(&doubles, &[4], None, None)), Type);
    let w64 = Tensor::from_vec(vec![1.0f64; 4], shape![4]).unwrap();
    assert_eq!(kind(rms_norm(&x, &[4], Some(&w64), None)), Type);
    assert_eq!(kind(RmsNorm::new(&[], None)), Value);
    assert_eq!(kind(RmsNorm::new(&[4], Some(-0.5))), Value);
    assert_eq!(VersionSnapshot::of(&x), before);
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn embedding_padding_and_max_norm_match_pytorch_forward_and_gradient() {
    let lines: Vec<&str> = LOSSES
        .lines()
        .filter(|l| l.starts_with("embedding"))
        .collect();
    assert_eq!(lines.len(), 3, "the fixture lost embedding cases");
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

fn ids(v: &[i32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), autograd_core::Shape::from(dims)).unwrap()
}

#[test]
fn embedding_padding_row_starts_at_zero_and_takes_no_gradient() {
    let opts = EmbeddingOptions {
        padding_idx: Some(2),
        ..EmbeddingOptions::default()
    };
    let table = Embedding::with_options(4, 3, opts, &mut Rng::new(1)).unwrap();
    let w = vals(table.weight());
    assert_eq!(w[6..9], [0.0; 3]);
    assert!(w[..6].iter().chain(&w[9..]).all(|&v| v != 0.0));
    let y = table.forward(&ids(&[2, 1, 2, 1, 0], &[5])).unwrap();
    assert_eq!(vals(&y)[..3], [0.0; 3]);
    let g = noise(15, 9);
    let gt = t(&g, &[5, 3]);
    autograd_ops::sum(&autograd_ops::mul(&y, &gt).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let dw = grad_vals(table.weight()).expect("the table's gradient");
    for c in 0..3 {
        assert!((dw[c] - g[12 + c]).abs() < 1e-6, "row 0");
        assert!((dw[3 + c] - (g[3 + c] + g[9 + c])).abs() < 1e-6, "row 1");
        assert_eq!(dw[6 + c], 0.0, "the padding row");
        assert_eq!(dw[9 + c], 0.0, "row 3 is not looked up");
    }
    // `new` and `from_weight` keep working, without options
    let plain = Embedding::new(4, 3, &mut Rng::new(1)).unwrap();
    assert_eq!(plain.options(), EmbeddingOptions::default());
    assert!(vals(plain.weight())[6..9].iter().all(|&v| v != 0.0));
    let pretrained = Embedding::from_weight_with_options(
        t(&[1.0; 6], &[2, 3]),
        EmbeddingOptions {
            padding_idx: Some(0),
            ..EmbeddingOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        vals(pretrained.weight()),
        [1.0; 6],
        "from_weight keeps the padding row"
    );
}

#[test]
fn embedding_max_norm_renormalises_the_referenced_rows_in_place_and_bumps_the_version() {
    let w0 = [3.0f32, 4.0, 0.3, 0.4, 6.0, 8.0, 0.0, 10.0];
    let weight = t(&w0, &[4, 2]);
    let opts = EmbeddingOptions {
        max_norm: Some(1.0),
        ..EmbeddingOptions::default()
    };
    let table = Embedding::from_weight_with_options(weight.clone(), opts).unwrap();
    // a graph recorded before the renormalisation
    let earlier = table.forward(&ids(&[1], &[1])).unwrap();
    let before = VersionSnapshot::of(&weight);
    let y = table.forward(&ids(&[0, 1, 0, 2], &[2, 2])).unwrap();
    assert_ne!(
        VersionSnapshot::of(&weight),
        before,
        "the renormalisation is a write"
    );
    let w = vals(&weight);
    // rows 0 and 2 (norms 5 and 10) are scaled to norm 1 over norm + 1e-7; row 1 (0.5) and the
    // unreferenced row 3 stay
    for (r, norm) in [(0usize, 5.0f64), (2, 10.0)] {
        for c in 0..2 {
            let want = f64::from(w0[2 * r + c]) * (1.0 / (norm + 1e-7));
            assert!((f64::from(w[2 * r + c]) - want).abs() < 1e-7, "row {r}");
        }
    }
    assert_eq!(w[2..4], w0[2..4]);
    assert_eq!(w[6..], w0[6..]);
    assert_eq!(vals(&y)[..2], w[..2]);
    // the lookup's gradient still reaches the table
    autograd_ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(
        grad_vals(&weight).unwrap(),
        [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    );
    // the earlier graph saw the old weight: its backward is refused, as PyTorch's
    assert!(autograd_ops::sum(&earlier).unwrap().backward().is_err());
    // the infinity norm bounds the largest magnitude
    let inf = EmbeddingOptions {
        max_norm: Some(2.0),
        norm_type: f32::INFINITY,
        ..EmbeddingOptions::default()
    };
    let table = Embedding::from_weight_with_options(t(&[-4.0, 1.0], &[1, 2]), inf).unwrap();
    let y = vals(&table.forward(&ids(&[0], &[1])).unwrap());
    assert!(
        (y[0] + 2.0).abs() < 1e-6 && (y[1] - 0.5).abs() < 1e-6,
        "{y:?}"
    );
}

#[test]
fn embedding_option_errors_are_value_errors_that_change_nothing() {
    use ErrorKind::{Type, Value};
    let mut rng = Rng::new(0);
    let bad = |o: EmbeddingOptions| Embedding::with_options(3, 2, o, &mut Rng::new(0));
    let d = EmbeddingOptions::default();
    assert_eq!(
        kind(bad(EmbeddingOptions {
            padding_idx: Some(3),
            ..d
        })),
        Value
    );
    assert_eq!(
        kind(bad(EmbeddingOptions {
            max_norm: Some(0.0),
            ..d
        })),
        Value
    );
    assert_eq!(
        kind(bad(EmbeddingOptions {
            max_norm: Some(f32::NAN),
            ..d
        })),
        Value
    );
    assert_eq!(
        kind(bad(EmbeddingOptions {
            norm_type: 0.0,
            ..d
        })),
        Value
    );
    let opts = EmbeddingOptions {
        max_norm: Some(0.1),
        ..d
    };
    let table = Embedding::with_options(3, 2, opts, &mut rng).unwrap();
    let (before, values) = (VersionSnapshot::of(table.weight()), vals(table.weight()));
    // an id out of range fails before any row is renormalised
    assert_eq!(kind(table.forward(&ids(&[0, 3], &[2]))), Value);
    let floats = Tensor::ones(shape![2], &DType::Float32).unwrap();
    assert_eq!(kind(table.forward(&floats)), Type);
    assert_eq!(VersionSnapshot::of(table.weight()), before);
    assert_eq!(vals(table.weight()), values);
}

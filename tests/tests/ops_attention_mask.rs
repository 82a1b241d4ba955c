//! Attention beyond causal self-attention (issue 38 item 7): masks (Bool and additive, full
//! and key-padding), non-causal and cross-attention (`T_q != T_k`) and dropout on the
//! probabilities, in both forms. Values and gradients (of q, k, v and an additive mask) against
//! the numbers PyTorch 2.15's `scaled_dot_product_attention` prints
//! (`tests/fixtures/attention/attention.txt`, written by `gen_attention.py` beside it), rows
//! with every key masked (zeros, not NaN), gradcheck with masks and dropout, dropout's
//! statistics, strided inputs and errors that change nothing.

use autograd_core::ops::{mul, sum};
use autograd_core::{
    grad, gradcheck, shape, ErrorKind, GradOptions, GradcheckOptions, Result, Rng, Shape, Tensor,
};
use autograd_ops::{
    attention_with_probabilities, causal_attention, scaled_dot_product_attention, AttentionMask,
    AttentionOptions,
};
use autograd_tests::fixture::{floats, mismatches, operand, Tolerance};
use autograd_tests::{noise, strided, t, vals};

const FIXTURE: &str = include_str!("../fixtures/attention/attention.txt");

const TOL: Tolerance = Tolerance {
    abs: 2e-5,
    rel: 2e-4,
};

/// The fixture's operand `field` as a tensor.
fn tensor(field: &str) -> Tensor {
    let (dims, values) = operand(field).expect("an operand");
    t(&values, &dims)
}

/// Both forms' context, for `inputs` = q, k, v and possibly the mask.
fn forms(inputs: &[Tensor], options: &AttentionOptions) -> Result<[Tensor; 2]> {
    let flash = scaled_dot_product_attention(&inputs[0], &inputs[1], &inputs[2], options)?;
    let (materialised, _) =
        attention_with_probabilities(&inputs[0], &inputs[1], &inputs[2], options)?;
    Ok([flash, materialised])
}

#[test]
fn masked_causal_and_cross_attention_give_pytorchs_values_and_gradients() {
    let mut cases = 0;
    let mut wrong = Vec::new();
    for line in FIXTURE.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [label, causal, scale, kind, q, k, v, mask, cot, out, dq, dk, dv, dmask] = f[..] else {
            panic!("a fixture line has fourteen fields: {line}");
        };
        let (q, k, v) = (tensor(q), tensor(k), tensor(v));
        let mut options = AttentionOptions::new().causal(causal == "1");
        if !scale.is_empty() {
            options = options.scale(scale.parse().unwrap());
        }
        let mut inputs = vec![q, k, v];
        let additive = !dmask.is_empty();
        if kind != "none" {
            let (dims, values) = operand(mask).expect("a mask");
            let m = if additive {
                t(&values, &dims)
            } else {
                let bits: Vec<bool> = values.iter().map(|&b| b == 1.0).collect();
                Tensor::from_vec(bits, Shape::from(dims.as_slice())).unwrap()
            };
            options = options.mask(match kind {
                "attend" => AttentionMask::Attend(m.clone()),
                "padding" => AttentionMask::KeyPadding(m.clone()),
                other => panic!("unknown mask kind {other}"),
            });
            if additive {
                inputs.push(m);
            }
        }
        let dims = inputs[0].dims();
        let g = t(&floats(cot), &dims);
        let refs: Vec<&Tensor> = inputs.iter().collect();
        for (form, o) in ["flash", "materialised"]
            .iter()
            .zip(forms(&inputs, &options).unwrap())
        {
            let label = format!("{label} ({form})");
            wrong.extend(mismatches(&label, "output", &vals(&o), &floats(out), TOL));
            let grads = grad(&o, &refs, &g, GradOptions::default()).unwrap();
            let mut want = vec![dq, dk, dv];
            if additive {
                want.push(dmask);
            }
            for ((name, got), theirs) in ["dq", "dk", "dv", "dmask"].iter().zip(&grads).zip(want) {
                let got = vals(got.as_ref().expect("a gradient"));
                wrong.extend(mismatches(&label, name, &got, &floats(theirs), TOL));
            }
        }
        cases += 1;
    }
    assert_eq!(cases, 13);
    assert!(
        wrong.is_empty(),
        "{} mismatches:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}

#[test]
fn a_row_whose_keys_are_all_masked_is_zero_with_zero_gradients() {
    let (b, h, tq, tk, d) = (2, 2, 3, 5, 4);
    let [q, k, v] = [0, 1, 2].map(|i| {
        t(
            &noise(b * h * tq.max(tk) * d, 40 + i),
            &[b, h, tq.max(tk), d],
        )
    });
    let q = q.narrow(2, 0, tq).unwrap().contiguous().unwrap();
    // batch 1's every key is padding; batch 0's last two
    let pad = Tensor::from_vec(
        vec![
            false, false, false, true, true, true, true, true, true, true,
        ],
        shape![2, 5],
    )
    .unwrap();
    for causal in [false, true] {
        let options = AttentionOptions::new()
            .causal(causal)
            .mask(AttentionMask::KeyPadding(pad.clone()));
        let inputs = [q.clone(), k.clone(), v.clone()];
        for o in forms(&inputs, &options).unwrap() {
            let values = vals(&o);
            assert!(values.iter().all(|x| x.is_finite()));
            let half = values.len() / 2;
            assert!(
                values[half..].iter().all(|&x| x == 0.0),
                "batch 1 is all zeros"
            );
            assert!(values[..half].iter().any(|&x| x != 0.0));
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let g = t(&noise(o.size(), 7), &o.dims());
            let grads: Vec<Vec<f32>> = grad(&o, &refs, &g, GradOptions::default())
                .unwrap()
                .iter()
                .map(|gr| vals(gr.as_ref().unwrap()))
                .collect();
            for (name, gr) in ["q", "k", "v"].iter().zip(&grads) {
                assert!(gr.iter().all(|x| x.is_finite()), "{name}");
                let half = gr.len() / 2;
                assert!(gr[half..].iter().all(|&x| x == 0.0), "{name} of batch 1");
            }
            // batch 0's padded keys get no gradient
            let dk = &grads[1];
            for head in 0..h {
                let at = head * tk * d;
                assert!(dk[at + 3 * d..at + 5 * d].iter().all(|&x| x == 0.0));
            }
        }
    }
}

#[test]
fn gradcheck_with_masks_cross_attention_and_dropout() {
    let cases: Vec<(usize, usize, bool, &str, f32)> = vec![
        (3, 5, false, "additive", 0.0),
        (5, 3, true, "additive", 0.0),
        (4, 6, false, "bool", 0.3),
        (6, 4, true, "padding", 0.5),
        (35, 3, true, "none", 0.2),
    ];
    for (tq, tk, causal, kind, p) in cases {
        let (b, h, d) = (2, 2, 3);
        let mut inputs = vec![
            t(&noise(b * h * tq * d, 1), &[b, h, tq, d]),
            t(&noise(b * h * tk * d, 2), &[b, h, tk, d]),
            t(&noise(b * h * tk * d, 3), &[b, h, tk, d]),
        ];
        let mut rng = Rng::new(9);
        let mut options = AttentionOptions::new()
            .causal(causal)
            .dropout(p, &mut rng)
            .unwrap();
        match kind {
            "additive" => inputs.push(t(&noise(b * tq * tk, 4), &[b, 1, tq, tk])),
            "bool" => {
                let bits: Vec<bool> = (0..tq * tk).map(|i| i % 3 != 1).collect();
                options = options.mask(AttentionMask::Attend(
                    Tensor::from_vec(bits, shape![tq, tk]).unwrap(),
                ));
            }
            "padding" => {
                let bits: Vec<bool> = (0..b * tk).map(|i| i % tk == tk - 1).collect();
                options = options.mask(AttentionMask::KeyPadding(
                    Tensor::from_vec(bits, shape![b, tk]).unwrap(),
                ));
            }
            _ => {}
        }
        let with_mask = |x: &[Tensor]| -> AttentionOptions {
            match x.get(3) {
                Some(m) => options.clone().mask(AttentionMask::Attend(m.clone())),
                None => options.clone(),
            }
        };
        let w = t(&noise(b * h * tq * tk, 5), &[b, h, tq, tk]);
        let flash = |x: &[Tensor]| scaled_dot_product_attention(&x[0], &x[1], &x[2], &with_mask(x));
        let both = |x: &[Tensor]| -> Result<Tensor> {
            let (o, pr) = attention_with_probabilities(&x[0], &x[1], &x[2], &with_mask(x))?;
            autograd_core::ops::add(&sum(&mul(&o, &o)?)?, &sum(&mul(&pr, &w)?)?)
        };
        for f in [&flash as &dyn Fn(&[Tensor]) -> Result<Tensor>, &both] {
            gradcheck(f, &inputs, GradcheckOptions::default())
                .unwrap_or_else(|e| panic!("tq {tq} tk {tk} causal {causal} {kind} p {p}: {e}"));
        }
    }
}

#[test]
fn both_forms_drop_the_same_probabilities_at_the_rate_asked() {
    // q = 0: every probability is 1 / T_k; v = I: the context is the dropped probabilities
    let (tq, tk) = (40, 50);
    let q = t(&vec![0.0; tq * tk], &[1, 1, tq, tk]);
    let eye: Vec<f32> = (0..tk * tk)
        .map(|i| if i / tk == i % tk { 1.0 } else { 0.0 })
        .collect();
    let kv = t(&eye, &[1, 1, tk, tk]);
    let mut rng = Rng::new(3);
    let options = AttentionOptions::new().dropout(0.25, &mut rng).unwrap();
    let [flash, materialised] = forms(&[q.clone(), kv.clone(), kv.clone()], &options).unwrap();
    let kept = 1.0 / tk as f32 / 0.75;
    let values = vals(&flash);
    for (a, b) in values.iter().zip(vals(&materialised)) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
    assert!(values.iter().all(|&x| x == 0.0 || (x - kept).abs() < 1e-6));
    let dropped = values.iter().filter(|&&x| x == 0.0).count() as f64 / values.len() as f64;
    assert!((dropped - 0.25).abs() < 0.03, "dropped {dropped}");
    // a fresh draw from the generator gives another mask; the same options give the same one
    let again = forms(&[q.clone(), kv.clone(), kv.clone()], &options).unwrap();
    assert_eq!(vals(&again[0]), values);
    let other = AttentionOptions::new().dropout(0.25, &mut rng).unwrap();
    let other = forms(&[q, kv.clone(), kv], &other).unwrap();
    assert_ne!(vals(&other[0]), values);
    // the probabilities returned are those before dropout
    let (_, p) = attention_with_probabilities(
        &t(&vec![0.0; tq * tk], &[1, 1, tq, tk]),
        &t(&eye, &[1, 1, tk, tk]),
        &t(&eye, &[1, 1, tk, tk]),
        &options,
    )
    .unwrap();
    assert!(vals(&p).iter().all(|&x| (x - 1.0 / tk as f32).abs() < 1e-6));
}

#[test]
fn strided_masked_cross_attention_equals_compact() {
    let (b, h, tq, tk, d) = (2, 3, 33, 40, 5);
    let q = t(&noise(b * h * tq * d, 11), &[b, h, tq, d]);
    let kv = noise(b * h * tk * d, 12);
    let (k, k_view) = (t(&kv, &[b, h, tk, d]), strided(&kv, &[b, h, tk, d]));
    let v = t(&noise(b * h * tk * d, 13), &[b, h, tk, d]);
    let pad: Vec<bool> = (0..b * tk).map(|i| i % tk >= 30 + i / tk * 5).collect();
    let options = AttentionOptions::new()
        .causal(true)
        .mask(AttentionMask::KeyPadding(
            Tensor::from_vec(pad, shape![b, tk]).unwrap(),
        ));
    let a = forms(&[q.clone(), k, v.clone()], &options).unwrap();
    let c = forms(&[q, k_view, v], &options).unwrap();
    for (x, y) in a.iter().zip(&c) {
        for (p, r) in vals(x).iter().zip(vals(y)) {
            assert!((p - r).abs() <= 1e-5 * (1.0 + r.abs()), "{p} vs {r}");
        }
    }
}

#[test]
fn the_causal_self_attention_forms_equal_the_general_ones() {
    let dims = [2, 2, 37, 4];
    let [q, k, v] = [1, 2, 3].map(|s| t(&noise(dims.iter().product(), s), &dims));
    let (o, p) = causal_attention(&q, &k, &v, Some(0.6)).unwrap();
    let options = AttentionOptions::new().causal(true).scale(0.6);
    let (o2, p2) = attention_with_probabilities(&q, &k, &v, &options).unwrap();
    assert_eq!(vals(&o), vals(&o2));
    assert_eq!(vals(&p), vals(&p2));
    let f = autograd_ops::flash_causal_attention(&q, &k, &v, Some(0.6)).unwrap();
    let f2 = scaled_dot_product_attention(&q, &k, &v, &options).unwrap();
    assert_eq!(vals(&f), vals(&f2));
}

#[test]
fn bad_masks_and_options_are_errors_of_the_right_kind_and_change_nothing() {
    let q = t(&noise(24, 1), &[1, 2, 3, 4]);
    let k = t(&noise(40, 2), &[1, 2, 5, 4]);
    let v = t(&noise(40, 3), &[1, 2, 5, 4]);
    let versions = || [&q, &k, &v].map(|x| x.carrier().unwrap().version());
    let before = versions();
    let bools = |dims: &[usize]| {
        let n = dims.iter().product();
        Tensor::from_vec(vec![true; n], Shape::from(dims)).unwrap()
    };
    let ints = Tensor::from_vec(vec![1i32; 15], shape![3, 5]).unwrap();
    let cases: Vec<(AttentionOptions, &Tensor, ErrorKind, &str)> = vec![
        (
            AttentionOptions::new().mask(AttentionMask::Attend(bools(&[3, 4]))),
            &v,
            ErrorKind::Value,
            "does not broadcast",
        ),
        (
            AttentionOptions::new().mask(AttentionMask::Attend(bools(&[2, 2, 3, 5]))),
            &v,
            ErrorKind::Value,
            "does not broadcast",
        ),
        (
            AttentionOptions::new().mask(AttentionMask::Attend(bools(&[1, 1, 1, 3, 5]))),
            &v,
            ErrorKind::Value,
            "four axes",
        ),
        (
            AttentionOptions::new().mask(AttentionMask::KeyPadding(bools(&[1, 3]))),
            &v,
            ErrorKind::Value,
            "[B, T_k]",
        ),
        (
            AttentionOptions::new().mask(AttentionMask::Attend(ints.clone())),
            &v,
            ErrorKind::Type,
            "Bool or Float32",
        ),
        (
            AttentionOptions::new(),
            &q,
            ErrorKind::Value,
            "k and v need one shape",
        ),
    ];
    for (options, v, kind, words) in cases {
        let e = scaled_dot_product_attention(&q, &k, v, &options).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.message().contains(words), "{e}");
        let e = attention_with_probabilities(&q, &k, v, &options).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.message().contains(words), "{e}");
    }
    let mut rng = Rng::new(1);
    let state = rng.state();
    for p in [-0.1, 1.5, f32::NAN] {
        let e = AttentionOptions::new().dropout(p, &mut rng).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    }
    assert_eq!(rng.state(), state, "a refused dropout draws nothing");
    assert_eq!(versions(), before);
    for x in [&q, &k, &v] {
        assert!(x.grad().unwrap().is_none());
    }
}

#[test]
fn an_empty_key_axis_gives_a_zero_context_and_zero_gradients() {
    // PyTorch 2.15: SDPA over T_k = 0 is all zeros, and so is q's gradient
    let q = t(&noise(24, 1), &[1, 2, 3, 4]);
    let (k, v) = (t(&[], &[1, 2, 0, 4]), t(&[], &[1, 2, 0, 4]));
    let pad = Tensor::from_vec(Vec::<bool>::new(), shape![1, 0]).unwrap();
    for options in [
        AttentionOptions::new(),
        AttentionOptions::new()
            .causal(true)
            .mask(AttentionMask::KeyPadding(pad)),
    ] {
        for o in forms(&[q.clone(), k.clone(), v.clone()], &options).unwrap() {
            assert_eq!(o.dims(), [1, 2, 3, 4]);
            assert!(vals(&o).iter().all(|&x| x == 0.0));
            let g = t(&noise(24, 2), &[1, 2, 3, 4]);
            let grads = grad(&o, &[&q, &k, &v], &g, GradOptions::default()).unwrap();
            assert!(vals(grads[0].as_ref().unwrap()).iter().all(|&x| x == 0.0));
            assert_eq!(grads[1].as_ref().unwrap().dims(), [1, 2, 0, 4]);
        }
    }
}

//! The character-level GPT of `train_gpt` (and bench W11/W12): the tied head's gradient is the
//! sum of its two uses, the vocabulary and windows are right, sampling stays in the
//! vocabulary, and `train_gpt --quick --save` writes a model that loads into a fresh one.

use std::process::Command;

use autograd_core::{grad, shape, GradOptions, Rng, Tensor};
use autograd_examples::gpt::{sample, w11, w12, windows, Chars};
use autograd_examples::transformer::{Config, Transformer};
use autograd_ops::{cross_entropy, embedding, layer_norm, linear, CrossEntropyOptions, Module};

mod support;

fn small() -> Config {
    Config {
        vocab: 11,
        context: 6,
        d_model: 8,
        heads: 2,
        layers: 1,
        ff: 16,
        checkpoint: false,
    }
}

#[test]
fn the_tied_head_has_no_parameters_of_its_own_and_its_gradient_sums_both_uses() {
    let c = small();
    let model = Transformer::gpt(c, &mut Rng::new(3)).unwrap();
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(names.iter().any(|n| n == "token.weight"));
    assert!(!names.iter().any(|n| n.starts_with("head")), "{names:?}");
    // token + position + block (2 LN, qkv, proj, up, down) + final LN; no head
    let d = c.d_model;
    let block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * c.ff + c.ff) + (c.ff * d + d);
    assert_eq!(
        model.num_parameters(),
        c.vocab * d + c.context * d + block + 2 * d
    );

    let ids = Tensor::from_vec(vec![1i32, 4, 2, 9, 0, 10], shape![1, 6]).unwrap();
    let targets = Tensor::from_vec(vec![4i32, 2, 9, 0, 10, 3], shape![1, 6]).unwrap();
    let token = model.named_parameters()[0].1.clone();
    let loss = model.loss(&ids, &targets, None).unwrap();
    let tied = grad(
        &loss,
        &[&token],
        &loss.ones_like().unwrap(),
        GradOptions::default(),
    )
    .unwrap()
    .remove(0)
    .unwrap()
    .values::<f32>()
    .unwrap();

    // the same function with the head's use of the weight through a separate copy: the tied
    // gradient is the embedding's part plus the head's part
    let copy = Tensor::from_vec(token.values::<f32>().unwrap(), token.shape().clone()).unwrap();
    let params = model.named_parameters();
    let p = |name: &str| params.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let positions = Tensor::from_vec((0..6).collect::<Vec<i32>>(), shape![6]).unwrap();
    let x = autograd_ops::add(
        &embedding(&token, &ids).unwrap(),
        &embedding(&p("position.weight"), &positions).unwrap(),
    )
    .unwrap();
    // the model's blocks, then the final LayerNorm and the head through the copy
    let hidden = model.residual(&x).unwrap();
    let normed = layer_norm(
        &hidden,
        &[d],
        Some(&p("ln.weight")),
        Some(&p("ln.bias")),
        1e-5,
    )
    .unwrap();
    let logits = linear(&normed, &copy, None).unwrap();
    let loss = cross_entropy(
        &logits.reshape(&[6, c.vocab]).unwrap(),
        &targets.reshape(&[6]).unwrap(),
        CrossEntropyOptions::default(),
    )
    .unwrap();
    let g = grad(
        &loss,
        &[&token, &copy],
        &loss.ones_like().unwrap(),
        GradOptions::default(),
    )
    .unwrap();
    let embed_part = g[0].as_ref().unwrap().values::<f32>().unwrap();
    let head_part = g[1].as_ref().unwrap().values::<f32>().unwrap();
    assert!(head_part.iter().any(|v| *v != 0.0) && embed_part.iter().any(|v| *v != 0.0));
    for ((t, e), h) in tied.iter().zip(&embed_part).zip(&head_part) {
        assert!(
            (t - (e + h)).abs() <= 1e-5 * (1.0 + t.abs()),
            "{t} vs {e} + {h}"
        );
    }
}

#[test]
fn presets_have_the_benchmark_sizes() {
    let m = Transformer::gpt(w11(65), &mut Rng::new(0)).unwrap();
    assert_eq!(m.num_parameters(), 809_856);
    let c = w12();
    assert_eq!(
        (c.vocab, c.context, c.layers, c.heads, c.d_model, c.ff),
        (50_257, 256, 12, 12, 768, 3072)
    );
}

#[test]
fn chars_windows_and_sampling() {
    let chars = Chars::of("abca\nb").unwrap();
    assert_eq!(chars.len(), 4);
    let tokens = chars.encode("abca\nb").unwrap();
    assert_eq!(tokens, [1, 2, 3, 1, 0, 2]);
    assert_eq!(chars.decode(&tokens), "abca\nb");
    assert_eq!(chars.decode(&[7]), "?");
    assert!(chars.encode("z").is_err());
    assert!(Chars::of("").is_err());

    let data: Vec<i32> = (0..50).collect();
    let (ids, targets) = windows(&data, 3, 5, &mut Rng::new(1)).unwrap();
    assert_eq!(ids.dims(), [3, 5]);
    let (ids, targets) = (
        ids.values::<i32>().unwrap(),
        targets.values::<i32>().unwrap(),
    );
    for w in 0..3 {
        let row = &ids[w * 5..w * 5 + 5];
        assert!(row.windows(2).all(|p| p[1] == p[0] + 1));
        for (i, t) in row.iter().zip(&targets[w * 5..w * 5 + 5]) {
            assert_eq!(*t, i + 1);
        }
    }
    assert!(windows(&data[..5], 1, 5, &mut Rng::new(1)).is_err());

    let model = Transformer::gpt(small(), &mut Rng::new(2)).unwrap();
    let out = sample(&model, &[1, 2], 20, 0.8, &mut Rng::new(4)).unwrap();
    assert_eq!(out.len(), 20);
    assert!(out.iter().all(|&t| (0..11).contains(&t)));
    assert_eq!(
        out,
        sample(&model, &[1, 2], 20, 0.8, &mut Rng::new(4)).unwrap()
    );
    assert!(sample(&model, &[], 1, 0.8, &mut Rng::new(4)).is_err());
    assert!(sample(&model, &[1], 1, 0.0, &mut Rng::new(4)).is_err());
}

#[test]
fn train_gpt_quick_saves_a_model_that_loads_into_a_fresh_one() {
    let dir = std::env::temp_dir().join(format!("train-gpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("gpt.safetensors");
    let out = Command::new(support::example_binary("train_gpt"))
        .args(["--quick", "--sample", "30", "--save"])
        .arg(&path)
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("held-out loss") && stdout.contains("--- sampled ---"),
        "{stdout}"
    );
    let entries = autograd_ops::persist::contents(&path).unwrap();
    let vocab = entries
        .iter()
        .find(|e| e.name == "token.weight")
        .unwrap()
        .shape[0];
    let config = Config {
        vocab,
        context: 16,
        d_model: 32,
        heads: 2,
        layers: 1,
        ff: 128,
        checkpoint: false,
    };
    let mut fresh = Transformer::gpt(config, &mut Rng::new(9)).unwrap();
    let before = fresh.named_parameters()[0].1.values::<f32>().unwrap();
    fresh.load(&path).unwrap();
    assert_ne!(
        fresh.named_parameters()[0].1.values::<f32>().unwrap(),
        before
    );
    assert!(
        stdout.contains(&format!("({} parameters)", fresh.num_parameters())),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

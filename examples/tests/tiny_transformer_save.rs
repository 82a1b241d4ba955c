//! `tiny_transformer --save` writes the trained model to a safetensors file that loads,
//! strictly, into a fresh `Transformer` and gives it the trained parameters.

use std::process::Command;

use autograd_core::{Rng, Tensor};
use autograd_examples::addition::{split, train, Training};
use autograd_examples::transformer::Transformer;
use autograd_ops::Module;

mod support;

#[test]
fn a_saved_tiny_transformer_loads_into_a_fresh_model_with_the_trained_parameters() {
    let dir = std::env::temp_dir().join(format!("tiny-transformer-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("model.safetensors");
    let out = Command::new(support::example_binary("tiny_transformer"))
        .args(["--quick", "--steps", "3", "--save"])
        .arg(&path)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("model saved to"), "{stdout}");

    // the same three steps in this process: the example's defaults, seed 0
    let (train_set, _) = split(1000, 0);
    let config = Training {
        model: Training::model(false),
        steps: 3,
        batch: 64,
        lr: 3e-3,
        seed: 0,
    };
    let trained = train(&config, &train_set, |_, _| {}).unwrap();
    let untrained = Transformer::new(config.model, &mut Rng::new(0)).unwrap();
    let mut loaded = Transformer::new(config.model, &mut Rng::new(1)).unwrap();
    loaded.load(&path).unwrap();
    assert!(stdout.contains(&format!("({} parameters)", loaded.num_parameters())));

    let values = |t: &Tensor| t.values::<f32>().unwrap();
    let names = loaded.named_parameters();
    assert_eq!(names[0].0, "token.weight");
    assert!(names.iter().any(|(n, _)| n == "blocks.1.qkv.weight"));
    for (((name, l), t), u) in names
        .iter()
        .zip(trained.parameters())
        .zip(untrained.parameters())
    {
        let (l, t, u) = (values(l), values(&t), values(&u));
        // the example ran on one thread, this process may use more: equal to rounding
        for (a, b) in l.iter().zip(&t) {
            assert!(
                (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                "{name}: {a} vs {b}"
            );
        }
        assert_ne!(l, u, "{name} was trained");
    }
    std::fs::remove_dir_all(&dir).ok();
}

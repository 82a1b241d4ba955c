//! Smoke test of `train_digits`'s training (its `--quick` length): the loss falls and the
//! held-out accuracy is far above chance after three epochs on the real data.

use autograd_examples::digits::{load, shipped_path};
use autograd_examples::mlp::{train, Config};

#[test]
fn three_epochs_on_the_digits_lower_the_loss_and_generalise() {
    let data = load(&shipped_path()).unwrap();
    let (train_set, test_set) = data.split(0.2, 0).unwrap();
    let config = Config {
        epochs: 3,
        hidden: 64,
        batch: 32,
        lr: 3e-3,
        seed: 0,
        resume: None,
        save: None,
    };
    let mut losses = Vec::new();
    let (model, history) = train(&config, &train_set, &test_set, |_, l| losses.push(l)).unwrap();
    assert_eq!(losses.len(), 3 * train_set.len().div_ceil(32));
    let first: f64 = losses[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = losses[losses.len() - 10..].iter().sum::<f64>() / 10.0;
    assert!(
        first > 1.5,
        "an untrained 10-class model starts near ln 10: {first}"
    );
    assert!(last < 0.5 * first, "the loss falls: {first} -> {last}");
    assert!(
        history.train_loss.windows(2).all(|w| w[1] < w[0]),
        "{history:?}"
    );
    let (_, accuracy) = model.evaluate(&test_set).unwrap();
    assert!(accuracy > 0.85, "held-out accuracy {accuracy}");
    assert_eq!(history.test_accuracy.last().copied(), Some(accuracy));
}

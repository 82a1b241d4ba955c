//! `train_cnn_digits`'s CNN learns: a short run lowers the loss and classifies most held-out
//! digits, evaluation uses batch norm's running statistics (and leaves the model training),
//! and a saved model reloads with its running statistics under PyTorch's names.

use autograd_examples::cnn::{train, Cnn, Config};
use autograd_examples::digits::{load, shipped_path};
use autograd_ops::Module;

#[test]
fn a_short_run_learns_the_digits_and_saves_its_running_statistics() {
    let data = load(&shipped_path()).unwrap();
    let (train_set, test_set) = data.split(0.2, 0).unwrap();
    let dir = std::env::temp_dir().join(format!("train-cnn-digits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cnn.safetensors");
    let config = Config {
        epochs: 3,
        batch: 64,
        lr: 3e-3,
        seed: 0,
        save: Some(path.clone()),
    };
    let mut losses = Vec::new();
    let (mut model, history) =
        train(&config, &train_set, &test_set, |_, l| losses.push(l)).unwrap();
    assert_eq!(history.test_accuracy.len(), 3);
    let first: f64 = losses[..5].iter().sum::<f64>() / 5.0;
    let last: f64 = losses[losses.len() - 5..].iter().sum::<f64>() / 5.0;
    assert!(last < 0.5 * first, "the loss falls: {first} -> {last}");
    let (_, accuracy) = model.evaluate(&test_set).unwrap();
    assert!(accuracy > 0.9, "held-out accuracy {accuracy}");
    // the state dict has PyTorch's names, running statistics included, and reloads exactly
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(names.contains(&"c1.weight".to_string()), "{names:?}");
    let contents = autograd_ops::persist::contents(&path).unwrap();
    let saved: Vec<&str> = contents.iter().map(|e| e.name.as_str()).collect();
    for name in ["b1.running_mean", "b1.running_var", "b2.weight", "fc.bias"] {
        assert!(saved.contains(&name), "{name} in {saved:?}");
    }
    let mut again = Cnn::new(&mut autograd_core::Rng::new(99)).unwrap();
    Module::load(&mut again, &path).unwrap();
    let (loss_a, acc_a) = model.evaluate(&test_set).unwrap();
    let (loss_b, acc_b) = again.evaluate(&test_set).unwrap();
    assert_eq!((loss_a, acc_a), (loss_b, acc_b));
    std::fs::remove_dir_all(&dir).unwrap();
}

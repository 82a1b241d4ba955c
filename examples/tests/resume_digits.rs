//! `train_digits --resume` continues the epoch count: two epochs saved and two more resumed
//! train, bit for bit, the model four epochs in one run train (the resumed epochs draw the
//! shuffle orders of epochs 3 and 4, not a replay of 1 and 2), and a resume with another
//! batch size or seed, or a progress file that does not fit, is refused instead of guessing.

use std::path::PathBuf;

use autograd_core::{Error, Tensor};
use autograd_examples::digits::{load, shipped_path, Digits};
use autograd_examples::mlp::{progress_path, train, Config};
use autograd_ops::Module;

fn config(epochs: usize, batch: usize, resume: Option<PathBuf>, save: Option<PathBuf>) -> Config {
    Config {
        epochs,
        hidden: 16,
        batch,
        lr: 3e-3,
        seed: 0,
        resume,
        save,
    }
}

fn data() -> (Digits, Digits) {
    load(&shipped_path()).unwrap().split(0.2, 0).unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.values::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// A directory of its own under the system's temporary one.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn two_epochs_saved_and_two_resumed_equal_four_bit_for_bit() {
    let (train_set, test_set) = data();
    let mut whole_epochs = Vec::new();
    let (whole, whole_history) =
        train(&config(4, 64, None, None), &train_set, &test_set, |e, _| {
            whole_epochs.push(e);
        })
        .unwrap();

    let dir = temp_dir("resume-digits");
    let saved = dir.join("half.safetensors");
    let (_, first) = train(
        &config(2, 64, None, Some(saved.clone())),
        &train_set,
        &test_set,
        |_, _| {},
    )
    .unwrap();
    let mut resumed_epochs = Vec::new();
    let (resumed, history) = train(
        &config(2, 64, Some(saved), None),
        &train_set,
        &test_set,
        |e, _| resumed_epochs.push(e),
    )
    .unwrap();

    assert_eq!((first.first_epoch, history.first_epoch), (0, 2));
    let per_epoch = train_set.len().div_ceil(64);
    assert_eq!(resumed_epochs.len(), 2 * per_epoch);
    assert_eq!(resumed_epochs[..], whole_epochs[2 * per_epoch..]);
    for ((name, a), (_, b)) in whole
        .named_parameters()
        .iter()
        .zip(resumed.named_parameters())
    {
        assert!(
            bits(a) == bits(&b),
            "{name} differs from the uninterrupted run's"
        );
    }
    let tail = |v: &[f64]| v[2..].iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let now = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(now(&history.train_loss), tail(&whole_history.train_loss));
    assert_eq!(
        now(&history.test_accuracy),
        tail(&whole_history.test_accuracy)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_resume_with_another_batch_size_seed_or_progress_is_refused() {
    let (train_set, test_set) = data();
    let dir = temp_dir("resume-digits-refused");
    let saved = dir.join("model.safetensors");
    train(
        &config(2, 32, None, Some(saved.clone())),
        &train_set,
        &test_set,
        |_, _| {},
    )
    .unwrap();
    let progress = progress_path(&saved);
    assert_eq!(
        std::fs::read_to_string(&progress).unwrap(),
        "epochs 2\nbatch 32\nseed 0\n"
    );
    let resume = |batch: usize, seed: u64| {
        let mut c = config(1, batch, Some(saved.clone()), None);
        c.seed = seed;
        train(&c, &train_set, &test_set, |_, _| {}).unwrap_err()
    };
    // batch 16 has exactly twice the batches of batch 32: the step count alone would fit
    assert_eq!(
        train_set.len().div_ceil(16),
        2 * train_set.len().div_ceil(32)
    );
    for (batch, seed) in [(16, 0), (32, 1)] {
        let err = resume(batch, seed);
        assert!(matches!(err, Error::Value(_)), "{err}");
        assert!(
            err.to_string().contains("trained with batch 32 and seed 0"),
            "{err}"
        );
    }
    // a progress file that disagrees with the optimizer's step count, or is not one
    std::fs::write(&progress, "epochs 3\nbatch 32\nseed 0\n").unwrap();
    let err = resume(32, 0);
    assert!(err.to_string().contains("took 90 steps"), "{err}");
    for text in [
        "epochs 2\nbatch 32\n",
        "epochs 2\nepochs 2\nbatch 32\nseed 0\n",
        "epochs two",
    ] {
        std::fs::write(&progress, text).unwrap();
        assert!(matches!(resume(32, 0), Error::Value(_)), "{text:?}");
    }
    std::fs::remove_file(&progress).unwrap();
    assert!(matches!(resume(32, 0), Error::Runtime(_)));
    std::fs::remove_dir_all(&dir).ok();
}

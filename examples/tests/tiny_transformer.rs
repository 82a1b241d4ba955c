//! Smoke test of `tiny_transformer`'s training (a short `--quick`-like run): the loss falls,
//! checkpointing every block trains the same model, and the task's encoding is the one the
//! example documents.

use autograd_examples::addition::{answers, batch, split, train, Problem, Training, IGNORE};

fn config(steps: usize, checkpoint: bool) -> Training {
    Training {
        model: Training::model(checkpoint),
        steps,
        batch: 32,
        lr: 3e-3,
        seed: 0,
    }
}

#[test]
fn problems_are_written_as_characters_and_only_the_answer_is_scored() {
    let p = Problem { a: 7, b: 85 };
    assert_eq!(p.text(), "07+85=092");
    let (ids, targets) = batch(&[p, Problem { a: 99, b: 99 }]).unwrap();
    assert_eq!(ids.dims(), [2, 8]);
    assert_eq!(
        ids.values::<i32>().unwrap(),
        [0, 7, 10, 8, 5, 11, 0, 9, 9, 9, 10, 9, 9, 11, 1, 9]
    );
    let i = IGNORE;
    assert_eq!(
        targets.values::<i32>().unwrap(),
        [i, i, i, i, i, 0, 9, 2, i, i, i, i, i, 1, 9, 8]
    );
    let (train_set, test_set) = split(1000, 3);
    assert_eq!((train_set.len(), test_set.len()), (9000, 1000));
    assert!(test_set.iter().all(|p| !train_set.contains(p)));
}

#[test]
fn a_short_run_lowers_the_loss_and_checkpointing_does_not_change_it() {
    let (train_set, test_set) = split(1000, 0);
    let mut plain = Vec::new();
    let model = train(&config(120, false), &train_set, |_, l| plain.push(l)).unwrap();
    assert_eq!(plain.len(), 120);
    let first: f64 = plain[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = plain[plain.len() - 10..].iter().sum::<f64>() / 10.0;
    assert!(
        first > 1.8,
        "an untrained model starts near ln 12 = 2.48: {first}"
    );
    assert!(last < 0.75 * first, "the loss falls: {first} -> {last}");
    let written = answers(&model, &test_set[..5]).unwrap();
    assert!(written.iter().all(|w| w.len() == 3), "{written:?}");

    let (mut short, mut checkpointed) = (Vec::new(), Vec::new());
    train(&config(5, false), &train_set, |_, l| short.push(l)).unwrap();
    train(&config(5, true), &train_set, |_, l| checkpointed.push(l)).unwrap();
    assert_eq!(checkpointed.len(), 5);
    for (a, b) in checkpointed.iter().zip(&short) {
        assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

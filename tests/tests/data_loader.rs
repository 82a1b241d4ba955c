//! The data loader: every sample exactly once per epoch, seeded orders that differ between
//! epochs and agree between loaders, drop-last, disjoint and covering shards, prefetching that
//! changes nothing but when batches are built, and errors instead of panics.

use std::collections::BTreeSet;

use autograd_core::{shape, Error, ErrorKind, Result, Tensor};
use autograd_ops::data::{DataLoader, Dataset, TensorDataset};
use autograd_tests::{kind, t};
use proptest::prelude::*;

/// `n` samples: row `i` of the inputs is `[i, 10 i]`, label `i` (Int32).
fn numbered(n: usize) -> TensorDataset {
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, 10.0 * i as f32]).collect();
    let y: Vec<i32> = (0..n).map(|i| i as i32).collect();
    TensorDataset::new(vec![
        t(&x, &[n, 2]),
        Tensor::from_vec(y, shape![n]).unwrap(),
    ])
    .unwrap()
}

/// The labels of every batch of one epoch, checking each batch's inputs against its labels.
fn labels<D: Dataset<Sample = Vec<Tensor>>>(loader: &DataLoader<D>, epoch: u64) -> Vec<Vec<i32>> {
    loader
        .epoch(epoch)
        .unwrap()
        .map(|batch| {
            let batch = batch.unwrap();
            let y = batch[1].values::<i32>().unwrap();
            let x = batch[0].values::<f32>().unwrap();
            assert_eq!(batch[0].dims(), [y.len(), 2]);
            for (row, &label) in x.chunks(2).zip(&y) {
                assert_eq!(row, [label as f32, 10.0 * label as f32]);
            }
            assert!(batch[0].autograd_ctx().is_none(), "batches record no graph");
            y
        })
        .collect()
}

#[test]
fn an_unshuffled_epoch_is_the_dataset_in_order_with_a_partial_last_batch() {
    let loader = DataLoader::new(numbered(7), 3).unwrap();
    assert_eq!(loader.batches_per_epoch(), 3);
    assert_eq!(labels(&loader, 0), [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    let dropped = DataLoader::new(numbered(7), 3).unwrap().drop_last(true);
    assert_eq!(dropped.batches_per_epoch(), 2);
    assert_eq!(labels(&dropped, 0), [vec![0, 1, 2], vec![3, 4, 5]]);
}

#[test]
fn seeded_orders_differ_between_epochs_and_agree_between_loaders() {
    let a = DataLoader::new(numbered(50), 8).unwrap().shuffle(11);
    let b = DataLoader::new(numbered(50), 8)
        .unwrap()
        .shuffle(11)
        .prefetch(0);
    let c = DataLoader::new(numbered(50), 8).unwrap().shuffle(12);
    let (e0, e1) = (labels(&a, 0), labels(&a, 1));
    assert_ne!(e0, e1, "another order per epoch");
    assert_eq!(
        e0,
        labels(&b, 0),
        "the same seed, the same order, prefetched or not"
    );
    assert_eq!(e1, labels(&b, 1));
    assert_ne!(e0, labels(&c, 0), "another seed, another order");
    for epoch in [e0, e1] {
        let mut all: Vec<i32> = epoch.concat();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..50).collect::<Vec<_>>(),
            "every sample exactly once"
        );
    }
    assert_eq!(a.order(3), b.order(3));
}

#[test]
fn a_prefetched_epoch_dropped_early_stops_its_thread() {
    let loader = DataLoader::new(numbered(1000), 2).unwrap().prefetch(1);
    let mut batches = loader.epoch(0).unwrap();
    assert_eq!(batches.size_hint(), (500, Some(500)));
    assert!(batches.next().unwrap().is_ok());
    drop(batches); // joins the worker, blocked on its full channel: must not hang
    assert_eq!(labels(&loader, 0).len(), 500);
}

#[test]
fn bad_settings_and_datasets_are_value_errors() {
    assert_eq!(kind(DataLoader::new(numbered(3), 0)), ErrorKind::Value);
    assert_eq!(
        kind(DataLoader::new(numbered(3), 1).unwrap().shard(2, 2)),
        ErrorKind::Value
    );
    assert_eq!(kind(TensorDataset::new(vec![])), ErrorKind::Value);
    let scalar = Tensor::from_vec(vec![1.0f32], shape![]).unwrap();
    assert_eq!(kind(TensorDataset::new(vec![scalar])), ErrorKind::Value);
    let rows = TensorDataset::new(vec![t(&[1.0, 2.0], &[2]), t(&[1.0, 2.0, 3.0], &[3])]);
    assert_eq!(kind(rows), ErrorKind::Value);
    assert_eq!(kind(numbered(3).get(3)), ErrorKind::Value);
    assert_eq!(kind(numbered(3).batch(&[0, 5])), ErrorKind::Value);
}

/// A dataset whose sample `bad` cannot be read, or panics when `panics`.
struct Flaky {
    bad: usize,
    panics: bool,
}

impl Dataset for Flaky {
    type Sample = Tensor;
    fn len(&self) -> usize {
        10
    }
    fn get(&self, index: usize) -> Result<Tensor> {
        if index == self.bad {
            assert!(!self.panics, "sample {index} panics");
            return Err(Error::Value(format!("sample {index} is unreadable")));
        }
        Ok(t(&[index as f32], &[1]))
    }
}

#[test]
fn a_failing_sample_ends_the_epoch_with_its_error_prefetched_or_not() {
    for prefetch in [0, 2] {
        let loader = DataLoader::new(
            Flaky {
                bad: 5,
                panics: false,
            },
            2,
        )
        .unwrap()
        .prefetch(prefetch);
        let got: Vec<Result<Tensor>> = loader.epoch(0).unwrap().collect();
        assert_eq!(got.len(), 3, "two batches, then the error, then nothing");
        assert_eq!(
            got[0].as_ref().unwrap().values::<f32>().unwrap(),
            [0.0, 1.0]
        );
        assert_eq!(got[1].as_ref().unwrap().dims(), [2, 1]);
        assert_eq!(got[2].as_ref().unwrap_err().kind(), ErrorKind::Value);
    }
}

#[test]
fn a_panicking_dataset_on_the_prefetch_thread_is_a_runtime_error() {
    let loader = DataLoader::new(
        Flaky {
            bad: 0,
            panics: true,
        },
        4,
    )
    .unwrap();
    let got: Vec<Result<Tensor>> = loader.epoch(0).unwrap().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref().unwrap_err().kind(), ErrorKind::Runtime);
}

proptest! {
    /// The shards of one epoch are disjoint and cover every sample; with drop-last every rank
    /// gets the same number of full batches and fewer than `world` samples are left out.
    #[test]
    fn shards_are_disjoint_and_covering(
        n in 0usize..60,
        world in 1usize..5,
        batch in 1usize..7,
        seed in any::<u64>(),
        epoch in 0u64..3,
    ) {
        let mut seen = BTreeSet::new();
        let mut counts = Vec::new();
        for rank in 0..world {
            let loader = DataLoader::new(numbered(n), batch).unwrap().shuffle(seed).shard(rank, world).unwrap();
            let batches = labels(&loader, epoch);
            prop_assert_eq!(batches.len(), loader.batches_per_epoch());
            for label in batches.concat() {
                prop_assert!(seen.insert(label), "sample {} in two shards", label);
            }
            let dropped = DataLoader::new(numbered(n), batch).unwrap().shuffle(seed).drop_last(true)
                .shard(rank, world).unwrap();
            let got = labels(&dropped, epoch);
            prop_assert!(got.iter().all(|b| b.len() == batch));
            prop_assert_eq!(got.len(), dropped.batches_per_epoch());
            counts.push(got.len());
        }
        prop_assert_eq!(seen.len(), n);
        prop_assert!(counts.iter().all(|&c| c == counts[0]), "{:?}", counts);
        prop_assert_eq!(counts[0], (n / world) / batch);
    }
}

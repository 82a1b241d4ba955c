//! The digits CNN that `train_cnn_digits` trains and bench W9b times: two blocks of a 3x3
//! convolution, batch normalisation, ReLU and 2x2 max pooling (1 -> 32 -> 64 channels on the
//! 8x8 images), then a linear head on the 256 features, softmax cross-entropy and AdamW over
//! mini-batches a `DataLoader` shuffles per epoch. Its state-dict names are those of the
//! PyTorch module in `shared/peers/bench_torch_w9.py` (`c1.weight`, `b1.running_mean`, …).

use std::path::PathBuf;

use autograd_core::{ensure, Result, Rng, Tensor};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::{
    relu, AdamW, AdamWConfig, BatchNorm2d, Conv2d, Conv2dOptions, Linear, MaxPool2d, Module,
    Padding,
};

use crate::classifier::train_epoch;
pub use crate::classifier::History;
use crate::digits::{Digits, CLASSES, FEATURES};

/// The images' side: the 64 features are an 8x8 picture.
const SIDE: usize = 8;

/// conv(1 -> 32) + BatchNorm2d + ReLU + MaxPool2d(2) -> conv(32 -> 64) + BatchNorm2d + ReLU +
/// MaxPool2d(2) -> flatten (256) -> Linear(256, 10), initialised as PyTorch's layers are.
#[derive(Debug, Module)]
pub struct Cnn {
    c1: Conv2d,
    b1: BatchNorm2d,
    c2: Conv2d,
    b2: BatchNorm2d,
    fc: Linear,
    #[module(skip)]
    pool: MaxPool2d,
}

impl Cnn {
    /// A fresh model.
    pub fn new(rng: &mut Rng) -> Result<Cnn> {
        let same = Conv2dOptions::new().padding(Padding::Explicit([1, 1]));
        Ok(Cnn {
            c1: Conv2d::new(1, 32, [3, 3], same, true, rng)?,
            b1: BatchNorm2d::new(32)?,
            c2: Conv2d::new(32, 64, [3, 3], same, true, rng)?,
            b2: BatchNorm2d::new(64)?,
            fc: Linear::new(64 * 2 * 2, CLASSES, true, rng)?,
            pool: MaxPool2d::new([2, 2]),
        })
    }

    /// Logits `[N, 10]` for images `[N, 1, 8, 8]` (or `[N, 64]`, reshaped).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let n = x.dims()[0];
        let x = x.reshape(&[n, 1, SIDE, SIDE])?;
        let x = self
            .pool
            .forward(&relu(&self.b1.forward(&self.c1.forward(&x)?)?)?)?;
        let x = self
            .pool
            .forward(&relu(&self.b2.forward(&self.c2.forward(&x)?)?)?)?;
        self.fc.forward(&x.reshape(&[n, 64 * 2 * 2])?)
    }

    /// `(mean loss, accuracy)` on `data` in eval mode (batch norm's running statistics),
    /// without recording a graph; the model is left in training mode.
    pub fn evaluate(&mut self, data: &Digits) -> Result<(f64, f64)> {
        self.eval();
        let result = crate::classifier::evaluate(data, |x| self.forward(x));
        self.train();
        result
    }
}

/// What to train.
#[derive(Debug, Clone)]
pub struct Config {
    /// Passes over the training set.
    pub epochs: usize,
    /// Images per optimizer step.
    pub batch: usize,
    /// AdamW's learning rate.
    pub lr: f32,
    /// Seeds the initialisation and the batch order.
    pub seed: u64,
    /// Save the trained model (parameters and batch norm's running statistics) here.
    pub save: Option<PathBuf>,
}

/// Trains a fresh [`Cnn`] on `train` for `config.epochs` epochs, evaluating on `test` after
/// every epoch; `on_step` is called after every optimizer step with the epoch and the
/// batch's loss.
pub fn train(
    config: &Config,
    train: &Digits,
    test: &Digits,
    mut on_step: impl FnMut(usize, f64),
) -> Result<(Cnn, History)> {
    ensure!(config.batch > 0, Value, "the batch size must be positive");
    let mut rng = Rng::new(config.seed);
    let mut model = Cnn::new(&mut rng)?;
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: config.lr,
            ..AdamWConfig::default()
        },
    )?;
    let (x, y) = train.tensors()?;
    debug_assert_eq!(x.dims()[1], FEATURES);
    let loader =
        DataLoader::new(TensorDataset::new(vec![x, y])?, config.batch)?.shuffle(config.seed);
    let mut history = History::default();
    for epoch in 0..config.epochs {
        let loss = train_epoch(&loader, epoch, &mut opt, |x| model.forward(x), &mut on_step)?;
        let (_, train_acc) = model.evaluate(train)?;
        let held_out = model.evaluate(test)?;
        history.record(loss, train_acc, held_out);
    }
    if let Some(path) = &config.save {
        model.save(path)?;
    }
    Ok((model, history))
}

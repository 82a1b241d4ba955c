//! The digits MLP that `train_digits` trains: Linear -> ReLU -> Linear, softmax cross-entropy,
//! AdamW over mini-batches a `DataLoader` shuffles per epoch. Kept here, outside the example's `main`, so that a smoke
//! test can run a short training and check that it learns.

use std::path::{Path, PathBuf};

use autograd_core::{ensure, no_grad, Result, Rng, Tensor};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::{
    argmax, cross_entropy, relu, AdamW, AdamWConfig, CrossEntropyOptions, Linear, Module, Optimizer,
};

use crate::digits::{Digits, CLASSES, FEATURES};

/// What to train.
#[derive(Debug, Clone)]
pub struct Config {
    /// Passes over the training set in this run. A resumed run continues the epoch count
    /// (its shuffle orders are those of the epochs after the saved ones), so `epochs: 2` saved
    /// and then `epochs: 2` resumed trains the same model as `epochs: 4`.
    pub epochs: usize,
    /// Width of the hidden layer.
    pub hidden: usize,
    /// Images per optimizer step.
    pub batch: usize,
    /// AdamW's learning rate.
    pub lr: f32,
    /// Seeds the initialisation and the batch order.
    pub seed: u64,
    /// Continue from a model saved with `save` (and its optimizer state beside it), trained
    /// with the same `hidden`, `batch` and `seed`; the epochs it had done are AdamW's step
    /// count over the batches of an epoch.
    pub resume: Option<PathBuf>,
    /// Save the trained model here, and the optimizer state beside it ([`optimizer_path`]).
    pub save: Option<PathBuf>,
}

/// Where the optimizer state of a model saved at `model` goes: `name.optim.safetensors`
/// beside it.
pub fn optimizer_path(model: &Path) -> PathBuf {
    let stem = model
        .file_stem()
        .map_or_else(Default::default, std::ffi::OsStr::to_os_string);
    let mut name = stem;
    name.push(".optim.safetensors");
    model.with_file_name(name)
}

/// The curves of one training run, one entry per epoch of this run.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Epochs done before this run (by the run it resumed); entry `i` of each curve is epoch
    /// `first_epoch + i + 1`.
    pub first_epoch: usize,
    /// Mean training loss over the epoch's batches.
    pub train_loss: Vec<f64>,
    /// Held-out loss at the end of the epoch.
    pub test_loss: Vec<f64>,
    /// Training accuracy at the end of the epoch (0..1).
    pub train_accuracy: Vec<f64>,
    /// Held-out accuracy at the end of the epoch (0..1).
    pub test_accuracy: Vec<f64>,
}

/// Linear(64, hidden) -> ReLU -> Linear(hidden, 10); its state dict names are PyTorch's for
/// the same two `nn.Linear` fields (`hidden.weight`, `hidden.bias`, `out.weight`, `out.bias`).
#[derive(Debug, Module)]
pub struct Mlp {
    hidden: Linear,
    out: Linear,
}

impl Mlp {
    /// Initialised as PyTorch initialises `Linear`.
    pub fn new(hidden: usize, rng: &mut Rng) -> Result<Mlp> {
        Ok(Mlp {
            hidden: Linear::new(FEATURES, hidden, true, rng)?,
            out: Linear::new(hidden, CLASSES, true, rng)?,
        })
    }

    /// Logits `[N, 10]` for images `[N, 64]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.out.forward(&relu(&self.hidden.forward(x)?)?)
    }

    /// A model with the hidden width of the one saved at `path`, its parameters loaded.
    pub fn load(path: &Path) -> Result<Mlp> {
        let hidden = hidden_width(path)?;
        let mut model = Mlp::new(hidden, &mut Rng::new(0))?;
        Module::load(&mut model, path)?;
        Ok(model)
    }

    /// `(mean loss, accuracy)` on `data`, without recording a graph.
    pub fn evaluate(&self, data: &Digits) -> Result<(f64, f64)> {
        let _guard = no_grad();
        let (x, y) = data.tensors()?;
        let logits = self.forward(&x)?;
        let loss = cross_entropy(&logits, &y, CrossEntropyOptions::default())?;
        let predicted = argmax(&logits, 1, false)?.values::<i32>()?;
        let right = predicted
            .iter()
            .zip(&data.labels)
            .filter(|(p, l)| p == l)
            .count();
        Ok((
            loss.item()?.to_f64(),
            right as f64 / data.len().max(1) as f64,
        ))
    }
}

/// Trains a fresh (or resumed) [`Mlp`] on `train` for `config.epochs` epochs, evaluating on
/// `test` after every epoch; `on_step` is called after every optimizer step with the epoch
/// (counted from 0 at the start of the first run, not of this one) and the batch's loss.
pub fn train(
    config: &Config,
    train: &Digits,
    test: &Digits,
    mut on_step: impl FnMut(usize, f64),
) -> Result<(Mlp, History)> {
    ensure!(config.batch > 0, Value, "the batch size must be positive");
    let mut rng = Rng::new(config.seed);
    let mut model = Mlp::new(config.hidden, &mut rng)?;
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: config.lr,
            ..AdamWConfig::default()
        },
    )?;
    let (x, y) = train.tensors()?;
    let loader =
        DataLoader::new(TensorDataset::new(vec![x, y])?, config.batch)?.shuffle(config.seed);
    let mut first_epoch = 0;
    if let Some(path) = &config.resume {
        Module::load(&mut model, path)?;
        opt.load_state(&model.named_parameters(), optimizer_path(path))?;
        first_epoch = epochs_done(&opt, loader.batches_per_epoch(), path)?;
    }
    let mut history = History {
        first_epoch,
        ..History::default()
    };
    let last = first_epoch.checked_add(config.epochs).ok_or_else(|| {
        autograd_core::Error::Value(format!(
            "{first_epoch} epochs done and {} more is more than can be counted",
            config.epochs
        ))
    })?;
    for epoch in first_epoch..last {
        let mut total = 0.0;
        let mut batches = 0;
        for batch in loader.epoch(epoch as u64)? {
            let [x, y] = <[Tensor; 2]>::try_from(batch?).map_err(|_| {
                autograd_core::Error::Runtime("a digits batch has two fields".into())
            })?;
            let loss = cross_entropy(&model.forward(&x)?, &y, CrossEntropyOptions::default())?;
            opt.zero_grad()?;
            loss.backward()?;
            opt.step()?;
            let l = loss.item()?.to_f64();
            total += l;
            batches += 1;
            on_step(epoch, l);
        }
        history.train_loss.push(total / f64::from(batches.max(1)));
        let (_, train_acc) = model.evaluate(train)?;
        let (test_loss, test_acc) = model.evaluate(test)?;
        history.train_accuracy.push(train_acc);
        history.test_loss.push(test_loss);
        history.test_accuracy.push(test_acc);
    }
    if let Some(path) = &config.save {
        model.save(path)?;
        opt.save_state(&model.named_parameters(), optimizer_path(path))?;
    }
    Ok((model, history))
}

/// The epochs a resumed run had done: every epoch is `per_epoch` optimizer steps (no batch
/// is dropped), and every step updates the first parameter. `Error::Value` when the count is
/// not a whole number of epochs (a run saved with another batch size or training set).
fn epochs_done(opt: &AdamW, per_epoch: usize, path: &Path) -> Result<usize> {
    let steps = opt.steps(0);
    let per_epoch = per_epoch as u64;
    ensure!(
        per_epoch > 0 && steps.is_multiple_of(per_epoch),
        Value,
        "{}: its optimizer took {steps} steps, not a whole number of epochs of {per_epoch} \
         batches: resume with the batch size, seed and data it was trained with",
        path.display()
    );
    usize::try_from(steps / per_epoch)
        .map_err(|_| autograd_core::Error::Value(format!("{steps} steps is too many epochs")))
}

/// The hidden width of the model saved at `path`: the rows of its `hidden.weight`.
fn hidden_width(path: &Path) -> Result<usize> {
    let entries = autograd_ops::persist::contents(path)?;
    let weight = entries.iter().find(|e| e.name == "hidden.weight");
    match weight.map(|e| e.shape.as_slice()) {
        Some(&[hidden, FEATURES]) => Ok(hidden),
        _ => autograd_core::bail!(
            Value,
            "{} holds no digits MLP: no hidden.weight of shape [hidden, {FEATURES}]",
            path.display()
        ),
    }
}

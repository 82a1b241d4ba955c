//! The digits MLP that `train_digits` trains: Linear -> ReLU -> Linear, softmax cross-entropy,
//! AdamW over mini-batches a `DataLoader` shuffles per epoch. Kept here, outside the example's `main`, so that a smoke
//! test can run a short training and check that it learns.

use std::path::{Path, PathBuf};

use autograd_core::{ensure, Result, Rng, Tensor};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::{relu, AdamW, AdamWConfig, Linear, Module};

use crate::classifier::train_epoch;
pub use crate::classifier::History;
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
    /// Continue from a model saved with `save` (its optimizer state and progress beside
    /// it), from the epoch it stopped at; `batch` and `seed` must be the ones it was saved
    /// with, since they fix every epoch's batches.
    pub resume: Option<PathBuf>,
    /// Save the trained model here, the optimizer state beside it ([`optimizer_path`]) and
    /// the epochs done ([`progress_path`]).
    pub save: Option<PathBuf>,
}

/// `name{suffix}` beside `model`, where `name` is the model file's stem.
fn beside(model: &Path, suffix: &str) -> PathBuf {
    let mut name = model
        .file_stem()
        .map_or_else(Default::default, std::ffi::OsStr::to_os_string);
    name.push(suffix);
    model.with_file_name(name)
}

/// Where the optimizer state of a model saved at `model` goes: `name.optim.safetensors`
/// beside it.
pub fn optimizer_path(model: &Path) -> PathBuf {
    beside(model, ".optim.safetensors")
}

/// Where the training progress of a model saved at `model` goes: `name.progress` beside it,
/// a text file of the epochs done and the batch size and seed that ordered them.
pub fn progress_path(model: &Path) -> PathBuf {
    beside(model, ".progress")
}

/// How far a saved run got, and what fixed its epochs' batches (a resume needs the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Progress {
    epochs: usize,
    batch: usize,
    seed: u64,
}

impl Progress {
    /// Writes `epochs N`, `batch N` and `seed N`, a line each.
    fn save(self, path: &Path) -> Result<()> {
        let text = format!(
            "epochs {}\nbatch {}\nseed {}\n",
            self.epochs, self.batch, self.seed
        );
        std::fs::write(path, text).map_err(|e| {
            autograd_core::Error::Runtime(format!("cannot write {}: {e}", path.display()))
        })
    }

    /// Reads what [`Progress::save`] wrote: each of the three keys exactly once, nothing else.
    fn load(path: &Path) -> Result<Progress> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            autograd_core::Error::Runtime(format!(
                "cannot read {} (the progress saved beside the model): {e}",
                path.display()
            ))
        })?;
        let (mut epochs, mut batch, mut seed) = (None, None, None);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let bad = || {
                autograd_core::Error::Value(format!(
                    "{}: `{line}` is not `epochs N`, `batch N` or `seed N` (once each)",
                    path.display()
                ))
            };
            let (key, value) = line.trim().split_once(' ').ok_or_else(bad)?;
            let value = value.trim();
            let fresh = match key {
                "epochs" => epochs.replace(value.parse().map_err(|_| bad())?).is_none(),
                "batch" => batch.replace(value.parse().map_err(|_| bad())?).is_none(),
                "seed" => seed.replace(value.parse().map_err(|_| bad())?).is_none(),
                _ => false,
            };
            if !fresh {
                return Err(bad());
            }
        }
        match (epochs, batch, seed) {
            (Some(epochs), Some(batch), Some(seed)) => Ok(Progress {
                epochs,
                batch,
                seed,
            }),
            _ => autograd_core::bail!(
                Value,
                "{}: needs the lines `epochs N`, `batch N` and `seed N`",
                path.display()
            ),
        }
    }
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
        crate::classifier::evaluate(data, |x| self.forward(x))
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
        first_epoch = epochs_done(config, &opt, loader.batches_per_epoch(), path)?;
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
        let loss = train_epoch(&loader, epoch, &mut opt, |x| model.forward(x), &mut on_step)?;
        let (_, train_acc) = model.evaluate(train)?;
        history.record(loss, train_acc, model.evaluate(test)?);
    }
    if let Some(path) = &config.save {
        model.save(path)?;
        opt.save_state(&model.named_parameters(), optimizer_path(path))?;
        Progress {
            epochs: last,
            batch: config.batch,
            seed: config.seed,
        }
        .save(&progress_path(path))?;
    }
    Ok((model, history))
}

/// The epochs the run saved at `path` had done, from its progress file, which must name
/// `config`'s batch size and seed (they fix every epoch's batches), and agree with the
/// optimizer's step count (every step updates the first parameter; `per_epoch` steps an
/// epoch, none dropped): another training set would not.
fn epochs_done(config: &Config, opt: &AdamW, per_epoch: usize, path: &Path) -> Result<usize> {
    let progress_file = progress_path(path);
    let p = Progress::load(&progress_file)?;
    ensure!(
        (p.batch, p.seed) == (config.batch, config.seed),
        Value,
        "{} was trained with batch {} and seed {}, not {} and {}: resume with those, so that \
         the epochs continue the same batch orders",
        path.display(),
        p.batch,
        p.seed,
        config.batch,
        config.seed
    );
    let steps = opt.steps(0);
    ensure!(
        u64::try_from(p.epochs.saturating_mul(per_epoch)) == Ok(steps),
        Value,
        "{}: {} epochs of {per_epoch} batches, but its optimizer took {steps} steps: was it \
         trained on other data?",
        progress_file.display(),
        p.epochs
    );
    Ok(p.epochs)
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

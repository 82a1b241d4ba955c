//! Cutting the rate when a metric stops improving: PyTorch's `ReduceLROnPlateau` (relative
//! threshold).

use autograd_core::{ensure, Result};

use super::{check_non_negative, Optimizer};

/// Whether the metric should fall (a loss) or rise (an accuracy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlateauMode {
    /// Lower is better (PyTorch's `"min"`, the default).
    #[default]
    Min,
    /// Higher is better (`"max"`).
    Max,
}

/// The config of [`ReduceLrOnPlateau`]; `Default` is PyTorch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReduceLrOnPlateauConfig {
    /// Which way is better.
    pub mode: PlateauMode,
    /// The factor a cut multiplies the rates by, in `[0, 1)`.
    pub factor: f64,
    /// Epochs without improvement tolerated before a cut.
    pub patience: u64,
    /// The relative margin an improvement needs: `metric < best * (1 - threshold)` in min
    /// mode, `metric > best * (1 + threshold)` in max mode (finite, `>= 0`).
    pub threshold: f64,
    /// Epochs after a cut during which bad epochs are not counted.
    pub cooldown: u64,
    /// No rate is cut below this (finite, `>= 0`).
    pub min_lr: f64,
    /// A cut smaller than this is skipped (finite, `>= 0`).
    pub eps: f64,
}

impl Default for ReduceLrOnPlateauConfig {
    fn default() -> Self {
        ReduceLrOnPlateauConfig {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
        }
    }
}

/// Counts the epochs whose metric is not better than the best so far; after more than
/// `patience` of them, each group's rate becomes `max(lr * factor, min_lr)` (unless that
/// changes it by no more than `eps`) and `cooldown` epochs follow in which none are counted.
#[derive(Debug, Clone)]
pub struct ReduceLrOnPlateau {
    config: ReduceLrOnPlateauConfig,
    best: f64,
    bad_epochs: u64,
    cooldown_left: u64,
    epoch: u64,
    last: Vec<f32>,
}

impl ReduceLrOnPlateau {
    /// The schedule of `opt`'s group rates (which it leaves as they are).
    pub fn new(opt: &dyn Optimizer, config: ReduceLrOnPlateauConfig) -> Result<ReduceLrOnPlateau> {
        ensure!(
            (0.0..1.0).contains(&config.factor),
            Value,
            "ReduceLROnPlateau's factor must be in [0, 1), got {}",
            config.factor
        );
        check_non_negative("threshold", config.threshold)?;
        check_non_negative("min_lr", config.min_lr)?;
        check_non_negative("eps", config.eps)?;
        Ok(ReduceLrOnPlateau {
            config,
            best: match config.mode {
                PlateauMode::Min => f64::INFINITY,
                PlateauMode::Max => f64::NEG_INFINITY,
            },
            bad_epochs: 0,
            cooldown_left: 0,
            epoch: 0,
            last: opt.group_lrs(),
        })
    }

    fn is_better(&self, metric: f64) -> bool {
        let t = self.config.threshold;
        match self.config.mode {
            PlateauMode::Min => metric < self.best * (1.0 - t),
            PlateauMode::Max => metric > self.best * (1.0 + t),
        }
    }

    /// One epoch with `metric` (a NaN is never better); cuts `opt`'s rates when the
    /// plateau has lasted too long. On an error (the optimizer refuses a rate) nothing changes.
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: f64) -> Result<()> {
        let (mut best, mut bad, mut cooldown) = (self.best, self.bad_epochs, self.cooldown_left);
        if self.is_better(metric) {
            best = metric;
            bad = 0;
        } else {
            bad += 1;
        }
        if cooldown > 0 {
            cooldown -= 1;
            bad = 0;
        }
        let mut last = opt.group_lrs();
        if bad > self.config.patience {
            let c = self.config;
            for lr in &mut last {
                let old = f64::from(*lr);
                let new = (old * c.factor).max(c.min_lr);
                if old - new > c.eps {
                    *lr = new as f32;
                }
            }
            opt.set_group_lrs(&last)?;
            cooldown = c.cooldown;
            bad = 0;
        }
        (self.best, self.bad_epochs, self.cooldown_left) = (best, bad, cooldown);
        self.epoch += 1;
        self.last = last;
        Ok(())
    }

    /// The rates after the last step, one per group.
    pub fn last_lr(&self) -> &[f32] {
        &self.last
    }

    /// The best metric so far (infinite before the first step).
    pub fn best(&self) -> f64 {
        self.best
    }

    /// The epochs stepped.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

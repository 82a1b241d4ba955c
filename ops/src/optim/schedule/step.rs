//! Decay by `gamma` every `step_size` epochs: PyTorch's `StepLR`.

use autograd_core::{ensure, Result};

use super::{check_non_negative, LrSchedule, Optimizer, Ticker};

/// The config of [`StepLr`]; `Default` is PyTorch's `gamma` of 0.1 with a `step_size` of 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLrConfig {
    /// Epochs between decays, at least 1.
    pub step_size: u64,
    /// The factor each decay multiplies the rate by, finite and `>= 0`.
    pub gamma: f64,
}

impl Default for StepLrConfig {
    fn default() -> Self {
        StepLrConfig {
            step_size: 1,
            gamma: 0.1,
        }
    }
}

/// `lr = base * gamma^(epoch / step_size)` (integer division).
#[derive(Debug, Clone)]
pub struct StepLr {
    config: StepLrConfig,
    ticker: Ticker,
}

impl StepLr {
    /// The schedule of `opt`'s current group rates; sets epoch 0's rates (the same).
    pub fn new(opt: &mut dyn Optimizer, config: StepLrConfig) -> Result<StepLr> {
        ensure!(
            config.step_size >= 1,
            Value,
            "StepLR needs a step_size of at least 1, got 0"
        );
        check_non_negative("gamma", config.gamma)?;
        let ticker = Ticker::start(opt, |b, e| Ok(rate(&config, b, e)))?;
        Ok(StepLr { config, ticker })
    }
}

fn rate(c: &StepLrConfig, base: f64, epoch: u64) -> f64 {
    let k = i32::try_from(epoch / c.step_size).unwrap_or(i32::MAX);
    base * c.gamma.powi(k)
}

impl LrSchedule for StepLr {
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let c = self.config;
        self.ticker.advance(opt, |b, e| Ok(rate(&c, b, e)))
    }

    fn last_lr(&self) -> &[f32] {
        self.ticker.last()
    }

    fn epoch(&self) -> u64 {
        self.ticker.epoch()
    }
}

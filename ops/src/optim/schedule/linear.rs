//! A linear ramp of the rate's factor over a number of epochs: PyTorch's `LinearLR`.

use autograd_core::{ensure, Result};

use super::{as_f64, LrSchedule, Optimizer, Ticker};

/// The config of [`LinearLr`]; `Default` is PyTorch's (1/3 to 1 over 5 epochs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearLrConfig {
    /// The factor at epoch 0, in `(0, 1]`.
    pub start_factor: f64,
    /// The factor from `total_iters` on, in `[0, 1]`.
    pub end_factor: f64,
    /// The epochs of the ramp, at least 1.
    pub total_iters: u64,
}

impl Default for LinearLrConfig {
    fn default() -> Self {
        LinearLrConfig {
            start_factor: 1.0 / 3.0,
            end_factor: 1.0,
            total_iters: 5,
        }
    }
}

/// `lr = base * (start + (end - start) * min(epoch, total_iters) / total_iters)`.
#[derive(Debug, Clone)]
pub struct LinearLr {
    config: LinearLrConfig,
    ticker: Ticker,
}

/// The config's ranges, as PyTorch checks them.
pub(crate) fn check(c: &LinearLrConfig) -> Result<()> {
    ensure!(
        c.start_factor > 0.0 && c.start_factor <= 1.0,
        Value,
        "LinearLR's start_factor must be in (0, 1], got {}",
        c.start_factor
    );
    ensure!(
        (0.0..=1.0).contains(&c.end_factor),
        Value,
        "LinearLR's end_factor must be in [0, 1], got {}",
        c.end_factor
    );
    ensure!(
        c.total_iters >= 1,
        Value,
        "LinearLR needs total_iters of at least 1, got 0"
    );
    Ok(())
}

/// The factor at `epoch`.
pub(crate) fn factor(c: &LinearLrConfig, epoch: u64) -> f64 {
    let done = as_f64(epoch.min(c.total_iters)) / as_f64(c.total_iters);
    c.start_factor + (c.end_factor - c.start_factor) * done
}

impl LinearLr {
    /// The schedule of `opt`'s current group rates; sets epoch 0's (`base * start_factor`).
    pub fn new(opt: &mut dyn Optimizer, config: LinearLrConfig) -> Result<LinearLr> {
        check(&config)?;
        let ticker = Ticker::start(opt, |b, e| Ok(b * factor(&config, e)))?;
        Ok(LinearLr { config, ticker })
    }
}

impl LrSchedule for LinearLr {
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let c = self.config;
        self.ticker.advance(opt, |b, e| Ok(b * factor(&c, e)))
    }

    fn last_lr(&self) -> &[f32] {
        self.ticker.last()
    }

    fn epoch(&self) -> u64 {
        self.ticker.epoch()
    }
}

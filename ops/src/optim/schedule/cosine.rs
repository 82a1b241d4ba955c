//! Cosine annealing after a linear warm-up: PyTorch's `SequentialLR` of a `LinearLR` warm-up
//! and a `CosineAnnealingLR`, with the milestone at the warm-up's end.

use std::f64::consts::PI;

use autograd_core::{ensure, Result};

use super::linear::{self, LinearLrConfig};
use super::{as_f64, check_non_negative, LrSchedule, Optimizer, Ticker};

/// The config of [`WarmupCosineLr`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmupCosineLrConfig {
    /// The warm-up's epochs (0: none); the rate ramps linearly from
    /// `base * warmup_start_factor` towards `base` over them.
    pub warmup_iters: u64,
    /// The warm-up's first factor, in `(0, 1]`.
    pub warmup_start_factor: f64,
    /// The epochs of the cosine's half period after the warm-up (PyTorch's `T_max`), at
    /// least 1; past it the cosine rises again, as PyTorch's does.
    pub t_max: u64,
    /// The rate the cosine reaches at `t_max` (PyTorch's `eta_min`), finite and `>= 0`.
    pub eta_min: f64,
}

impl Default for WarmupCosineLrConfig {
    fn default() -> Self {
        WarmupCosineLrConfig {
            warmup_iters: 0,
            warmup_start_factor: 1.0 / 3.0,
            t_max: 1,
            eta_min: 0.0,
        }
    }
}

/// With `w = warmup_iters`:
///
/// ```text
/// lr = base * (s + (1 - s) * epoch / w)                                  epoch < w
/// lr = eta_min + (base - eta_min) * (1 + cos(pi * (epoch - w) / t_max)) / 2    after
/// ```
#[derive(Debug, Clone)]
pub struct WarmupCosineLr {
    config: WarmupCosineLrConfig,
    ticker: Ticker,
}

fn rate(c: &WarmupCosineLrConfig, base: f64, epoch: u64) -> f64 {
    if epoch < c.warmup_iters {
        let warm = LinearLrConfig {
            start_factor: c.warmup_start_factor,
            end_factor: 1.0,
            total_iters: c.warmup_iters,
        };
        return base * linear::factor(&warm, epoch);
    }
    let t = as_f64(epoch - c.warmup_iters) / as_f64(c.t_max);
    c.eta_min + (base - c.eta_min) * (1.0 + (PI * t).cos()) / 2.0
}

impl WarmupCosineLr {
    /// The schedule of `opt`'s current group rates; sets epoch 0's.
    pub fn new(opt: &mut dyn Optimizer, config: WarmupCosineLrConfig) -> Result<WarmupCosineLr> {
        if config.warmup_iters > 0 {
            linear::check(&LinearLrConfig {
                start_factor: config.warmup_start_factor,
                end_factor: 1.0,
                total_iters: config.warmup_iters,
            })?;
        }
        ensure!(
            config.t_max >= 1,
            Value,
            "cosine annealing needs t_max of at least 1, got 0"
        );
        check_non_negative("eta_min", config.eta_min)?;
        let ticker = Ticker::start(opt, |b, e| Ok(rate(&config, b, e)))?;
        Ok(WarmupCosineLr { config, ticker })
    }
}

impl LrSchedule for WarmupCosineLr {
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

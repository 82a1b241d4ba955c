//! The one-cycle policy: PyTorch's `OneCycleLR` (two phases; the rate only, momentum does not
//! cycle).

use std::f64::consts::PI;

use autograd_core::{ensure, Result};

use super::{as_f64, check_non_negative, LrSchedule, Optimizer, Ticker};

/// How a phase goes from its start rate to its end rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anneal {
    /// Half a cosine (PyTorch's `"cos"`, the default).
    #[default]
    Cos,
    /// A straight line (`"linear"`).
    Linear,
}

/// The config of [`OneCycleLr`]; `Default` is PyTorch's apart from `max_lr` and
/// `total_steps`, which have none there (0.1 and 100 here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OneCycleLrConfig {
    /// The peak rate, every group's (finite, `>= 0`).
    pub max_lr: f64,
    /// The steps of the cycle, at least 1: epochs `0..total_steps` follow the cycle, epoch
    /// `total_steps` (where a loop of `total_steps` iterations ends) keeps the last rate, and
    /// stepping past it is `Error::Value`.
    pub total_steps: u64,
    /// The share of the cycle spent rising, in `(0, 1)`.
    pub pct_start: f64,
    /// The shape of both phases.
    pub anneal: Anneal,
    /// The first rate is `max_lr / div_factor` (> 0).
    pub div_factor: f64,
    /// The last rate is the first `/ final_div_factor` (> 0).
    pub final_div_factor: f64,
}

impl Default for OneCycleLrConfig {
    fn default() -> Self {
        OneCycleLrConfig {
            max_lr: 0.1,
            total_steps: 100,
            pct_start: 0.3,
            anneal: Anneal::Cos,
            div_factor: 25.0,
            final_div_factor: 1e4,
        }
    }
}

/// Rises from `max_lr / div_factor` to `max_lr` until step `pct_start * total_steps - 1`, then
/// falls to `max_lr / div_factor / final_div_factor` at step `total_steps - 1`, as PyTorch's
/// `OneCycleLR(three_phase=False)` (except at epoch `total_steps`, where PyTorch extrapolates
/// and this keeps the final rate); every group gets the same rates (the groups' own rates
/// are replaced, as PyTorch's with one `max_lr`). Momentum is not cycled.
#[derive(Debug, Clone)]
pub struct OneCycleLr {
    config: OneCycleLrConfig,
    ticker: Ticker,
}

fn positive(name: &str, v: f64) -> Result<()> {
    ensure!(
        v.is_finite() && v > 0.0,
        Value,
        "OneCycleLR's {name} must be finite and > 0, got {v}"
    );
    Ok(())
}

/// The end of the rising phase (a step, fractional as PyTorch's).
fn rise_end(c: &OneCycleLrConfig) -> f64 {
    c.pct_start * as_f64(c.total_steps) - 1.0
}

fn anneal(how: Anneal, start: f64, end: f64, pct: f64) -> f64 {
    match how {
        Anneal::Cos => end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0),
        Anneal::Linear => (end - start) * pct + start,
    }
}

fn rate(c: &OneCycleLrConfig, epoch: u64) -> Result<f64> {
    ensure!(
        epoch <= c.total_steps,
        Value,
        "OneCycleLR was stepped {epoch} times, past its total_steps of {}",
        c.total_steps
    );
    let initial = c.max_lr / c.div_factor;
    let min = initial / c.final_div_factor;
    let (e, end1, end2) = (as_f64(epoch), rise_end(c), as_f64(c.total_steps) - 1.0);
    Ok(if e <= end1 {
        anneal(c.anneal, initial, c.max_lr, e / end1)
    } else {
        // clamped: PyTorch extrapolates past the cycle's last step (a negative rate with
        // linear annealing) at the one step it allows after it
        let pct = ((e - end1) / (end2 - end1)).min(1.0);
        anneal(c.anneal, c.max_lr, min, pct)
    })
}

impl OneCycleLr {
    /// The schedule; sets every group's rate to `max_lr / div_factor`.
    pub fn new(opt: &mut dyn Optimizer, config: OneCycleLrConfig) -> Result<OneCycleLr> {
        check_non_negative("max_lr", config.max_lr)?;
        ensure!(
            config.total_steps >= 1,
            Value,
            "OneCycleLR needs total_steps of at least 1, got 0"
        );
        ensure!(
            config.pct_start > 0.0 && config.pct_start < 1.0,
            Value,
            "OneCycleLR's pct_start must be in (0, 1), got {}",
            config.pct_start
        );
        positive("div_factor", config.div_factor)?;
        positive("final_div_factor", config.final_div_factor)?;
        let (end1, end2) = (rise_end(&config), as_f64(config.total_steps) - 1.0);
        // PyTorch divides by zero (a ZeroDivisionError) on these
        ensure!(
            end1 != 0.0 && end1 != end2,
            Value,
            "OneCycleLR's phases are empty: pct_start {} of total_steps {} ends the rise at step {end1}",
            config.pct_start,
            config.total_steps
        );
        let ticker = Ticker::start(opt, |_, e| rate(&config, e))?;
        Ok(OneCycleLr { config, ticker })
    }
}

impl LrSchedule for OneCycleLr {
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let c = self.config;
        self.ticker.advance(opt, |_, e| rate(&c, e))
    }

    fn last_lr(&self) -> &[f32] {
        self.ticker.last()
    }

    fn epoch(&self) -> u64 {
        self.ticker.epoch()
    }
}

//! Learning-rate schedules: small types that set an optimizer's per-group rates each `step()`,
//! as PyTorch's `torch.optim.lr_scheduler` does. A schedule sets the rates for epoch 0 when it
//! is built (as PyTorch's constructor does) and for the next epoch at each
//! [`LrSchedule::step`]; [`ReduceLrOnPlateau`] steps on a metric instead. Every rate is
//! computed in f64 from the groups' rates at construction (their base rates) and stored as
//! f32. A bad config, or a step a schedule cannot take, is `Error::Value` and changes nothing.
//!
//! ```
//! use autograd_core::Rng;
//! use autograd_ops::{Linear, Optimizer, Sgd, SgdConfig};
//! use autograd_ops::optim::schedule::{LrSchedule, StepLr, StepLrConfig};
//! let layer = Linear::new(2, 1, true, &mut Rng::new(0))?;
//! let mut opt = Sgd::new(layer.parameters(), SgdConfig { lr: 0.1, ..SgdConfig::default() })?;
//! let mut sched = StepLr::new(&mut opt, StepLrConfig { step_size: 2, gamma: 0.5 })?;
//! let mut lrs = vec![opt.lr()];
//! for _ in 0..4 {
//!     // opt.step() ... then:
//!     sched.step(&mut opt)?;
//!     lrs.push(opt.lr());
//! }
//! assert_eq!(lrs, [0.1, 0.1, 0.05, 0.05, 0.025]);
//! # Ok::<(), autograd_core::Error>(())
//! ```

mod cosine;
mod linear;
mod one_cycle;
mod plateau;
mod step;

pub use cosine::{WarmupCosineLr, WarmupCosineLrConfig};
pub use linear::{LinearLr, LinearLrConfig};
pub use one_cycle::{Anneal, OneCycleLr, OneCycleLrConfig};
pub use plateau::{PlateauMode, ReduceLrOnPlateau, ReduceLrOnPlateauConfig};
pub use step::{StepLr, StepLrConfig};

use autograd_core::{ensure, Result};

use super::Optimizer;

/// A schedule driven by epochs (calls): what a training loop calls after each optimizer step.
pub trait LrSchedule {
    /// Moves to the next epoch and sets the optimizer's rates for it. On an error (the
    /// optimizer refuses a rate, a schedule past its end) nothing changes.
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()>;

    /// The rates last set, one per group (PyTorch's `get_last_lr()`).
    fn last_lr(&self) -> &[f32];

    /// The epochs stepped since construction (PyTorch's `last_epoch`).
    fn epoch(&self) -> u64;
}

/// The epoch count, base rates and last rates an epoch schedule keeps.
#[derive(Debug, Clone)]
pub(crate) struct Ticker {
    base: Vec<f64>,
    epoch: u64,
    last: Vec<f32>,
}

impl Ticker {
    /// Reads `opt`'s group rates as the base rates and sets `rate(base, 0)` for each group.
    pub(crate) fn start(
        opt: &mut dyn Optimizer,
        rate: impl Fn(f64, u64) -> Result<f64>,
    ) -> Result<Ticker> {
        let base: Vec<f64> = opt.group_lrs().into_iter().map(f64::from).collect();
        let mut t = Ticker {
            base,
            epoch: 0,
            last: Vec::new(),
        };
        t.last = t.set(opt, 0, &rate)?;
        Ok(t)
    }

    /// Moves to the next epoch and sets its rates; on an error nothing changes.
    pub(crate) fn advance(
        &mut self,
        opt: &mut dyn Optimizer,
        rate: impl Fn(f64, u64) -> Result<f64>,
    ) -> Result<()> {
        let next = self.epoch + 1;
        self.last = self.set(opt, next, &rate)?;
        self.epoch = next;
        Ok(())
    }

    fn set(
        &self,
        opt: &mut dyn Optimizer,
        epoch: u64,
        rate: &impl Fn(f64, u64) -> Result<f64>,
    ) -> Result<Vec<f32>> {
        let lrs = self
            .base
            .iter()
            .map(|&b| rate(b, epoch).map(|r| r as f32))
            .collect::<Result<Vec<f32>>>()?;
        opt.set_group_lrs(&lrs)?;
        Ok(lrs)
    }

    pub(crate) fn last(&self) -> &[f32] {
        &self.last
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// A config value that must be finite and at least 0.
pub(crate) fn check_non_negative(name: &str, value: f64) -> Result<()> {
    ensure!(
        value.is_finite() && value >= 0.0,
        Value,
        "invalid {name} {value}: it must be finite and >= 0"
    );
    Ok(())
}

/// An epoch count as the exponent or numerator the formulas take.
pub(crate) fn as_f64(n: u64) -> f64 {
    n as f64
}

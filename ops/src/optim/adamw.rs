//! Adam with decoupled weight decay: PyTorch's `torch.optim.AdamW`.

use std::path::Path;

use autograd_core::{Result, Tensor};

use super::group::{Groups, ParamGroup};
use super::moments::{check_hyper, AdamCore, Decay, Hyper};
use super::Optimizer;

/// The hyperparameters of [`AdamW`]; `Default` is PyTorch's (lr 1e-3, betas (0.9, 0.999),
/// eps 1e-8, weight decay 1e-2). AMSGrad and maximizing are switched on the optimizer
/// ([`AdamW::amsgrad`], [`AdamW::maximize`]), so that this struct keeps its fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    /// The learning rate.
    pub lr: f32,
    /// The decay rates of the first and second moment averages, each in `[0, 1)`.
    pub betas: (f32, f32),
    /// Added to the denominator for numerical stability.
    pub eps: f32,
    /// The decoupled weight decay: each step multiplies `p` by `1 - lr * weight_decay`.
    pub weight_decay: f32,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
        }
    }
}

impl AdamWConfig {
    fn hyper(&self) -> Hyper {
        Hyper {
            lr: self.lr,
            betas: self.betas,
            eps: self.eps,
            weight_decay: self.weight_decay,
            amsgrad: false,
            maximize: false,
        }
    }
}

/// AdamW as PyTorch computes it, for each parameter `p` with gradient `g` at its step `t`
/// (counted per parameter, from 1):
///
/// ```text
/// g = -g                                    if maximize
/// p = p * (1 - lr * weight_decay)
/// m = lerp(m, g, 1 - beta1)                 (beta1 * m + (1 - beta1) * g)
/// v = beta2 * v + (1 - beta2) * g * g
/// v_max = max(v_max, v)                     if amsgrad (and v_max replaces v below)
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
#[derive(Debug)]
pub struct AdamW {
    core: AdamCore,
    /// The core's hyperparameters as the public config (kept in step with it).
    config: AdamWConfig,
}

impl AdamW {
    /// An optimizer of `params` (Float32 leaves of one subtensor with injective layouts, each
    /// once). Invalid hyperparameters are `Error::Value`, as PyTorch's `ValueError`.
    pub fn new(params: Vec<Tensor>, config: AdamWConfig) -> Result<AdamW> {
        let hyper = config.hyper();
        check_hyper(&hyper, false)?;
        let groups = Groups::single(params.len(), config.lr, config.weight_decay);
        let core = AdamCore::new(params, groups, hyper, Decay::Decoupled)?;
        Ok(AdamW { core, config })
    }

    /// An optimizer of parameter groups, each with its own learning rate and weight decay
    /// (the config's where a group sets none); parameters are numbered group after group.
    pub fn with_groups(groups: Vec<ParamGroup>, config: AdamWConfig) -> Result<AdamW> {
        let hyper = config.hyper();
        check_hyper(&hyper, false)?;
        let (params, groups) = Groups::build(groups, config.lr, config.weight_decay)?;
        let core = AdamCore::new(params, groups, hyper, Decay::Decoupled)?;
        Ok(AdamW { core, config })
    }

    /// AMSGrad (PyTorch's `amsgrad=True`): the denominator uses the running maximum of the
    /// second moment. Switched before the first step; after it, `Error::Value` (the maxima
    /// would start from moments already averaged).
    pub fn amsgrad(mut self, on: bool) -> Result<AdamW> {
        autograd_core::ensure!(
            self.core.untouched(),
            Value,
            "AdamW: switch amsgrad before the first step"
        );
        self.core.hyper.amsgrad = on;
        Ok(self)
    }

    /// Climbs the objective instead of descending it (PyTorch's `maximize=True`): the
    /// gradient's sign is flipped first.
    #[must_use]
    pub fn maximize(mut self, on: bool) -> AdamW {
        self.core.hyper.maximize = on;
        self
    }

    /// Whether AMSGrad and maximizing are on: `(amsgrad, maximize)`.
    pub fn flags(&self) -> (bool, bool) {
        (self.core.hyper.amsgrad, self.core.hyper.maximize)
    }

    /// The hyperparameters (`lr`: the first group's once a schedule or a load set it).
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// The config the core holds now.
    fn sync(&mut self) {
        let h = self.core.hyper;
        self.config = AdamWConfig {
            lr: h.lr,
            betas: h.betas,
            eps: h.eps,
            weight_decay: h.weight_decay,
        };
    }

    /// The steps parameter `i` has taken (steps without its gradient do not count).
    pub fn steps(&self, i: usize) -> u64 {
        self.core.steps(i)
    }

    /// Saves the hyperparameters, the groups and each parameter's step count and moments to
    /// a safetensors file, named after the parameter (`state.{name}.step`, `.exp_avg`,
    /// `.exp_avg_sq`, `.max_exp_avg_sq` with AMSGrad); `names` is the module's
    /// `named_parameters()` and must name every parameter of this optimizer.
    pub fn save_state(&self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        self.core.save_state("AdamW", names, path.as_ref())
    }

    /// Loads what [`AdamW::save_state`] saved, replacing the hyperparameters, step counts and
    /// moments; parameters are matched by name through `names`. On an error nothing changes.
    pub fn load_state(&mut self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        self.core.load_state("AdamW", false, names, path.as_ref())?;
        self.sync();
        Ok(())
    }
}

impl Optimizer for AdamW {
    fn params(&self) -> &[Tensor] {
        &self.core.params
    }

    fn steps_each_parameter_apart(&self) -> bool {
        true
    }

    fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        self.core.step_with(grads)
    }

    fn lr(&self) -> f32 {
        self.core.hyper.lr
    }

    fn set_lr(&mut self, lr: f32) -> Result<()> {
        self.core.set_lr(lr)?;
        self.sync();
        Ok(())
    }

    fn group_lrs(&self) -> Vec<f32> {
        self.core.groups.lrs()
    }

    fn set_group_lrs(&mut self, lrs: &[f32]) -> Result<()> {
        self.core.set_group_lrs(lrs)?;
        self.sync();
        Ok(())
    }
}

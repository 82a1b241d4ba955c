//! Adam with weight decay as an L2 penalty added to the gradient: PyTorch's `torch.optim.Adam`.

use std::path::Path;

use autograd_core::{Result, Tensor};

use super::group::{Groups, ParamGroup};
use super::moments::{check_hyper, AdamCore, Decay, Hyper};
use super::Optimizer;

/// The hyperparameters of [`Adam`]; `Default` is PyTorch's (lr 1e-3, betas (0.9, 0.999),
/// eps 1e-8, no weight decay, no AMSGrad, minimizing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamConfig {
    /// The learning rate.
    pub lr: f32,
    /// The decay rates of the first and second moment averages, each in `[0, 1)`.
    pub betas: (f32, f32),
    /// Added to the denominator for numerical stability.
    pub eps: f32,
    /// The L2 penalty added to the gradient: `g + weight_decay * p` (not decoupled: see
    /// [`crate::AdamW`]).
    pub weight_decay: f32,
    /// AMSGrad: the denominator uses the running maximum of the second moment.
    pub amsgrad: bool,
    /// Climbs the objective instead: the gradient's sign is flipped first.
    pub maximize: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
        }
    }
}

impl AdamConfig {
    fn hyper(&self) -> Hyper {
        Hyper {
            lr: self.lr,
            betas: self.betas,
            eps: self.eps,
            weight_decay: self.weight_decay,
            amsgrad: self.amsgrad,
            maximize: self.maximize,
        }
    }
}

/// Adam as PyTorch computes it, for each parameter `p` with gradient `g` at its step `t`
/// (counted per parameter, from 1):
///
/// ```text
/// g = -g                                    if maximize
/// g = g + weight_decay * p
/// m = lerp(m, g, 1 - beta1)                 (beta1 * m + (1 - beta1) * g)
/// v = beta2 * v + (1 - beta2) * g * g
/// v_max = max(v_max, v)                     if amsgrad (and v_max replaces v below)
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
#[derive(Debug)]
pub struct Adam {
    core: AdamCore,
    /// The core's hyperparameters as the public config (kept in step with it).
    config: AdamConfig,
}

impl Adam {
    /// An optimizer of `params` (Float32 leaves of one subtensor with injective layouts, each
    /// once). Invalid hyperparameters are `Error::Value`, as PyTorch's `ValueError`
    /// (and `eps` must be > 0).
    pub fn new(params: Vec<Tensor>, config: AdamConfig) -> Result<Adam> {
        let hyper = config.hyper();
        check_hyper(&hyper, true)?;
        let groups = Groups::single(params.len(), config.lr, config.weight_decay);
        let core = AdamCore::new(params, groups, hyper, Decay::L2)?;
        Ok(Adam { core, config })
    }

    /// An optimizer of parameter groups, each with its own learning rate and weight decay
    /// (the config's where a group sets none); parameters are numbered group after group.
    pub fn with_groups(groups: Vec<ParamGroup>, config: AdamConfig) -> Result<Adam> {
        let hyper = config.hyper();
        check_hyper(&hyper, true)?;
        let (params, groups) = Groups::build(groups, config.lr, config.weight_decay)?;
        let core = AdamCore::new(params, groups, hyper, Decay::L2)?;
        Ok(Adam { core, config })
    }

    /// The hyperparameters (`lr`: the first group's once a schedule or a load set it).
    pub fn config(&self) -> &AdamConfig {
        &self.config
    }

    /// The config the core holds now.
    fn sync(&mut self) {
        let h = self.core.hyper;
        self.config = AdamConfig {
            lr: h.lr,
            betas: h.betas,
            eps: h.eps,
            weight_decay: h.weight_decay,
            amsgrad: h.amsgrad,
            maximize: h.maximize,
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
        self.core.save_state("Adam", names, path.as_ref())
    }

    /// Loads what [`Adam::save_state`] saved, replacing the hyperparameters, step counts and
    /// moments; parameters are matched by name through `names`. On an error nothing changes.
    pub fn load_state(&mut self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        self.core.load_state("Adam", true, names, path.as_ref())?;
        self.sync();
        Ok(())
    }
}

impl Optimizer for Adam {
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

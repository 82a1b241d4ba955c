//! Adagrad with learning-rate decay and L2 weight decay: PyTorch's `torch.optim.Adagrad`.

use std::path::Path;

use autograd_core::kernel::alloc;
use autograd_core::{Result, Tensor};

use crate::persist::optimizer_state::{self, names_of, Loaded, Slot};

use super::group::{borrowed, flag, Groups, ParamGroup};
use super::parameter::{
    check_eps, check_gradients, check_non_negative, check_parameters, decimal, sign_of,
};
use super::update::{step_all, update, Bound};
use super::Optimizer;

/// The hyperparameters of [`Adagrad`]; `Default` is PyTorch's (lr 1e-2, eps 1e-10,
/// everything else 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdagradConfig {
    /// The learning rate.
    pub lr: f32,
    /// The rate at step `t` is `lr / (1 + (t - 1) * lr_decay)`.
    pub lr_decay: f32,
    /// The L2 penalty added to the gradient: `g + weight_decay * p`.
    pub weight_decay: f32,
    /// What the sum of squared gradients starts at.
    pub initial_accumulator_value: f32,
    /// Added to the denominator for numerical stability, > 0.
    pub eps: f32,
    /// Climbs the objective instead: the gradient's sign is flipped first.
    pub maximize: bool,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// The state of one parameter, from its first step.
#[derive(Debug, Clone)]
struct State {
    step: u64,
    sum: Vec<f32>,
}

/// Adagrad as PyTorch computes it, for each parameter `p` with gradient `g` at its step `t`:
///
/// ```text
/// g = -g                                    if maximize
/// g = g + weight_decay * p
/// s = s + g * g                             (s starts at initial_accumulator_value)
/// p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)
/// ```
#[derive(Debug)]
pub struct Adagrad {
    params: Vec<Tensor>,
    config: AdagradConfig,
    groups: Groups,
    state: Vec<Option<State>>,
    scratch: Vec<f32>,
}

/// The hyperparameters' ranges, as PyTorch checks them, and `eps > 0`.
fn check_config(c: &AdagradConfig) -> Result<()> {
    check_non_negative("learning rate", c.lr)?;
    check_non_negative("lr_decay", c.lr_decay)?;
    check_non_negative("weight_decay", c.weight_decay)?;
    check_non_negative("initial_accumulator_value", c.initial_accumulator_value)?;
    check_eps(c.eps)
}

impl Adagrad {
    /// An optimizer of `params` (Float32 leaves of one subtensor with injective layouts, each
    /// once). Invalid hyperparameters are `Error::Value`.
    pub fn new(params: Vec<Tensor>, config: AdagradConfig) -> Result<Adagrad> {
        check_config(&config)?;
        let groups = Groups::single(params.len(), config.lr, config.weight_decay);
        Adagrad::build(params, groups, config)
    }

    /// An optimizer of parameter groups, each with its own learning rate and weight decay
    /// (the config's where a group sets none); parameters are numbered group after group.
    pub fn with_groups(groups: Vec<ParamGroup>, config: AdagradConfig) -> Result<Adagrad> {
        check_config(&config)?;
        let (params, groups) = Groups::build(groups, config.lr, config.weight_decay)?;
        Adagrad::build(params, groups, config)
    }

    fn build(params: Vec<Tensor>, groups: Groups, config: AdagradConfig) -> Result<Adagrad> {
        check_parameters(&params)?;
        let state = params.iter().map(|_| None).collect();
        Ok(Adagrad {
            params,
            config,
            groups,
            state,
            scratch: Vec::new(),
        })
    }

    /// The hyperparameters (`lr` and `weight_decay`: the first group's).
    pub fn config(&self) -> &AdagradConfig {
        &self.config
    }

    /// The steps parameter `i` has taken (steps without its gradient do not count).
    pub fn steps(&self, i: usize) -> u64 {
        self.state
            .get(i)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.step)
    }

    /// Saves the hyperparameters, groups and each parameter's step count and sum to a
    /// safetensors file (`state.{name}.step`, `state.{name}.sum`); `names` is the module's
    /// `named_parameters()` and must name every parameter of this optimizer.
    pub fn save_state(&self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let c = &self.config;
        let mut hyper = vec![
            ("lr", c.lr.to_string()),
            ("lr_decay", c.lr_decay.to_string()),
            ("weight_decay", c.weight_decay.to_string()),
            (
                "initial_accumulator_value",
                c.initial_accumulator_value.to_string(),
            ),
            ("eps", c.eps.to_string()),
            ("maximize", c.maximize.to_string()),
        ];
        let groups = self.groups.hyper();
        hyper.extend(borrowed(&groups));
        let mut slots = Vec::new();
        for ((name, p), s) in param_names.iter().zip(&self.params).zip(&self.state) {
            let Some(s) = s else { continue };
            slots.push((
                format!("state.{name}.step"),
                Vec::new(),
                Slot::Count(s.step),
            ));
            slots.push((format!("state.{name}.sum"), p.dims(), Slot::F32(&s.sum)));
        }
        optimizer_state::save(path.as_ref(), "Adagrad", &hyper, &slots)
    }

    /// Loads what [`Adagrad::save_state`] saved, replacing the hyperparameters, groups and
    /// state; parameters are matched by name through `names`. On an error nothing changes.
    pub fn load_state(&mut self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let param_names = names_of(&self.params, names)?;
        let mut file = Loaded::read(path, "Adagrad")?;
        let config = AdagradConfig {
            lr: file.hyper("lr")?,
            lr_decay: file.hyper("lr_decay")?,
            weight_decay: file.hyper("weight_decay")?,
            initial_accumulator_value: file.hyper("initial_accumulator_value")?,
            eps: file.hyper("eps")?,
            maximize: flag(&file, "maximize")?,
        };
        check_config(&config)?;
        let groups = self.groups.load(&file, config.lr, config.weight_decay)?;
        let mut state = Vec::with_capacity(self.params.len());
        for (name, p) in param_names.iter().zip(&self.params) {
            let dims = p.dims();
            let step = file.count(&format!("state.{name}.step"))?;
            let sum = file.f32s(&format!("state.{name}.sum"), &dims)?;
            state.push(match (step, sum) {
                (Some(step), Some(sum)) => Some(State { step, sum }),
                (None, None) => None,
                _ => autograd_core::bail!(
                    Value,
                    "{}: the state of `{name}` needs both step and sum",
                    path.display()
                ),
            });
        }
        file.finish()?;
        self.config = config;
        self.groups = groups;
        self.state = state;
        Ok(())
    }
}

impl Optimizer for Adagrad {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn steps_each_parameter_apart(&self) -> bool {
        true
    }

    fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        check_gradients(&self.params, grads)?;
        let c = self.config;
        let (sign, eps) = (sign_of(c.maximize), c.eps);
        let scratch = &mut self.scratch;
        let (params, groups) = (&self.params, &self.groups);
        step_all(params, grads, &mut self.state, |i, state| {
            let (p, Some(g)) = (&params[i], &grads[i]) else {
                return Ok(());
            };
            let o = groups.of(i);
            let wd = o.weight_decay;
            let s = match state.take() {
                Some(s) => state.insert(s),
                None => state.insert(State {
                    step: 0,
                    sum: alloc::filled(p.size(), c.initial_accumulator_value)?,
                }),
            };
            s.step += 1;
            // the rate in f64, as PyTorch's Python float
            let clr = decimal(o.lr) / (1.0 + (s.step - 1) as f64 * decimal(c.lr_decay));
            let neg_clr = (-clr) as f32;
            update(
                p,
                g,
                Bound::Arithmetic,
                scratch,
                [&mut s.sum],
                |p, g, [sum]| {
                    let g = sign * g;
                    let g = if wd == 0.0 { g } else { g + wd * *p };
                    *sum += g * g;
                    let std = sum.sqrt() + eps;
                    *p += neg_clr * g / std;
                },
            )
        })
    }

    fn lr(&self) -> f32 {
        self.config.lr
    }

    fn set_lr(&mut self, lr: f32) -> Result<()> {
        check_non_negative("learning rate", lr)?;
        self.config.lr = lr;
        self.groups.set_all_lrs(lr);
        Ok(())
    }

    fn group_lrs(&self) -> Vec<f32> {
        self.groups.lrs()
    }

    fn set_group_lrs(&mut self, lrs: &[f32]) -> Result<()> {
        self.groups.set_lrs(lrs)?;
        self.config.lr = lrs[0];
        Ok(())
    }
}

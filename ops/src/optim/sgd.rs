//! Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight
//! decay: PyTorch's `torch.optim.SGD`.

use std::path::Path;

use autograd_core::kernel::alloc;
use autograd_core::{ensure, Result, Tensor};

use crate::persist::optimizer_state::{self, names_of, Loaded, Slot};

use super::group::{borrowed, flag, Groups, ParamGroup};
use super::parameter::{check_gradients, check_non_negative, check_parameters, sign_of};
use super::update::{step_all, update, Bound};
use super::Optimizer;

/// The hyperparameters of [`Sgd`]; `Default` is PyTorch's (lr 1e-3, everything else off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdConfig {
    /// The learning rate.
    pub lr: f32,
    /// The momentum factor (0: plain SGD).
    pub momentum: f32,
    /// The dampening of momentum (the gradient enters the buffer times `1 - dampening`).
    pub dampening: f32,
    /// The L2 penalty added to the gradient: `g + weight_decay * p`.
    pub weight_decay: f32,
    /// Nesterov momentum (needs `momentum > 0` and `dampening == 0`).
    pub nesterov: bool,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }
}

/// SGD as PyTorch computes it, for each parameter `p` with gradient `g`:
///
/// ```text
/// g = -g                                              if maximize
/// d = g + weight_decay * p
/// if momentum != 0:
///     buf = d                                          on the parameter's first step
///     buf = momentum * buf + (1 - dampening) * d       afterwards
///     d = d + momentum * buf   if nesterov   else   buf
/// p = p - lr * d
/// ```
#[derive(Debug)]
pub struct Sgd {
    params: Vec<Tensor>,
    config: SgdConfig,
    groups: Groups,
    /// Climb the objective: the gradient's sign is flipped before everything else.
    maximize: bool,
    /// The momentum buffer of each parameter (logical order), from its first step.
    momentum: Vec<Option<Vec<f32>>>,
    scratch: Vec<f32>,
}

impl Sgd {
    /// An optimizer of `params` (Float32 leaves of one subtensor with injective layouts, each
    /// once). Invalid hyperparameters are `Error::Value`, as PyTorch's `ValueError`.
    pub fn new(params: Vec<Tensor>, config: SgdConfig) -> Result<Sgd> {
        check_config(&config)?;
        let groups = Groups::single(params.len(), config.lr, config.weight_decay);
        Sgd::build(params, groups, config)
    }

    /// An optimizer of parameter groups, each with its own learning rate and weight decay
    /// (the config's where a group sets none); parameters are numbered group after group.
    pub fn with_groups(groups: Vec<ParamGroup>, config: SgdConfig) -> Result<Sgd> {
        check_config(&config)?;
        let (params, groups) = Groups::build(groups, config.lr, config.weight_decay)?;
        Sgd::build(params, groups, config)
    }

    fn build(params: Vec<Tensor>, groups: Groups, config: SgdConfig) -> Result<Sgd> {
        check_parameters(&params)?;
        let momentum = vec![None; params.len()];
        Ok(Sgd {
            params,
            config,
            groups,
            maximize: false,
            momentum,
            scratch: Vec::new(),
        })
    }

    /// Climbs the objective instead of descending it (PyTorch's `maximize=True`): the
    /// gradient's sign is flipped before everything else.
    #[must_use]
    pub fn maximize(mut self, on: bool) -> Sgd {
        self.maximize = on;
        self
    }

    /// Whether [`Sgd::maximize`] is on.
    pub fn is_maximizing(&self) -> bool {
        self.maximize
    }

    /// The hyperparameters (`lr` and `weight_decay`: the first group's).
    pub fn config(&self) -> &SgdConfig {
        &self.config
    }

    /// The momentum buffer of parameter `i` in logical order, once it has taken a step with
    /// momentum.
    pub fn momentum_buffer(&self, i: usize) -> Option<&[f32]> {
        self.momentum.get(i)?.as_deref()
    }
}

/// The hyperparameters' ranges, as PyTorch checks them.
fn check_config(config: &SgdConfig) -> Result<()> {
    check_non_negative("learning rate", config.lr)?;
    check_non_negative("momentum", config.momentum)?;
    check_non_negative("weight_decay", config.weight_decay)?;
    ensure!(
        config.dampening.is_finite(),
        Value,
        "invalid dampening {}: it must be finite",
        config.dampening
    );
    ensure!(
        !config.nesterov || (config.momentum > 0.0 && config.dampening == 0.0),
        Value,
        "Nesterov momentum requires a momentum > 0 and zero dampening, got momentum {} and dampening {}",
        config.momentum,
        config.dampening
    );
    Ok(())
}

impl Sgd {
    /// Saves the hyperparameters and momentum buffers to a safetensors file, each buffer
    /// named after its parameter (`state.{name}.momentum_buffer`); `names` is the module's
    /// `named_parameters()` and must name every parameter of this optimizer.
    pub fn save_state(&self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let c = &self.config;
        let hyper = [
            ("lr", c.lr.to_string()),
            ("momentum", c.momentum.to_string()),
            ("dampening", c.dampening.to_string()),
            ("weight_decay", c.weight_decay.to_string()),
            ("nesterov", c.nesterov.to_string()),
            ("maximize", self.maximize.to_string()),
        ];
        let groups = self.groups.hyper();
        let mut hyper = hyper.to_vec();
        hyper.extend(borrowed(&groups));
        let slots: Vec<_> = param_names
            .iter()
            .zip(&self.params)
            .zip(&self.momentum)
            .filter_map(|((name, p), buf)| {
                let buf = buf.as_deref()?;
                Some((
                    format!("state.{name}.momentum_buffer"),
                    p.dims(),
                    Slot::F32(buf),
                ))
            })
            .collect();
        optimizer_state::save(path.as_ref(), "Sgd", &hyper, &slots)
    }

    /// Loads what [`Sgd::save_state`] saved, replacing the hyperparameters and momentum
    /// buffers; parameters are matched by name through `names`. On an error nothing changes.
    pub fn load_state(&mut self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let mut file = Loaded::read(path.as_ref(), "Sgd")?;
        let config = SgdConfig {
            lr: file.hyper("lr")?,
            momentum: file.hyper("momentum")?,
            dampening: file.hyper("dampening")?,
            weight_decay: file.hyper("weight_decay")?,
            nesterov: file.hyper("nesterov")?,
        };
        let maximize = flag(&file, "maximize")?;
        check_config(&config)?;
        let groups = self.groups.load(&file, config.lr, config.weight_decay)?;
        let momentum = param_names
            .iter()
            .zip(&self.params)
            .map(|(name, p)| file.f32s(&format!("state.{name}.momentum_buffer"), &p.dims()))
            .collect::<Result<Vec<_>>>()?;
        file.finish()?;
        self.config = config;
        self.groups = groups;
        self.maximize = maximize;
        self.momentum = momentum;
        Ok(())
    }
}

impl Optimizer for Sgd {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn steps_each_parameter_apart(&self) -> bool {
        true
    }

    fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        check_gradients(&self.params, grads)?;
        let config = self.config;
        let sign = sign_of(self.maximize);
        let scratch = &mut self.scratch;
        let (params, groups) = (&self.params, &self.groups);
        step_all(params, grads, &mut self.momentum, |i, buf| {
            let (p, Some(g)) = (&params[i], &grads[i]) else {
                return Ok(());
            };
            let o = groups.of(i);
            let c = SgdConfig {
                lr: o.lr,
                weight_decay: o.weight_decay,
                ..config
            };
            let decay = c.weight_decay != 0.0;
            if c.momentum == 0.0 {
                return if decay {
                    plain::<true>(p, g, scratch, &c, sign)
                } else {
                    plain::<false>(p, g, scratch, &c, sign)
                };
            }
            let first = buf.is_none();
            let b = match buf.take() {
                Some(b) => buf.insert(b),
                None => buf.insert(alloc::filled(p.size(), 0.0)?),
            };
            let run = match (first, c.nesterov, decay) {
                (false, false, false) => with_momentum::<false, false, false>,
                (false, false, true) => with_momentum::<false, false, true>,
                (false, true, false) => with_momentum::<false, true, false>,
                (false, true, true) => with_momentum::<false, true, true>,
                (true, false, false) => with_momentum::<true, false, false>,
                (true, false, true) => with_momentum::<true, false, true>,
                (true, true, false) => with_momentum::<true, true, false>,
                (true, true, true) => with_momentum::<true, true, true>,
            };
            run(p, g, scratch, b, &c, sign)
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

// The settings that branch are compile-time parameters, so each loop is straight-line code
// the compiler vectorizes (a run-time test inside the closure kept it scalar, 7x slower).

/// `d = g (+ wd p)`: PyTorch skips the decay term when `weight_decay` is 0 (so an infinite
/// parameter does not turn into NaN).
#[inline]
fn decayed<const DECAY: bool>(p: f32, g: f32, wd: f32) -> f32 {
    if DECAY {
        g + wd * p
    } else {
        g
    }
}

/// `p -= lr d` without momentum.
fn plain<const DECAY: bool>(
    p: &Tensor,
    g: &Tensor,
    scratch: &mut Vec<f32>,
    c: &SgdConfig,
    sign: f32,
) -> Result<()> {
    let (lr, wd) = (c.lr, c.weight_decay);
    update(p, g, Bound::Memory, scratch, [], |p, g, []| {
        *p += -lr * decayed::<DECAY>(*p, sign * g, wd);
    })
}

/// `buf = d` on the first step, else `momentum buf + (1 - dampening) d`; then
/// `p -= lr (d + momentum buf)` with Nesterov, else `p -= lr buf`.
fn with_momentum<const FIRST: bool, const NESTEROV: bool, const DECAY: bool>(
    p: &Tensor,
    g: &Tensor,
    scratch: &mut Vec<f32>,
    buf: &mut [f32],
    c: &SgdConfig,
    sign: f32,
) -> Result<()> {
    let (lr, wd, mu, keep) = (c.lr, c.weight_decay, c.momentum, 1.0 - c.dampening);
    update(p, g, Bound::Memory, scratch, [buf], |p, g, [b]| {
        let d = decayed::<DECAY>(*p, sign * g, wd);
        *b = if FIRST { d } else { mu * *b + keep * d };
        let d = if NESTEROV { d + mu * *b } else { *b };
        *p += -lr * d;
    })
}

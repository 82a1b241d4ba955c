//! RMSprop with momentum, the centered variant and L2 weight decay: PyTorch's
//! `torch.optim.RMSprop`.

use std::path::Path;

use autograd_core::kernel::alloc;
use autograd_core::{Result, Tensor};

use crate::persist::optimizer_state::{self, names_of, Loaded, Slot};

use super::group::{borrowed, flag, Groups, ParamGroup};
use super::moments::lerp;
use super::parameter::{
    check_eps, check_gradients, check_non_negative, check_parameters, decimal, sign_of,
};
use super::update::{step_all, update, Bound};
use super::Optimizer;

/// The hyperparameters of [`RmsProp`]; `Default` is PyTorch's (lr 1e-2, alpha 0.99, eps 1e-8,
/// everything else off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsPropConfig {
    /// The learning rate.
    pub lr: f32,
    /// The smoothing constant of the squared-gradient average, at least 0.
    pub alpha: f32,
    /// Added to the denominator for numerical stability, > 0.
    pub eps: f32,
    /// The L2 penalty added to the gradient: `g + weight_decay * p`.
    pub weight_decay: f32,
    /// The momentum factor (0: none).
    pub momentum: f32,
    /// Normalises by the variance estimate (the squared average minus the squared mean).
    pub centered: bool,
    /// Climbs the objective instead: the gradient's sign is flipped first.
    pub maximize: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

/// The state of one parameter, from its first step.
#[derive(Debug, Clone)]
struct State {
    step: u64,
    square_avg: Vec<f32>,
    /// With momentum only.
    momentum_buffer: Option<Vec<f32>>,
    /// Centered only.
    grad_avg: Option<Vec<f32>>,
}

/// RMSprop as PyTorch computes it, for each parameter `p` with gradient `g`:
///
/// ```text
/// g = -g                                    if maximize
/// g = g + weight_decay * p
/// s = alpha * s + (1 - alpha) * g * g
/// a = sqrt(s) + eps                         not centered
/// m = lerp(m, g, 1 - alpha); a = sqrt(s - m * m) + eps      centered
/// buf = momentum * buf + g / a; p = p - lr * buf            with momentum
/// p = p - lr * g / a                                        without
/// ```
#[derive(Debug)]
pub struct RmsProp {
    params: Vec<Tensor>,
    config: RmsPropConfig,
    groups: Groups,
    state: Vec<Option<State>>,
    scratch: Vec<f32>,
}

/// The hyperparameters' ranges, as PyTorch checks them, and `eps > 0`.
fn check_config(c: &RmsPropConfig) -> Result<()> {
    check_non_negative("learning rate", c.lr)?;
    check_non_negative("alpha", c.alpha)?;
    check_non_negative("momentum", c.momentum)?;
    check_non_negative("weight_decay", c.weight_decay)?;
    check_eps(c.eps)
}

impl RmsProp {
    /// An optimizer of `params` (Float32 leaves of one subtensor with injective layouts, each
    /// once). Invalid hyperparameters are `Error::Value`.
    pub fn new(params: Vec<Tensor>, config: RmsPropConfig) -> Result<RmsProp> {
        check_config(&config)?;
        let groups = Groups::single(params.len(), config.lr, config.weight_decay);
        RmsProp::build(params, groups, config)
    }

    /// An optimizer of parameter groups, each with its own learning rate and weight decay
    /// (the config's where a group sets none); parameters are numbered group after group.
    pub fn with_groups(groups: Vec<ParamGroup>, config: RmsPropConfig) -> Result<RmsProp> {
        check_config(&config)?;
        let (params, groups) = Groups::build(groups, config.lr, config.weight_decay)?;
        RmsProp::build(params, groups, config)
    }

    fn build(params: Vec<Tensor>, groups: Groups, config: RmsPropConfig) -> Result<RmsProp> {
        check_parameters(&params)?;
        let state = params.iter().map(|_| None).collect();
        Ok(RmsProp {
            params,
            config,
            groups,
            state,
            scratch: Vec::new(),
        })
    }

    /// The hyperparameters (`lr` and `weight_decay`: the first group's).
    pub fn config(&self) -> &RmsPropConfig {
        &self.config
    }

    /// The steps parameter `i` has taken (steps without its gradient do not count).
    pub fn steps(&self, i: usize) -> u64 {
        self.state
            .get(i)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.step)
    }

    /// Saves the hyperparameters, groups and each parameter's state to a safetensors file,
    /// named after the parameter (`state.{name}.step`, `.square_avg`, `.momentum_buffer`
    /// with momentum, `.grad_avg` centered); `names` is the module's `named_parameters()`.
    pub fn save_state(&self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let c = &self.config;
        let mut hyper = vec![
            ("lr", c.lr.to_string()),
            ("alpha", c.alpha.to_string()),
            ("eps", c.eps.to_string()),
            ("weight_decay", c.weight_decay.to_string()),
            ("momentum", c.momentum.to_string()),
            ("centered", c.centered.to_string()),
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
            slots.push((
                format!("state.{name}.square_avg"),
                p.dims(),
                Slot::F32(&s.square_avg),
            ));
            if let Some(b) = &s.momentum_buffer {
                slots.push((
                    format!("state.{name}.momentum_buffer"),
                    p.dims(),
                    Slot::F32(b),
                ));
            }
            if let Some(m) = &s.grad_avg {
                slots.push((format!("state.{name}.grad_avg"), p.dims(), Slot::F32(m)));
            }
        }
        optimizer_state::save(path.as_ref(), "RmsProp", &hyper, &slots)
    }

    /// Loads what [`RmsProp::save_state`] saved, replacing the hyperparameters, groups and
    /// state; parameters are matched by name through `names`. On an error nothing changes.
    pub fn load_state(&mut self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let param_names = names_of(&self.params, names)?;
        let mut file = Loaded::read(path, "RmsProp")?;
        let config = RmsPropConfig {
            lr: file.hyper("lr")?,
            alpha: file.hyper("alpha")?,
            eps: file.hyper("eps")?,
            weight_decay: file.hyper("weight_decay")?,
            momentum: file.hyper("momentum")?,
            centered: flag(&file, "centered")?,
            maximize: flag(&file, "maximize")?,
        };
        check_config(&config)?;
        let groups = self.groups.load(&file, config.lr, config.weight_decay)?;
        let mut state = Vec::with_capacity(self.params.len());
        for (name, p) in param_names.iter().zip(&self.params) {
            let dims = p.dims();
            let step = file.count(&format!("state.{name}.step"))?;
            let square_avg = file.f32s(&format!("state.{name}.square_avg"), &dims)?;
            let buf = file.f32s(&format!("state.{name}.momentum_buffer"), &dims)?;
            let grad_avg = file.f32s(&format!("state.{name}.grad_avg"), &dims)?;
            let fits =
                buf.is_some() == (config.momentum > 0.0) && grad_avg.is_some() == config.centered;
            state.push(match (step, square_avg) {
                (Some(step), Some(square_avg)) if fits => Some(State {
                    step,
                    square_avg,
                    momentum_buffer: buf,
                    grad_avg,
                }),
                (None, None) if buf.is_none() && grad_avg.is_none() => None,
                _ => autograd_core::bail!(
                    Value,
                    "{}: the state of `{name}` needs step and square_avg, momentum_buffer exactly with momentum and grad_avg exactly when centered",
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

impl Optimizer for RmsProp {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn steps_each_parameter_apart(&self) -> bool {
        true
    }

    fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        check_gradients(&self.params, grads)?;
        let c = self.config;
        let sign = sign_of(c.maximize);
        let (alpha, eps, mu) = (c.alpha, c.eps, c.momentum);
        let w = (1.0 - decimal(alpha)) as f32;
        let scratch = &mut self.scratch;
        let (params, groups) = (&self.params, &self.groups);
        step_all(params, grads, &mut self.state, |i, state| {
            let (p, Some(g)) = (&params[i], &grads[i]) else {
                return Ok(());
            };
            let o = groups.of(i);
            let (lr, wd) = (o.lr, o.weight_decay);
            let n = p.size();
            let s = match state.take() {
                Some(s) => state.insert(s),
                None => state.insert(State {
                    step: 0,
                    square_avg: alloc::filled(n, 0.0)?,
                    momentum_buffer: if mu > 0.0 {
                        Some(alloc::filled(n, 0.0)?)
                    } else {
                        None
                    },
                    grad_avg: if c.centered {
                        Some(alloc::filled(n, 0.0)?)
                    } else {
                        None
                    },
                }),
            };
            s.step += 1;
            // g (signed, decayed) and the new square average
            let grad = move |p: f32, g: f32, sq: &mut f32| {
                let g = sign * g;
                let g = if wd == 0.0 { g } else { g + wd * p };
                *sq = *sq * alpha + w * g * g;
                g
            };
            match (&mut s.momentum_buffer, &mut s.grad_avg) {
                (None, None) => update(
                    p,
                    g,
                    Bound::Arithmetic,
                    scratch,
                    [&mut s.square_avg],
                    |p, g, [sq]| {
                        let g = grad(*p, g, sq);
                        let avg = sq.sqrt() + eps;
                        *p += -lr * g / avg;
                    },
                ),
                (Some(b), None) => update(
                    p,
                    g,
                    Bound::Arithmetic,
                    scratch,
                    [&mut s.square_avg, b],
                    |p, g, [sq, b]| {
                        let g = grad(*p, g, sq);
                        let avg = sq.sqrt() + eps;
                        *b = *b * mu + g / avg;
                        *p += -lr * *b;
                    },
                ),
                (None, Some(m)) => update(
                    p,
                    g,
                    Bound::Arithmetic,
                    scratch,
                    [&mut s.square_avg, m],
                    |p, g, [sq, m]| {
                        let g = grad(*p, g, sq);
                        *m = lerp(*m, g, w);
                        let avg = (*sq - *m * *m).sqrt() + eps;
                        *p += -lr * g / avg;
                    },
                ),
                (Some(b), Some(m)) => update(
                    p,
                    g,
                    Bound::Arithmetic,
                    scratch,
                    [&mut s.square_avg, b, m],
                    |p, g, [sq, b, m]| {
                        let g = grad(*p, g, sq);
                        *m = lerp(*m, g, w);
                        let avg = (*sq - *m * *m).sqrt() + eps;
                        *b = *b * mu + g / avg;
                        *p += -lr * *b;
                    },
                ),
            }
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

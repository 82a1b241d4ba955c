//! Adam with decoupled weight decay: PyTorch's `torch.optim.AdamW`.

use std::path::Path;

use autograd_core::kernel::alloc;
use autograd_core::{ensure, Result, Tensor};

use crate::persist::optimizer_state::{self, names_of, Loaded, Slot};

use super::parameter::{check_gradients, check_non_negative, check_parameters};
use super::update::{step_all, update};
use super::Optimizer;

/// The hyperparameters of [`AdamW`]; `Default` is PyTorch's (lr 1e-3, betas (0.9, 0.999),
/// eps 1e-8, weight decay 1e-2).
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

/// The state of one parameter, from its first step.
#[derive(Debug, Clone)]
struct Moments {
    /// Steps taken with a gradient.
    step: u64,
    exp_avg: Vec<f32>,
    exp_avg_sq: Vec<f32>,
}

/// AdamW as PyTorch computes it, for each parameter `p` with gradient `g` at its step `t`
/// (counted per parameter, from 1):
///
/// ```text
/// p = p * (1 - lr * weight_decay)
/// m = lerp(m, g, 1 - beta1)                 (beta1 * m + (1 - beta1) * g)
/// v = beta2 * v + (1 - beta2) * g * g
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
#[derive(Debug)]
pub struct AdamW {
    params: Vec<Tensor>,
    config: AdamWConfig,
    moments: Vec<Option<Moments>>,
    scratch: Vec<f32>,
}

impl AdamW {
    /// An optimizer of `params` (Float32 leaves of one subtensor with injective layouts, each
    /// once). Invalid hyperparameters are `Error::Value`, as PyTorch's `ValueError`.
    pub fn new(params: Vec<Tensor>, config: AdamWConfig) -> Result<AdamW> {
        check_parameters(&params)?;
        check_config(&config)?;
        let moments = params.iter().map(|_| None).collect();
        Ok(AdamW {
            params,
            config,
            moments,
            scratch: Vec::new(),
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// The steps parameter `i` has taken (steps without its gradient do not count).
    pub fn steps(&self, i: usize) -> u64 {
        self.moments
            .get(i)
            .and_then(Option::as_ref)
            .map_or(0, |m| m.step)
    }
}

/// The hyperparameters' ranges, as PyTorch checks them.
fn check_config(config: &AdamWConfig) -> Result<()> {
    check_non_negative("learning rate", config.lr)?;
    check_non_negative("epsilon", config.eps)?;
    check_non_negative("weight_decay", config.weight_decay)?;
    for (k, beta) in [config.betas.0, config.betas.1].into_iter().enumerate() {
        ensure!(
            (0.0..1.0).contains(&beta),
            Value,
            "invalid beta parameter at index {k}: {beta} is not in [0, 1)"
        );
    }
    Ok(())
}

impl AdamW {
    /// Saves the hyperparameters and each parameter's step count and moments to a
    /// safetensors file, named after the parameter (`state.{name}.step`, `.exp_avg`,
    /// `.exp_avg_sq`); `names` is the module's `named_parameters()` and must name every
    /// parameter of this optimizer.
    pub fn save_state(&self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let c = &self.config;
        let hyper = [
            ("lr", c.lr.to_string()),
            ("beta1", c.betas.0.to_string()),
            ("beta2", c.betas.1.to_string()),
            ("eps", c.eps.to_string()),
            ("weight_decay", c.weight_decay.to_string()),
        ];
        let mut slots = Vec::new();
        for ((name, p), m) in param_names.iter().zip(&self.params).zip(&self.moments) {
            let Some(m) = m else { continue };
            slots.push((
                format!("state.{name}.step"),
                Vec::new(),
                Slot::Count(m.step),
            ));
            slots.push((
                format!("state.{name}.exp_avg"),
                p.dims(),
                Slot::F32(&m.exp_avg),
            ));
            slots.push((
                format!("state.{name}.exp_avg_sq"),
                p.dims(),
                Slot::F32(&m.exp_avg_sq),
            ));
        }
        optimizer_state::save(path.as_ref(), "AdamW", &hyper, &slots)
    }

    /// Loads what [`AdamW::save_state`] saved, replacing the hyperparameters, step counts and
    /// moments; parameters are matched by name through `names`. On an error nothing changes.
    pub fn load_state(&mut self, names: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let mut file = Loaded::read(path.as_ref(), "AdamW")?;
        let config = AdamWConfig {
            lr: file.hyper("lr")?,
            betas: (file.hyper("beta1")?, file.hyper("beta2")?),
            eps: file.hyper("eps")?,
            weight_decay: file.hyper("weight_decay")?,
        };
        check_config(&config)?;
        let mut moments = Vec::with_capacity(self.params.len());
        for (name, p) in param_names.iter().zip(&self.params) {
            let dims = p.dims();
            let step = file.count(&format!("state.{name}.step"))?;
            let exp_avg = file.f32s(&format!("state.{name}.exp_avg"), &dims)?;
            let exp_avg_sq = file.f32s(&format!("state.{name}.exp_avg_sq"), &dims)?;
            moments.push(match (step, exp_avg, exp_avg_sq) {
                (Some(step), Some(exp_avg), Some(exp_avg_sq)) => Some(Moments {
                    step,
                    exp_avg,
                    exp_avg_sq,
                }),
                (None, None, None) => None,
                _ => autograd_core::bail!(
                    Value,
                    "{}: the state of `{name}` needs all of step, exp_avg and exp_avg_sq",
                    path.as_ref().display()
                ),
            });
        }
        file.finish()?;
        self.config = config;
        self.moments = moments;
        Ok(())
    }
}

/// `a + w * (b - a)` as PyTorch's `lerp` computes it (the form that is exact at `w = 1`).
fn lerp(a: f32, b: f32, w: f32) -> f32 {
    if w.abs() < 0.5 {
        a + w * (b - a)
    } else {
        b - (b - a) * (1.0 - w)
    }
}

impl Optimizer for AdamW {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        check_gradients(&self.params, grads)?;
        let AdamWConfig {
            lr,
            betas: (beta1, beta2),
            eps,
            weight_decay,
        } = self.config;
        // Scalars in f64, then f32, as PyTorch computes them in Python floats.
        let (lr64, b1, b2) = (f64::from(lr), f64::from(beta1), f64::from(beta2));
        let decay = (1.0 - lr64 * f64::from(weight_decay)) as f32;
        let (w1, w2) = ((1.0 - b1) as f32, (1.0 - b2) as f32);
        let scratch = &mut self.scratch;
        let params = &self.params;
        step_all(params, grads, &mut self.moments, |i, state| {
            let (p, Some(g)) = (&params[i], &grads[i]) else {
                return Ok(());
            };
            let m = match state.take() {
                Some(m) => state.insert(m),
                None => state.insert(Moments {
                    step: 0,
                    exp_avg: alloc::filled(p.size(), 0.0)?,
                    exp_avg_sq: alloc::filled(p.size(), 0.0)?,
                }),
            };
            m.step += 1;
            let t = i32::try_from(m.step).unwrap_or(i32::MAX);
            let step_size = (lr64 / (1.0 - b1.powi(t))) as f32;
            let bc2_sqrt = (1.0 - b2.powi(t)).sqrt() as f32;
            update(
                p,
                g,
                scratch,
                [&mut m.exp_avg, &mut m.exp_avg_sq],
                |p, g, [m, v]| {
                    *p *= decay;
                    *m = lerp(*m, g, w1);
                    *v = *v * beta2 + w2 * g * g;
                    let denom = v.sqrt() / bc2_sqrt + eps;
                    *p += -step_size * (*m / denom);
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::lerp;

    #[test]
    fn lerp_is_exact_at_both_ends() {
        assert_eq!(lerp(0.3, 7.1, 0.0), 0.3);
        assert_eq!(lerp(0.3, 7.1, 1.0), 7.1);
        assert_eq!(lerp(2.0, 4.0, 0.25), 2.5);
        assert_eq!(lerp(2.0, 4.0, 0.75), 3.5);
    }
}

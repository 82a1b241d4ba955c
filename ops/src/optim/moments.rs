//! What [`super::Adam`] and [`super::AdamW`] share: the moment estimates of each parameter,
//! the update that differs only in how weight decay enters, and their saving and loading.

use std::path::Path;

use autograd_core::kernel::alloc;
use autograd_core::{ensure, Result, Tensor};

use crate::persist::optimizer_state::{self, names_of, Loaded, Slot};

use super::group::{borrowed, flag, Groups};
use super::parameter::{check_gradients, check_non_negative, check_parameters, decimal, sign_of};
use super::update::{step_all, update, Bound};

/// The hyperparameters both variants take besides each group's rate and weight decay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Hyper {
    pub(crate) lr: f32,
    pub(crate) betas: (f32, f32),
    pub(crate) eps: f32,
    pub(crate) weight_decay: f32,
    pub(crate) amsgrad: bool,
    pub(crate) maximize: bool,
}

/// How weight decay enters the update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decay {
    /// Adam's L2 penalty: `g + weight_decay * p`.
    L2,
    /// AdamW's: `p * (1 - lr * weight_decay)` before the update.
    Decoupled,
}

/// The state of one parameter, from its first step.
#[derive(Debug, Clone)]
struct Moments {
    /// Steps taken with a gradient.
    step: u64,
    exp_avg: Vec<f32>,
    exp_avg_sq: Vec<f32>,
    /// The running maximum of `exp_avg_sq` (AMSGrad only).
    max_exp_avg_sq: Option<Vec<f32>>,
}

/// Parameters, their groups and moments: the body of both variants.
#[derive(Debug)]
pub(crate) struct AdamCore {
    pub(crate) params: Vec<Tensor>,
    pub(crate) hyper: Hyper,
    pub(crate) groups: Groups,
    decay: Decay,
    moments: Vec<Option<Moments>>,
    scratch: Vec<f32>,
}

/// The hyperparameters' ranges, as PyTorch checks them; `strict_eps` refuses `eps == 0` too.
pub(crate) fn check_hyper(h: &Hyper, strict_eps: bool) -> Result<()> {
    check_non_negative("learning rate", h.lr)?;
    check_non_negative("epsilon", h.eps)?;
    ensure!(
        !strict_eps || h.eps > 0.0,
        Value,
        "invalid epsilon {}: it must be > 0",
        h.eps
    );
    check_non_negative("weight_decay", h.weight_decay)?;
    for (k, beta) in [h.betas.0, h.betas.1].into_iter().enumerate() {
        ensure!(
            (0.0..1.0).contains(&beta),
            Value,
            "invalid beta parameter at index {k}: {beta} is not in [0, 1)"
        );
    }
    Ok(())
}

/// `a + w * (b - a)` as PyTorch's `lerp` computes it (the form that is exact at `w = 1`).
pub(crate) fn lerp(a: f32, b: f32, w: f32) -> f32 {
    if w.abs() < 0.5 {
        a + w * (b - a)
    } else {
        b - (b - a) * (1.0 - w)
    }
}

impl AdamCore {
    /// The body of an optimizer of `params` in `groups` (hyperparameters already checked).
    pub(crate) fn new(
        params: Vec<Tensor>,
        groups: Groups,
        hyper: Hyper,
        decay: Decay,
    ) -> Result<AdamCore> {
        check_parameters(&params)?;
        let moments = params.iter().map(|_| None).collect();
        Ok(AdamCore {
            params,
            hyper,
            groups,
            decay,
            moments,
            scratch: Vec::new(),
        })
    }

    /// The steps parameter `i` has taken.
    pub(crate) fn steps(&self, i: usize) -> u64 {
        self.moments
            .get(i)
            .and_then(Option::as_ref)
            .map_or(0, |m| m.step)
    }

    /// Whether no parameter has taken a step (no moments exist yet).
    pub(crate) fn untouched(&self) -> bool {
        self.moments.iter().all(Option::is_none)
    }

    /// One step, as PyTorch's single-tensor Adam (`decoupled_weight_decay` per the variant).
    pub(crate) fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        check_gradients(&self.params, grads)?;
        let Hyper {
            betas: (beta1, beta2),
            eps,
            amsgrad,
            maximize,
            ..
        } = self.hyper;
        let decay = self.decay;
        let sign = sign_of(maximize);
        // Scalars in f64, then f32, as PyTorch computes them in Python floats.
        let (b1, b2) = (decimal(beta1), decimal(beta2));
        let (w1, w2) = ((1.0 - b1) as f32, (1.0 - b2) as f32);
        let scratch = &mut self.scratch;
        let (params, groups) = (&self.params, &self.groups);
        step_all(params, grads, &mut self.moments, |i, state| {
            let (p, Some(g)) = (&params[i], &grads[i]) else {
                return Ok(());
            };
            let o = groups.of(i);
            let lr64 = decimal(o.lr);
            let m = match state.take() {
                Some(m) => state.insert(m),
                None => state.insert(Moments {
                    step: 0,
                    exp_avg: alloc::filled(p.size(), 0.0)?,
                    exp_avg_sq: alloc::filled(p.size(), 0.0)?,
                    max_exp_avg_sq: if amsgrad {
                        Some(alloc::filled(p.size(), 0.0)?)
                    } else {
                        None
                    },
                }),
            };
            m.step += 1;
            let t = i32::try_from(m.step).unwrap_or(i32::MAX);
            let step_size = (lr64 / (1.0 - b1.powi(t))) as f32;
            let bc2_sqrt = (1.0 - b2.powi(t)).sqrt() as f32;
            // PyTorch skips the decay term when weight_decay is 0 (an infinite parameter
            // then stays infinite rather than turning into NaN).
            // (multiplying by a shrink of 1 is exact, and keeps the loop free of branches)
            let (shrink, wd) = match decay {
                _ if o.weight_decay == 0.0 => (1.0, 0.0),
                Decay::Decoupled => ((1.0 - lr64 * decimal(o.weight_decay)) as f32, 0.0),
                Decay::L2 => (1.0, o.weight_decay),
            };
            let grad_of = move |p: f32, g: f32| {
                let g = sign * g;
                if wd == 0.0 {
                    g
                } else {
                    g + wd * p
                }
            };
            let moments = |p: &mut f32, g: f32, m: &mut f32, v: &mut f32| {
                *p *= shrink;
                let g = grad_of(*p, g);
                *m = lerp(*m, g, w1);
                *v = *v * beta2 + w2 * g * g;
            };
            match &mut m.max_exp_avg_sq {
                None => update(
                    p,
                    g,
                    Bound::Arithmetic,
                    scratch,
                    [&mut m.exp_avg, &mut m.exp_avg_sq],
                    |p, g, [m, v]| {
                        moments(p, g, m, v);
                        let denom = v.sqrt() / bc2_sqrt + eps;
                        *p += -step_size * *m / denom;
                    },
                ),
                Some(vmax) => update(
                    p,
                    g,
                    Bound::Arithmetic,
                    scratch,
                    [&mut m.exp_avg, &mut m.exp_avg_sq, vmax],
                    |p, g, [m, v, vmax]| {
                        // in locals, each slot read and written once (the vectorizer
                        // then needs no alias checks between the five buffers)
                        let (mut pv, mut mv, mut vv) = (*p, *m, *v);
                        moments(&mut pv, g, &mut mv, &mut vv);
                        // torch.maximum: NaN wins (once v is NaN it stays NaN)
                        let vm = if vv <= *vmax { *vmax } else { vv };
                        let denom = vm.sqrt() / bc2_sqrt + eps;
                        (*p, *m, *v, *vmax) = (pv + -step_size * mv / denom, mv, vv, vm);
                    },
                ),
            }
        })
    }

    /// Saves the hyperparameters, groups and each parameter's step count and moments under
    /// the optimizer `kind` (`state.{name}.step`, `.exp_avg`, `.exp_avg_sq`, and with AMSGrad
    /// `.max_exp_avg_sq`).
    pub(crate) fn save_state(
        &self,
        kind: &str,
        names: &[(String, Tensor)],
        path: &Path,
    ) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let h = &self.hyper;
        let mut hyper = vec![
            ("lr", h.lr.to_string()),
            ("beta1", h.betas.0.to_string()),
            ("beta2", h.betas.1.to_string()),
            ("eps", h.eps.to_string()),
            ("weight_decay", h.weight_decay.to_string()),
            ("amsgrad", h.amsgrad.to_string()),
            ("maximize", h.maximize.to_string()),
        ];
        let groups = self.groups.hyper();
        hyper.extend(borrowed(&groups));
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
            if let Some(vmax) = &m.max_exp_avg_sq {
                slots.push((
                    format!("state.{name}.max_exp_avg_sq"),
                    p.dims(),
                    Slot::F32(vmax),
                ));
            }
        }
        optimizer_state::save(path, kind, &hyper, &slots)
    }

    /// Loads what [`AdamCore::save_state`] saved for `kind`; on an error nothing changes.
    pub(crate) fn load_state(
        &mut self,
        kind: &str,
        strict_eps: bool,
        names: &[(String, Tensor)],
        path: &Path,
    ) -> Result<()> {
        let param_names = names_of(&self.params, names)?;
        let mut file = Loaded::read(path, kind)?;
        let hyper = Hyper {
            lr: file.hyper("lr")?,
            betas: (file.hyper("beta1")?, file.hyper("beta2")?),
            eps: file.hyper("eps")?,
            weight_decay: file.hyper("weight_decay")?,
            amsgrad: flag(&file, "amsgrad")?,
            maximize: flag(&file, "maximize")?,
        };
        check_hyper(&hyper, strict_eps)?;
        let groups = self.groups.load(&file, hyper.lr, hyper.weight_decay)?;
        let mut moments = Vec::with_capacity(self.params.len());
        for (name, p) in param_names.iter().zip(&self.params) {
            let dims = p.dims();
            let step = file.count(&format!("state.{name}.step"))?;
            let exp_avg = file.f32s(&format!("state.{name}.exp_avg"), &dims)?;
            let exp_avg_sq = file.f32s(&format!("state.{name}.exp_avg_sq"), &dims)?;
            let vmax = file.f32s(&format!("state.{name}.max_exp_avg_sq"), &dims)?;
            moments.push(match (step, exp_avg, exp_avg_sq) {
                (Some(step), Some(exp_avg), Some(exp_avg_sq))
                    if vmax.is_some() == hyper.amsgrad =>
                {
                    Some(Moments {
                        step,
                        exp_avg,
                        exp_avg_sq,
                        max_exp_avg_sq: vmax,
                    })
                }
                (None, None, None) if vmax.is_none() => None,
                _ => autograd_core::bail!(
                    Value,
                    "{}: the state of `{name}` needs all of step, exp_avg and exp_avg_sq, and max_exp_avg_sq exactly when amsgrad is on",
                    path.display()
                ),
            });
        }
        file.finish()?;
        self.hyper = hyper;
        self.groups = groups;
        self.moments = moments;
        Ok(())
    }

    /// Sets every group's rate.
    pub(crate) fn set_lr(&mut self, lr: f32) -> Result<()> {
        check_non_negative("learning rate", lr)?;
        self.hyper.lr = lr;
        self.groups.set_all_lrs(lr);
        Ok(())
    }

    /// Sets each group's rate.
    pub(crate) fn set_group_lrs(&mut self, lrs: &[f32]) -> Result<()> {
        self.groups.set_lrs(lrs)?;
        self.hyper.lr = lrs[0];
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

//! Parameter groups: PyTorch's `param_groups`, each with its own learning rate and weight decay
//! (no decay for biases and norms, a smaller rate for an embedding), which schedules scale.

use autograd_core::{ensure, Result, Tensor};

use crate::persist::optimizer_state::Loaded;

use super::parameter::check_non_negative;

/// Parameters that share a learning rate and weight decay; an option left `None` takes the
/// optimizer config's value, as a PyTorch group without the key takes the default.
///
/// ```
/// use autograd_core::Rng;
/// use autograd_ops::{AdamW, AdamWConfig, Linear, Optimizer, ParamGroup};
/// let layer = Linear::new(4, 2, true, &mut Rng::new(0))?;
/// let groups = vec![
///     ParamGroup::new(vec![layer.weight().clone()]),
///     ParamGroup::new(layer.bias().into_iter().cloned().collect()).weight_decay(0.0),
/// ];
/// let opt = AdamW::with_groups(groups, AdamWConfig::default())?;
/// assert_eq!(opt.group_lrs(), [1e-3, 1e-3]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ParamGroup {
    /// The group's parameters.
    pub params: Vec<Tensor>,
    /// The group's learning rate, or the config's.
    pub lr: Option<f32>,
    /// The group's weight decay, or the config's.
    pub weight_decay: Option<f32>,
}

impl ParamGroup {
    /// A group of `params` with the config's options.
    pub fn new(params: Vec<Tensor>) -> ParamGroup {
        ParamGroup {
            params,
            lr: None,
            weight_decay: None,
        }
    }

    /// This group with learning rate `lr`.
    #[must_use]
    pub fn lr(mut self, lr: f32) -> ParamGroup {
        self.lr = Some(lr);
        self
    }

    /// This group with weight decay `weight_decay`.
    #[must_use]
    pub fn weight_decay(mut self, weight_decay: f32) -> ParamGroup {
        self.weight_decay = Some(weight_decay);
        self
    }
}

/// One group's resolved options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GroupOptions {
    pub(crate) lr: f32,
    pub(crate) weight_decay: f32,
}

/// The groups of an optimizer's flat parameter list: each group's options and each
/// parameter's group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Groups {
    options: Vec<GroupOptions>,
    of: Vec<usize>,
}

impl Groups {
    /// One group of `n` parameters.
    pub(crate) fn single(n: usize, lr: f32, weight_decay: f32) -> Groups {
        Groups {
            options: vec![GroupOptions { lr, weight_decay }],
            of: vec![0; n],
        }
    }

    /// The flat parameter list of `groups` and their options, defaults from the config. Every
    /// group needs a parameter, and its options must be finite and at least 0 (`Error::Value`).
    pub(crate) fn build(
        groups: Vec<ParamGroup>,
        lr: f32,
        weight_decay: f32,
    ) -> Result<(Vec<Tensor>, Groups)> {
        ensure!(
            !groups.is_empty(),
            Value,
            "an optimizer got no parameter group"
        );
        let mut params = Vec::new();
        let mut out = Groups {
            options: Vec::with_capacity(groups.len()),
            of: Vec::new(),
        };
        for (k, g) in groups.into_iter().enumerate() {
            ensure!(!g.params.is_empty(), Value, "parameter group {k} is empty");
            let options = GroupOptions {
                lr: g.lr.unwrap_or(lr),
                weight_decay: g.weight_decay.unwrap_or(weight_decay),
            };
            check_non_negative(&format!("learning rate of group {k}"), options.lr)?;
            check_non_negative(&format!("weight_decay of group {k}"), options.weight_decay)?;
            out.options.push(options);
            out.of.extend(std::iter::repeat_n(k, g.params.len()));
            params.extend(g.params);
        }
        Ok((params, out))
    }

    /// The options of parameter `i`'s group.
    pub(crate) fn of(&self, i: usize) -> GroupOptions {
        self.options[self.of[i]]
    }

    /// Each group's learning rate.
    pub(crate) fn lrs(&self) -> Vec<f32> {
        self.options.iter().map(|o| o.lr).collect()
    }

    /// Sets each group's learning rate, all or none: one finite rate `>= 0` per group.
    pub(crate) fn set_lrs(&mut self, lrs: &[f32]) -> Result<()> {
        ensure!(
            lrs.len() == self.options.len(),
            Value,
            "got {} learning rates for {} parameter groups",
            lrs.len(),
            self.options.len()
        );
        for (k, &lr) in lrs.iter().enumerate() {
            check_non_negative(&format!("learning rate of group {k}"), lr)?;
        }
        for (o, &lr) in self.options.iter_mut().zip(lrs) {
            o.lr = lr;
        }
        Ok(())
    }

    /// Sets every group's learning rate to `lr` (already checked).
    pub(crate) fn set_all_lrs(&mut self, lr: f32) {
        for o in &mut self.options {
            o.lr = lr;
        }
    }

    /// The groups as hyperparameters for a state file: their count and each one's options.
    pub(crate) fn hyper(&self) -> Vec<(String, String)> {
        let mut out = vec![("groups".to_string(), self.options.len().to_string())];
        for (k, o) in self.options.iter().enumerate() {
            out.push((format!("group.{k}.lr"), o.lr.to_string()));
            out.push((
                format!("group.{k}.weight_decay"),
                o.weight_decay.to_string(),
            ));
        }
        out
    }

    /// The groups a state file holds, which must be as many as these; a file saved before
    /// groups existed gives every group `lr` and `weight_decay` (its config's).
    pub(crate) fn load(&self, file: &Loaded, lr: f32, weight_decay: f32) -> Result<Groups> {
        let Ok(count) = file.hyper::<String>("groups") else {
            let mut out = self.clone();
            for o in &mut out.options {
                *o = GroupOptions { lr, weight_decay };
            }
            return Ok(out);
        };
        ensure!(
            count == self.options.len().to_string(),
            Value,
            "the state file holds {count} parameter groups, this optimizer has {}",
            self.options.len()
        );
        let mut out = self.clone();
        for (k, o) in out.options.iter_mut().enumerate() {
            *o = GroupOptions {
                lr: file.hyper(&format!("group.{k}.lr"))?,
                weight_decay: file.hyper(&format!("group.{k}.weight_decay"))?,
            };
            check_non_negative(&format!("learning rate of group {k}"), o.lr)?;
            check_non_negative(&format!("weight_decay of group {k}"), o.weight_decay)?;
        }
        Ok(out)
    }
}

/// The metadata flag `key` of `file`, or `false` in a file saved before the flag existed.
pub(crate) fn flag(file: &Loaded, key: &str) -> Result<bool> {
    match file.hyper::<String>(key) {
        Err(_) => Ok(false),
        Ok(text) => text.parse().map_err(|_| {
            autograd_core::Error::Value(format!(
                "hyperparameter `{key}` has the unreadable value `{text}`"
            ))
        }),
    }
}

/// `hyper` as the `(&str, String)` pairs a state file's writer takes.
pub(crate) fn borrowed(hyper: &[(String, String)]) -> Vec<(&str, String)> {
    hyper.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
}

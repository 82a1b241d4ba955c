//! Gradients staged by a traversal until it commits.

use super::gradient;
use crate::engine::gradient::Sum;
use crate::error::Result;
use crate::runtime::ids::IdMap;
use crate::tensor::Tensor;

/// Gradients staged per tensor, summed per logical position in the order they arrive.
#[derive(Default)]
pub(crate) struct Staging {
    entries: IdMap<(Tensor, Sum)>,
}

impl Staging {
    pub(crate) fn add(&mut self, target: &Tensor, g: Tensor) -> Result<()> {
        match self.entries.get_mut(&target.id()) {
            Some((_, sum)) => sum.add(&g)?,
            None => {
                self.entries
                    .insert(target.id(), (target.clone(), Sum::Shared(g)));
            }
        }
        Ok(())
    }

    /// The gradient of every staged tensor, keyed by tensor identity: its summed cotangent,
    /// with broadcast aliases folded (per-slot sums at every position of a slot).
    pub(crate) fn finish(self) -> Result<IdMap<(Tensor, Tensor)>> {
        self.entries
            .into_iter()
            .map(|(k, (t, s))| {
                let g = gradient::fold_for(&t, s.into_tensor()?)?;
                Ok((k, (t, g)))
            })
            .collect()
    }

    /// Adds every staged gradient into its tensor's `.grad` as a detached copy in fresh
    /// storage of the tensor's carrier class. All new values are computed before any is set.
    pub(crate) fn commit(self) -> Result<()> {
        let mut entries: Vec<(Tensor, Tensor)> = self.finish()?.into_values().collect();
        entries.sort_by_key(|(t, _)| t.id());
        let (targets, gradients): (Vec<Tensor>, Vec<Tensor>) = entries.into_iter().unzip();
        let mut guards = Vec::with_capacity(targets.len());
        let mut new = Vec::with_capacity(targets.len());
        for (t, g) in targets.iter().zip(gradients) {
            let guard = t.state();
            let class = t.part_carrier(0);
            let value = match &guard.grad {
                Some(old) => gradient::add(&g, old, class)?,
                None => gradient::detached(g, class)?,
            };
            new.push(value);
            guards.push(guard);
        }
        for (mut guard, value) in guards.into_iter().zip(new) {
            guard.grad = Some(value);
        }
        Ok(())
    }
}

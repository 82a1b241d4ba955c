//! Cotangents a traversal has yet to hand to their nodes.

use std::sync::Arc;

use crate::engine::gradient::Sum;
use crate::engine::plan::Plan;
use crate::error::Result;
use crate::graph::vjp_call::Cotangent;
use crate::layout::Layout;
use crate::runtime::ids::IdMap;
use crate::tensor::Tensor;

/// The cotangents a traversal has yet to hand to their nodes: only the slots that received
/// one and whose node has not run yet, so that a million-node chain keeps one at a time, not a
/// table of a million. A slot that receives several keeps their running sum. The slot filled
/// last stays out of the map: along a chain, each cotangent is taken by the very next node.
#[derive(Default)]
pub(crate) struct Pending {
    last: Option<(usize, Sum)>,
    rest: IdMap<Sum>,
    /// For a batched traversal, whose cotangents hold K each along a leading batch mode.
    batch: Option<Box<Batch>>,
}

/// What a batched traversal keeps besides the cotangents: K, and the layout of the result
/// each slot's cotangents belong to, so that a node running its VJP once per cotangent gets
/// each with its result's exact shape.
struct Batch {
    k: usize,
    results: Vec<Option<Arc<Layout>>>,
}

/// Cotangents for results of a plan's steps, `(step, result, cotangent)`; several for one
/// result are summed in this order.
pub(crate) type Seeds = Vec<(usize, usize, Tensor)>;

/// What a step of the traversal runs with, taken from the pending cotangents.
pub(super) enum Taken<'s> {
    /// Its VJP runs with these cotangents; a batched one comes with its result's layout.
    Run(Cotangent<'s>, Option<Arc<Layout>>),
    /// The step is skipped: no cotangent reached it, or nothing it leads to is wanted.
    Skip,
    /// A batched traversal reached a node of several results, which it cannot batch.
    Unbatchable,
}

impl Pending {
    /// The cotangent `g` of the plan's root result, and no other.
    pub(crate) fn root(plan: &Plan, g: Tensor) -> Pending {
        Pending {
            last: Some((plan.root_slot, Sum::Shared(g))),
            ..Pending::default()
        }
    }

    /// The `seeds`' cotangents.
    pub(crate) fn seeds(plan: &Plan, seeds: Seeds) -> Result<Pending> {
        let mut pending = Pending::default();
        for (i, k, g) in seeds {
            let slots = plan.slots_of(i);
            debug_assert!(k < slots.len());
            pending.add(slots.start + k, g)?;
        }
        Ok(pending)
    }

    /// `k` cotangents of the plan's root result (whose layout is `result`) along the leading
    /// batch mode of `g`.
    pub(crate) fn batched(plan: &Plan, g: Tensor, k: usize, result: Arc<Layout>) -> Pending {
        let mut results = vec![None; plan.slot_count()];
        results[plan.root_slot] = Some(result);
        Pending {
            batch: Some(Box::new(Batch { k, results })),
            ..Pending::root(plan, g)
        }
    }

    /// Step `i`'s cotangents, taken out (`several` holds them for a node of several results).
    pub(super) fn take_step<'s>(
        &mut self,
        plan: &Plan,
        i: usize,
        several: &'s mut Vec<Option<Tensor>>,
    ) -> Result<Taken<'s>> {
        let slots = plan.slots_of(i);
        if slots.len() == 1 {
            let Some(g) = self.take(slots.start)? else {
                return Ok(Taken::Skip);
            };
            if !plan.useful(i) {
                return Ok(Taken::Skip);
            }
            return Ok(match &mut self.batch {
                None => Taken::Run(Cotangent::One(g), None),
                Some(b) => {
                    let batched = Cotangent::Batched {
                        gradients: g,
                        batch: b.k,
                    };
                    Taken::Run(batched, b.results[slots.start].take())
                }
            });
        }
        if self.batch.is_some() {
            return Ok(Taken::Unbatchable);
        }
        several.clear();
        for slot in slots {
            several.push(self.take(slot)?);
        }
        if !plan.useful(i) || several.iter().all(Option::is_none) {
            return Ok(Taken::Skip);
        }
        Ok(Taken::Run(Cotangent::Several(several), None))
    }

    /// Adds `g`, the gradient of `input`, to slot `slot`'s cotangent.
    pub(super) fn add_from(&mut self, slot: usize, input: &Tensor, g: Tensor) -> Result<()> {
        if let Some(b) = &mut self.batch {
            b.results[slot].get_or_insert_with(|| input.layout_arc());
        }
        self.add(slot, g)
    }

    /// Adds `g` to slot `slot`'s cotangent; a refused contribution leaves the slot as it was.
    fn add(&mut self, slot: usize, g: Tensor) -> Result<()> {
        match &mut self.last {
            Some((s, sum)) if *s == slot => return sum.add(&g),
            _ => {}
        }
        if let Some(sum) = self.rest.get_mut(&(slot as u64)) {
            return sum.add(&g);
        }
        if let Some((s, sum)) = self.last.replace((slot, Sum::Shared(g))) {
            self.rest.insert(s as u64, sum);
        }
        Ok(())
    }

    /// Slot `slot`'s cotangent, taken out; `None` when it received none.
    fn take(&mut self, slot: usize) -> Result<Option<Tensor>> {
        let sum = match self.last.take() {
            Some((s, sum)) if s == slot => Some(sum),
            last => {
                self.last = last;
                if self.rest.is_empty() {
                    None
                } else {
                    self.rest.remove(&(slot as u64))
                }
            }
        };
        sum.map(Sum::into_tensor).transpose()
    }
}

#[cfg(test)]
mod tests {
    use crate::{shape, Tensor};

    /// The slot filled last waits outside the map; every slot keeps its own running sum,
    /// and a refused contribution changes nothing.
    #[test]
    fn pending_cotangents_sum_per_slot() {
        let t = |v: Vec<f32>| {
            let n = v.len();
            Tensor::from_vec(v, shape![n]).unwrap()
        };
        let mut p = super::Pending::default();
        p.add(3, t(vec![1.0, 2.0])).unwrap();
        p.add(5, t(vec![10.0])).unwrap();
        p.add(3, t(vec![0.5, 0.5])).unwrap();
        assert!(p.add(5, t(vec![1.0, 1.0])).is_err(), "another shape");
        p.add(9, t(vec![7.0])).unwrap();
        let values = |g: Option<Tensor>| g.unwrap().values::<f32>().unwrap();
        assert_eq!(values(p.take(5).unwrap()), [10.0]);
        assert_eq!(values(p.take(3).unwrap()), [1.5, 2.5]);
        assert!(p.take(3).unwrap().is_none(), "taken once");
        assert!(p.take(7).unwrap().is_none());
        assert_eq!(values(p.take(9).unwrap()), [7.0]);
        assert!(p.last.is_none() && p.rest.is_empty());
    }
}

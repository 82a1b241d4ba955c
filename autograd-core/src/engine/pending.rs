//! Cotangents a traversal has yet to hand to their nodes.

use std::sync::Arc;

use crate::engine::gradient::Sum;
use crate::error::Result;
use crate::graph::ids::IdMap;
use crate::layout::Layout;
use crate::tensor::Tensor;

/// The cotangent a node's VJP runs with: of its one result, or of each of its results
/// (`None` for a result the traversal did not reach).
pub(crate) enum Cotangent<'a> {
    One(Tensor),
    Several(&'a [Option<Tensor>]),
    /// K cotangents of the one result along a leading batch mode of extent `.1`; `.2` is the
    /// result's layout, when known.
    Batched(Tensor, usize, Option<Arc<Layout>>),
}

/// The cotangents a traversal has yet to hand to their nodes: only the slots that received
/// one and whose node has not run yet, so that a million-node chain keeps one at a time, not a
/// table of a million. A slot that receives several keeps their running sum. The slot filled
/// last stays out of the map: along a chain, each cotangent is taken by the very next node.
#[derive(Default)]
pub(super) struct Pending {
    last: Option<(usize, Sum)>,
    rest: IdMap<Sum>,
}

impl Pending {
    /// Slot `slot`'s cotangent `g`, and no other.
    pub(super) fn seeded(slot: usize, g: Tensor) -> Pending {
        Pending {
            last: Some((slot, Sum::Shared(g))),
            rest: IdMap::default(),
        }
    }

    /// Adds `g` to slot `slot`'s cotangent; a refused contribution leaves the slot as it was.
    pub(super) fn add(&mut self, slot: usize, g: Tensor) -> Result<()> {
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
    pub(super) fn take(&mut self, slot: usize) -> Result<Option<Tensor>> {
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
    pub(super) fn pending_cotangents_sum_per_slot() {
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

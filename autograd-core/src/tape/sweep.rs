//! The dense reverse sweeps: `backward_dense` (optional gradients, only reached nodes run their
//! VJP), its totalized form `backward_dense_all`, and `backward_dense_from` (every VJP, from a
//! total gradient array).
//!
//! Arrays are passed by value and returned, as in the document: a failed call consumes its
//! array and reports an [`Error`](crate::Error), so no half-updated array is ever observable.
//! Violated preconditions (an id out of range, an array of the wrong length, a gradient of the
//! wrong shape, a contribution to an id that is not an earlier parent) are errors, not panics.

use std::fmt;

use crate::error::{bail, ensure, Result};

use super::grad_value::{checked, GradValue, GradZero, SameShape};
use super::Tape;

/// Names node `id` in messages: `node 3 (`sin`)`, formatted only when an error is built.
struct NodeName<'a, V> {
    tape: &'a Tape<V>,
    id: usize,
}

impl<V> fmt::Display for NodeName<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tape.node(self.id).and_then(|n| n.name.as_deref()) {
            Some(name) => write!(f, "node {} (`{name}`)", self.id),
            None => write!(f, "node {}", self.id),
        }
    }
}

/// `what` followed by a node name: `the gradient for node 3 (`sin`)`.
struct About<'a, V> {
    what: &'static str,
    node: NodeName<'a, V>,
}

impl<V> fmt::Display for About<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.what, self.node)
    }
}

/// Replaces `v[i]` by `f(v[i])` for element types without a placeholder value, in O(1).
fn update<V>(mut v: Vec<V>, i: usize, f: impl FnOnce(V) -> Result<V>) -> Result<Vec<V>> {
    let old = v.swap_remove(i);
    v.push(f(old)?);
    let last = v.len() - 1;
    v.swap(i, last);
    Ok(v)
}

impl<V> Tape<V> {
    fn name(&self, id: usize) -> NodeName<'_, V> {
        NodeName { tape: self, id }
    }

    fn about(&self, what: &'static str, id: usize) -> About<'_, V> {
        About {
            what,
            node: self.name(id),
        }
    }

    fn check_id(&self, id: usize, what: &str) -> Result<()> {
        ensure!(
            id < self.size(),
            Value,
            "{what}: node id {id} is out of range for a tape of {} nodes",
            self.size()
        );
        Ok(())
    }

    fn check_len(&self, len: usize, what: &str) -> Result<()> {
        ensure!(
            len == self.size(),
            Value,
            "{what}: the gradient array has {len} entries but the tape has {} nodes",
            self.size()
        );
        Ok(())
    }

    /// Refuses a contribution from node `child` to `parent` unless `parent` is one of the
    /// child's declared parents and comes before it (so the reverse sweep has yet to visit it).
    ///
    /// Stricter than the tape document, whose sweeps accept a contribution to any existing id:
    /// a VJP that sends to a node it does not depend on is a bug this reports.
    fn check_parent(&self, child: usize, parent: usize, allowed: &Allowed) -> Result<()> {
        let parents = &self.nodes[child].parents;
        if parent < child && allowed.contains(parents, parent) {
            return Ok(());
        }
        bail!(
            Value,
            "the VJP of {} sent a contribution to node {parent}, which is not one of its parents {parents:?} (parents come before their children)",
            self.name(child)
        )
    }

    /// Runs the VJP of node `id` on cotangent `g`, naming the node in an error.
    fn run_vjp(&self, id: usize, g: &V) -> Result<Vec<(usize, V)>> {
        (self.nodes[id].backward)(g).map_err(|e| e.context(self.about("backward of", id)))
    }
}

impl<V: GradValue> Tape<V> {
    /// Adds one contribution `g` for node `id` into the optional gradient array.
    ///
    /// The entry is `None` until the sweep first reaches the node. A first contribution is kept
    /// as it is; later ones are summed in, in the order the sweep produces them. A contribution
    /// for a node that does not require a gradient is retired with [`GradValue::drop`].
    pub fn add_grad_dense(&self, grads: Vec<Option<V>>, id: usize, g: V) -> Result<Vec<Option<V>>> {
        self.check_len(grads.len(), "add_grad_dense")?;
        self.check_id(id, "add_grad_dense")?;
        // the entry came from the caller: checked as the contribution is
        if let Some(entry) = &grads[id] {
            self.check_entry(entry, id, "the gradient entry of")?;
        }
        self.add_contribution(grads, id, g)
    }

    /// [`add_grad_dense`](Tape::add_grad_dense) into an array whose entry `id`, if any, is known
    /// to have its node's shape (the sweeps' own entries, or ones checked on the way in).
    fn add_contribution(
        &self,
        mut grads: Vec<Option<V>>,
        id: usize,
        g: V,
    ) -> Result<Vec<Option<V>>> {
        let node = &self.nodes[id];
        if !node.requires_grad {
            V::drop(g);
            return Ok(grads);
        }
        let g = checked(g, &node.value, self.about("a contribution for", id))?;
        grads[id] = Some(match grads[id].take() {
            None => g,
            Some(sum) => V::add(sum, g).map_err(|e| e.context(self.about("summing into", id)))?,
        });
        Ok(grads)
    }

    /// Visits node `id` in the optional-gradient reverse sweep: an unreached node (or one that
    /// does not require a gradient) is skipped without running its VJP; otherwise its
    /// contributions are added to its parents in the order the VJP returns them.
    ///
    /// The entries the step reads or sums into (the node's and its parents') are checked
    /// against their nodes' shapes before the VJP runs (`Error::Value`), as every other entry
    /// point checks what it is given.
    pub fn backward_dense_step(&self, acc: Vec<Option<V>>, id: usize) -> Result<Vec<Option<V>>> {
        self.check_len(acc.len(), "backward_dense_step")?;
        self.check_id(id, "backward_dense_step")?;
        for &j in std::iter::once(&id).chain(&self.nodes[id].parents) {
            if let Some(Some(g)) = acc.get(j) {
                self.check_entry(g, j, "the gradient entry of")?;
            }
        }
        self.checked_step(acc, id)
    }

    /// [`backward_dense_step`](Tape::backward_dense_step) on an array whose entries are known to
    /// have their nodes' shapes (entries only change through `add_contribution`, which checks
    /// what it stores).
    fn checked_step(&self, acc: Vec<Option<V>>, id: usize) -> Result<Vec<Option<V>>> {
        if !self.nodes[id].requires_grad {
            return Ok(acc);
        }
        let contributions = match &acc[id] {
            Some(g) => self.run_vjp(id, g)?,
            None => return Ok(acc),
        };
        let mut acc = acc;
        let allowed = Allowed::of(&self.nodes[id].parents);
        for (parent, c) in contributions {
            self.check_parent(id, parent, &allowed)?;
            acc = self.add_contribution(acc, parent, c)?;
        }
        Ok(acc)
    }

    /// Reverse-mode backpropagation from node `out` with cotangent `seed`, producing one
    /// optional gradient per node: `Some` for every node reached from `out`, `None` otherwise.
    ///
    /// Contributions several paths send to one node are summed; a node's VJP runs only when the
    /// node was reached. Nodes after `out` are never reached.
    pub fn backward_dense(&self, out: usize, seed: V) -> Result<Vec<Option<V>>> {
        self.check_id(out, "backward_dense")?;
        let seed = checked(
            seed,
            &self.nodes[out].value,
            self.about("the seed for", out),
        )?;
        let mut grads: Vec<Option<V>> = std::iter::repeat_with(|| None).take(self.size()).collect();
        grads[out] = Some(seed);
        for id in (0..=out).rev() {
            grads = self.checked_step(grads, id)?;
        }
        Ok(grads)
    }

    /// Adds one contribution `g` for node `id` into a total gradient array, checking both the
    /// contribution and the current entry against the node's shape. A contribution for a node
    /// that does not require a gradient is retired with [`GradValue::drop`].
    pub fn add_grad_all(&self, grads: Vec<V>, id: usize, g: V) -> Result<Vec<V>> {
        self.check_len(grads.len(), "add_grad_all")?;
        self.check_id(id, "add_grad_all")?;
        let node = &self.nodes[id];
        if !node.requires_grad {
            V::drop(g);
            return Ok(grads);
        }
        let g = checked(g, &node.value, self.about("a contribution for", id))?;
        update(grads, id, |sum| {
            let sum = checked(sum, &node.value, self.about("the gradient entry of", id))?;
            V::add(sum, g).map_err(|e| e.context(self.about("summing into", id)))
        })
    }

    /// Checks the precondition of the `from` sweeps in full: `acc` has one entry per node and
    /// every entry has its node's shape and passes the device check. `what` names the entries
    /// in messages.
    fn check_entries(&self, acc: &[V], op: &str, what: &'static str) -> Result<()> {
        self.check_len(acc.len(), op)?;
        for (id, g) in acc.iter().enumerate() {
            self.check_entry(g, id, what)?;
        }
        Ok(())
    }

    /// Fails unless `g` has node `id`'s shape.
    fn check_entry(&self, g: &V, id: usize, what: &'static str) -> Result<()> {
        let what = self.about(what, id);
        let value = &self.nodes[id].value;
        SameShape::check(g, value, &what)?;
        V::check(g, value).map_err(|e| e.context(&what))
    }

    /// One reverse-mode step at node `id` over a total gradient array: runs the node's VJP on
    /// its entry (unless the node does not require a gradient) and adds the contributions.
    ///
    /// Precondition, checked in full (as the tape document says) before anything runs: `acc`
    /// has one entry per node, and every entry, not only the ones this step reads or updates,
    /// has its node's shape. A step therefore refuses exactly what
    /// [`backward_dense_from`](Tape::backward_dense_from) refuses, at O(size) per call; a
    /// whole sweep checks once, through [`backward_dense_from_loop`](Tape::backward_dense_from_loop).
    pub fn backward_dense_from_step(&self, acc: Vec<V>, id: usize) -> Result<Vec<V>> {
        self.check_id(id, "backward_dense_from_step")?;
        self.check_entries(&acc, "backward_dense_from_step", "the gradient entry of")?;
        self.checked_from_step(acc, id)
    }

    /// [`backward_dense_from_step`](Tape::backward_dense_from_step) on an array whose entries
    /// have been checked: an entry changes only through `add_grad_all`, which checks what it
    /// stores, so the array stays valid from one step to the next.
    fn checked_from_step(&self, acc: Vec<V>, id: usize) -> Result<Vec<V>> {
        let node = &self.nodes[id];
        if !node.requires_grad {
            return Ok(acc);
        }
        let contributions = self.run_vjp(id, &acc[id])?;
        let mut acc = acc;
        let allowed = Allowed::of(&node.parents);
        for (parent, c) in contributions {
            self.check_parent(id, parent, &allowed)?;
            acc = self.add_grad_all(acc, parent, c)?;
        }
        Ok(acc)
    }

    /// Reverse-mode accumulation over the first `n` nodes in reverse order: visits ids `n - 1`,
    /// `n - 2`, ..., `0`. `n = size()` traverses the whole tape.
    ///
    /// The whole array is checked once before the first step (entries of nodes the loop does
    /// not visit included), so the loop refuses exactly what
    /// [`backward_dense_from`](Tape::backward_dense_from) refuses.
    pub fn backward_dense_from_loop(&self, n: usize, acc: Vec<V>) -> Result<Vec<V>> {
        ensure!(
            n <= self.size(),
            Value,
            "backward_dense_from_loop: cannot visit the first {n} nodes of a tape of {} nodes",
            self.size()
        );
        self.check_entries(&acc, "backward_dense_from_loop", "the gradient entry of")?;
        self.checked_from_loop(n, acc)
    }

    fn checked_from_loop(&self, n: usize, acc: Vec<V>) -> Result<Vec<V>> {
        let mut acc = acc;
        for id in (0..n).rev() {
            acc = self.checked_from_step(acc, id)?;
        }
        Ok(acc)
    }

    /// Reverse-mode accumulation starting from an explicit gradient for every node: runs every
    /// node's VJP (in reverse order, skipping only nodes that do not require a gradient) and
    /// keeps a gradient for every node id.
    ///
    /// Every entry of `grads0` is checked against its node's shape before anything runs. On a
    /// zero-preserving tape this agrees with [`backward_dense_all`](Tape::backward_dense_all)
    /// from the one-hot seed array; elsewhere a disconnected node may turn its zero entry into
    /// NaN contributions (`0 * (1/0)`).
    pub fn backward_dense_from(&self, grads0: Vec<V>) -> Result<Vec<V>> {
        self.check_entries(&grads0, "backward_dense_from", "the initial gradient of")?;
        self.checked_from_loop(self.size(), grads0)
    }
}

impl<V: GradValue + GradZero> Tape<V> {
    /// One gradient per node: reached nodes keep their computed gradient, every other node
    /// (including ids missing from a short array) gets a zero of its value's shape. Entries
    /// beyond the tape's size are retired with [`GradValue::drop`].
    pub fn totalize(&self, grads: Vec<Option<V>>) -> Result<Vec<V>> {
        let mut it = grads.into_iter();
        let total = self
            .nodes
            .iter()
            .map(|node| match it.next().flatten() {
                Some(g) => Ok(g),
                None => V::zeros_like(&node.value),
            })
            .collect::<Result<Vec<V>>>()?;
        for g in it.flatten() {
            V::drop(g);
        }
        Ok(total)
    }

    /// Reverse-mode accumulation that returns a gradient for every node id: propagation uses
    /// [`backward_dense`](Tape::backward_dense), so VJPs run only for nodes reached from `out`,
    /// and unreached nodes then receive explicit zeros.
    ///
    /// This matters at singular forward values: applying a disconnected VJP to a synthetic zero
    /// cotangent can manufacture NaN through `0 * (1/0)`, although the gradient of the output
    /// with respect to that node is zero.
    pub fn backward_dense_all(&self, out: usize, seed: V) -> Result<Vec<V>> {
        let grads = self.backward_dense(out, seed)?;
        self.totalize(grads)
    }
}

/// A node's declared parents, for membership tests that stay cheap when a node has many
/// parents (a scan for a few, a binary search in a sorted copy beyond that).
enum Allowed {
    Scan,
    Sorted(Vec<usize>),
}

impl Allowed {
    fn of(parents: &[usize]) -> Allowed {
        if parents.len() <= 16 {
            return Allowed::Scan;
        }
        let mut sorted = parents.to_vec();
        sorted.sort_unstable();
        Allowed::Sorted(sorted)
    }

    fn contains(&self, parents: &[usize], id: usize) -> bool {
        match self {
            Allowed::Scan => parents.contains(&id),
            Allowed::Sorted(sorted) => sorted.binary_search(&id).is_ok(),
        }
    }
}

//! The public differentiation surface: gradient state on tensors, `backward`,
//! `backwards_traversal` and the functional `grad`.

use std::sync::Arc;

use crate::engine::gradient;
use crate::engine::profile::BackwardProfile;
use crate::engine::{
    propagate, propagate_to_grad, Claim, Collect, IdMap, IdSet, Pending, Plan, Staging,
};
use crate::error::{bail, ensure, Result};
use crate::graph::op::Node;
use crate::layout::Layout;
use crate::storage::allocation::with_capacity;
use crate::storage::dtype::DType;
use crate::storage::scalar::Buffer;
use crate::tensor::Tensor;

impl Tensor {
    /// Whether this tensor participates in differentiation: its logical dtype is exactly
    /// `DType::Float32`, whatever its carrier.
    pub fn is_differentiable(&self) -> bool {
        self.dtype().is_differentiable()
    }

    pub(crate) fn ensure_differentiable(&self, what: &str) -> Result<()> {
        ensure!(
            self.is_differentiable(),
            Runtime,
            "{what} needs a differentiable (Float32) tensor, but this tensor's logical dtype is {}",
            self.dtype()
        );
        Ok(())
    }

    /// The accumulated gradient, `None` until one is accumulated or assigned.
    pub fn grad(&self) -> Result<Option<Tensor>> {
        self.ensure_differentiable("reading .grad")?;
        Ok(self.state().grad.clone())
    }

    /// Assigns `.grad`. `None` always succeeds; a gradient must be a Float32 tensor of this
    /// tensor's shape, on a differentiable tensor.
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        if let Some(g) = &grad {
            self.ensure_differentiable("assigning .grad")?;
            ensure!(
                g.dtype() == &DType::Float32,
                Type,
                "a gradient must be a Float32 tensor, got {}",
                g.dtype()
            );
            ensure!(
                g.shape() == self.shape(),
                Value,
                "a gradient of shape {} cannot be assigned to a tensor of shape {}",
                g.shape(),
                self.shape()
            );
        }
        self.state().grad = grad;
        Ok(())
    }

    /// Whether later traversals accumulate into this non-leaf tensor's `.grad`.
    pub fn retain_grad(&self, retain: bool) -> Result<()> {
        self.ensure_differentiable("retain_grad")?;
        self.set_retains_grad(retain);
        Ok(())
    }

    /// The autograd node that produced this tensor, `None` for a leaf.
    pub fn autograd_ctx(&self) -> Option<Node> {
        self.autograd_result().map(|(node, _)| node)
    }

    /// The producing node and which of its results this tensor is (0 for every node with one
    /// result).
    pub(crate) fn autograd_result(&self) -> Option<(Node, usize)> {
        let state = self.state();
        let ctx = state.ctx.as_ref()?;
        Some(match ctx.__result_of() {
            Some((node, k)) => (node.clone(), k),
            None => (ctx.clone(), 0),
        })
    }

    /// The producing node, and whether the edge being followed is the only way to reach it:
    /// this handle is the tensor's only one (held by the consumer being visited) and the
    /// tensor is the node's only holder. No new path to the node can appear without another
    /// handle, so a traversal may then skip its duplicate check.
    pub(crate) fn producer(&self) -> Option<(Node, usize, bool)> {
        producer_of(&self.state(), self.0.is_unique())
    }

    /// [`Tensor::producer`] of a handle a node saved, read while the caller holds that node's
    /// lock: when it is the tensor's only handle, nothing else can reach the tensor's state,
    /// so it is read without the tensor's lock (one locked instruction fewer per edge).
    ///
    /// # Safety
    /// The caller holds the lock of the node whose saved state holds this handle, so no other
    /// thread can reach the handle while the call runs.
    #[allow(clippy::inline_always)] // as a call, W1s backward ran ~4% more instructions
    #[inline(always)]
    pub(crate) unsafe fn saved_producer(&self) -> Option<(Node, usize, bool)> {
        if self.0.is_unique() {
            // SAFETY: another guard on the state needs another handle, and none exists
            // (the acquire load above orders every other handle's drop, and the unlock before
            // it, before this read); none can be made, since only the caller reaches this one.
            return producer_of(unsafe { self.0.autograd.get_unlocked() }, true);
        }
        self.producer()
    }

    /// Assigns the autograd node. `None` always succeeds; a node needs a differentiable tensor,
    /// and must not depend on this tensor: that would make a cycle, which no traversal can
    /// order and no drop can free (`Error::Runtime`). The check walks the node's graph once.
    pub fn set_autograd_ctx(&self, ctx: Option<Node>) -> Result<()> {
        if let Some(node) = &ctx {
            self.ensure_differentiable("assigning autograd_ctx")?;
            ensure!(
                !depends_on(node, self),
                Runtime,
                "assigning {} as the autograd_ctx of a tensor it depends on would make a cycle in the autograd graph",
                crate::graph::op::describe_node(&**node)
            );
        }
        self.state().ctx = ctx;
        Ok(())
    }

    /// `backward_with(None, false)`: differentiates a one-element tensor of layout `(1):(1)`.
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        self.backward_with(None, false)
    }

    /// Propagates `gradient` (the cotangent for this tensor; `None` for the implicit unit
    /// cotangent of a scalar) through the graph and accumulates into `.grad` of the leaves and
    /// retained non-leaves. Unless `retain_graph`, the reached graph is released afterwards.
    ///
    /// On any error nothing changes: no `.grad`, no release.
    pub fn backward_with(&self, gradient: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        self.backward_impl(gradient, retain_graph, None)
    }

    /// [`Tensor::backward_with`], recording each node's figures into `profile` when given.
    pub(crate) fn backward_impl(
        &self,
        gradient: Option<&Tensor>,
        retain_graph: bool,
        profile: Option<&mut BackwardProfile>,
    ) -> Result<()> {
        self.ensure_differentiable("backward")?;
        ensure!(
            self.subtensor_count() == 1,
            NotImplemented,
            "backward needs a tensor with one subtensor, this one has {}",
            self.subtensor_count()
        );
        let cotangent = match gradient {
            Some(g) => {
                gradient::check_cotangent(self, g.clone()).map_err(|e| e.context("backward"))?
            }
            None => self.unit_cotangent()?,
        };
        let mut staging = Staging::default();
        let Some((root, k)) = self.autograd_result() else {
            staging.add(self, cotangent)?;
            return staging.commit();
        };
        if self.retains_grad() {
            staging.add(self, cotangent.clone())?;
        }
        if k == 0 && root.outputs() == 1 {
            return crate::engine::sole_tree::accumulate(
                &root,
                cotangent,
                staging,
                retain_graph,
                profile,
            );
        }
        let plan = Plan::discover(&root, k)?;
        accumulate_from(&plan, cotangent, staging, retain_graph, profile)
    }

    fn unit_cotangent(&self) -> Result<Tensor> {
        let l = self.layout();
        ensure!(
            l.rank() == 1 && l.mode_is_leaf(0) && l.size() == 1,
            Value,
            "backward() without a gradient needs a tensor with exactly one top-level leaf mode of extent 1, got layout {l}; pass a gradient"
        );
        let carrier = self
            .carrier()?
            .fresh(Buffer::F32(crate::storage::allocation::filled(
                l.cosize(),
                1.0,
            )?))?;
        Ok(Tensor::from_carrier_unchecked(
            carrier,
            self.kept_layout(),
            DType::Float32,
        ))
    }
}

/// The producing node of a tensor whose autograd state is `state`, and whether the edge is the
/// only way to reach it (`unique`: the handle followed is the tensor's only one).
fn producer_of(state: &crate::tensor::AutogradState, unique: bool) -> Option<(Node, usize, bool)> {
    let ctx = state.ctx.as_ref()?;
    if let Some((node, k)) = ctx.__result_of() {
        return Some((node.clone(), k, false));
    }
    let sole = unique && Arc::strong_count(ctx) == 1;
    Some((ctx.clone(), 0, sole))
}

/// Whether `target` is a saved input or residual of `node` or of any node its graph reaches
/// (released nodes hold nothing). Iterative, each node visited once.
fn depends_on(node: &Node, target: &Tensor) -> bool {
    let mut seen = IdSet::default();
    let mut stack = vec![node.clone()];
    while let Some(node) = stack.pop() {
        if !seen.insert(node.id().get()) {
            continue;
        }
        let found = node.saved().with(node.name(), |s| {
            for t in s.inputs().chain(s.context()) {
                if t.same_tensor(target) {
                    return true;
                }
                if let Some(next) = t.autograd_ctx() {
                    stack.push(next);
                }
            }
            false
        });
        if found == Ok(true) {
            return true;
        }
    }
    false
}

/// Propagates `gradient`, the cotangent of the result `operation` produced, through the graph
/// rooted at `operation`, accumulating into leaves as `backward` does but into no result's
/// `.grad`. `None` traverses nothing. A node with several results is refused
/// (`Error::Runtime`): a cotangent alone does not say which result it belongs to, so call
/// `backward_with` on that result instead.
pub fn backwards_traversal(
    gradient: &Tensor,
    operation: Option<&Node>,
    retain_graph: bool,
) -> Result<()> {
    let Some(root) = operation else { return Ok(()) };
    let plan = if let Some((node, k)) = root.__result_of() {
        Plan::discover(node, k)?
    } else {
        ensure!(
            root.outputs() == 1,
            Runtime,
            "{} has {} results, so a cotangent alone does not say which it belongs to; call backward_with on that result tensor",
            crate::graph::op::describe_node(&**root),
            root.outputs()
        );
        return crate::engine::sole_tree::accumulate(
            root,
            gradient.clone(),
            Staging::default(),
            retain_graph,
            None,
        );
    };
    accumulate_from(
        &plan,
        gradient.clone(),
        Staging::default(),
        retain_graph,
        None,
    )
}

/// Propagates `cotangent` through `plan` into `staging`, commits it to `.grad`, and (unless
/// `retain_graph`) releases the graph; on any error nothing is committed or released.
fn accumulate_from(
    plan: &Plan,
    cotangent: Tensor,
    mut staging: Staging,
    retain_graph: bool,
    profile: Option<&mut BackwardProfile>,
) -> Result<()> {
    let mut claim = if retain_graph {
        None
    } else {
        Some(Claim::begin(plan)?)
    };
    let pending = Pending::root(plan, cotangent);
    propagate_to_grad(plan, pending, &mut staging, claim.as_mut(), profile)?;
    if let Some(claim) = &mut claim {
        claim.rest()?;
    }
    staging.commit()?;
    if let Some(claim) = claim {
        claim.finish();
    }
    Ok(())
}

/// Options of [`grad`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GradOptions {
    /// The first cotangent mode indexes independent cotangents.
    pub batched: bool,
    /// Keep the traversed graph for a later traversal.
    pub retain_graph: bool,
}

/// Vector-Jacobian products of `output` with respect to `inputs`, one entry per input in
/// order: a detached gradient in fresh storage of the input's carrier class, or `None` when
/// the traversal does not reach the input. Never reads or writes any `.grad`.
///
/// With `options.batched`, `cotangents` has a leaf batch mode of extent K prepended to
/// `output`'s layout, and each gradient gains a batch mode whose stride is the single
/// gradient layout's cosize.
pub fn grad(
    output: &Tensor,
    inputs: &[&Tensor],
    cotangents: &Tensor,
    options: GradOptions,
) -> Result<Vec<Option<Tensor>>> {
    output.ensure_differentiable("grad of an output")?;
    ensure!(
        output.subtensor_count() == 1,
        NotImplemented,
        "grad needs an output with one subtensor, this one has {}",
        output.subtensor_count()
    );
    for (i, t) in inputs.iter().enumerate() {
        ensure!(
            t.is_differentiable(),
            Value,
            "input {i} of grad is not differentiable: its logical dtype is {}",
            t.dtype()
        );
    }
    let batch = if options.batched {
        batch_cotangents(output, cotangents)?
    } else {
        vec![gradient::check_cotangent(output, cotangents.clone())?]
    };
    let requested: IdSet = inputs.iter().map(|t| t.id()).collect();
    let wanted = |t: &Tensor| requested.contains(&t.id());
    let plan = match output.autograd_result() {
        Some((root, k)) => {
            let mut plan = Plan::discover(&root, k)?;
            plan.prune(&wanted)?;
            Some(plan)
        }
        None => None,
    };
    // The graph is released once, by the last of the K runs.
    let mut claim = match &plan {
        Some(plan) if !options.retain_graph => Some(Claim::begin(plan)?),
        _ => None,
    };
    // Batched cotangents run through the graph at once (nodes without a batched VJP run theirs
    // once per cotangent) unless a node has several results or a requested tensor needs a
    // per-index broadcast fold; then the K cotangents run one by one.
    if let (true, Some(plan)) = (options.batched, &plan) {
        let single_layouts = inputs
            .iter()
            .all(|t| t.layout().aliasing() == crate::layout::Aliasing::None);
        if single_layouts && !wanted(output) {
            if let Some(staged) = all_at_once(plan, output, &batch, &wanted)? {
                if let Some(claim) = &mut claim {
                    claim.rest()?;
                }
                let results = inputs
                    .iter()
                    .map(|t| stacked_from_batch(t, &staged, batch.len()))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(claim) = claim {
                    claim.finish();
                }
                return Ok(results);
            }
        }
    }
    let last = batch.len().saturating_sub(1);
    let mut runs = Vec::with_capacity(batch.len());
    for (k, cot) in batch.into_iter().enumerate() {
        let mut staging = Staging::default();
        if wanted(output) {
            staging.add(output, cot.clone())?;
        }
        if let Some(plan) = &plan {
            let claim = claim.as_mut().filter(|_| k == last);
            let mut sink = Collect {
                wanted: &wanted,
                staging: &mut staging,
            };
            propagate(plan, Pending::root(plan, cot), &mut sink, claim)?;
        }
        runs.push(staging.finish()?);
    }
    if let Some(claim) = &mut claim {
        claim.rest()?;
    }
    let results = if options.batched {
        inputs
            .iter()
            .map(|t| stack(t, &runs))
            .collect::<Result<Vec<_>>>()?
    } else {
        let mut staged = runs.pop().unwrap_or_default();
        // how many more times each input is requested: only its last request may take the
        // staged gradient itself, so that every returned gradient has storage of its own
        let mut remaining: IdMap<usize> = IdMap::default();
        for t in inputs {
            *remaining.entry(t.id()).or_default() += 1;
        }
        inputs
            .iter()
            .map(|t| {
                let left = remaining.get_mut(&t.id()).map_or(0, |n| {
                    *n -= 1;
                    *n
                });
                single(t, &mut staged, left == 0)
            })
            .collect::<Result<Vec<_>>>()?
    };
    if let Some(claim) = claim {
        claim.finish();
    }
    Ok(results)
}

/// `input`'s gradient from one run, as a detached value of its carrier class; the `last`
/// request for an input takes the staged gradient (copied only if something else can see it).
fn single(
    input: &Tensor,
    staged: &mut IdMap<(Tensor, Tensor)>,
    last: bool,
) -> Result<Option<Tensor>> {
    let class = input.part_carrier(0);
    if last {
        return staged
            .remove(&input.id())
            .map(|(_, g)| gradient::detached(g, class))
            .transpose();
    }
    staged
        .get(&input.id())
        .map(|(_, g)| gradient::detached_copy(g, class))
        .transpose()
}

/// One gradient per batch index stacked along a new leading mode of stride = cosize.
fn stack(input: &Tensor, runs: &[IdMap<(Tensor, Tensor)>]) -> Result<Option<Tensor>> {
    let Some(layout) = runs
        .iter()
        .find_map(|s| s.get(&input.id()))
        .map(|(_, g)| g.layout().clone())
    else {
        return Ok(None);
    };
    // The stacked layout's logical order is batch index first, then the single layout's
    // logical order, so the K gradients' values concatenate into it.
    let mut values = with_capacity(layout.size().saturating_mul(runs.len()))?;
    for run in runs {
        match run.get(&input.id()) {
            Some((_, g)) => values.extend(g.values::<f32>()?),
            None => values.resize(values.len() + layout.size(), 0.0),
        }
    }
    let stacked = layout.prepend_mode(runs.len(), layout.cosize())?;
    gradient::place(values, Arc::new(stacked), input.part_carrier(0)).map(Some)
}

/// The K validated cotangents `batch` propagated through `plan` at once, as one cotangent with
/// a leading batch mode; `None` when a node reached has several results (nothing was released
/// or committed, and the caller runs them one by one).
fn all_at_once(
    plan: &Plan,
    output: &Tensor,
    batch: &[Tensor],
    wanted: &dyn Fn(&Tensor) -> bool,
) -> Result<Option<IdMap<(Tensor, Tensor)>>> {
    let k = batch.len();
    let mut values = with_capacity(output.size().saturating_mul(k))?;
    for cot in batch {
        values.extend(cot.values::<f32>()?);
    }
    let layout = Layout::compact_row_major(crate::batch::batched_shape(output.shape(), k)?)?;
    let stacked = output.f32_with_layout(values, Arc::new(layout))?;
    let mut staging = Staging::default();
    let pending = Pending::batched(plan, stacked, k, output.layout_arc());
    let mut sink = Collect {
        wanted,
        staging: &mut staging,
    };
    if !propagate(plan, pending, &mut sink, None)? {
        return Ok(None);
    }
    staging.finish().map(Some)
}

/// `input`'s K gradients from [`all_at_once`], stacked as [`stack`] stacks K runs: a leading
/// batch mode whose stride is the cosize of the input's (injective) layout.
fn stacked_from_batch(
    input: &Tensor,
    staged: &IdMap<(Tensor, Tensor)>,
    k: usize,
) -> Result<Option<Tensor>> {
    let Some((_, g)) = staged.get(&input.id()) else {
        return Ok(None);
    };
    let layout = input.layout();
    let stacked = layout.prepend_mode(k, layout.cosize())?;
    gradient::place(g.values::<f32>()?, Arc::new(stacked), input.part_carrier(0)).map(Some)
}

/// Splits a batched cotangent into its K cotangents for `output`, each validated.
fn batch_cotangents(output: &Tensor, cotangents: &Tensor) -> Result<Vec<Tensor>> {
    let c = cotangents.layout();
    let o = output.layout();
    let expected = format!("a leaf batch mode K:stride followed by the output layout {o}");
    let trailing_ok =
        c.rank() == o.rank() + 1 && c.mode_is_leaf(0) && c.modes()[1..] == o.modes()[..];
    if !trailing_ok || cotangents.subtensor_count() != 1 {
        bail!(
            Value,
            "batched cotangents must have layout {expected}, got {c}"
        );
    }
    let k = c.dims()[0];
    ensure!(
        k > 0,
        Value,
        "batched cotangents need at least one batch index, got layout {c}"
    );
    let batch_stride = c.mode_leaves(0)[0].stride;
    let view_layout = if o.shape().tree() == &crate::IntTuple::Int(o.size() as i64) {
        o.clone()
    } else {
        Layout::from_modes(&o.modes())?
    };
    (0..k)
        .map(|i| {
            // An empty output's cotangents address no storage: every view sits at the start.
            let shift = if o.size() == 0 { 0 } else { i * batch_stride };
            let view = cotangents
                .with_layout_detached(view_layout.clone(), cotangents.offset() + shift)?;
            gradient::check_cotangent(output, view)
                .map_err(|e| e.context(format!("cotangent at batch index {i}")))
        })
        .collect()
}

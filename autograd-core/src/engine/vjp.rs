//! One node's VJP, with the spec's checks around it, in the order they run: the saved inputs
//! are unmodified before the VJP; the VJP runs with graph construction disabled; after it,
//! they are still unmodified, it returned one gradient per saved input, and each wanted
//! gradient addresses its input exactly. Only then does a gradient leave the node.

// The per-node steps are inlined into the traversal: as calls, W1/W1s backward ran 5-8% more
// instructions (callgrind).
#![allow(clippy::inline_always)]

use std::sync::Arc;

use super::gradient;
use crate::error::{bail, ensure, Result};
use crate::graph::grad_mode::no_grad;
use crate::graph::op::{
    describe_input, describe_node, Modification, Operation, Saved, TraversalToken,
};
use crate::graph::vjp_call::{Cotangent, VjpCall, Written};
use crate::layout::Layout;
use crate::tensor::Tensor;

/// Where one node's gradients go: the traversal's routing, asked which gradients it wants and
/// handed each one that passed the checks. `wants` and `send` run while the node's saved
/// state is locked, so neither may touch the node.
pub(crate) trait Router {
    /// Whether input `j`'s gradient is wanted; asked for every input, in order.
    fn wants(&mut self, j: usize, input: &Tensor) -> bool;
    /// Runs between reading the mask and the VJP, with the node unlocked.
    fn ready(&mut self) {}
    /// Takes input `j`'s gradient, one value per logical position of `input`.
    fn send(&mut self, j: usize, input: &Tensor, g: Tensor) -> Result<()>;
}

/// One node's VJP as a traversal runs it.
pub(crate) struct Step<'a> {
    /// The cotangents of the node's results.
    pub(crate) cotangent: Cotangent<'a>,
    /// For a batched cotangent, the layout of the result it belongs to.
    pub(crate) result: Option<Arc<Layout>>,
    /// The traversal that claims the node for its release, under the lock of the last check.
    pub(crate) claim: Option<TraversalToken>,
}

/// Runs `node`'s VJP for `step` with the spec's checks in order, writing its gradients into
/// `grads` (one vector reused for every node), and hands each wanted gradient to `router`.
/// Returns the bytes of the gradients handed on (for profiles).
#[inline]
pub(crate) fn run_vjp(
    node: &dyn Operation,
    step: Step<'_>,
    grads: &mut Vec<Option<Tensor>>,
    router: &mut impl Router,
) -> Result<usize> {
    let mask = unmodified_and_wanted(node, router)?;
    router.ready();
    let check = call(
        node,
        step.cotangent,
        step.result.as_deref(),
        mask.get(),
        grads,
    )?;
    checked_and_sent(node, check, mask.get(), grads, step.claim, router)
}

/// Which gradients a VJP must compute, most nodes having at most four inputs.
struct Mask {
    n: usize,
    small: [bool; 4],
    large: Vec<bool>,
}

impl Mask {
    fn get(&self) -> &[bool] {
        if self.n <= self.small.len() {
            &self.small[..self.n]
        } else {
            &self.large
        }
    }
}

/// Check 1, before the VJP runs (so it never sees modified inputs): the node's saved inputs
/// are at their saved versions. Under the same lock, the mask: input `j`'s gradient is wanted
/// when the router wants it and the input is differentiable.
#[inline(always)]
fn unmodified_and_wanted(node: &dyn Operation, router: &mut impl Router) -> Result<Mask> {
    let (mask, modified) = node.saved().with(node.name(), |s| {
        let n = s.inputs.len();
        let mut mask = Mask {
            n,
            small: [false; 4],
            large: Vec::new(),
        };
        if n > mask.small.len() {
            mask.large.resize(n, false);
        }
        let bits: &mut [bool] = if n <= mask.small.len() {
            &mut mask.small[..n]
        } else {
            &mut mask.large
        };
        for ((j, input), m) in s.inputs().enumerate().zip(bits.iter_mut()) {
            // the router sees every input (a traversal that discovers as it goes reads them all)
            *m = router.wants(j, input) && input.is_differentiable();
        }
        (mask, s.modification())
    })?;
    match modified {
        Some(m) => Err(modified_error(node, m)),
        None => Ok(mask),
    }
}

/// How a call's gradients are checked.
#[derive(Clone, Copy)]
enum Check {
    /// Each addresses its input exactly.
    Exact,
    /// Each has its input's shape; lay it out first.
    Shaped,
    /// Each addresses its input exactly after a leading batch mode of this extent.
    Batched(usize),
}

/// The VJP itself, through [`Operation::vjp`], with graph construction disabled. A failure
/// that a write racing with the VJP caused reports the write. A batched call the node cannot
/// serve runs once per cotangent.
#[inline(always)]
fn call(
    node: &dyn Operation,
    cotangent: Cotangent<'_>,
    result: Option<&Layout>,
    mask: &[bool],
    grads: &mut Vec<Option<Tensor>>,
) -> Result<Check> {
    let _guard = no_grad();
    let check = match cotangent {
        Cotangent::Batched { gradients, batch } => {
            batched(node, &gradients, (batch, result), mask, grads)
        }
        cotangent => match node.vjp(VjpCall::new(cotangent, mask, grads)) {
            Ok(Written::Exact) => Ok(Check::Exact),
            Ok(Written::Shaped) => Ok(Check::Shaped),
            Ok(Written::Unbatched) => Err(crate::Error::Runtime(format!(
                "{} answered a call that was not batched with Written::Unbatched",
                describe_node(node)
            ))),
            Err(e) => Err(e),
        },
    };
    check.map_err(
        |e| match node.saved().with(node.name(), Saved::modification) {
            Ok(Some(m)) => modified_error(node, m),
            _ => e.context(format!("backward of {}", describe_node(node))),
        },
    )
}

/// [`call`] for a batch of `k` cotangents of the result laid out as `result`.
#[cold]
fn batched(
    node: &dyn Operation,
    gradients: &Tensor,
    (k, result): (usize, Option<&Layout>),
    mask: &[bool],
    grads: &mut Vec<Option<Tensor>>,
) -> Result<Check> {
    let cotangent = Cotangent::Batched {
        gradients: gradients.clone(),
        batch: k,
    };
    if node.vjp(VjpCall::new(cotangent, mask, grads))? == Written::Unbatched {
        *grads = one_by_one(node, gradients, (k, result), mask)?;
    }
    Ok(Check::Batched(k))
}

/// Input `input`'s gradient `g` as a VJP wrote it, checked (spec: cotangent layouts must
/// address the target exactly), after laying it out when the VJP wrote only its shape.
#[inline(always)]
fn fit(input: &Tensor, g: Tensor, check: Check) -> Result<Tensor> {
    match check {
        Check::Exact => gradient::check_cotangent(input, g),
        Check::Shaped if gradient::addresses_exactly(input, &g) => Ok(g),
        Check::Shaped => gradient::check_cotangent(input, gradient::laid_out(input, g)?),
        Check::Batched(k) => gradient::check_batched_cotangent(input, g, k),
    }
}

/// Checks 2 to 4, after the VJP and under one lock (a write racing with the VJP must not leak
/// into its result): the saved inputs are still unmodified, there is one gradient per saved
/// input, and each wanted one fits its input; each then goes to `router`. With a `claim`
/// token, success also claims the node for that traversal's release. No method of the node
/// runs while its state is locked (one may read its own state): failures are described after
/// the lock is released.
#[inline(always)]
fn checked_and_sent(
    node: &dyn Operation,
    check: Check,
    mask: &[bool],
    grads: &mut Vec<Option<Tensor>>,
    claim: Option<TraversalToken>,
    router: &mut impl Router,
) -> Result<usize> {
    let returned = grads.len();
    let mut bytes = 0usize;
    let Ok((failure, claimed)) = node.saved().with_then_claim(node.name(), claim, |s| {
        if let Some(m) = s.modification() {
            return Some(Failure::Modified(m));
        }
        if returned != s.inputs.len() {
            return Some(Failure::Count(s.inputs.len()));
        }
        for (j, (gi, input)) in grads.drain(..).zip(s.inputs()).enumerate() {
            let Some(gi) = gi else { continue };
            if !mask.get(j).copied().unwrap_or(false) {
                continue;
            }
            let gi = match fit(input, gi, check) {
                Ok(gi) => gi,
                Err(e) => return Some(Failure::Gradient(j, e)),
            };
            bytes = bytes.saturating_add(gi.size() * std::mem::size_of::<f32>());
            if let Err(e) = router.send(j, input, gi) {
                return Some(Failure::Sink(e));
            }
        }
        None
    }) else {
        bail!(
            Runtime,
            "the saved state of {} was released while its backward ran, by Operation::release or by a concurrent traversal without retain_graph=True",
            describe_node(node)
        );
    };
    match failure {
        None => match claim.filter(|_| !claimed) {
            Some(me) => Err(node.saved().claim_error(node.name(), me)),
            None => Ok(bytes),
        },
        Some(Failure::Modified(m)) => Err(modified_error(node, m)),
        Some(Failure::Count(expected)) => bail!(
            Value,
            "backward of {} returned {returned} gradients for {expected} saved tensor inputs",
            describe_node(node)
        ),
        Some(Failure::Gradient(j, e)) => Err(e.context(format!(
            "gradient for {} (recorded at {})",
            describe_input(node, j),
            node.saved().location()
        ))),
        Some(Failure::Sink(e)) => Err(e),
    }
}

/// The batched VJP of a node without one: its VJP for each of the `k` cotangents along the
/// leading batch mode of `g`, each input's gradients stacked along a new leading mode (zeros
/// for a batch index without one, `None` when no index has one).
fn one_by_one(
    node: &dyn Operation,
    g: &Tensor,
    (k, result): (usize, Option<&Layout>),
    mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    // Each per-index gradient obeys the rules an unbatched run's would (a count that differs
    // from the saved inputs' is reported by the caller).
    let inputs: Vec<Tensor> = node
        .saved()
        .with(node.name(), |s| s.inputs().cloned().collect())?;
    let mut runs = Vec::with_capacity(k);
    for i in 0..k {
        let mut grads = Vec::new();
        let cotangent = Cotangent::One(batch_index(g, i, result)?);
        let check = match node.vjp(VjpCall::new(cotangent, mask, &mut grads))? {
            Written::Shaped => Check::Shaped,
            _ => Check::Exact,
        };
        for (j, gj) in grads.iter_mut().enumerate() {
            let input = inputs.get(j).filter(|_| mask.get(j) == Some(&true));
            if let (Some(input), Some(g)) = (input, gj.take()) {
                let fitted = fit(input, g, check).map_err(|e| {
                    e.context(format!(
                        "gradient for {} at batch index {i}",
                        describe_input(node, j)
                    ))
                })?;
                *gj = Some(fitted);
            }
        }
        runs.push(grads);
    }
    let count = runs.first().map_or(0, Vec::len);
    ensure!(
        runs.iter().all(|r| r.len() == count),
        Value,
        "backward of {} returned different gradient counts for the cotangents of one batch",
        node.name()
    );
    (0..count)
        .map(|j| {
            let Some(like) = runs.iter().find_map(|r| r[j].clone()) else {
                return Ok(None);
            };
            let mut values =
                crate::storage::allocation::with_capacity(like.size().saturating_mul(k))?;
            for r in &runs {
                match &r[j] {
                    Some(gj) => {
                        ensure!(
                            gj.shape() == like.shape(),
                            Value,
                            "backward of {} returned gradients of shapes {} and {} for input {j} in one batch",
                            node.name(),
                            like.shape(),
                            gj.shape()
                        );
                        values.extend(gj.values::<f32>()?);
                    }
                    None => values.resize(values.len() + like.size(), 0.0),
                }
            }
            let layout =
                Layout::compact_row_major(crate::batch::batched_shape(like.shape(), k)?)?;
            like.f32_with_layout(values, Arc::new(layout)).map(Some)
        })
        .collect()
}

/// Cotangent `i` of the K along `g`'s leading mode, with the shape of `result` (the layout of
/// the result they belong to, when known): selecting the batch index leaves the other modes
/// as a tuple, and a result whose shape is one bare extent (`Shape(n)`) gets it back.
pub(super) fn batch_index(g: &Tensor, i: usize, result: Option<&Layout>) -> Result<Tensor> {
    let gi = g.raw_select(0, i)?;
    let Some(result) = result else { return Ok(gi) };
    if gi.shape() == result.shape() {
        return Ok(gi);
    }
    match (result.shape().tree(), gi.layout().leaves()) {
        (crate::IntTuple::Int(n), [leaf]) if gi.layout().rank() == 1 => {
            let bare = Layout::new(*n, leaf.stride as i64)?;
            gi.with_layout_detached(bare, gi.offset())
        }
        _ => Ok(gi),
    }
}

/// Why a node's gradients were refused.
enum Failure {
    /// A saved input was modified while the VJP ran.
    Modified(Modification),
    /// The VJP returned a gradient count other than this number of saved inputs.
    Count(usize),
    /// The gradient for input `.0` does not fit it.
    Gradient(usize, crate::Error),
    /// Staging the gradient failed.
    Sink(crate::Error),
}

pub(super) fn modified_error(
    node: &dyn Operation,
    (i, (id, saved, now)): Modification,
) -> crate::Error {
    crate::Error::Runtime(format!(
        "in-place modification of {} (recorded at {}): {id} is at version {now} but the forward pass saved version {saved}; run backward before mutating saved tensors",
        describe_input(node, i),
        node.saved().location()
    ))
}

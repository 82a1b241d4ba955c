//! One node's VJP, with the spec's checks around it.

use std::sync::Arc;

use super::{gradient, Cotangent};
use crate::engine::grad_mode::no_grad;
use crate::error::{bail, ensure, Result};
use crate::graph::op::{
    describe_input, describe_node, Modification, Operation, Saved, TraversalToken,
};
use crate::layout::Layout;
use crate::tensor::Tensor;

/// Runs `node`'s VJP for cotangent `g` (of its result, or of each of its results): checks its
/// saved inputs' versions, runs its backward with graph construction disabled, telling it
/// which differentiable inputs' gradients are `needed`, checks the versions again (a write
/// racing with the VJP must not leak into its result), checks the gradient count and
/// validates each gradient against its input (spec: cotangent layouts must address the target
/// exactly), after laying it out for the input when the node asks for that
/// ([`Operation::__lays_out_gradients`]: `#[differentiable]` nodes' `backward_into`). Hands
/// `(input index, input, gradient per logical position)` to `each` for every needed input
/// that received one. `needed` and `each` run while the node's saved state is
/// locked, so they must not touch the node; `ready` runs between the first look and the VJP,
/// unlocked. With a `claim` token, a successful run also claims the node for that traversal's
/// release, under the same lock.
pub(crate) fn run_vjp(
    node: &dyn Operation,
    g: Cotangent<'_>,
    claim: Option<TraversalToken>,
    needed: impl Fn(usize, &Tensor) -> bool,
    ready: impl FnOnce(),
    grads: &mut Vec<Option<Tensor>>,
    mut each: impl FnMut(usize, &Tensor, Tensor) -> Result<()>,
) -> Result<()> {
    // One lock for the version check and the mask; most nodes have at most four inputs. The
    // spec checks versions before the VJP runs (so it never sees modified inputs), and the
    // check after it keeps a write racing with it out of its result.
    let mut small = [false; 4];
    let mut large = Vec::new();
    let (n, modified) = node.saved().with(node.name(), |s| {
        let n = s.inputs.len();
        let mask: &mut [bool] = if n <= small.len() {
            &mut small[..n]
        } else {
            large.resize(n, false);
            &mut large
        };
        for ((j, input), m) in s.inputs().enumerate().zip(mask.iter_mut()) {
            // `needed` sees every input (a traversal that discovers as it goes reads them all)
            *m = needed(j, input) && input.is_differentiable();
        }
        (n, s.modification())
    })?;
    if let Some(m) = modified {
        return Err(modified_error(node, m));
    }
    let mask: &[bool] = if n <= small.len() {
        &small[..n]
    } else {
        &large
    };
    ready();
    let mut batch = None;
    // `backward_into`'s gradients are laid out here, under the lock taken below anyway
    let lay_out = matches!(g, Cotangent::One(_)) && node.__lays_out_gradients();
    {
        let _guard = no_grad();
        match g {
            Cotangent::One(g) => node.backward_into(g, mask, grads),
            Cotangent::Several(gs) => node.backward_outputs(gs, mask).map(|v| *grads = v),
            Cotangent::Batched(g, k, result) => {
                batch = Some(k);
                match node.backward_batched(&g, mask) {
                    Some(v) => v,
                    None => one_by_one(node, &g, (k, result.as_deref()), mask),
                }
                .map(|v| *grads = v)
            }
        }
        .map_err(|e| {
            // a VJP that failed because a write raced with it reports the write
            match node.saved().with(node.name(), Saved::modification) {
                Ok(Some(m)) => modified_error(node, m),
                _ => e.context(format!("backward of {}", describe_node(node))),
            }
        })?;
    }
    // No method of the node runs while its state is locked (one may read its own state):
    // failures are described after the lock is released.
    let returned = grads.len();
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
            let checked = match batch {
                Some(k) => gradient::check_batched_cotangent(input, gi, k),
                None if lay_out => {
                    if gradient::addresses_exactly(input, &gi) {
                        Ok(gi)
                    } else {
                        crate::__private::laid_out(input, gi)
                            .and_then(|gi| gradient::check_cotangent(input, gi))
                    }
                }
                None => gradient::check_cotangent(input, gi),
            };
            let gi = match checked {
                Ok(gi) => gi,
                Err(e) => return Some(Failure::Gradient(j, e)),
            };
            if let Err(e) = each(j, input, gi) {
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
            None => Ok(()),
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
pub(super) fn one_by_one(
    node: &dyn Operation,
    g: &Tensor,
    (k, result): (usize, Option<&Layout>),
    mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let mut runs = Vec::with_capacity(k);
    for i in 0..k {
        runs.push(node.backward_needed(&batch_index(g, i, result)?, mask)?);
    }
    let count = runs.first().map_or(0, Vec::len);
    ensure!(
        runs.iter().all(|r| r.len() == count),
        Value,
        "backward of {} returned different gradient counts for the cotangents of one batch",
        node.name()
    );
    // Each per-index gradient obeys the rules an unbatched run's would (a count that differs
    // from the saved inputs' is reported by the caller).
    let inputs: Vec<Tensor> = node
        .saved()
        .with(node.name(), |s| s.inputs().cloned().collect())?;
    (0..count)
        .map(|j| {
            let Some(like) = runs.iter().find_map(|r| r[j].clone()) else {
                return Ok(None);
            };
            let input = inputs.get(j).filter(|_| mask.get(j) == Some(&true));
            let mut values = crate::storage::allocation::with_capacity(like.size().saturating_mul(k))?;
            for (i, r) in runs.iter().enumerate() {
                match &r[j] {
                    Some(gj) => {
                        if let Some(input) = input {
                            gradient::check_cotangent(input, gj.clone()).map_err(|e| {
                                e.context(format!(
                                    "gradient for {} at batch index {i}",
                                    describe_input(node, j)
                                ))
                            })?;
                        }
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

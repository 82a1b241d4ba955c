//! One call of a node's VJP: what the engine hands [`Operation::vjp`] and what the node answers.

use crate::graph::op::Operation;
use crate::tensor::Tensor;

/// The cotangents a VJP call runs with.
#[derive(Debug)]
pub enum Cotangent<'a> {
    /// The cotangent of the node's one result, handed over: when nothing else holds it, the
    /// VJP may compute a gradient in its storage (see [`crate::kernel::map_owned`]).
    One(Tensor),
    /// One cotangent per result of a node with several ([`Operation::outputs`]), `None` for a
    /// result the traversal did not reach; at least one is present.
    Several(&'a [Option<Tensor>]),
    /// `batch` cotangents of the node's one result at once (batched functional
    /// [`grad`](crate::grad)): `gradients` has a leading batch mode of extent `batch` before
    /// the result's shape (see [`crate::batch`]).
    Batched {
        /// The stacked cotangents.
        gradients: Tensor,
        /// How many.
        batch: usize,
    },
}

/// One call of [`Operation::vjp`]: the cotangents, which gradients the traversal will use,
/// and where the VJP writes them.
#[derive(Debug)]
#[non_exhaustive]
pub struct VjpCall<'a> {
    /// The cotangents of the node's results.
    pub cotangent: Cotangent<'a>,
    /// `needed[i]` is false when input `i`'s gradient would be discarded (the input is not
    /// differentiable, or no requested tensor depends on it): the VJP may skip computing it
    /// and write `None` there.
    pub needed: &'a [bool],
    /// Where the VJP writes one gradient (or `None`) per saved input, in order, replacing
    /// what the vector held; a traversal reuses one vector for every node it runs.
    pub gradients: &'a mut Vec<Option<Tensor>>,
}

impl<'a> VjpCall<'a> {
    /// A call with these cotangents, this mask and this output vector.
    pub fn new(
        cotangent: Cotangent<'a>,
        needed: &'a [bool],
        gradients: &'a mut Vec<Option<Tensor>>,
    ) -> VjpCall<'a> {
        VjpCall {
            cotangent,
            needed,
            gradients,
        }
    }
}

/// What a VJP call wrote, as the engine must read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Each gradient addresses its input exactly: one value per logical position of the
    /// input, in its layout when that is injective, else in an injective layout of its shape;
    /// for a batched call, after a leading batch mode.
    Exact,
    /// Each gradient has its input's shape in any layout, and the engine lays it out (what
    /// `#[differentiable]` ops write for one cotangent, sparing a copy where the VJP's layout
    /// already fits).
    Shaped,
    /// Nothing: the call was batched and the node has no batched VJP, so the engine calls it
    /// once per cotangent and stacks the gradients.
    Unbatched,
}

/// The provided [`Operation::vjp`]: the call served by the older entry points a hand-written
/// op may implement ([`Operation::backward_into`], [`Operation::backward_outputs`],
/// [`Operation::backward_batched`]), all of which end in [`Operation::backward`].
pub(crate) fn by_entry_points<O: Operation + ?Sized>(
    op: &O,
    call: VjpCall<'_>,
) -> crate::Result<Written> {
    let VjpCall {
        cotangent,
        needed,
        gradients,
    } = call;
    match cotangent {
        Cotangent::One(g) => op
            .backward_into(g, needed, gradients)
            .map(|()| Written::Exact),
        Cotangent::Several(gs) => {
            *gradients = op.backward_outputs(gs, needed)?;
            Ok(Written::Exact)
        }
        Cotangent::Batched { gradients: g, .. } => match op.backward_batched(&g, needed) {
            Some(v) => {
                *gradients = v?;
                Ok(Written::Exact)
            }
            None => Ok(Written::Unbatched),
        },
    }
}

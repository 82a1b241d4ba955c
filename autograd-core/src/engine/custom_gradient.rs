//! `custom_gradient`: a node whose vector-Jacobian product is a closure built at run time, the
//! run-time twin of `#[differentiable]`.
//!
//! The node is an ordinary [`Operation`], so the engine applies to its results exactly the
//! checks it applies to every op's (version checks before and after, gradient count, each
//! gradient against its input's shape, layout and dtype, all staged before any `.grad` is
//! touched). The node adds what only a closure needs: a panic caught at the boundary, and the
//! checks for positions the traversal would otherwise skip and for carrier classes.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::engine::gradient::check_cotangent;
use crate::error::{ensure, Error, Result};
use crate::graph::grad_mode::no_grad;
use crate::graph::op::{describe_input, Operation, Recording, SavedState};
use crate::tensor::Tensor;

/// The name of every node [`custom_gradient`] records (drawn distinctly by `to_dot`).
pub(crate) const CUSTOM_GRADIENT: &str = "custom_gradient";

/// A closure VJP: the cotangent of the output in, one contribution per input out.
type Vjp = dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// Connects `output`, computed outside the graph, to the graph as a function of `inputs` whose
/// vector-Jacobian product is `vjp`, and returns it as a tensor with that node (a fresh handle
/// to `output`'s storage when `output` is shared or already has a node).
///
/// `vjp` receives the cotangent of the output (one value per logical position, in the output's
/// layout) and returns exactly one entry per input, in order, `None` included for inputs that
/// need no gradient. Each `Some` must be a Float32 tensor in its input's layout (any injective
/// layout of its shape for a broadcast input) in its input's carrier class. The whole result
/// is checked before anything is accumulated; a callback `Err`, a malformed result or a panic
/// (turned into `Error::Runtime`) fails the traversal and leaves every `.grad` unchanged. The
/// callback runs with graph construction disabled: higher-order gradients through it are not
/// recorded. It should capture only the values its derivative needs, and must not mutate the
/// inputs (their versions are captured now and checked around the callback).
///
/// Nothing is recorded when graph construction is disabled or no input is differentiable.
/// Inputs and output must share one carrier class (`Error::Value`).
///
/// ```
/// use autograd_core::{custom_gradient, ops::mul, Tensor, shape};
/// let x = Tensor::from_vec(vec![2.0f32, 3.0], shape![2])?;
/// let y = Tensor::from_vec(vec![4.0f32, 5.0], shape![2])?;
/// let (xv, yv) = (x.detach(), y.detach());
/// let value = { let _g = autograd_core::no_grad(); mul(&x, &y)? };
/// let p = custom_gradient(value, &[&x, &y], move |g| {
///     Ok(vec![Some(mul(g, &yv)?), Some(mul(g, &xv)?)])
/// })?;
/// p.backward_with(Some(&Tensor::from_vec(vec![1.0f32, 1.0], shape![2])?), false)?;
/// assert_eq!(x.grad()?.unwrap().values::<f32>()?, [4.0, 5.0]);
/// assert_eq!(y.grad()?.unwrap().values::<f32>()?, [2.0, 3.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn custom_gradient<F>(output: Tensor, inputs: &[&Tensor], vjp: F) -> Result<Tensor>
where
    F: Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
{
    ensure!(
        output.is_differentiable(),
        Runtime,
        "custom_gradient: the output is a {} tensor, which carries no autograd node; only a Float32 output can",
        output.dtype()
    );
    ensure_one_class(&output, inputs)?;
    let Some(recording) = Recording::begin(inputs) else {
        return Ok(output);
    };
    Ok(
        recording.finish(output, Vec::new(), |saved| CustomGradient {
            saved,
            vjp: Box::new(vjp),
        }),
    )
}

/// Fails with `Error::Value` unless every input's carrier is of `output`'s carrier class.
fn ensure_one_class(output: &Tensor, inputs: &[&Tensor]) -> Result<()> {
    let class = output.part_carrier(0);
    for (i, t) in inputs.iter().enumerate() {
        for c in t.carriers() {
            ensure!(
                c.same_class(&**class),
                Value,
                "custom_gradient: input {i} is stored in a {} carrier but the output in a {} carrier; inputs and output must share one carrier class",
                c.class_name(),
                class.class_name()
            );
        }
    }
    Ok(())
}

/// The node of [`custom_gradient`].
struct CustomGradient {
    saved: SavedState,
    vjp: Box<Vjp>,
}

impl Operation for CustomGradient {
    fn name(&self) -> &str {
        CUSTOM_GRADIENT
    }

    fn saved(&self) -> &SavedState {
        &self.saved
    }

    fn backward(&self, gradient: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let grads = {
            let _guard = no_grad();
            guarded("the custom_gradient callback", || (self.vjp)(gradient))?
        };
        self.validate(&grads)?;
        Ok(grads)
    }
}

impl CustomGradient {
    /// Checks every contribution the callback returned, also those the traversal will not use
    /// (the engine checks the count and the used ones again as for any op): each against its
    /// input with the engine's cotangent rule, and its carrier class against the input's.
    fn validate(&self, grads: &[Option<Tensor>]) -> Result<()> {
        self.saved.with(CUSTOM_GRADIENT, |s| -> Result<()> {
            for (j, (gi, input)) in grads.iter().zip(s.inputs()).enumerate() {
                let Some(gi) = gi else { continue };
                let what = || format!("contribution for {}", describe_input(self, j));
                check_cotangent(input, gi.clone()).map_err(|e| e.context(what()))?;
                let (class, mine) = (gi.part_carrier(0), input.part_carrier(0));
                ensure!(
                    class.same_class(&**mine),
                    Value,
                    "{}: it is stored in a {} carrier but its input in a {} carrier",
                    what(),
                    class.class_name(),
                    mine.class_name()
                );
            }
            Ok(())
        })?
    }
}

/// Runs user code `f`, turning a panic into `Error::Runtime` naming `what`, and adding `what`
/// as context to the error it returns.
pub(crate) fn guarded<R>(what: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| e.context(what)),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_owned());
            Err(Error::Runtime(format!("{what} panicked: {message}")))
        }
    }
}

//! What the reverse sweeps need of the values a tape stores: `GradValue` and `GradZero`, with
//! their implementations for `f32`, `f64`, ndarray `ArrayD<f32>`/`ArrayD<f64>` and `Tensor`.

use std::fmt;

use ndarray::ArrayD;

use crate::engine::gradient;
use crate::error::{ensure, Result};
use crate::layout::int_tuple::Shape;
use crate::tensor::Tensor;

/// Witness that a gradient's shape was found equal to a value's shape: the argument
/// [`GradValue::retag`] takes in place of the document's proof `shape g = shape v`.
///
/// Only [`SameShape::check`] makes one, so holding it means a check ran.
#[derive(Debug)]
pub struct SameShape(());

impl SameShape {
    /// Compares the shapes of gradient `g` and value `v`; `what` names the gradient in the error.
    pub fn check<V: GradValue>(g: &V, v: &V, what: impl fmt::Display) -> Result<SameShape> {
        let (gs, vs) = (V::shape(g), V::shape(v));
        ensure!(
            gs == vs,
            Value,
            "{what} has shape {gs:?} but the value it belongs to has shape {vs:?}"
        );
        Ok(SameShape(()))
    }
}

/// What the reverse sweep needs from the values a tape stores.
///
/// A gradient for a node has the node's shape. `retag` re-expresses a gradient whose shape has
/// been checked against a value, `check` performs any further device check, and `add` sums two
/// gradients of one node. Backward rules return fresh contributions, so a node keeps its first
/// contribution as it is; `drop` retires one that no node keeps.
///
/// The functions are associated functions, not methods, so that `GradValue::add` never competes
/// with `std::ops::Add::add` in method lookup.
pub trait GradValue: Sized {
    /// The runtime shape of a value (`()` for plain scalars).
    type Shape: PartialEq + fmt::Debug;

    /// Runtime shape of a value.
    fn shape(v: &Self) -> Self::Shape;

    /// `g`, given the shape of `v`, once the two shapes are known to agree. The default keeps
    /// `g` as it is.
    fn retag(g: Self, v: &Self, agree: SameShape) -> Self {
        let _ = (v, agree);
        g
    }

    /// Device checks of a gradient `g` against the value `v` it belongs to.
    fn check(g: &Self, v: &Self) -> Result<()> {
        let _ = (g, v);
        Ok(())
    }

    /// Sums two gradients of one node.
    fn add(a: Self, b: Self) -> Result<Self>;

    /// Retires a contribution that no node keeps (a device would release its buffer here).
    fn drop(g: Self) {
        drop(g);
    }
}

/// A zero gradient of the same shape as a value, for nodes the sweep never reached.
pub trait GradZero: Sized {
    /// A zero gradient shaped like `v`.
    fn zeros_like(v: &Self) -> Result<Self>;
}

/// Checks `g` against `v` (shape, then device checks) and returns it retagged for `v`.
pub(crate) fn checked<V: GradValue>(g: V, v: &V, what: impl fmt::Display) -> Result<V> {
    let agree = SameShape::check(&g, v, &what)?;
    V::check(&g, v).map_err(|e| e.context(&what))?;
    Ok(V::retag(g, v, agree))
}

macro_rules! scalar_grad_value {
    ($($t:ty),*) => {$(
        impl GradValue for $t {
            type Shape = ();
            fn shape(_: &Self) {}
            fn add(a: Self, b: Self) -> Result<Self> {
                Ok(a + b)
            }
        }
        impl GradZero for $t {
            fn zeros_like(_: &Self) -> Result<Self> {
                Ok(0.0)
            }
        }
    )*};
}

scalar_grad_value!(f32, f64);

macro_rules! array_grad_value {
    ($($t:ty),*) => {$(
        impl GradValue for ArrayD<$t> {
            type Shape = Vec<usize>;
            fn shape(v: &Self) -> Vec<usize> {
                v.shape().to_vec()
            }
            fn add(a: Self, b: Self) -> Result<Self> {
                ensure!(
                    a.shape() == b.shape(),
                    Value,
                    "cannot add gradients of shapes {:?} and {:?}",
                    a.shape(),
                    b.shape()
                );
                Ok(a + &b)
            }
        }
        impl GradZero for ArrayD<$t> {
            fn zeros_like(v: &Self) -> Result<Self> {
                Ok(ArrayD::zeros(v.raw_dim()))
            }
        }
    )*};
}

array_grad_value!(f32, f64);

/// Gradients of tensors are Float32 tensors of the value's shape, each in one subtensor; the
/// sum is computed as the engine sums contributions.
impl GradValue for Tensor {
    type Shape = Shape;

    fn shape(v: &Self) -> Shape {
        v.shape().clone()
    }

    fn check(g: &Self, v: &Self) -> Result<()> {
        let _ = v;
        gradient::ensure_plain_f32(g, "a gradient")
    }

    fn add(a: Self, b: Self) -> Result<Self> {
        gradient::ensure_plain_f32(&a, "a gradient")?;
        gradient::ensure_plain_f32(&b, "a gradient")?;
        gradient::add(&a, &b, a.part_carrier(0))
    }
}

impl GradZero for Tensor {
    /// Float32 zeros in a layout a gradient for `v` may have, in fresh storage of `v`'s class.
    fn zeros_like(v: &Self) -> Result<Self> {
        v.f32_full_like(0.0)
    }
}

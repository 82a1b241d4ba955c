//! Casts among Float32, Float64 and Int32 (and from Bool), `to_dtype`.

use crate::error::{bail, Result};
use crate::kernel::map;
use crate::{differentiable, DType, Tensor};

/// `a`'s values as `dtype`. Float32, Float64 and Int32 convert among each other and Bool
/// converts to each of them (1 and 0). Floats become Int32 by truncation toward zero,
/// saturating at the Int32 range, NaN becoming 0 (Rust's `as`); Float64 to Float32 rounds to
/// nearest. A cast to the tensor's own dtype returns a new handle sharing its storage (as
/// PyTorch's `.to` returns the tensor itself), differentiable with the identity VJP for
/// Float32; every other cast has a non-Float32 input or result, so it records no node.
/// Anything else is `Error::Type`.
#[differentiable(crate = crate)]
pub fn to_dtype(a: &Tensor, dtype: &DType) -> Result<Tensor> {
    // Float32 -> Float32 is the identity: d a = g
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    match (a.dtype(), dtype) {
        (from, to) if from == to => Ok(a.detach()),
        (DType::Float32, DType::Float64) => map(a, |x: f32| f64::from(x)),
        (DType::Float32, DType::Int32) => map(a, |x: f32| x as i32),
        (DType::Float64, DType::Float32) => map(a, |x: f64| x as f32),
        (DType::Float64, DType::Int32) => map(a, |x: f64| x as i32),
        (DType::Int32, DType::Float32) => map(a, |x: i32| x as f32),
        (DType::Int32, DType::Float64) => map(a, |x: i32| f64::from(x)),
        (DType::Bool, DType::Float32) => map(a, |x: bool| f32::from(u8::from(x))),
        (DType::Bool, DType::Float64) => map(a, |x: bool| f64::from(u8::from(x))),
        (DType::Bool, DType::Int32) => map(a, |x: bool| i32::from(x)),
        (from, to) => bail!(Type, "to_dtype: cannot cast {from} to {to}"),
    }
}

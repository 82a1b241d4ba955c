//! Casts among Float32, Float64, Int32, Int64 and Bool, `to_dtype`.

use crate::error::{bail, Result};
use crate::kernel::map;
use crate::{differentiable, DType, Element, Tensor};

/// `a`'s values as `dtype`, among Float32, Float64, Int32, Int64 and Bool. Floats become
/// integers by truncation toward zero, saturating at the integer's range, NaN becoming 0
/// (Rust's `as`); Float64 to Float32 and Int64 to a float round to nearest; Int64 to Int32
/// wraps (two's complement, as PyTorch); a cast to Bool is `x != 0` (NaN is true, as in
/// PyTorch), from Bool 1 and 0. A cast to the tensor's own dtype returns a new handle sharing
/// its storage (as PyTorch's `.to` returns the tensor itself), differentiable with the
/// identity VJP for Float32; every other cast has a non-Float32 input or result, so it records
/// no node. Anything else (a compound dtype or a category) is `Error::Type`.
#[differentiable(crate = crate)]
pub fn to_dtype(a: &Tensor, dtype: &DType) -> Result<Tensor> {
    // Float32 -> Float32 is the identity: d a = g
    fn vjp(g: Tensor) -> Option<Tensor> {
        Some(g)
    }
    if a.dtype() == dtype {
        return Ok(a.detach());
    }
    match a.dtype() {
        DType::Float32 => cast_from::<f32>(a, dtype),
        DType::Float64 => cast_from::<f64>(a, dtype),
        DType::Int32 => cast_from::<i32>(a, dtype),
        DType::Int64 => cast_from::<i64>(a, dtype),
        DType::Bool => cast_from::<bool>(a, dtype),
        from => bail!(Type, "to_dtype: cannot cast {from} to {dtype}"),
    }
}

/// One element conversion to every simple dtype: `as` semantics for numbers, `!= 0` to Bool.
trait Convert: Element {
    fn f32_(self) -> f32;
    fn f64_(self) -> f64;
    fn i32_(self) -> i32;
    fn i64_(self) -> i64;
    fn bool_(self) -> bool;
}

macro_rules! convert_number {
    ($($t:ty),*) => {$(
        impl Convert for $t {
            fn f32_(self) -> f32 { self as f32 }
            fn f64_(self) -> f64 { self as f64 }
            fn i32_(self) -> i32 { self as i32 }
            fn i64_(self) -> i64 { self as i64 }
            #[allow(clippy::cast_lossless)]
            fn bool_(self) -> bool { self != (0 as $t) }
        }
    )*};
}
convert_number!(f32, f64, i32, i64);

impl Convert for bool {
    fn f32_(self) -> f32 {
        f32::from(u8::from(self))
    }
    fn f64_(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn i32_(self) -> i32 {
        i32::from(self)
    }
    fn i64_(self) -> i64 {
        i64::from(self)
    }
    fn bool_(self) -> bool {
        self
    }
}

/// `a` (of element type `T`) converted to `dtype`, one monomorphised kernel per pair.
fn cast_from<T: Convert>(a: &Tensor, dtype: &DType) -> Result<Tensor> {
    match dtype {
        DType::Float32 => map(a, T::f32_),
        DType::Float64 => map(a, T::f64_),
        DType::Int32 => map(a, T::i32_),
        DType::Int64 => map(a, T::i64_),
        DType::Bool => map(a, T::bool_),
        to => bail!(Type, "to_dtype: cannot cast {} to {to}", a.dtype()),
    }
}

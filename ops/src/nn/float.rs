//! The floating element types the row kernels are generic over (Float32 and Float64).

use std::ops::{Add, Mul, Sub};

use autograd_core::Element;

/// `f32` or `f64`: what a softmax row needs of its elements. Sums are accumulated in `f64`.
pub(crate) trait Float:
    Element + PartialOrd + Into<f64> + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    /// Negative infinity, the start of a running maximum.
    const NEG_INFINITY: Self;
    /// The nearest value to `v`.
    fn from_f64(v: f64) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// Whether this is NaN.
    fn is_nan(self) -> bool;
}

impl Float for f32 {
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Float for f64 {
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// The largest element of `x` (NaN when any is NaN, -inf when `x` is empty).
pub(crate) fn row_max<T: Float>(x: &[T]) -> T {
    x.iter().fold(
        T::NEG_INFINITY,
        |m, &v| {
            if m.is_nan() || m >= v {
                m
            } else {
                v
            }
        },
    )
}

/// `ln sum_j e^(x_j - m)` for the row maximum `m` (as `f64`): with `m` added back, the row's
/// log-sum-exp, computed without overflow.
pub(crate) fn log_sum_exp_shifted<T: Float>(x: &[T], m: T) -> f64 {
    x.iter().map(|&v| (v - m).exp().into()).sum::<f64>().ln()
}

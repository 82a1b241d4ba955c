//! The floating element types the row kernels are generic over (Float32 and Float64), and
//! the row reductions they share.
//!
//! Everything here is `#[inline(always)]`: the row kernels run it inside `simd!`, which
//! compiles it for the running CPU's vector width (Float32's `exp` then vectorises).
#![allow(clippy::inline_always)]

use std::ops::{Add, Mul, Sub};

use autograd_core::Element;

/// `f32` or `f64`: what a softmax row needs of its elements. Sums are accumulated in `f64`.
pub(crate) trait Float:
    Element + PartialOrd + Into<f64> + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    /// Negative infinity, the start of a running maximum.
    const NEG_INFINITY: Self;
    /// Zero.
    const ZERO: Self;
    /// The nearest value to `v`.
    fn from_f64(v: f64) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// Whether this is NaN.
    fn is_nan(self) -> bool;
}

impl Float for f32 {
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const ZERO: f32 = 0.0;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn exp(self) -> f32 {
        autograd_core::kernel::exp_f32(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Float for f64 {
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const ZERO: f64 = 0.0;
    fn from_f64(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// The largest element of `x` (NaN when any is NaN, -inf when `x` is empty).
#[inline(always)]
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
#[inline(always)]
pub(crate) fn log_sum_exp_shifted<T: Float>(x: &[T], m: T) -> f64 {
    // the exponentials a block at a time into a buffer: a plain map, which vectorises
    let mut buf = [T::ZERO; 64];
    let mut total = 0.0;
    for block in x.chunks(buf.len()) {
        let b = &mut buf[..block.len()];
        for (o, &v) in b.iter_mut().zip(block) {
            *o = (v - m).exp();
        }
        total += sum_f64(b);
    }
    total.ln()
}

/// `sum_j x_j` in `f64`, in eight running sums so that it vectorises (for either element
/// type; Float32-only rows use the row layer's `lane_sum`).
#[inline(always)]
pub(crate) fn sum_f64<T: Float>(x: &[T]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v.into();
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| v.into()).sum();
    acc.iter().sum::<f64>() + tail
}

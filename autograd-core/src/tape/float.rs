//! The float types of the scalar tape: the sealed [`Float`] trait and its `f32` and `f64`
//! implementations, what [`ScalarTape`](super::ScalarTape) needs of a precision.

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

use super::{GradValue, GradZero};

mod sealed {
    /// Keeps [`Float`](super::Float) implemented for `f32` and `f64` only.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The float types a [`ScalarTape`](super::ScalarTape) records: `f32` and `f64` (the trait is sealed).
///
/// It lists what the tape needs: arithmetic, the elementary functions the tape differentiates,
/// and the [`GradValue`]/[`GradZero`] that [`ScalarTape::to_tape`](super::ScalarTape::to_tape)
/// needs. Write code generic
/// over the precision with `F: Float`; the functions are associated, so call them as
/// `F::sin(x)` when `x: F` is generic (on a concrete `f32`/`f64` the inherent methods win).
pub trait Float:
    sealed::Sealed
    + Copy
    + PartialOrd
    + fmt::Debug
    + fmt::Display
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + GradValue
    + GradZero
{
    /// `0`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;
    /// `0.5`.
    const HALF: Self;
    /// `n`, rounded to the nearest value of this type.
    fn from_i32(n: i32) -> Self;
    /// `sin(x)`.
    fn sin(x: Self) -> Self;
    /// `cos(x)`.
    fn cos(x: Self) -> Self;
    /// `e^x`.
    fn exp(x: Self) -> Self;
    /// The natural logarithm.
    fn ln(x: Self) -> Self;
    /// `tanh(x)`.
    fn tanh(x: Self) -> Self;
    /// `x^n` for an integer `n`.
    fn powi(x: Self, n: i32) -> Self;
    /// `x^e`.
    fn powf(x: Self, e: Self) -> Self;
    /// The square root.
    fn sqrt(x: Self) -> Self;
    /// A `'static` zero, for gradients of nodes a sweep did not cover.
    #[doc(hidden)]
    fn zero_ref() -> &'static Self;
}

macro_rules! float_impl {
    ($($t:ident),*) => {$(
        impl Float for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const HALF: $t = 0.5;
            #[inline]
            fn from_i32(n: i32) -> $t {
                n as $t
            }
            #[inline]
            fn sin(x: $t) -> $t {
                x.sin()
            }
            #[inline]
            fn cos(x: $t) -> $t {
                x.cos()
            }
            #[inline]
            fn exp(x: $t) -> $t {
                x.exp()
            }
            #[inline]
            fn ln(x: $t) -> $t {
                x.ln()
            }
            #[inline]
            fn tanh(x: $t) -> $t {
                x.tanh()
            }
            #[inline]
            fn powi(x: $t, n: i32) -> $t {
                x.powi(n)
            }
            #[inline]
            fn powf(x: $t, e: $t) -> $t {
                x.powf(e)
            }
            #[inline]
            fn sqrt(x: $t) -> $t {
                x.sqrt()
            }
            #[inline]
            fn zero_ref() -> &'static $t {
                &0.0
            }
        }
    )*};
}

float_impl!(f32, f64);

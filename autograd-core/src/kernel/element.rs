//! The element trait family both crates' kernels are generic over: [`Num`] for every numeric
//! element type (`f32`, `f64`, `i32`, `i64`) and [`Real`] for the IEEE ones (`f32`, `f64`). A
//! kernel written once over them is monomorphised once per dtype, and the dtype dispatch here
//! (`numeric!`, `real!`) picks that instantiation once per call, never per element.
//!
//! Methods are named apart from the inherent ones of `f32` and `f64` (`exp_`, `is_nan_value`):
//! on a concrete `f32`, `x.exp()` is libm's call per element, `x.exp_()` the vectorisable
//! [`exp_f32`]. They are all inlined (`exp_` always), so that a loop compiled for a wider
//! instruction set by [`simd!`](crate::simd) vectorises them.
// `simd!` compiles what it runs into each instruction-set copy only when it is inlined there.
#![allow(clippy::inline_always)]

use std::ops::{Add, Mul, Sub};

use crate::kernel::math::{erf, exp_f32, tanh_f32};
use crate::storage::scalar::Element;

/// Arithmetic on one numeric element type. Integer forms wrap on overflow (as two's-complement
/// hardware and PyTorch do) instead of panicking.
pub trait Num: Element + PartialOrd {
    /// `self + o`.
    fn plus(self, o: Self) -> Self;
    /// `self - o`.
    fn minus(self, o: Self) -> Self;
    /// `self * o`.
    fn times(self, o: Self) -> Self;
    /// `-self`.
    fn negated(self) -> Self;
    /// `|self|`.
    fn magnitude(self) -> Self;
    /// Whether the value is NaN (never, for integers).
    fn is_nan_value(self) -> bool;
    /// The larger of two values; NaN if either is NaN (as `torch.maximum`).
    #[inline]
    fn max_of(self, o: Self) -> Self {
        if self.is_nan_value() || o.is_nan_value() || self >= o {
            if o.is_nan_value() {
                o
            } else {
                self
            }
        } else {
            o
        }
    }
    /// The smaller of two values; NaN if either is NaN (as `torch.minimum`).
    #[inline]
    fn min_of(self, o: Self) -> Self {
        if self.is_nan_value() || o.is_nan_value() || self <= o {
            if o.is_nan_value() {
                o
            } else {
                self
            }
        } else {
            o
        }
    }
}

/// IEEE floating-point elements (`f32`, `f64`): what the transcendental ops and the row kernels
/// (softmax, normalisation, losses) take. Row sums accumulate in `f64` (`Into<f64>`).
pub trait Real:
    Num + Into<f64> + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    /// Negative infinity, the start of a running maximum.
    const NEG_INFINITY: Self;
    /// Zero.
    const ZERO: Self;
    /// A Float32 constant (scalar operands) in this type.
    fn from_f32(c: f32) -> Self;
    /// A double-precision constant, rounded once to this type (so Float64 ops keep it exact).
    fn from_f64(c: f64) -> Self;
    /// `self / o` (IEEE: division by zero gives an infinity or NaN).
    fn over(self, o: Self) -> Self;
    /// `e^self`: [`exp_f32`] for Float32 (vectorisable, within 2 ulps), libm's for Float64.
    fn exp_(self) -> Self;
    /// The natural logarithm.
    fn ln_(self) -> Self;
    /// The square root.
    fn sqrt_(self) -> Self;
    /// `tanh`: a vectorisable rational function for Float32, libm's for Float64.
    fn tanh_(self) -> Self;
    /// The sine.
    fn sin_(self) -> Self;
    /// The cosine.
    fn cos_(self) -> Self;
    /// `self^p`.
    fn powf_(self, p: Self) -> Self;
    /// The error function, computed in double precision.
    fn erf_(self) -> Self;
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            #[inline]
            fn plus(self, o: Self) -> Self {
                self + o
            }
            #[inline]
            fn minus(self, o: Self) -> Self {
                self - o
            }
            #[inline]
            fn times(self, o: Self) -> Self {
                self * o
            }
            #[inline]
            fn negated(self) -> Self {
                -self
            }
            #[inline]
            fn magnitude(self) -> Self {
                self.abs()
            }
            #[inline]
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
        }
    };
}
float_num!(f32);
float_num!(f64);

macro_rules! int_num {
    ($t:ty) => {
        impl Num for $t {
            #[inline]
            fn plus(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline]
            fn minus(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline]
            fn times(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline]
            fn negated(self) -> Self {
                self.wrapping_neg()
            }
            #[inline]
            fn magnitude(self) -> Self {
                self.wrapping_abs()
            }
            #[inline]
            fn is_nan_value(self) -> bool {
                false
            }
        }
    };
}
int_num!(i32);
int_num!(i64);

impl Real for f32 {
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const ZERO: f32 = 0.0;
    #[inline]
    fn from_f32(c: f32) -> Self {
        c
    }
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    fn from_f64(c: f64) -> Self {
        c as f32
    }
    #[inline]
    fn over(self, o: Self) -> Self {
        self / o
    }
    #[inline(always)]
    fn exp_(self) -> Self {
        exp_f32(self)
    }
    #[inline]
    fn ln_(self) -> Self {
        self.ln()
    }
    #[inline]
    fn sqrt_(self) -> Self {
        self.sqrt()
    }
    #[inline]
    fn tanh_(self) -> Self {
        tanh_f32(self)
    }
    #[inline]
    fn sin_(self) -> Self {
        self.sin()
    }
    #[inline]
    fn cos_(self) -> Self {
        self.cos()
    }
    #[inline]
    fn powf_(self, p: Self) -> Self {
        self.powf(p)
    }
    #[inline]
    fn erf_(self) -> Self {
        erf(f64::from(self)) as f32
    }
}

impl Real for f64 {
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const ZERO: f64 = 0.0;
    #[inline]
    fn from_f32(c: f32) -> Self {
        f64::from(c)
    }
    #[inline]
    fn from_f64(c: f64) -> Self {
        c
    }
    #[inline]
    fn over(self, o: Self) -> Self {
        self / o
    }
    #[inline(always)]
    fn exp_(self) -> Self {
        self.exp()
    }
    #[inline]
    fn ln_(self) -> Self {
        self.ln()
    }
    #[inline]
    fn sqrt_(self) -> Self {
        self.sqrt()
    }
    #[inline]
    fn tanh_(self) -> Self {
        self.tanh()
    }
    #[inline]
    fn sin_(self) -> Self {
        self.sin()
    }
    #[inline]
    fn cos_(self) -> Self {
        self.cos()
    }
    #[inline]
    fn powf_(self, p: Self) -> Self {
        self.powf(p)
    }
    #[inline]
    fn erf_(self) -> Self {
        erf(self)
    }
}

/// Runs `$body` with `$T` bound to the element type of `$dtype` among the listed dtypes; any
/// other dtype is `Error::Type` with `$fmt` formatted with the op and the dtype.
macro_rules! dispatch {
    ($dtype:expr, $op:expr, $T:ident => $body:expr, [$($variant:ident: $ty:ty),+], $fmt:literal) => {
        match $dtype {
            $($crate::DType::$variant => {
                type $T = $ty;
                $body
            })+
            other => $crate::bail!(Type, $fmt, $op, other),
        }
    };
}

/// Runs `$body` with `$T` bound to the element type of `$t`'s dtype among Float32, Float64
/// and Int32; any other dtype is `Error::Type` naming the op.
macro_rules! numeric {
    ($op:expr, $t:expr, $T:ident => $body:expr) => {
        $crate::kernel::element::dispatch!(
            $t.dtype(), $op, $T => $body,
            [Float32: f32, Float64: f64, Int32: i32],
            "{}: takes Float32, Float64 or Int32 tensors, not {}"
        )
    };
}

/// [`numeric!`] for the floating dtypes Float32 and Float64 only.
macro_rules! real {
    ($op:expr, $t:expr, $T:ident => $body:expr) => {
        $crate::kernel::element::dispatch!(
            $t.dtype(), $op, $T => $body,
            [Float32: f32, Float64: f64],
            "{}: takes Float32 or Float64 tensors, not {}"
        )
    };
}

pub(crate) use {dispatch, numeric, real};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_and_min_propagate_nan_and_wrap_integers() {
        assert!(f32::NAN.max_of(1.0).is_nan());
        assert!(1.0f32.max_of(f32::NAN).is_nan());
        assert!(1.0f32.min_of(f32::NAN).is_nan());
        assert_eq!(2.0f32.max_of(1.0), 2.0);
        assert_eq!(2.0f32.min_of(1.0), 1.0);
        assert_eq!(i32::MIN.negated(), i32::MIN);
        assert_eq!(i32::MAX.plus(1), i32::MIN);
    }
}

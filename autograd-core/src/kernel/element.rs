//! Element arithmetic the elementwise ops are generic over, and the dtype dispatch that picks a
//! monomorphised kernel once per call (never per element).

use crate::kernel::math::{erf, exp_f32, tanh_f32};
use crate::tensor::scalar::Element;

/// Arithmetic on one element type. Integer forms wrap on overflow (as two's-complement
/// hardware and PyTorch do) instead of panicking.
pub(crate) trait Num: Element + PartialOrd {
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

/// IEEE floating-point elements: the transcendental ops take these.
pub(crate) trait Real: Num {
    /// A Float32 constant (scalar operands) in this type.
    fn from_f32(c: f32) -> Self;
    /// A double-precision constant, rounded once to this type (so Float64 ops keep it exact).
    fn from_f64(c: f64) -> Self;
    /// `self / o` (IEEE: division by zero gives an infinity or NaN).
    fn over(self, o: Self) -> Self;
    fn exp_(self) -> Self;
    fn ln_(self) -> Self;
    fn sqrt_(self) -> Self;
    fn tanh_(self) -> Self;
    fn sin_(self) -> Self;
    fn cos_(self) -> Self;
    fn powf_(self, p: Self) -> Self;
    fn erf_(self) -> Self;
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            fn plus(self, o: Self) -> Self {
                self + o
            }
            fn minus(self, o: Self) -> Self {
                self - o
            }
            fn times(self, o: Self) -> Self {
                self * o
            }
            fn negated(self) -> Self {
                -self
            }
            fn magnitude(self) -> Self {
                self.abs()
            }
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
            fn plus(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn minus(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn times(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn negated(self) -> Self {
                self.wrapping_neg()
            }
            fn magnitude(self) -> Self {
                self.wrapping_abs()
            }
            fn is_nan_value(self) -> bool {
                false
            }
        }
    };
}
int_num!(i32);
int_num!(i64);

impl Real for f32 {
    fn from_f32(c: f32) -> Self {
        c
    }
    #[allow(clippy::cast_possible_truncation)]
    fn from_f64(c: f64) -> Self {
        c as f32
    }
    fn over(self, o: Self) -> Self {
        self / o
    }
    fn exp_(self) -> Self {
        exp_f32(self)
    }
    fn ln_(self) -> Self {
        self.ln()
    }
    fn sqrt_(self) -> Self {
        self.sqrt()
    }
    fn tanh_(self) -> Self {
        tanh_f32(self)
    }
    fn sin_(self) -> Self {
        self.sin()
    }
    fn cos_(self) -> Self {
        self.cos()
    }
    fn powf_(self, p: Self) -> Self {
        self.powf(p)
    }
    fn erf_(self) -> Self {
        erf(f64::from(self)) as f32
    }
}

impl Real for f64 {
    fn from_f32(c: f32) -> Self {
        f64::from(c)
    }
    fn from_f64(c: f64) -> Self {
        c
    }
    fn over(self, o: Self) -> Self {
        self / o
    }
    fn exp_(self) -> Self {
        self.exp()
    }
    fn ln_(self) -> Self {
        self.ln()
    }
    fn sqrt_(self) -> Self {
        self.sqrt()
    }
    fn tanh_(self) -> Self {
        self.tanh()
    }
    fn sin_(self) -> Self {
        self.sin()
    }
    fn cos_(self) -> Self {
        self.cos()
    }
    fn powf_(self, p: Self) -> Self {
        self.powf(p)
    }
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

//! Method forms of the elementwise ops, comparisons and casts: `x.exp()?`, `x.add(&y)?`,
//! `mask.where_cond(&a, &b)?`. Each calls the op of the same name in [`crate::ops`].

use super::{cast, compare, elementwise, unary};
use crate::{DType, Result, Tensor};

macro_rules! binary_methods {
    ($($module:ident :: $name:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("[`ops::", stringify!($name), "`](crate::ops::", stringify!($name), ") of `self` and `other` (numpy broadcasting).")]
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    $module::$name(self, other)
                }
            )*
        }
    };
}

macro_rules! scalar_methods {
    ($($name:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("[`ops::", stringify!($name), "`](crate::ops::", stringify!($name), ") of `self` and the constant `c`.")]
                #[track_caller]
                pub fn $name(&self, c: f32) -> Result<Tensor> {
                    elementwise::$name(self, c)
                }
            )*
        }
    };
}

macro_rules! unary_methods {
    ($($module:ident :: $name:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("[`ops::", stringify!($name), "`](crate::ops::", stringify!($name), ") of `self`, elementwise.")]
                #[track_caller]
                pub fn $name(&self) -> Result<Tensor> {
                    $module::$name(self)
                }
            )*
        }
    };
}

binary_methods!(
    elementwise::add,
    elementwise::sub,
    elementwise::mul,
    elementwise::div,
    elementwise::maximum,
    elementwise::minimum,
    compare::eq,
    compare::ne,
    compare::lt,
    compare::le,
    compare::gt,
    compare::ge,
    compare::logical_and,
    compare::logical_or,
);

scalar_methods!(
    add_scalar,
    sub_scalar,
    rsub_scalar,
    mul_scalar,
    div_scalar,
    rdiv_scalar
);

unary_methods!(
    unary::neg,
    unary::abs,
    unary::exp,
    unary::log,
    unary::sqrt,
    unary::rsqrt,
    unary::tanh,
    unary::sigmoid,
    unary::relu,
    unary::gelu,
    unary::gelu_tanh,
    unary::silu,
    unary::sin,
    unary::cos,
    compare::logical_not,
);

impl Tensor {
    /// [`ops::powf`](crate::ops::powf): `self^p` elementwise for a constant `p`.
    #[track_caller]
    pub fn powf(&self, p: f32) -> Result<Tensor> {
        unary::powf(self, p)
    }

    /// [`ops::clamp`](crate::ops::clamp): `self` limited to `[min, max]` elementwise.
    #[track_caller]
    pub fn clamp(&self, min: f32, max: f32) -> Result<Tensor> {
        unary::clamp(self, min, max)
    }

    /// [`ops::where_cond`](crate::ops::where_cond) with `self` as the Bool mask: `on_true`
    /// where it holds, `on_false` elsewhere (numpy broadcasting).
    #[track_caller]
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        compare::where_cond(self, on_true, on_false)
    }

    /// [`ops::to_dtype`](crate::ops::to_dtype): `self`'s values as `dtype`.
    #[track_caller]
    pub fn to_dtype(&self, dtype: &DType) -> Result<Tensor> {
        cast::to_dtype(self, dtype)
    }
}

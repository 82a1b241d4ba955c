//! Method forms of the elementwise ops, comparisons and casts: `x.exp()?`, `x.add(&y)?`,
//! `mask.where_cond(&a, &b)?`. Each calls the op of the same name in [`crate::ops`].

use super::{activation, cast, compare, elementwise, pointwise, special, unary};
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
    pointwise::atan2,
    pointwise::pow,
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
    special::log1p,
    special::expm1,
    special::reciprocal,
    special::erf,
    special::erfinv,
    special::sign,
    special::floor,
    special::ceil,
    special::round,
    special::isnan,
    special::isinf,
    special::isfinite,
    activation::selu,
    activation::hardswish,
    activation::mish,
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

    /// [`ops::softplus`](crate::ops::softplus): `ln(1 + e^(beta self)) / beta`, linear above
    /// `threshold`.
    #[track_caller]
    pub fn softplus(&self, beta: f32, threshold: f32) -> Result<Tensor> {
        activation::softplus(self, beta, threshold)
    }

    /// [`ops::leaky_relu`](crate::ops::leaky_relu): `self`, scaled by `negative_slope` where
    /// not positive.
    #[track_caller]
    pub fn leaky_relu(&self, negative_slope: f32) -> Result<Tensor> {
        activation::leaky_relu(self, negative_slope)
    }

    /// [`ops::elu`](crate::ops::elu): `self` where positive, `alpha (e^self - 1)` elsewhere.
    #[track_caller]
    pub fn elu(&self, alpha: f32) -> Result<Tensor> {
        activation::elu(self, alpha)
    }

    /// [`ops::hardtanh`](crate::ops::hardtanh): `self` limited to `[min_val, max_val]`.
    #[track_caller]
    pub fn hardtanh(&self, min_val: f32, max_val: f32) -> Result<Tensor> {
        activation::hardtanh(self, min_val, max_val)
    }

    /// [`ops::nan_to_num`](crate::ops::nan_to_num): NaN and the infinities replaced.
    #[track_caller]
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Result<Tensor> {
        special::nan_to_num(self, nan, posinf, neginf)
    }

    /// [`ops::lerp`](crate::ops::lerp): `self + weight (end - self)` (numpy broadcasting).
    #[track_caller]
    pub fn lerp(&self, end: &Tensor, weight: f32) -> Result<Tensor> {
        pointwise::lerp(self, end, weight)
    }

    /// [`ops::lerp_tensor`](crate::ops::lerp_tensor): `self + weight (end - self)` with a tensor
    /// weight (numpy broadcasting).
    #[track_caller]
    pub fn lerp_tensor(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        pointwise::lerp_tensor(self, end, weight)
    }

    /// [`ops::addcmul`](crate::ops::addcmul): `self + value t1 t2` (numpy broadcasting).
    #[track_caller]
    pub fn addcmul(&self, t1: &Tensor, t2: &Tensor, value: f32) -> Result<Tensor> {
        pointwise::addcmul(self, t1, t2, value)
    }

    /// [`ops::addcdiv`](crate::ops::addcdiv): `self + value t1 / t2` (numpy broadcasting).
    #[track_caller]
    pub fn addcdiv(&self, t1: &Tensor, t2: &Tensor, value: f32) -> Result<Tensor> {
        pointwise::addcdiv(self, t1, t2, value)
    }

    /// [`ops::where_cond`](crate::ops::where_cond) with `self` as the Bool mask: `on_true`
    /// where it holds, `on_false` elsewhere (numpy broadcasting); either may be a scalar.
    #[track_caller]
    pub fn where_cond<'a>(
        &self,
        on_true: impl Into<compare::Operand<'a>>,
        on_false: impl Into<compare::Operand<'a>>,
    ) -> Result<Tensor> {
        compare::where_cond(self, on_true, on_false)
    }

    /// [`ops::to_dtype`](crate::ops::to_dtype): `self`'s values as `dtype`.
    #[track_caller]
    pub fn to_dtype(&self, dtype: &DType) -> Result<Tensor> {
        cast::to_dtype(self, dtype)
    }
}

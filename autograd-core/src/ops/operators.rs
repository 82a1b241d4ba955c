//! Arithmetic operators on tensors: `&a + &b`, `&a - 1.0`, `2.0 * &a`, `-&a`, ...
//!
//! Every operator returns `Result<Tensor>` (as candle's do), since operands can fail to
//! broadcast or have different dtypes; chain them with `?`: `((&x * 0.5)? + &b)?`. Each is the
//! named op in [`crate::ops`] (`add`, `sub_scalar`, `rdiv_scalar`, ...), so it records the same
//! node and broadcasts the same way.
//!
//! Where they live: Rust's orphan rule lets only the crate that defines `Tensor` implement
//! `std::ops` traits for it, so the operators, the ops they call and the method forms
//! (`x.exp()?`) are in `autograd-core`; `autograd-ops` re-exports the ops and holds what builds
//! on them (network layers, optimizers).
//!
//! ```
//! use autograd_core::{shape, Tensor};
//! # fn main() -> autograd_core::Result<()> {
//! let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3])?;
//! let b = Tensor::from_vec(vec![10.0f32], shape![1])?;
//! let y = ((&x * 2.0)? + &b)?; // b broadcasts
//! assert_eq!(y.values::<f32>()?, [12.0, 14.0, 16.0]);
//! assert_eq!((1.0 - &x)?.values::<f32>()?, [0.0, -1.0, -2.0]);
//! assert_eq!((-&x)?.values::<f32>()?, [-1.0, -2.0, -3.0]);
//! # Ok(())
//! # }
//! ```

use std::ops::{Add, Div, Mul, Neg, Sub};

use super::elementwise::{
    add, add_scalar, div, div_scalar, mul, mul_scalar, rdiv_scalar, rsub_scalar, sub, sub_scalar,
};
use super::unary::neg;
use crate::{Result, Tensor};

macro_rules! tensor_operator {
    ($trait:ident, $method:ident, $op:ident, $scalar:ident, $rscalar:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                $op(self, rhs)
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                $op(self, &rhs)
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                $op(&self, rhs)
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                $op(&self, &rhs)
            }
        }
        impl $trait<f32> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: f32) -> Result<Tensor> {
                $scalar(self, rhs)
            }
        }
        impl $trait<f32> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: f32) -> Result<Tensor> {
                $scalar(&self, rhs)
            }
        }
        impl $trait<&Tensor> for f32 {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                $rscalar(rhs, self)
            }
        }
        impl $trait<Tensor> for f32 {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                $rscalar(&rhs, self)
            }
        }
    };
}

tensor_operator!(Add, add, add, add_scalar, add_scalar);
tensor_operator!(Sub, sub, sub, sub_scalar, rsub_scalar);
tensor_operator!(Mul, mul, mul, mul_scalar, mul_scalar);
tensor_operator!(Div, div, div, div_scalar, rdiv_scalar);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    #[track_caller]
    fn neg(self) -> Result<Tensor> {
        neg(self)
    }
}

impl Neg for Tensor {
    type Output = Result<Tensor>;
    #[track_caller]
    fn neg(self) -> Result<Tensor> {
        neg(&self)
    }
}

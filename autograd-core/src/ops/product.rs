//! Products: `prod` of every element and `prod_axis` along one axis, as PyTorch's
//! `torch.prod`. Floating products run in double precision; integer ones (Int32, Int64) in
//! Int64 with wrap-around, and give Int64 as PyTorch's do.
//!
//! The gradient of a product is `prod_{i != k} x(i)` at each `k`, computed as an exclusive
//! prefix product times an exclusive suffix product, never as `y / x(k)`: with one zero in a
//! group the zero's gradient is the product of the others and the rest are zero, with two or
//! more every one is zero, exactly as PyTorch's.

use std::sync::Arc;

use crate::error::Result;
use crate::kernel::element::dispatch;
use crate::kernel::{per_row, read_rows, row, write_rows, Rows};
use crate::layout::axis::Axis;
use crate::layout::Layout;
use crate::storage::scalar::Element;
use crate::{differentiable, kernel, Tensor};

/// The product of every element of `a`, as a one-element tensor of shape `[1]` (like
/// [`sum`](crate::ops::sum)); 1 for an empty tensor. Float32 (differentiable) and Float64 keep
/// their dtype, Int32 and Int64 give Int64; another dtype is `Error::Type`.
///
/// ```
/// use autograd_core::{ops::prod, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// assert_eq!(prod(&a)?.values::<f32>()?, [24.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn prod(a: &Tensor) -> Result<Tensor> {
    node::prod(a)
}

/// The product of `a` along `axis` (negative from the back), the axis dropped or kept with
/// extent 1 when `keepdim`; dtypes as [`prod`], an axis out of range is `Error::Value`.
///
/// ```
/// use autograd_core::{ops::prod_axis, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 4.0], shape![2, 2])?;
/// assert_eq!(prod_axis(&a, -1, false)?.values::<f32>()?, [2.0, 0.0]);
/// assert_eq!(prod_axis(&a, 0, true)?.dims(), [1, 2]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn prod_axis(a: &Tensor, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
    let axis = axis.into().resolve_for("prod_axis", a.layout().rank())?;
    node::prod_axis(a, axis, keepdim)
}

/// A product's accumulator and result for one element type.
trait Factor: Element {
    /// The result element (the input's floating type, or Int64).
    type Out: Element;
    /// The product of `x` in the accumulator, as a result element.
    fn product(x: &[Self]) -> Self::Out;
}

impl Factor for f32 {
    type Out = f32;
    #[allow(clippy::cast_possible_truncation)]
    fn product(x: &[f32]) -> f32 {
        x.iter().fold(1.0f64, |p, &v| p * f64::from(v)) as f32
    }
}

impl Factor for f64 {
    type Out = f64;
    fn product(x: &[f64]) -> f64 {
        x.iter().product()
    }
}

impl Factor for i32 {
    type Out = i64;
    fn product(x: &[i32]) -> i64 {
        x.iter().fold(1i64, |p, &v| p.wrapping_mul(i64::from(v)))
    }
}

impl Factor for i64 {
    type Out = i64;
    fn product(x: &[i64]) -> i64 {
        x.iter().fold(1i64, |p, &v| p.wrapping_mul(v))
    }
}

/// The product of every row of `a` as `rows` splits it, into a compact tensor of `dims`.
fn row_products<T: Factor>(a: &Tensor, rows: Rows, dims: &[usize]) -> Result<Tensor> {
    let n = rows.n;
    let values = read_rows::<T, _>(a, rows, |e| {
        per_row(rows, |k, buf: &mut Vec<T>| T::product(row(&e, k, n, buf)))
    })?;
    kernel::fresh(a, Arc::new(Layout::row_major(dims)?), |out| {
        out.copy_from_slice(&values);
        Ok(())
    })
}

/// [`row_products`] dispatched on `a`'s dtype.
fn products(op: &str, a: &Tensor, rows: Rows, dims: &[usize]) -> Result<Tensor> {
    dispatch!(
        a.dtype(), op, T => row_products::<T>(a, rows, dims),
        [Float32: f32, Float64: f64, Int32: i32, Int64: i64],
        "{}: takes Float32, Float64, Int32 or Int64 tensors, not {}"
    )
}

/// The gradient of one row's product: `g prod_{i != k} x(i)` at every `k`, as the exclusive
/// suffix products (into `suffix`, from the end) times the running prefix product, in double
/// precision and rounded once.
#[allow(clippy::cast_possible_truncation)]
fn product_gradient_row(x: &[f32], g: f32, suffix: &mut Vec<f64>, out: &mut [f32]) {
    suffix.clear();
    suffix.resize(x.len(), 0.0);
    let mut after = f64::from(g);
    for (s, &v) in suffix.iter_mut().zip(x).rev() {
        *s = after;
        after *= f64::from(v);
    }
    let mut prefix = 1.0f64;
    for ((o, &s), &v) in out.iter_mut().zip(suffix.iter()).zip(x) {
        *o = (prefix * s) as f32;
        prefix *= f64::from(v);
    }
}

mod node {
    use super::{
        differentiable, product_gradient_row, products, read_rows, row, write_rows, Result, Rows,
        Tensor,
    };

    /// [`prod`](super::prod).
    #[differentiable(crate = crate)]
    pub(super) fn prod(a: &Tensor) -> Result<Tensor> {
        // y = prod_i x(i)  =>  dx(k) = g prod_{i != k} x(i)
        fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
            let g = g.values::<f32>()?[0];
            let x = a.values::<f32>()?;
            let mut dx = crate::storage::allocation::filled(x.len(), 0.0f32)?;
            let mut suffix = crate::storage::allocation::with_capacity(x.len())?;
            product_gradient_row(&x, g, &mut suffix, &mut dx);
            Ok(Some(a.f32_like(dx)?))
        }
        let dims = a.dims();
        products("prod", a, Rows::trailing(&dims, dims.len()), &[1])
    }

    /// [`prod_axis`](super::prod_axis) along a resolved axis.
    #[differentiable(crate = crate)]
    pub(super) fn prod_axis(a: &Tensor, axis: usize, keepdim: bool) -> Result<Tensor> {
        // y(k) = prod_i x(k, i)  =>  dx(k, j) = g(k) prod_{i != j} x(k, i)
        fn vjp(g: &Tensor, a: &Tensor, axis: usize) -> Result<Option<Tensor>> {
            let rows = Rows::along("prod_axis", &a.dims(), axis)?;
            let (n, g) = (rows.n, g.values::<f32>()?);
            let dx = read_rows::<f32, _>(a, rows, |ex| {
                write_rows::<f32, (Vec<f32>, Vec<f64>)>(a, rows, |k, (bx, s), out| {
                    product_gradient_row(row(&ex, k, n, bx), g[k], s, out);
                })
            })?;
            Ok(Some(dx))
        }
        let dims = a.dims();
        let rows = Rows::along("prod_axis", &dims, axis)?;
        let out = crate::kernel::reduced_dims(&dims, &[axis], keepdim)?;
        products("prod_axis", a, rows, &out)
    }
}

/// Method forms of the products.
impl Tensor {
    /// [`prod`] of every element.
    pub fn prod(&self) -> Result<Tensor> {
        prod(self)
    }

    /// [`prod_axis`] along `axis`.
    #[track_caller]
    pub fn prod_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        prod_axis(self, axis, keepdim)
    }
}

#[cfg(test)]
mod tests {
    use super::product_gradient_row;

    #[test]
    fn product_gradients_follow_pytorchs_zero_rules() {
        let mut out = [0.0f32; 4];
        product_gradient_row(&[2.0, 0.0, 3.0, 4.0], 1.0, &mut Vec::new(), &mut out);
        assert_eq!(out, [0.0, 24.0, 0.0, 0.0]);
        product_gradient_row(&[2.0, 0.0, 3.0, 0.0], 1.0, &mut Vec::new(), &mut out);
        assert_eq!(out, [0.0; 4]);
        product_gradient_row(&[2.0, -1.0, 3.0, 4.0], 0.5, &mut Vec::new(), &mut out);
        assert_eq!(out, [-6.0, 12.0, -4.0, -3.0]);
    }
}

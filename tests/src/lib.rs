//! Shared helpers of the conformance tests.

use autograd_core::{differentiable, ErrorKind, Result, Tensor};

/// A Float32 tensor from values and flat dims (row-major).
pub fn t(values: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), autograd_core::Shape::from(dims)).expect("valid test tensor")
}

/// The Float32 values of a tensor in logical order.
pub fn vals(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().expect("Float32 tensor")
}

/// The values of `t.grad`, or `None`.
pub fn grad_vals(t: &Tensor) -> Option<Vec<f32>> {
    t.grad().expect("differentiable").map(|g| vals(&g))
}

/// The error kind of a failed result.
pub fn kind<T: std::fmt::Debug>(r: Result<T>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

/// `f(x)` for every element: a plain kernel with no autograd of its own, for test ops.
pub fn map(x: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
    let v = x.values::<f32>()?.into_iter().map(f).collect();
    Tensor::from_vec(v, x.shape().clone())
}

/// `f(a, b)` elementwise for tensors of one shape: a plain kernel for test ops.
pub fn zip(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Tensor> {
    autograd_core::ensure!(a.shape() == b.shape(), Value, "shapes differ");
    let v = a.values::<f32>()?.into_iter().zip(b.values::<f32>()?);
    Tensor::from_vec(v.map(|(x, y)| f(x, y)).collect(), a.shape().clone())
}

/// `a * b` elementwise, defined with `#[differentiable]` in a library crate.
#[differentiable]
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // d(a b) = g b da + g a db
    fn vjp(g: &Tensor, a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((
            Some(zip(g, b, |g, y| g * y)?),
            Some(zip(g, a, |g, x| g * x)?),
        ))
    }
    zip(a, b, |x, y| x * y)
}

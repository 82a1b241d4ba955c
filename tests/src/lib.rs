//! Shared helpers of the conformance tests.

use autograd_core::{ErrorKind, Result, Tensor};

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

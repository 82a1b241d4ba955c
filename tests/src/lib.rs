//! Shared helpers of the conformance tests.

pub mod committed;
pub mod fixture;

use autograd_core::{differentiable, CpuCarrier, ErrorKind, Layout, Result, Shape, Stride, Tensor};

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

/// Asserts `got` matches `want` element by element within `tol` relative to `1 + |want|`.
pub fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
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

/// The row-major coordinate of position `p` in extents `dims`.
pub fn coords(mut p: usize, dims: &[usize]) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for (ci, &d) in c.iter_mut().zip(dims).rev() {
        *ci = p % d;
        p /= d;
    }
    c
}

/// Storage holding `values` (row-major over `dims`) column-major (first axis fastest) from
/// slot 1, with NaN padding in slot 0, and the layout that reads them back at offset 1.
pub fn column_major_storage(values: &[f32], dims: &[usize]) -> (Vec<f32>, Layout) {
    let mut stride = vec![1usize; dims.len()];
    for i in 1..dims.len() {
        stride[i] = stride[i - 1] * dims[i - 1];
    }
    let mut storage = vec![f32::NAN; values.len() + 1];
    for (p, &v) in values.iter().enumerate() {
        let c = coords(p, dims);
        storage[1 + c.iter().zip(&stride).map(|(a, b)| a * b).sum::<usize>()] = v;
    }
    let layout = Layout::new(Shape::from(dims.to_vec()), Stride::from(stride)).unwrap();
    (storage, layout)
}

/// `values` (row-major over `dims`) stored column-major (first axis fastest) at offset 1 of a
/// larger CPU carrier whose padding is NaN: a non-contiguous input at an offset.
pub fn strided(values: &[f32], dims: &[usize]) -> Tensor {
    let (storage, layout) = column_major_storage(values, dims);
    Tensor::from_parts(CpuCarrier::from_vec(storage), layout, 1).unwrap()
}

/// `row` repeated `rows` times through a stride-0 first axis.
pub fn broadcast_rows(row: &[f32], rows: usize) -> Tensor {
    let layout = Layout::new(
        Shape::from(vec![rows, row.len()]),
        Stride::from(vec![0usize, 1]),
    )
    .unwrap();
    Tensor::from_parts(CpuCarrier::from_vec(row.to_vec()), layout, 0).unwrap()
}

/// Deterministic values in `[-1, 1)`.
pub fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

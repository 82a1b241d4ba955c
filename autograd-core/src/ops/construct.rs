//! Constructors PyTorch users reach for beside `Tensor::full_like` and `Tensor::eye`:
//! `one_hot` and a rectangular identity of any dtype. Their results are new leaves
//! (`one_hot` is Int64, not differentiable).

use crate::error::Result;
use crate::kernel::read;
use crate::storage::allocation::filled;
use crate::storage::scalar::Scalar;
use crate::{DType, Shape, Tensor};

/// The one-hot encoding of Int32 or Int64 class `indices` as PyTorch's `F.one_hot`: an Int64
/// tensor of shape `[..indices, classes]` with a 1 at each index. `num_classes` `None` takes
/// the largest index plus one. An index below 0 or not below `num_classes` is
/// `Error::Value`; another dtype is `Error::Type`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_core::ops::one_hot;
/// let i = Tensor::from_vec(vec![2i64, 0], shape![2])?;
/// assert_eq!(one_hot(&i, Some(3))?.values::<i64>()?, [0, 0, 1, 1, 0, 0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn one_hot(indices: &Tensor, num_classes: Option<usize>) -> Result<Tensor> {
    let classes: Vec<i64> = match indices.dtype() {
        DType::Int64 => read::<i64, _>(indices, |e| collect(&e))??,
        DType::Int32 => read::<i32, _>(indices, |e| collect(&e))??
            .into_iter()
            .map(i64::from)
            .collect(),
        other => crate::bail!(Type, "one_hot: takes Int32 or Int64 indices, not {other}"),
    };
    let largest = classes.iter().copied().max();
    let n = match num_classes {
        Some(n) => n,
        // every index non-negative is checked below; an empty tensor has 0 classes
        None => largest.map_or(0, |m| usize::try_from(m).map_or(0, |m| m + 1)),
    };
    let mut out = filled(
        classes.len().checked_mul(n).ok_or_else(|| {
            crate::Error::Value(format!(
                "one_hot: {} indices of {n} classes overflow",
                classes.len()
            ))
        })?,
        0i64,
    )?;
    for (k, &c) in classes.iter().enumerate() {
        let class = usize::try_from(c).ok().filter(|&c| c < n);
        let Some(class) = class else {
            crate::bail!(
                Value,
                "one_hot: index {c} (at position {k}) is outside 0..{n}"
            );
        };
        out[k * n + class] = 1;
    }
    let mut dims = indices.dims();
    dims.push(n);
    Tensor::from_vec(out, Shape::from(dims.as_slice()))
}

/// The `rows x cols` identity of `T`, whose one is `one`.
fn identity<T: crate::Element>(rows: usize, cols: usize, one: Scalar) -> Result<Tensor> {
    let Some(one) = T::from_scalar(one) else {
        crate::bail!(Type, "eye: {one:?} is not a {}", T::DTYPE);
    };
    let n = rows
        .checked_mul(cols)
        .ok_or_else(|| crate::Error::Value(format!("eye: {rows} x {cols} elements overflow")))?;
    let mut v = filled(n, T::default())?;
    for i in 0..rows.min(cols) {
        v[i * cols + i] = one;
    }
    Tensor::from_vec(v, Shape::from([rows, cols].as_slice()))
}

fn collect<T: crate::Element>(e: &crate::kernel::Elements<'_, T>) -> Result<Vec<T>> {
    let mut v = filled(e.len(), T::default())?;
    e.copy_range(0, &mut v);
    Ok(v)
}

impl Tensor {
    /// The `rows x cols` identity of `dtype` (ones on the main diagonal, `true` for Bool), as
    /// PyTorch's `torch.eye(rows, cols, dtype=...)`; [`Tensor::eye`] is the square Float32 one.
    pub fn eye_with(rows: usize, cols: usize, dtype: &DType) -> Result<Tensor> {
        let one = match dtype {
            DType::Bool => Scalar::Bool(true),
            _ => Scalar::I32(1).cast(dtype)?,
        };
        crate::kernel::element::dispatch!(
            dtype, "eye", T => identity::<T>(rows, cols, one),
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{}: makes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
        )
    }
}

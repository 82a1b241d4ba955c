//! Reductions: sums, means, extrema, variances and arg-extrema over top-level axes.
//!
//! Every reduction folds Float32 elements in an `f64` accumulator and rounds once. The axes are
//! top-level modes, resolved (`0..rank`) by the public functions of `reduce_axes`, which take
//! PyTorch's negative axes and call these nodes; the result is compact row-major with [`kernel::reduced_dims`] extents.
//! VJPs broadcast the reduced cotangent back over each group with [`groups`], which gives every
//! input position (in logical order) the row-major index of the result element it fed.

use crate::error::{bail, ensure};
use crate::{differentiable, kernel, DType, Result, Tensor};

/// The sum of every element, as a one-element tensor of layout `(1):(1)`.
#[differentiable(crate = crate)]
pub fn sum(a: &Tensor) -> Result<Tensor> {
    // d(sum a) = g[0] at every element
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(a.f32_full_like(g.values::<f32>()?[0])?))
    }
    ensure_f32("sum", a)?;
    // a scalar: one top-level leaf mode of extent 1
    scalar_like(a, kernel::sum_f32(a)? as f32)
}

/// For every position of a tensor of extents `dims` (logical order), the row-major index of
/// its group in the result of reducing `axes` (the same index with or without keepdim).
///
/// `groups(&[2, 3], &[1]) == [0, 0, 0, 1, 1, 1]`; `groups(&[2, 3], &[0]) == [0, 1, 2, 0, 1, 2]`.
fn groups(dims: &[usize], axes: &[usize]) -> Result<Vec<usize>> {
    // the stride of each axis in the result: 0 for a reduced axis
    let mut stride = vec![0; dims.len()];
    let mut s = 1;
    for i in (0..dims.len()).rev() {
        if !axes.contains(&i) {
            stride[i] = s;
            s *= dims[i];
        }
    }
    super::index::offsets(dims, &stride)
}

/// The number of elements each group of a reduction over `axes` holds.
fn group_len(a: &Tensor, axes: &[usize]) -> usize {
    let dims = a.dims();
    axes.iter().filter_map(|&i| dims.get(i)).product()
}

/// `value` as a one-element tensor of layout `(1):(1)` in fresh storage of `a`'s carrier
/// class.
fn scalar_like(a: &Tensor, value: f32) -> Result<Tensor> {
    a.f32_from_slice(
        &[value],
        std::sync::Arc::new(crate::Layout::row_major(&[1])?),
    )
}

/// Refuses anything but Float32 for the differentiable reductions.
fn ensure_f32(op: &str, a: &Tensor) -> Result<()> {
    ensure!(
        a.dtype() == &DType::Float32,
        Type,
        "{op} takes a Float32 tensor, got {}",
        a.dtype()
    );
    Ok(())
}

/// The sum over the top-level `axes` (resolved), keeping them as extent-1 modes when `keepdim`.
#[differentiable(crate = crate)]
pub(crate) fn sum_axes(a: &Tensor, axes: &[usize], keepdim: bool) -> Result<Tensor> {
    // y[k] = sum_{p in group k} a[p]  =>  da[p] = g[group(p)]
    fn vjp(g: &Tensor, a: &Tensor, axes: &[usize]) -> Result<Option<Tensor>> {
        let g = g.values::<f32>()?;
        let dx = groups(&a.dims(), axes)?.into_iter().map(|k| g[k]).collect();
        Ok(Some(a.f32_like(dx)?))
    }
    ensure_f32("sum_axes", a)?;
    kernel::reduce(
        a,
        axes,
        keepdim,
        || 0.0f64,
        |s, x: f32| s + f64::from(x),
        |s, _| s as f32,
    )
}

/// The mean of every element, as a one-element tensor of layout `(1):(1)` (NaN when `a` is
/// empty).
#[differentiable(crate = crate)]
pub fn mean(a: &Tensor) -> Result<Tensor> {
    // y = sum(a) / n  =>  da[p] = g[0] / n
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let n = a.size() as f64;
        Ok(Some(a.f32_full_like(
            (f64::from(g.values::<f32>()?[0]) / n) as f32,
        )?))
    }
    ensure_f32("mean", a)?;
    scalar_like(a, (kernel::sum_f32(a)? / a.size() as f64) as f32)
}

/// The mean over the top-level `axes` (NaN for an empty group).
#[differentiable(crate = crate)]
pub(crate) fn mean_axes(a: &Tensor, axes: &[usize], keepdim: bool) -> Result<Tensor> {
    // y[k] = (1/r) sum_{p in group k} a[p]  =>  da[p] = g[group(p)] / r
    fn vjp(g: &Tensor, a: &Tensor, axes: &[usize]) -> Result<Option<Tensor>> {
        let g = g.values::<f32>()?;
        let r = group_len(a, axes) as f64;
        let dx = groups(&a.dims(), axes)?
            .into_iter()
            .map(|k| (f64::from(g[k]) / r) as f32)
            .collect();
        Ok(Some(a.f32_like(dx)?))
    }
    ensure_f32("mean_axes", a)?;
    kernel::reduce(
        a,
        axes,
        keepdim,
        || 0.0f64,
        |s, x: f32| s + f64::from(x),
        |s, n| (s / n as f64) as f32,
    )
}

/// Which extremum a reduction keeps.
#[derive(Clone, Copy)]
enum Extremum {
    Max,
    Min,
}

impl Extremum {
    /// Whether `x` replaces the current best `best`: strictly better, or NaN (NaN propagates,
    /// as in numpy and PyTorch). Ties keep the earlier element.
    fn beats<T: PartialOrd + Copy>(self, x: T, best: T) -> bool {
        let x_nan = x.partial_cmp(&x).is_none();
        if best.partial_cmp(&best).is_none() {
            return false;
        }
        x_nan
            || match self {
                Extremum::Max => x > best,
                Extremum::Min => x < best,
            }
    }
}

/// The extremum of every group of `a` (Float32) over `axes`; an empty group is an error.
fn extremum(a: &Tensor, axes: &[usize], keepdim: bool, which: Extremum) -> Result<Tensor> {
    let op = match which {
        Extremum::Max => "max_axes",
        Extremum::Min => "min_axes",
    };
    ensure_f32(op, a)?;
    let out_dims = kernel::reduced_dims(&a.dims(), axes, keepdim)?;
    ensure!(
        group_len(a, axes) > 0 || out_dims.iter().product::<usize>() == 0,
        Value,
        "{op}: cannot reduce the empty axes {axes:?} of shape {}",
        a.shape()
    );
    kernel::reduce(
        a,
        axes,
        keepdim,
        || None::<f32>,
        move |best, x: f32| match best {
            Some(b) if !which.beats(x, b) => Some(b),
            _ => Some(x),
        },
        |best, _| best.unwrap_or(f32::NAN),
    )
}

/// The gradient of an extremum: `g[k]` split evenly among the elements of group `k` equal to
/// the extremum `y[k]`. A NaN extremum counts its NaN elements as equal to it, as PyTorch's
/// `max()` does, so the NaN reaches the gradient instead of vanishing into zeros.
fn extremum_grad(g: &Tensor, a: &Tensor, y: &Tensor, axes: &[usize]) -> Result<Tensor> {
    let (g, y, x) = (g.values::<f32>()?, y.values::<f32>()?, a.values::<f32>()?);
    let group = groups(&a.dims(), axes)?;
    let attains = |v: f32, m: f32| v == m || (v.is_nan() && m.is_nan());
    let mut ties = crate::storage::allocation::filled(y.len(), 0u32)?;
    for (&k, &v) in group.iter().zip(&x) {
        if attains(v, y[k]) {
            ties[k] += 1;
        }
    }
    let dx = group
        .iter()
        .zip(&x)
        .map(|(&k, &v)| {
            if attains(v, y[k]) {
                g[k] / ties[k] as f32
            } else {
                0.0
            }
        })
        .collect();
    a.f32_like(dx)
}

/// The largest element of every group over the top-level `axes` (NaN if the group holds one).
///
/// Gradient: each group's cotangent is **split evenly among the elements that equal the
/// maximum** (like PyTorch's `amax`), so ties share it and the gradient is symmetric in them;
/// a NaN maximum's cotangent goes to the group's NaN elements (as PyTorch's `max()`).
/// Reducing an empty axis is `Error::Value`.
#[differentiable(crate = crate)]
pub(crate) fn max_axes(a: &Tensor, axes: &[usize], keepdim: bool) -> Result<Tensor> {
    // y[k] = max_{p in k} a[p]; with T_k = {p in k : a[p] = y[k]}, da[p] = g[k] / |T_k| on T_k
    fn vjp(g: &Tensor, a: &Tensor, axes: &[usize], output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(extremum_grad(g, a, output, axes)?))
    }
    extremum(a, axes, keepdim, Extremum::Max)
}

/// The smallest element of every group over the top-level `axes`; gradient split evenly among
/// ties, as [`max_axes`].
#[differentiable(crate = crate)]
pub(crate) fn min_axes(a: &Tensor, axes: &[usize], keepdim: bool) -> Result<Tensor> {
    // y[k] = min_{p in k} a[p]; with T_k = {p in k : a[p] = y[k]}, da[p] = g[k] / |T_k| on T_k
    fn vjp(g: &Tensor, a: &Tensor, axes: &[usize], output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(extremum_grad(g, a, output, axes)?))
    }
    extremum(a, axes, keepdim, Extremum::Min)
}

/// The variance over the top-level `axes`: `sum (x - mean)^2 / (r - correction)` over each
/// group of `r` elements. `correction = 1` is the unbiased estimate (PyTorch's default),
/// `0` the population variance. When `r <= correction` the divisor is 0 (NaN or infinity, as
/// in PyTorch). Computed in one pass with Welford's update in `f64`.
#[differentiable(crate = crate)]
pub(crate) fn var_axes(
    a: &Tensor,
    axes: &[usize],
    keepdim: bool,
    correction: usize,
) -> Result<Tensor> {
    // v = sum_p (x_p - m)^2 / d with m = sum_p x_p / r, d = r - c:
    // dv/dx_q = (2 (x_q - m) - (2/r) sum_p (x_p - m)) / d = 2 (x_q - m) / d  (the sum is 0),
    // so da[q] = g[k] * 2 (x_q - m_k) / d.
    fn vjp(g: &Tensor, a: &Tensor, axes: &[usize], correction: usize) -> Result<Option<Tensor>> {
        let (g, x) = (g.values::<f32>()?, a.values::<f32>()?);
        let group = groups(&a.dims(), axes)?;
        let r = group_len(a, axes);
        let d = r.saturating_sub(correction) as f64;
        let mut means = crate::storage::allocation::filled(g.len(), 0.0f64)?;
        for (&k, &v) in group.iter().zip(&x) {
            means[k] += f64::from(v);
        }
        for m in &mut means {
            *m /= r as f64;
        }
        let dx = group
            .iter()
            .zip(&x)
            .map(|(&k, &v)| (f64::from(g[k]) * 2.0 * (f64::from(v) - means[k]) / d) as f32)
            .collect();
        Ok(Some(a.f32_like(dx)?))
    }
    ensure_f32("var_axes", a)?;
    kernel::reduce(
        a,
        axes,
        keepdim,
        || (0usize, 0.0f64, 0.0f64),
        |(n, mean, m2), x: f32| {
            let x = f64::from(x);
            let n = n + 1;
            let delta = x - mean;
            let mean = mean + delta / n as f64;
            (n, mean, m2 + delta * (x - mean))
        },
        move |(_, _, m2), r| (m2 / r.saturating_sub(correction) as f64) as f32,
    )
}

/// The index of the extremum along `axis` of every row, as Int32 (ties: the first index).
fn arg_extremum(a: &Tensor, axis: usize, keepdim: bool, which: Extremum) -> Result<Tensor> {
    let op = match which {
        Extremum::Max => "argmax",
        Extremum::Min => "argmin",
    };
    let dims = a.dims();
    ensure!(
        axis < dims.len(),
        Value,
        "{op}: axis {axis} is out of range for shape {} of {} axes",
        a.shape(),
        dims.len()
    );
    let out_dims = kernel::reduced_dims(&dims, &[axis], keepdim)?;
    ensure!(
        dims[axis] > 0 || out_dims.iter().product::<usize>() == 0,
        Value,
        "{op}: axis {axis} of shape {} is empty",
        a.shape()
    );
    ensure!(
        i32::try_from(dims[axis]).is_ok(),
        Value,
        "{op}: axis {axis} of extent {} has indices beyond Int32",
        dims[axis]
    );
    match a.dtype() {
        DType::Float32 => arg_extremum_of::<f32>(a, axis, keepdim, which),
        DType::Float64 => arg_extremum_of::<f64>(a, axis, keepdim, which),
        DType::Int32 => arg_extremum_of::<i32>(a, axis, keepdim, which),
        DType::Int64 => arg_extremum_of::<i64>(a, axis, keepdim, which),
        other => bail!(Type, "{op} does not take {other} tensors"),
    }
}

/// [`arg_extremum`] for one element type.
fn arg_extremum_of<T: crate::Element + PartialOrd>(
    a: &Tensor,
    axis: usize,
    keepdim: bool,
    which: Extremum,
) -> Result<Tensor> {
    kernel::reduce(
        a,
        &[axis],
        keepdim,
        || (0usize, 0usize, None::<T>),
        move |(i, at, best), x: T| match best {
            Some(b) if !which.beats(x, b) => (i + 1, at, Some(b)),
            _ => (i + 1, i, Some(x)),
        },
        |(_, at, _), _| at as i32,
    )
}

/// The index of the largest element along `axis`, as an Int32 tensor (the axis dropped, or kept
/// with extent 1 when `keepdim`). **Ties give the first index**; a NaN counts as the largest
/// (its first occurrence wins). Records no node: the result is not differentiable.
#[differentiable(crate = crate)]
pub(crate) fn argmax(a: &Tensor, axis: usize, keepdim: bool) -> Result<Tensor> {
    // an Int32 result has no cotangent
    fn vjp(_g: &Tensor) -> Option<Tensor> {
        None
    }
    arg_extremum(a, axis, keepdim, Extremum::Max)
}

/// The index of the smallest element along `axis`, as Int32; ties give the first index, as
/// [`argmax`].
#[differentiable(crate = crate)]
pub(crate) fn argmin(a: &Tensor, axis: usize, keepdim: bool) -> Result<Tensor> {
    // an Int32 result has no cotangent
    fn vjp(_g: &Tensor) -> Option<Tensor> {
        None
    }
    arg_extremum(a, axis, keepdim, Extremum::Min)
}

/// Method forms of the whole-tensor reductions (those over axes are in `reduce_axes`).
impl Tensor {
    /// [`sum`]: the sum of every element as a one-element tensor.
    pub fn sum(&self) -> Result<Tensor> {
        sum(self)
    }
    /// [`mean`]: the mean of every element as a one-element tensor.
    pub fn mean(&self) -> Result<Tensor> {
        mean(self)
    }
}

#[cfg(test)]
mod tests {
    use super::groups;

    #[test]
    fn groups_index_the_reduced_result() {
        assert_eq!(groups(&[2, 3], &[1]).unwrap(), [0, 0, 0, 1, 1, 1]);
        assert_eq!(groups(&[2, 3], &[0]).unwrap(), [0, 1, 2, 0, 1, 2]);
        assert_eq!(groups(&[2, 3], &[0, 1]).unwrap(), [0; 6]);
        assert_eq!(groups(&[2, 2, 2], &[1]).unwrap(), [0, 1, 0, 1, 2, 3, 2, 3]);
    }
}

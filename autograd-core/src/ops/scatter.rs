//! Writing values into a copy of a tensor at computed positions, as PyTorch's `scatter`
//! (non-additive, from a tensor or a scalar), `index_add` and `index_put` (advanced indexing on
//! the leading axes, overwriting or accumulating). Each op turns its indices into a list of
//! `(source position, target position)` pairs, checked before anything is computed, and calls
//! one node, [`node::put`], whose gradient follows PyTorch's rule: the input receives the
//! cotangent with the overwritten positions zeroed (all of it when accumulating), the values
//! receive the cotangent at their targets (a gather), times `alpha` for `index_add`.

use super::broadcast::{broadcast_shapes, expand};
use super::index::{check_axis, checked, index_values, offsets, scattered, strides};
use crate::error::{bail, ensure, Result};
use crate::graph::grad_mode::no_grad;
use crate::layout::axis::Axis;
use crate::storage::allocation::{filled, with_capacity};
use crate::storage::scalar::Scalar;
use crate::{DType, Layout, Tensor};

/// How [`node::put`] writes a value into its target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Write {
    /// The value replaces the target; of several values for one target the last wins.
    Overwrite,
    /// `alpha` times the value is added to the target (already of the input's dtype).
    Add(Scalar),
}

impl crate::graph::captured::Captured for Write {}

/// `a` with `src[p]` written at `p`'s coordinate with its `axis` (negative from the back)
/// entry replaced by `index[p]`, for every position `p` of `index`, as PyTorch's
/// `Tensor.scatter(dim, index, src)`. `index` (Int32 or Int64) and `src` have `a`'s rank;
/// `index`'s extents do not exceed `src`'s, nor `a`'s off `axis`. When `index` names one
/// target twice, the value written last (in row-major order of `index`) wins; PyTorch leaves
/// that undefined.
///
/// The gradient is PyTorch's: `a` receives the cotangent with the scattered positions zeroed,
/// `src` the cotangent gathered at `index` (zero where `index` does not reach).
/// `Error::Value` for a bad rank, extent or index (naming it), `Error::Type` for dtypes that
/// differ or indices that are not integers.
///
/// ```
/// use autograd_core::ops::scatter;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32; 6], shape![2, 3])?;
/// let i = Tensor::from_vec(vec![2i64, 0, 1, 1], shape![2, 2])?;
/// let s = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// let y = scatter(&a, -1, &i, &s)?;
/// assert_eq!(y.values::<f32>()?, [2.0, 0.0, 1.0, 0.0, 4.0, 0.0]); // row 1: 3 then 4 at 1
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn scatter(a: &Tensor, axis: impl Into<Axis>, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let dims = a.dims();
    let axis = axis.into().resolve_for("scatter", dims.len())?;
    check_axis("scatter", axis, dims.len(), a)?;
    same_dtype("scatter", a, src)?;
    let (sdims, idims) = (src.dims(), index.dims());
    ensure!(
        sdims.len() == idims.len() && idims.iter().zip(&sdims).all(|(i, s)| i <= s),
        Value,
        "scatter: index of shape {:?} does not fit in src of shape {sdims:?}",
        idims
    );
    let to = scattered("scatter", &dims, axis, index)?;
    let from = offsets(&idims, &strides(&sdims))?;
    node::put(a, src, &from, &to, Write::Overwrite)
}

/// `a` with `value` (cast to `a`'s dtype) written at every target of `index` along `axis`, as
/// PyTorch's `Tensor.scatter(dim, index, value)`; [`scatter`] with a `src` full of `value`.
/// The gradient reaches `a` where nothing was written.
///
/// ```
/// use autograd_core::ops::scatter_value;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1i64, 2, 3, 4], shape![4])?;
/// let i = Tensor::from_vec(vec![3i64, 0], shape![2])?;
/// assert_eq!(scatter_value(&a, 0, &i, 9i64)?.values::<i64>()?, [9, 2, 3, 9]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn scatter_value(
    a: &Tensor,
    axis: impl Into<Axis>,
    index: &Tensor,
    value: impl Into<Scalar>,
) -> Result<Tensor> {
    let value = value.into().cast(a.dtype())?;
    let src = Tensor::full(index.shape().clone(), value)?;
    scatter(a, axis, index, &src)
}

/// `a` with `alpha * source` added along `axis` (negative from the back) at the positions
/// `index` names, as PyTorch's `Tensor.index_add(dim, index, source, alpha=alpha)`:
/// `y[.., index[j], ..] += alpha * source[.., j, ..]`, repeated indices adding up. `index` is a
/// one-axis Int32 or Int64 tensor as long as `source`'s `axis`, and `source` has `a`'s extents
/// elsewhere. For integer tensors `alpha` must be a whole number.
///
/// The gradient: `a` receives the cotangent, `source` `alpha` times the cotangent selected at
/// `index`. `Error::Value` for mismatched shapes or an index out of range (naming them),
/// `Error::Type` for dtypes that differ or an `alpha` the dtype cannot hold.
///
/// ```
/// use autograd_core::ops::index_add;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32; 6], shape![3, 2])?;
/// let i = Tensor::from_vec(vec![2i64, 0, 2], shape![3])?;
/// let s = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![3, 2])?;
/// let y = index_add(&a, 0, &i, &s, 2.0)?;
/// assert_eq!(y.values::<f32>()?, [7.0, 9.0, 1.0, 1.0, 13.0, 17.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn index_add(
    a: &Tensor,
    axis: impl Into<Axis>,
    index: &Tensor,
    source: &Tensor,
    alpha: f64,
) -> Result<Tensor> {
    let dims = a.dims();
    let axis = axis.into().resolve_for("index_add", dims.len())?;
    same_dtype("index_add", a, source)?;
    ensure!(
        index.dims().len() <= 1,
        Value,
        "index_add: index must have one axis, got shape {:?}",
        index.dims()
    );
    let idx = checked(
        "index_add",
        &index_values("index_add", index)?,
        axis,
        dims[axis],
    )?;
    let sdims = source.dims();
    let mut want = dims.clone();
    want[axis] = idx.len();
    ensure!(
        sdims == want,
        Value,
        "index_add: source of shape {sdims:?} must have shape {want:?} (the input's {dims:?} with {} indices along axis {axis})",
        idx.len()
    );
    let (outer, inner): (usize, usize) = (
        dims[..axis].iter().product(),
        dims[axis + 1..].iter().product(),
    );
    let n = dims[axis];
    let mut to = with_capacity(source.size())?;
    for o in 0..outer {
        for &k in &idx {
            let base = (o * n + k) * inner;
            to.extend(base..base + inner);
        }
    }
    let from: Vec<usize> = (0..to.len()).collect();
    let alpha = alpha_of(a.dtype(), alpha)?;
    node::put(a, source, &from, &to, Write::Add(alpha))
}

/// `alpha` as a scalar of `dtype`: integers need a whole number (`Error::Type` otherwise).
fn alpha_of(dtype: &DType, alpha: f64) -> Result<Scalar> {
    let scalar = match dtype {
        DType::Int32 | DType::Int64 if alpha.fract() == 0.0 && alpha.abs() < 9.2e18 => {
            Scalar::I64(alpha as i64)
        }
        DType::Int32 | DType::Int64 => {
            bail!(
                Type,
                "index_add: alpha {alpha} is not a whole number for a {dtype} tensor"
            )
        }
        _ => Scalar::F64(alpha),
    };
    scalar.cast(dtype).map_err(|e| e.context("index_add"))
}

/// `a` with `values` written at the positions the index tensors `indices` name on `a`'s
/// leading axes, as PyTorch's `a.index_put((i0, i1, ..), values, accumulate)` (that is,
/// `a[i0, i1, ..] = values`): the indices (Int32 or Int64, negative counting from the back)
/// broadcast together to a shape `B`, and `values` broadcasts to `B` followed by the extents of
/// the axes not indexed. With `accumulate` the values add into their targets (repeated targets
/// add up); without it a target named twice keeps the value written last (in row-major order
/// of `B`), a choice PyTorch leaves undefined.
///
/// The gradient: `a` receives the cotangent, with the written positions zeroed unless
/// accumulating; `values` the cotangent at each value's target (summed over broadcast copies).
/// `Error::Value` for no indices or more than `a` has axes, index shapes that do not
/// broadcast or broadcast to more positions than can be indexed or allocated, an index out of
/// range or values that do not broadcast (naming the shapes);
/// `Error::Type` for non-integer indices, dtypes that differ, or accumulating Bool.
///
/// ```
/// use autograd_core::ops::index_put;
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32; 6], shape![3, 2])?;
/// let rows = Tensor::from_vec(vec![0i64, 2, 0], shape![3])?;
/// let cols = Tensor::from_vec(vec![1i64], shape![1])?; // broadcast over the rows
/// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3])?;
/// let put = index_put(&a, &[rows.clone(), cols.clone()], &v, false)?;
/// assert_eq!(put.values::<f32>()?, [0.0, 3.0, 0.0, 0.0, 0.0, 2.0]); // the last write wins
/// let added = index_put(&a, &[rows, cols], &v, true)?;
/// assert_eq!(added.values::<f32>()?, [0.0, 4.0, 0.0, 0.0, 0.0, 2.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn index_put(
    a: &Tensor,
    indices: &[Tensor],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    let dims = a.dims();
    let k = indices.len();
    ensure!(
        (1..=dims.len()).contains(&k),
        Value,
        "index_put: {k} index tensors for a tensor of shape {dims:?}; give 1 to {}",
        dims.len()
    );
    same_dtype("index_put", a, values)?;
    if accumulate && *a.dtype() == DType::Bool {
        bail!(Type, "index_put: cannot accumulate into a Bool tensor");
    }
    let mut joint: Vec<usize> = Vec::new();
    for i in indices {
        joint = broadcast_shapes(&joint, &i.dims())
            .map_err(|e| e.context("index_put: the index tensors"))?;
    }
    let inner: usize = dims[k..].iter().product();
    let mut target = joint.clone();
    target.extend_from_slice(&dims[k..]);
    // the indexed shape must be indexable before anything is allocated for it
    Layout::row_major(&target).map_err(|e| e.context("index_put: the indexed shape"))?;
    let row = strides(&dims);
    let count: usize = joint.iter().product();
    let mut base = filled(count, 0usize)?;
    for (axis, i) in indices.iter().enumerate() {
        let spread = {
            let _off = no_grad();
            expand(i, &joint)?
        };
        let n = dims[axis];
        for (b, &v) in base.iter_mut().zip(&index_values("index_put", &spread)?) {
            // extents fit i64; PyTorch counts negative indices from the back
            let at = if v < 0 { v + n as i64 } else { v };
            match usize::try_from(at) {
                Ok(u) if u < n => *b += u * row[axis],
                _ => bail!(
                    Value,
                    "index_put: index {v} is out of range for axis {axis} of extent {n} (shape {dims:?})"
                ),
            }
        }
    }
    let vdims = values.dims();
    let fits = broadcast_shapes(&vdims, &target).is_ok_and(|d| d == target);
    ensure!(
        fits,
        Value,
        "index_put: values of shape {vdims:?} do not broadcast to the indexed shape {target:?}"
    );
    let values = expand(values, &target)?;
    let mut to = with_capacity(count * inner)?;
    for &b in &base {
        to.extend(b..b + inner);
    }
    let mut from = with_capacity(to.len())?;
    from.extend(0..to.len());
    let write = if accumulate {
        Write::Add(Scalar::I32(1).cast(a.dtype())?)
    } else {
        Write::Overwrite
    };
    node::put(a, &values, &from, &to, write)
}

/// `Error::Type` unless `b` has `a`'s dtype.
fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    ensure!(
        a.dtype() == b.dtype(),
        Type,
        "{op}: the values have dtype {} but the tensor has {}",
        b.dtype(),
        a.dtype()
    );
    Ok(())
}

pub(crate) mod node {
    use super::Write;
    use crate::error::{bail, ensure, Result};
    use crate::kernel::element::Num;
    use crate::kernel::read_logical_pair;
    use crate::ops::index::emit;
    use crate::storage::allocation::filled;
    use crate::{differentiable, DType, Element, Tensor};

    /// A copy of `a` with `values[from[p]]` written at `a`'s logical position `to[p]` (as
    /// `write` says), for every `p` in order. The positions are checked by the callers.
    #[differentiable(crate = crate)]
    pub(crate) fn put(
        a: &Tensor,
        values: &Tensor,
        from: &[usize],
        to: &[usize],
        write: Write,
    ) -> Result<Tensor> {
        // overwrite: y = a (zero at the targets) + sum_p v[from p] e_{to p}
        // add:       y = a + alpha sum_p v[from p] e_{to p}
        // => da = g (zeroed at the targets when overwriting), dv[from p] += alpha g[to p]
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            values: &Tensor,
            from: &[usize],
            to: &[usize],
            write: Write,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>)> {
            let g = g.values::<f32>()?;
            let dv = if needs.input(1) {
                let alpha = match write {
                    Write::Overwrite => 1.0,
                    Write::Add(alpha) => alpha.to_f64() as f32,
                };
                let mut dv = filled(values.size(), 0.0f32)?;
                for (&s, &t) in from.iter().zip(to) {
                    dv[s] += alpha * g[t];
                }
                Some(values.f32_like(dv)?)
            } else {
                None
            };
            let da = if needs.input(0) {
                let mut da = g;
                if write == Write::Overwrite {
                    for &t in to {
                        da[t] = 0.0;
                    }
                }
                Some(a.f32_like(da)?)
            } else {
                None
            };
            Ok((da, dv))
        }
        ensure!(
            from.len() == to.len(),
            Value,
            "put: {} sources for {} targets",
            from.len(),
            to.len()
        );
        match (a.dtype(), write) {
            (DType::Float32, w) => write_as::<f32>(a, values, from, to, w),
            (DType::Float64, w) => write_as::<f64>(a, values, from, to, w),
            (DType::Int32, w) => write_as::<i32>(a, values, from, to, w),
            (DType::Int64, w) => write_as::<i64>(a, values, from, to, w),
            (DType::Bool, Write::Overwrite) => overwrite::<bool>(a, values, from, to),
            (other, _) => bail!(Type, "put: cannot write into a {other} tensor this way"),
        }
    }

    fn write_as<T: Num>(
        a: &Tensor,
        values: &Tensor,
        from: &[usize],
        to: &[usize],
        write: Write,
    ) -> Result<Tensor> {
        let Write::Add(alpha) = write else {
            return overwrite::<T>(a, values, from, to);
        };
        let Some(alpha) = T::from_scalar(alpha) else {
            bail!(Type, "put: alpha {alpha} is not a {}", T::DTYPE)
        };
        let one = T::from_scalar(crate::storage::scalar::Scalar::I32(1).cast(&T::DTYPE)?);
        let scaled = one != Some(alpha);
        read_logical_pair(a, values, |x: &[T], v: &[T]| {
            emit::<T>(a, &a.dims(), |out| {
                out.copy_from_slice(x);
                for (&s, &t) in from.iter().zip(to) {
                    let add = if scaled { v[s].times(alpha) } else { v[s] };
                    out[t] = out[t].plus(add);
                }
                Ok(())
            })
        })?
    }

    fn overwrite<T: Element>(
        a: &Tensor,
        values: &Tensor,
        from: &[usize],
        to: &[usize],
    ) -> Result<Tensor> {
        read_logical_pair(a, values, |x: &[T], v: &[T]| {
            emit::<T>(a, &a.dims(), |out| {
                out.copy_from_slice(x);
                for (&s, &t) in from.iter().zip(to) {
                    out[t] = v[s];
                }
                Ok(())
            })
        })?
    }
}

/// Method forms of the writing ops.
impl Tensor {
    /// [`scatter`] into a copy of this tensor.
    #[track_caller]
    pub fn scatter(&self, axis: impl Into<Axis>, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        scatter(self, axis, index, src)
    }

    /// [`scatter_value`] into a copy of this tensor.
    #[track_caller]
    pub fn scatter_value(
        &self,
        axis: impl Into<Axis>,
        index: &Tensor,
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        scatter_value(self, axis, index, value)
    }

    /// [`index_add`] into a copy of this tensor.
    #[track_caller]
    pub fn index_add(
        &self,
        axis: impl Into<Axis>,
        index: &Tensor,
        source: &Tensor,
        alpha: f64,
    ) -> Result<Tensor> {
        index_add(self, axis, index, source, alpha)
    }

    /// [`index_put`] into a copy of this tensor.
    pub fn index_put(
        &self,
        indices: &[Tensor],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        index_put(self, indices, values, accumulate)
    }
}

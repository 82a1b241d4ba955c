//! Padding as PyTorch's `F.pad`: extents grown (or, with negative pads, cropped) at both ends
//! of the last axes, the new elements a constant or taken from the input by reflection,
//! replication or wrapping round. The convolution ops reuse it, so the kernel works a row of
//! the last axis at a time: each output row is one contiguous copy of its source row plus the
//! few edge elements, and only the row's source is computed per row (no per-element index
//! arithmetic in the inner loop). The gradient adds each output row back into its source row,
//! so the edge rows of reflect, replicate and circular padding accumulate every copy.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::kernel::{self, element::dispatch};
use crate::layout::axis::IntList;
use crate::storage::allocation::{filled, with_capacity};
use crate::storage::scalar::{Element, Scalar};
use crate::{differentiable, DType, Layout, Tensor};

/// How [`pad`] fills the elements it adds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// Every new element is this value (cast to the input's dtype: an integer input needs a
    /// whole number, a Bool input 0 or 1), PyTorch's `mode="constant"`.
    Constant(f64),
    /// The input mirrored about its edge element, which is not repeated (`[1, 2, 3]` padded by
    /// 2 on the left gives `[3, 2, 1, 2, 3]`); each pad must be below the axis's extent.
    Reflect,
    /// The edge element repeated (`[1, 2, 3]` padded by 2 on the left gives `[1, 1, 1, 2, 3]`).
    Replicate,
    /// The input wrapped round (`[1, 2, 3]` padded by 2 on the left gives `[2, 3, 1, 2, 3]`);
    /// a negative pad on the other side crops first, and each pad must be at most the extent
    /// left after cropping.
    Circular,
}

impl crate::graph::captured::Captured for PadMode {}

impl PadMode {
    fn name(self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }

    /// The input coordinate output coordinate `j` of an axis of extent `n` padded by `(lo,
    /// hi)` reads, or `None` where it is the constant. Reflect and replicate work about the
    /// input's own edges; circular wraps round the window left after cropping (PyTorch crops a
    /// negative pad first), which `plan` checks is not empty when it pads.
    fn source(self, j: usize, (lo, hi): (i64, i64), n: usize) -> Option<usize> {
        // extents and pads fit i64: they count elements of allocated tensors
        let (s, n) = (j as i64 - lo, n as i64);
        if (0..n).contains(&s) {
            return usize::try_from(s).ok();
        }
        let s = match self {
            PadMode::Constant(_) => return None,
            PadMode::Reflect if s < 0 => -s,
            PadMode::Reflect => 2 * (n - 1) - s,
            PadMode::Replicate => s.clamp(0, n - 1),
            PadMode::Circular => {
                let (first, end) = ((-lo).max(0), n - (-hi).max(0));
                first + (s - first).rem_euclid((end - first).max(1))
            }
        };
        usize::try_from(s).ok()
    }
}

/// `a` padded as PyTorch's `F.pad(a, pads, mode, value)`: `pads` holds pairs `(before,
/// after)` for the last axes, the last axis first (`[left, right]` pads the last axis,
/// `[left, right, top, bottom]` the last two, ...). A negative pad crops that many elements.
/// Every axis gets the same rule (PyTorch limits reflect, replicate and circular to the last
/// three axes of a 2-D to 5-D input; this pads any axes of any rank).
///
/// `Error::Value` for an odd number of pads or more pairs than axes, a result extent below
/// zero, a reflect pad not below its axis's extent, a circular pad beyond what cropping leaves
/// of it, a replicate pad of an empty axis, or a result too large to index or to plan (each
/// naming the sizes; an empty result of any extents is had); `Error::Type` for a constant
/// that does not fit the dtype. The gradient reaches every input element each output element
/// was read from.
///
/// ```
/// use autograd_core::ops::{pad, PadMode};
/// use autograd_core::{shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3])?;
/// let y = pad(&a, &[2, 1], PadMode::Reflect)?;
/// assert_eq!(y.values::<f32>()?, [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 6.0, 5.0, 4.0, 5.0, 6.0, 5.0]);
/// let z = pad(&a, &[0, -1, 1, 0], PadMode::Constant(0.0))?; // crop a column, add a row
/// assert_eq!(z.dims(), [3, 2]);
/// assert_eq!(z.values::<f32>()?, [0.0, 0.0, 1.0, 2.0, 4.0, 5.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn pad(a: &Tensor, pads: impl IntList, mode: PadMode) -> Result<Tensor> {
    let dims = a.dims();
    let pairs = plan(&dims, &pads.to_ints(), mode)?;
    node::pad(a, &pairs, mode)
}

/// The `(before, after)` pad of every axis of `dims` (zeros for the axes `pads` leaves alone),
/// checked against the extents and `mode`.
fn plan(dims: &[usize], pads: &[i128], mode: PadMode) -> Result<Vec<(i64, i64)>> {
    let rank = dims.len();
    ensure!(
        pads.len().is_multiple_of(2) && pads.len() / 2 <= rank,
        Value,
        "pad: {} pads for a tensor of shape {dims:?}; give (before, after) pairs for at most {rank} axes, the last axis first",
        pads.len()
    );
    let mut pairs = vec![(0i64, 0i64); rank];
    for (k, pair) in pads.chunks_exact(2).enumerate() {
        let axis = rank - 1 - k;
        let (Ok(lo), Ok(hi)) = (i64::try_from(pair[0]), i64::try_from(pair[1])) else {
            bail!(Value, "pad: pads {pair:?} for axis {axis} do not fit i64");
        };
        let n = dims[axis] as i64;
        let out = n.checked_add(lo).and_then(|v| v.checked_add(hi));
        ensure!(
            out.is_some_and(|v| v >= 0),
            Value,
            "pad: pads ({lo}, {hi}) give axis {axis} of extent {n} (shape {dims:?}) a negative extent"
        );
        let check = |p: i64, ok: bool, what: &str| -> Result<()> {
            ensure!(
                p <= 0 || ok,
                Value,
                "pad: {} padding of {p} on axis {axis} of extent {n} (shape {dims:?}): {what}",
                mode.name()
            );
            Ok(())
        };
        for p in [lo, hi] {
            match mode {
                PadMode::Constant(_) => {}
                PadMode::Reflect => check(p, p < n, "the pad must be below the extent")?,
                PadMode::Circular => {
                    // PyTorch checks the pad against the uncropped extent only and then reads
                    // elements it has not written yet; wrapping round once is the rule here
                    let window = n - (-lo).max(0) - (-hi).max(0);
                    check(
                        p,
                        p <= window,
                        &format!("the pad must be at most the {} elements left after cropping (it wraps round once)", window.max(0)),
                    )?;
                }
                PadMode::Replicate => check(p, n > 0, "an empty axis has no edge to repeat")?,
            }
        }
        pairs[axis] = (lo, hi);
    }
    // the result's extents must be indexable before anything is planned for them
    Layout::row_major(&padded_dims(dims, &pairs))
        .map_err(|e| e.context(format!("pad: the result of padding shape {dims:?}")))?;
    Ok(pairs)
}

/// The extents of the padded result.
fn padded_dims(dims: &[usize], pairs: &[(i64, i64)]) -> Vec<usize> {
    dims.iter()
        .zip(pairs)
        // `plan` checked that every sum is a non-negative extent
        .map(|(&n, &(lo, hi))| usize::try_from(n as i64 + lo + hi).unwrap_or(0))
        .collect()
}

/// Where the rows of the last axis come from: for every output row (a position of the leading
/// axes) the input row it reads or `None` (a constant row); and along the last axis, the middle
/// run copied whole and the edge elements read one by one.
struct RowPlan {
    /// Input row per output row, row-major over the leading axes.
    rows: Vec<Option<usize>>,
    /// Extent of the last axis in the input and the output.
    width: (usize, usize),
    /// `(output start, input start, length)` of the run copied as is.
    middle: (usize, usize, usize),
    /// `(output position, input position or None)` of every other element of a row.
    edges: Vec<(usize, Option<usize>)>,
}

impl RowPlan {
    fn new(dims: &[usize], pairs: &[(i64, i64)], mode: PadMode) -> Result<RowPlan> {
        let out = padded_dims(dims, pairs);
        let (lead_in, lead_out) = match dims.len() {
            0 => (&[][..], &[][..]),
            r => (&dims[..r - 1], &out[..r - 1]),
        };
        let (n, m, (lo, hi)) = match (dims.last(), out.last(), pairs.last()) {
            (Some(&n), Some(&m), Some(&pair)) => (n, m, pair),
            _ => (1, 1, (0, 0)),
        };
        if out.contains(&0) {
            // no output element reads anything: an empty result of any extents
            return Ok(RowPlan {
                rows: Vec::new(),
                width: (n, m),
                middle: (0, 0, 0),
                edges: Vec::new(),
            });
        }
        // the source of each coordinate of each leading axis
        let maps: Vec<Vec<Option<usize>>> = lead_out
            .iter()
            .zip(lead_in)
            .zip(pairs)
            .map(|((&m, &n), &pair)| {
                let mut map = with_capacity(m)?;
                map.extend((0..m).map(|j| mode.source(j, pair, n)));
                Ok(map)
            })
            .collect::<Result<_>>()?;
        let count: usize = lead_out.iter().product();
        let mut rows = with_capacity(count)?;
        let mut coord = vec![0usize; lead_out.len()];
        for _ in 0..count {
            let mut row = Some(0usize);
            for (d, &c) in coord.iter().enumerate() {
                row = match (row, maps[d][c]) {
                    (Some(r), Some(s)) => Some(r * lead_in[d] + s),
                    _ => None,
                };
            }
            rows.push(row);
            for d in (0..coord.len()).rev() {
                coord[d] += 1;
                if coord[d] < lead_out[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
        // along the last axis: output j reads input j - lo wherever that is inside
        let start_out = usize::try_from(lo.max(0)).unwrap_or(0);
        let start_in = usize::try_from((-lo).max(0)).unwrap_or(0);
        let len = m.saturating_sub(start_out).min(n.saturating_sub(start_in));
        let mut edges = with_capacity(m - len)?;
        edges.extend(
            (0..m)
                .filter(|&j| j < start_out || j >= start_out + len)
                .map(|j| (j, mode.source(j, (lo, hi), n))),
        );
        Ok(RowPlan {
            rows,
            width: (n, m),
            middle: (start_out, start_in, len),
            edges,
        })
    }
}

/// The constant `value` as a `T`: floats round, integers must be whole and in range, Bool
/// takes 0 or 1 (`Error::Type` otherwise).
fn constant<T: Element>(value: f64) -> Result<T> {
    let scalar = match T::DTYPE {
        DType::Float32 => Some(Scalar::F32(value as f32)),
        DType::Float64 => Some(Scalar::F64(value)),
        DType::Int32 | DType::Int64 if value.fract() == 0.0 && value.abs() < 9.2e18 => {
            Scalar::I64(value as i64).cast(&T::DTYPE).ok()
        }
        DType::Bool if value == 0.0 || value == 1.0 => Some(Scalar::Bool(value == 1.0)),
        _ => None,
    };
    match scalar.and_then(T::from_scalar) {
        Some(v) => Ok(v),
        None => bail!(
            Type,
            "pad: the constant {value} is not a {} value",
            T::DTYPE
        ),
    }
}

/// About how many output elements one parallel task of the forward kernel writes.
const ROWS_ELEMENTS: usize = 1 << 14;

/// The padded copy of `a`'s elements: one slice copy per row plus its edges.
fn forward<T: Element>(a: &Tensor, rows: &RowPlan, dims: &[usize], fill: T) -> Result<Tensor> {
    let (n, m) = rows.width;
    let (o0, i0, len) = rows.middle;
    kernel::read_logical(a, |x: &[T]| {
        kernel::fresh(a, Arc::new(Layout::row_major(dims)?), |out: &mut [T]| {
            if m == 0 {
                return Ok(());
            }
            // output rows are independent: large results are written in blocks of rows on the
            // kernel threads
            let block = if out.len() >= kernel::PARALLEL_THRESHOLD {
                ROWS_ELEMENTS.div_ceil(m)
            } else {
                out.len() / m
            };
            kernel::for_each_chunk_mut(out, block.max(1) * m, |k, chunk| {
                let first = k * block.max(1);
                for (dst, src) in chunk.chunks_exact_mut(m).zip(&rows.rows[first..]) {
                    let Some(r) = *src else {
                        dst.fill(fill);
                        continue;
                    };
                    let row = &x[r * n..(r + 1) * n];
                    dst[o0..o0 + len].copy_from_slice(&row[i0..i0 + len]);
                    for &(j, s) in &rows.edges {
                        dst[j] = s.map_or(fill, |s| row[s]);
                    }
                }
            });
            Ok(())
        })
    })?
}

mod node {
    use super::{differentiable, Tensor};
    use super::{dispatch, filled, forward, kernel, padded_dims, PadMode, Result, RowPlan};

    #[differentiable(crate = crate)]
    pub(super) fn pad(a: &Tensor, pairs: &[(i64, i64)], mode: PadMode) -> Result<Tensor> {
        // y[j] = a[s(j)] (or a constant)  =>  da[i] = sum of g[j] over the j with s(j) = i
        fn vjp(
            g: &Tensor,
            a: &Tensor,
            pairs: &[(i64, i64)],
            mode: PadMode,
        ) -> Result<Option<Tensor>> {
            let rows = RowPlan::new(&a.dims(), pairs, mode)?;
            let (n, m) = rows.width;
            let (o0, i0, len) = rows.middle;
            let mut da = filled(a.size(), 0.0f32)?;
            if m > 0 && n > 0 {
                kernel::read_logical(g, |g: &[f32]| {
                    for (src, r) in g.chunks_exact(m).zip(&rows.rows) {
                        let Some(r) = *r else { continue };
                        let row = &mut da[r * n..(r + 1) * n];
                        for (d, &s) in row[i0..i0 + len].iter_mut().zip(&src[o0..o0 + len]) {
                            *d += s;
                        }
                        for &(j, s) in &rows.edges {
                            if let Some(s) = s {
                                row[s] += src[j];
                            }
                        }
                    }
                })?;
            }
            Ok(Some(a.f32_like(da)?))
        }
        let dims = a.dims();
        let rows = RowPlan::new(&dims, pairs, mode)?;
        let out = padded_dims(&dims, pairs);
        dispatch!(
            a.dtype(), "pad", T => {
                let fill: T = match mode {
                    PadMode::Constant(v) => super::constant::<T>(v)?,
                    _ => T::default(),
                };
                forward::<T>(a, &rows, &out, fill)
            },
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64, Bool: bool],
            "{}: takes Float32, Float64, Int32, Int64 or Bool tensors, not {}"
        )
    }
}

impl Tensor {
    /// [`pad`] of this tensor.
    pub fn pad(&self, pads: impl IntList, mode: PadMode) -> Result<Tensor> {
        pad(self, pads, mode)
    }
}

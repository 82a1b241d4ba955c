//! What the ordering ops along an axis share (`max_axis`/`min_axis`, `topk`, `sort`): the total
//! order of elements PyTorch sorts by (NaN above everything, equal to itself), the per-row
//! results assembled into a tensor with the axis in place, and the gradient that scatters a
//! cotangent back to the positions the indices name.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::kernel::{self, read_logical_pair, Rows};
use crate::layout::Layout;
use crate::storage::scalar::Element;
use crate::Tensor;

/// Elements as the ordering ops compare them: a total order for floats in which NaN is above
/// every number (and equal to every NaN), the plain order for integers.
pub(crate) trait Ordered: Element + PartialOrd {
    /// `self` against `o` in the total order.
    #[inline]
    fn order(self, o: Self) -> Ordering {
        match self.partial_cmp(&o) {
            Some(c) => c,
            // only floats are unordered: exactly one or both are NaN
            None => self.is_nan_elem().cmp(&o.is_nan_elem()),
        }
    }
    /// Whether the element is NaN (never for integers).
    fn is_nan_elem(self) -> bool;
}

impl Ordered for f32 {
    #[inline]
    fn is_nan_elem(self) -> bool {
        self.is_nan()
    }
}

impl Ordered for f64 {
    #[inline]
    fn is_nan_elem(self) -> bool {
        self.is_nan()
    }
}

impl Ordered for i32 {
    #[inline]
    fn is_nan_elem(self) -> bool {
        false
    }
}

impl Ordered for i64 {
    #[inline]
    fn is_nan_elem(self) -> bool {
        false
    }
}

/// Runs `$body` with `$T` bound to `$t`'s element type among the ordered dtypes (Float32,
/// Float64, Int32, Int64); another dtype is `Error::Type` naming `$op`.
macro_rules! ordered {
    ($op:expr, $t:expr, $T:ident => $body:expr) => {
        $crate::kernel::element::dispatch!(
            $t.dtype(), $op, $T => $body,
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64],
            "{}: takes Float32, Float64, Int32 or Int64 tensors, not {}"
        )
    };
}
pub(crate) use ordered;

/// A compact row-major tensor of extents `dims` (the input's, with the row axis's extent
/// replaced by `m`) in fresh storage of `like`'s carrier class, whose row `k` (as `rows`
/// splits the input) holds `parts[k]` (`m` values) along the axis.
pub(crate) fn along_axis<T: Element>(
    like: &Tensor,
    dims: &[usize],
    rows: Rows,
    m: usize,
    parts: &[Vec<T>],
) -> Result<Tensor> {
    let inner = rows.inner;
    kernel::fresh(
        like,
        Arc::new(Layout::row_major(dims)?),
        |out: &mut [T]| {
            if inner == 1 {
                for (o, part) in out.chunks_mut(m.max(1)).zip(parts) {
                    o.copy_from_slice(&part[..m]);
                }
                return Ok(());
            }
            for (k, part) in parts.iter().enumerate() {
                let (o, i) = (k / inner, k % inner);
                for (j, &v) in part.iter().enumerate().take(m) {
                    out[(o * m + j) * inner + i] = v;
                }
            }
            Ok(())
        },
    )
}

/// The gradient of picking elements along `axis` of `a` (Float32): zeros of `a`'s shape with
/// `g[.., j, ..]` added at `a[.., indices[.., j, ..], ..]` (`indices` Int64 of `g`'s shape,
/// `a`'s extents except along the axis, every index in range).
pub(crate) fn scatter_back(
    a: &Tensor,
    axis: usize,
    g: &Tensor,
    indices: &Tensor,
) -> Result<Tensor> {
    let dims = a.dims();
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let m = indices.dims()[axis];
    read_logical_pair(g, indices, |g: &[f32], idx: &[i64]| {
        kernel::fresh(
            a,
            Arc::new(Layout::row_major(&dims)?),
            |out: &mut [f32]| {
                for (p, (&gv, &at)) in g.iter().zip(idx).enumerate() {
                    let (o, i) = (p / (m * inner), p % inner);
                    // indices come from the forward pass over this shape: always in range
                    let at = usize::try_from(at).unwrap_or(0);
                    out[(o * n + at) * inner + i] += gv;
                }
                Ok(())
            },
        )
    })?
}

#[cfg(test)]
mod tests {
    use super::Ordered;
    use std::cmp::Ordering;

    #[test]
    fn nan_is_above_every_number_and_equal_to_itself() {
        assert_eq!(f32::NAN.order(f32::INFINITY), Ordering::Greater);
        assert_eq!(1.0f64.order(f64::NAN), Ordering::Less);
        assert_eq!(f32::NAN.order(f32::NAN), Ordering::Equal);
        assert_eq!((-0.0f32).order(0.0), Ordering::Equal);
        assert_eq!(3i64.order(-2), Ordering::Greater);
    }
}

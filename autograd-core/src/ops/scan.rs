//! Scans along one axis: `cumsum` and `cumprod`, as PyTorch's. Each row along the axis is
//! read once from any layout and written into a compact row-major result; floating rows run in
//! a double-precision accumulator, integer rows (Int32, Int64) in Int64 with wrap-around, and
//! an integer input gives an Int64 result, as PyTorch's does.
//!
//! Both gradients are one backward sweep per row: `cumsum`'s is the reversed cumulative sum of
//! the cotangent; `cumprod`'s is `P(k-1) S(k)` with the exclusive prefix product `P` and the
//! suffix sums `S(k) = g(k) + x(k+1) S(k+1)`, which never divides by an input, so zeros give
//! PyTorch's exact gradient.

use crate::error::Result;
use crate::kernel::element::{dispatch, Real};
use crate::kernel::{map_rows_along, read_row_pair, row, write_rows, Rows};
use crate::layout::axis::Axis;
use crate::storage::scalar::Element;
use crate::{differentiable, DType, Tensor};

/// The running sum of `a` along `axis` (negative from the back): `y[.., i, ..] = sum_{j <= i}
/// a[.., j, ..]`, as PyTorch's `torch.cumsum`. Float32 (differentiable) and Float64 keep their
/// dtype; Int32 and Int64 give Int64 (wrapping on overflow). An axis out of range is
/// `Error::Value`, another dtype `Error::Type`.
///
/// ```
/// use autograd_core::{ops::cumsum, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2])?;
/// assert_eq!(cumsum(&a, -1)?.values::<f32>()?, [1.0, 3.0, 3.0, 7.0]);
/// assert_eq!(cumsum(&a, 0)?.values::<f32>()?, [1.0, 2.0, 4.0, 6.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn cumsum(a: &Tensor, axis: impl Into<Axis>) -> Result<Tensor> {
    let axis = axis.into().resolve_for("cumsum", a.layout().rank())?;
    node::cumsum(a, axis)
}

/// The running product of `a` along `axis` (negative from the back), as PyTorch's
/// `torch.cumprod`; dtypes and errors as [`cumsum`].
///
/// Gradient: `dx(k) = sum_{j >= k} g(j) prod_{i <= j, i != k} x(i)`, computed without
/// dividing by `x`, so it is exact (PyTorch's) where the row holds zeros.
///
/// ```
/// use autograd_core::{ops::cumprod, shape, Tensor};
/// let a = Tensor::from_vec(vec![2.0f32, 0.0, 3.0], shape![3])?;
/// assert_eq!(cumprod(&a, 0)?.values::<f32>()?, [2.0, 0.0, 0.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn cumprod(a: &Tensor, axis: impl Into<Axis>) -> Result<Tensor> {
    let axis = axis.into().resolve_for("cumprod", a.layout().rank())?;
    node::cumprod(a, axis)
}

/// How a scan folds: the accumulator type, its start, and the step.
trait Fold<T>: Copy + Sync {
    /// The accumulator (`f64` for floats, `i64` for integers).
    type Acc: Copy;
    /// The result element.
    type Out: Element;
    /// The accumulator before the first element.
    fn start(self) -> Self::Acc;
    /// The accumulator after `x`.
    fn step(self, acc: Self::Acc, x: T) -> Self::Acc;
    /// The accumulator as a result element.
    fn out(self, acc: Self::Acc) -> Self::Out;
}

/// Which scan runs.
#[derive(Clone, Copy)]
enum Scan {
    /// The running sum.
    Sum,
    /// The running product.
    Product,
}

macro_rules! float_fold {
    ($t:ty) => {
        impl Fold<$t> for Scan {
            type Acc = f64;
            type Out = $t;
            fn start(self) -> f64 {
                match self {
                    Scan::Sum => 0.0,
                    Scan::Product => 1.0,
                }
            }
            fn step(self, acc: f64, x: $t) -> f64 {
                match self {
                    Scan::Sum => acc + f64::from(x),
                    Scan::Product => acc * f64::from(x),
                }
            }
            #[allow(clippy::cast_possible_truncation)]
            fn out(self, acc: f64) -> $t {
                acc as $t
            }
        }
    };
}
float_fold!(f32);
float_fold!(f64);

macro_rules! int_fold {
    ($t:ty) => {
        impl Fold<$t> for Scan {
            type Acc = i64;
            type Out = i64;
            fn start(self) -> i64 {
                match self {
                    Scan::Sum => 0,
                    Scan::Product => 1,
                }
            }
            fn step(self, acc: i64, x: $t) -> i64 {
                match self {
                    Scan::Sum => acc.wrapping_add(i64::from(x)),
                    Scan::Product => acc.wrapping_mul(i64::from(x)),
                }
            }
            fn out(self, acc: i64) -> i64 {
                acc
            }
        }
    };
}
int_fold!(i32);
int_fold!(i64);

/// The scan of every row of `a` along `axis`, for one element type.
fn scan_rows<T: Element>(a: &Tensor, axis: usize, scan: Scan) -> Result<Tensor>
where
    Scan: Fold<T>,
{
    let rows = Rows::along("scan", &a.dims(), axis)?;
    map_rows_along::<T, <Scan as Fold<T>>::Out>(a, rows, move |_, x, out| {
        let mut acc = scan.start();
        for (o, &v) in out.iter_mut().zip(x) {
            acc = scan.step(acc, v);
            *o = scan.out(acc);
        }
    })
}

/// [`scan_rows`] dispatched on `a`'s dtype (floating running sums by [`running_sum`]).
fn scan(op: &str, a: &Tensor, axis: usize, which: Scan) -> Result<Tensor> {
    match (which, a.dtype()) {
        (Scan::Sum, DType::Float32) => sum_rows::<f32>(a, axis, Direction::Forward),
        (Scan::Sum, DType::Float64) => sum_rows::<f64>(a, axis, Direction::Forward),
        _ => dispatch!(
            a.dtype(), op, T => scan_rows::<T>(a, axis, which),
            [Float32: f32, Float64: f64, Int32: i32, Int64: i64],
            "{}: takes Float32, Float64, Int32 or Int64 tensors, not {}"
        ),
    }
}

/// `cumsum`'s gradient: the cotangent summed from the end of every row.
fn reversed_cumsum(g: &Tensor, axis: usize) -> Result<Tensor> {
    sum_rows::<f32>(g, axis, Direction::Backward)
}

/// Which way a running sum runs along a row.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// From the first element (`cumsum`).
    Forward,
    /// From the last element (`cumsum`'s gradient).
    Backward,
}

/// The running sum of every floating row of `a` along `axis`, in `direction`.
fn sum_rows<T: Real>(a: &Tensor, axis: usize, direction: Direction) -> Result<Tensor> {
    let rows = Rows::along("cumsum", &a.dims(), axis)?;
    map_rows_along::<T, T>(a, rows, move |_, x, out| match direction {
        Direction::Forward => running_sum(x, out),
        Direction::Backward => running_sum_back(x, out),
    })
}

/// Elements per block of [`running_sum`].
const SUM_BLOCK: usize = 4;

/// `out[i] = sum_{j <= i} x[j]` in double precision, rounded once per element. A block's own
/// prefix sums do not depend on the running total, which takes one addition per block, so the
/// chain of dependent additions is a quarter of the row (the additions within blocks overlap).
#[inline]
fn running_sum<T: Real>(x: &[T], out: &mut [T]) {
    let mut carry = 0.0f64;
    let mut xs = x.chunks_exact(SUM_BLOCK);
    let mut outs = out.chunks_exact_mut(SUM_BLOCK);
    for (c, o) in (&mut xs).zip(&mut outs) {
        let p0: f64 = c[0].into();
        let p1 = p0 + c[1].into();
        let p2 = p1 + c[2].into();
        let p3 = p2 + c[3].into();
        o[0] = T::from_f64(carry + p0);
        o[1] = T::from_f64(carry + p1);
        o[2] = T::from_f64(carry + p2);
        o[3] = T::from_f64(carry + p3);
        carry += p3;
    }
    for (o, &v) in outs.into_remainder().iter_mut().zip(xs.remainder()) {
        carry += v.into();
        *o = T::from_f64(carry);
    }
}

/// `out[i] = sum_{j >= i} x[j]`, blocked as [`running_sum`].
#[inline]
fn running_sum_back<T: Real>(x: &[T], out: &mut [T]) {
    let mut carry = 0.0f64;
    let mut xs = x.rchunks_exact(SUM_BLOCK);
    let mut outs = out.rchunks_exact_mut(SUM_BLOCK);
    for (c, o) in (&mut xs).zip(&mut outs) {
        let p3: f64 = c[3].into();
        let p2 = p3 + c[2].into();
        let p1 = p2 + c[1].into();
        let p0 = p1 + c[0].into();
        o[3] = T::from_f64(carry + p3);
        o[2] = T::from_f64(carry + p2);
        o[1] = T::from_f64(carry + p1);
        o[0] = T::from_f64(carry + p0);
        carry += p0;
    }
    for (o, &v) in outs.into_remainder().iter_mut().zip(xs.remainder()).rev() {
        carry += v.into();
        *o = T::from_f64(carry);
    }
}

/// `cumprod`'s gradient, one row: `S(k) = g(k) + x(k+1) S(k+1)` from the end into `s`, then
/// `dx(k) = P(k-1) S(k)` with the running prefix product `P` from the start.
#[allow(clippy::cast_possible_truncation)]
fn cumprod_gradient_row(x: &[f32], g: &[f32], s: &mut Vec<f64>, out: &mut [f32]) {
    s.clear();
    s.resize(x.len(), 0.0);
    let mut next = 0.0f64;
    for k in (0..x.len()).rev() {
        let carry = x.get(k + 1).map_or(0.0, |&v| f64::from(v) * next);
        next = f64::from(g[k]) + carry;
        s[k] = next;
    }
    let mut prefix = 1.0f64;
    for ((o, &sk), &v) in out.iter_mut().zip(s.iter()).zip(x) {
        *o = (prefix * sk) as f32;
        prefix *= f64::from(v);
    }
}

mod node {
    use super::{
        cumprod_gradient_row, differentiable, read_row_pair, reversed_cumsum, row, scan,
        write_rows, Result, Rows, Scan, Tensor,
    };

    /// [`cumsum`](super::cumsum) along a resolved axis.
    #[differentiable(crate = crate)]
    pub(super) fn cumsum(a: &Tensor, axis: usize) -> Result<Tensor> {
        // y(i) = sum_{j <= i} x(j)  =>  dx(j) = sum_{i >= j} g(i)
        fn vjp(g: &Tensor, axis: usize) -> Result<Option<Tensor>> {
            Ok(Some(reversed_cumsum(g, axis)?))
        }
        scan("cumsum", a, axis, Scan::Sum)
    }

    /// [`cumprod`](super::cumprod) along a resolved axis.
    #[differentiable(crate = crate)]
    pub(super) fn cumprod(a: &Tensor, axis: usize) -> Result<Tensor> {
        // y(j) = prod_{i <= j} x(i)  =>  dx(k) = sum_{j >= k} g(j) prod_{i <= j, i != k} x(i)
        //       = P(k-1) S(k), P(k-1) = prod_{i < k} x(i), S(k) = g(k) + x(k+1) S(k+1)
        fn vjp(g: &Tensor, a: &Tensor, axis: usize) -> Result<Option<Tensor>> {
            let rows = Rows::along("cumprod", &a.dims(), axis)?;
            let n = rows.n;
            let dx = read_row_pair::<f32, f32, _>(a, g, rows, |ex, eg| {
                type Scratch = (Vec<f32>, Vec<f32>, Vec<f64>);
                write_rows::<f32, Scratch>(a, rows, |k, (bx, bg, s), out| {
                    let x = row(&ex, k, n, bx);
                    let g = row(&eg, k, n, bg);
                    cumprod_gradient_row(x, g, s, out);
                })
            })?;
            Ok(Some(dx))
        }
        scan("cumprod", a, axis, Scan::Product)
    }
}

impl Tensor {
    /// [`cumsum`] of this tensor along `axis`.
    #[track_caller]
    pub fn cumsum(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        cumsum(self, axis)
    }

    /// [`cumprod`] of this tensor along `axis`.
    #[track_caller]
    pub fn cumprod(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        cumprod(self, axis)
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // positions index several slices
mod tests {
    use super::{cumprod_gradient_row, running_sum, running_sum_back};

    #[test]
    fn blocked_running_sums_agree_with_the_sequential_ones() {
        for n in 0..12 {
            let x: Vec<f32> = (0..n).map(|i| (i * i) as f32 * 0.5 - 3.0).collect();
            let (mut fwd, mut back) = (vec![0.0f32; n], vec![0.0f32; n]);
            running_sum(&x, &mut fwd);
            running_sum_back(&x, &mut back);
            for i in 0..n {
                assert_eq!(fwd[i], x[..=i].iter().sum::<f32>(), "{n} {i}");
                assert_eq!(back[i], x[i..].iter().sum::<f32>(), "{n} {i}");
            }
        }
    }

    #[test]
    fn cumprod_gradient_matches_the_quadratic_sum_with_zeros() {
        let x = [2.0f32, 0.0, 3.0, -1.5, 0.0, 4.0];
        let g = [0.5f32, -1.0, 2.0, 0.25, 1.0, -2.0];
        let mut out = [0.0f32; 6];
        cumprod_gradient_row(&x, &g, &mut Vec::new(), &mut out);
        for k in 0..6 {
            // sum_{j >= k} g(j) prod_{i <= j, i != k} x(i)
            let want: f64 = (k..6)
                .map(|j| {
                    let p: f64 = (0..=j)
                        .filter(|&i| i != k)
                        .map(|i| f64::from(x[i]))
                        .product();
                    f64::from(g[j]) * p
                })
                .sum();
            assert!(
                (f64::from(out[k]) - want).abs() < 1e-6,
                "{k}: {} {want}",
                out[k]
            );
        }
    }
}

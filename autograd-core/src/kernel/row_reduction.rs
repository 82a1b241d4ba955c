//! The row reductions the row kernels share (softmax, normalisation, losses), generic over the
//! floating element types ([`Real`]: Float32 and Float64) or over Float32 lanes.
//!
//! Everything here is `#[inline(always)]`: the row kernels run it inside `simd!`, which
//! compiles it for the running CPU's vector width (Float32's `exp` then vectorises).
#![allow(clippy::inline_always)]

use crate::kernel::Real;

/// The largest element of `x` (NaN when any is NaN, -inf when `x` is empty).
#[inline(always)]
pub fn row_max<T: Real>(x: &[T]) -> T {
    x.iter().fold(T::NEG_INFINITY, |m, &v| {
        if m.is_nan_value() || m >= v {
            m
        } else {
            v
        }
    })
}

/// `ln sum_j e^(x_j - m)` for the row maximum `m` (as `f64`): with `m` added back, the row's
/// log-sum-exp, computed without overflow.
#[inline(always)]
pub fn log_sum_exp_shifted<T: Real>(x: &[T], m: T) -> f64 {
    // the exponentials a block at a time into a buffer: a plain map, which vectorises
    let mut buf = [T::ZERO; 64];
    let mut total = 0.0;
    for block in x.chunks(buf.len()) {
        let b = &mut buf[..block.len()];
        for (o, &v) in b.iter_mut().zip(block) {
            *o = (v - m).exp_();
        }
        total += sum_f64(b);
    }
    total.ln()
}

/// `sum_j x_j` in `f64`, in eight running sums so that it vectorises (for either element
/// type; Float32-only rows use [`lane_sum`]).
#[inline(always)]
pub fn sum_f64<T: Real>(x: &[T]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v.into();
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| v.into()).sum();
    acc.iter().sum::<f64>() + tail
}

/// `Σ f(a[i], b[i])` over two slices of one length: eight f32 lanes within blocks of
/// `LANE_BLOCK` (256) elements (so it vectorises), the block sums added in f64 (so long rows keep
/// their precision). [`lane_sum_runs`] over the one run of the whole slices.
#[inline(always)]
pub fn lane_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f64 {
    lane_sum_runs(a, b, std::iter::once(0..a.len().min(b.len())), f)
}

/// `Σ f(a[i], b[i])` over the runs (index ranges) of two buffers taken as one sequence: the
/// eight f32 lanes carried across runs (so that many short runs, the planes of a small image,
/// cost what one long one does), added in f64 every `LANE_BLOCK` (256) elements or so.
#[inline(always)]
pub fn lane_sum_runs(
    a: &[f32],
    b: &[f32],
    runs: impl Iterator<Item = std::ops::Range<usize>>,
    f: impl Fn(f32, f32) -> f32,
) -> f64 {
    let (mut total, mut lanes, mut tail, mut pending) = (0.0f64, [0.0f32; 8], 0.0f32, 0usize);
    for r in runs {
        for (ab, bb) in a[r.clone()].chunks(LANE_BLOCK).zip(b[r].chunks(LANE_BLOCK)) {
            let (mut ca, mut cb) = (ab.chunks_exact(8), bb.chunks_exact(8));
            for (x, y) in (&mut ca).zip(&mut cb) {
                for l in 0..8 {
                    lanes[l] += f(x[l], y[l]);
                }
            }
            for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
                tail += f(x, y);
            }
            pending += ab.len();
            if pending >= LANE_BLOCK {
                total += flush(&mut lanes, &mut tail);
                pending = 0;
            }
        }
    }
    total + flush(&mut lanes, &mut tail)
}

/// The f64 sum of the lanes and the tail of [`lane_sum_runs`], which are reset to zero.
#[inline(always)]
fn flush(lanes: &mut [f32; 8], tail: &mut f32) -> f64 {
    let sum = f64::from(*tail) + lanes.iter().map(|&l| f64::from(l)).sum::<f64>();
    *lanes = [0.0; 8];
    *tail = 0.0;
    sum
}

/// Elements after which [`lane_sum_runs`] flushes its lanes to f64: a lane adds at most 32
/// terms over one run's blocks, 64 when short runs carry a block past the mark.
const LANE_BLOCK: usize = 256;

//! `interpolate`: resizing the last two axes by nearest-neighbour or bilinear sampling, with
//! PyTorch's source-index formulas (computed in f32, as PyTorch's CPU kernels do). Each axis's
//! sources and weights are computed once per call; the kernels walk one plane per task.

use autograd_core::{differentiable, ensure, Captured, Result, Tensor};

use super::plane::{map_planes, per_output, Planes};

/// How [`interpolate`] samples its input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interpolation {
    /// The nearest input element at or before the scaled position (PyTorch's `nearest`:
    /// `floor(o * in / out)`, clamped to the input).
    Nearest,
    /// The weighted mean of the four surrounding elements (PyTorch's `bilinear`), with the
    /// corner pixels' centres aligned (`align_corners: true`) or their edges.
    Bilinear {
        /// Whether the first and last output elements sit on the first and last inputs.
        align_corners: bool,
    },
}

impl Captured for Interpolation {}

/// One output coordinate's sources along an axis: `w0 x[i0] + w1 x[i1]` (`i0 == i1`, `w1 == 0`
/// for nearest).
#[derive(Debug, Clone, Copy)]
struct Tap {
    i0: usize,
    i1: usize,
    w0: f32,
    w1: f32,
}

/// PyTorch's `nearest_idx`: identity when the extents match, `o / 2` when doubling, else
/// `min(floor(o * (in / out)), in - 1)` with the scale in f32.
fn nearest(input: usize, output: usize) -> Result<Vec<Tap>> {
    let scale = input as f32 / output as f32;
    per_output(output, |o| {
        let i = if input == output {
            o
        } else if input.checked_mul(2) == Some(output) {
            o / 2
        } else {
            // non-negative and finite: the cast floors
            ((o as f32 * scale).floor() as usize).min(input - 1)
        };
        Tap {
            i0: i,
            i1: i,
            w0: 1.0,
            w1: 0.0,
        }
    })
}

/// PyTorch's linear source index and weights (`area_pixel_compute_source_index` and
/// `compute_indices_weights_linear`): `scale o` with aligned corners (scale `(in - 1) /
/// (out - 1)`, 0 for one output), else `max(scale (o + 0.5) - 0.5, 0)` (scale `in / out`).
fn linear(input: usize, output: usize, align_corners: bool) -> Result<Vec<Tap>> {
    let scale = if align_corners {
        if output > 1 {
            (input - 1) as f32 / (output - 1) as f32
        } else {
            0.0
        }
    } else {
        input as f32 / output as f32
    };
    per_output(output, |o| {
        let src = if align_corners {
            scale * o as f32
        } else {
            (scale * (o as f32 + 0.5) - 0.5).max(0.0)
        };
        // non-negative: the cast floors
        let i0 = (src as usize).min(input - 1);
        let i1 = if i0 + 1 < input { i0 + 1 } else { i0 };
        let w1 = (src - i0 as f32).clamp(0.0, 1.0);
        Tap {
            i0,
            i1,
            w0: 1.0 - w1,
            w1,
        }
    })
}

/// The taps of both axes for `mode`, after checking `x` and `size`.
fn geometry(
    x: &Tensor,
    size: [usize; 2],
    mode: Interpolation,
) -> Result<(Planes, Vec<Tap>, Vec<Tap>)> {
    let planes = Planes::of("interpolate", x)?;
    let [h, w] = planes.hw;
    ensure!(
        size[0] > 0 && size[1] > 0 && h > 0 && w > 0,
        Value,
        "interpolate: the output size {size:?} and the input's last extents [{h}, {w}] must be positive"
    );
    let axis = |input, output| match mode {
        Interpolation::Nearest => nearest(input, output),
        Interpolation::Bilinear { align_corners } => linear(input, output, align_corners),
    };
    // the output's extents checked before anything is allocated for them
    planes.layout(size)?;
    if planes.count() == 0 {
        // no plane reads a tap: an empty batch gives an empty result of any size
        return Ok((planes, Vec::new(), Vec::new()));
    }
    Ok((planes, axis(h, size[0])?, axis(w, size[1])?))
}

/// Resizes the last two axes of `x` (`[N, C, H, W]` or `[C, H, W]`, Float32) to `size`
/// `[h, w]`, as PyTorch's `interpolate(x, size=size, mode=...)` for `nearest` and `bilinear`.
/// The gradient adds each output's cotangent into its sources with their weights.
///
/// A zero output size or input extent, or a result too large to allocate, is `Error::Value`
/// (an empty batch gives an empty result of any size); rank and dtype as
/// [`max_pool2d`](crate::max_pool2d).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{interpolate, Interpolation};
/// let x = Tensor::from_vec(vec![0.0f32, 2.0], shape![1, 1, 1, 2])?;
/// let y = interpolate(&x, [1, 3], Interpolation::Bilinear { align_corners: true })?;
/// assert_eq!(y.values::<f32>()?, [0.0, 1.0, 2.0]);
/// let n = interpolate(&x, [1, 4], Interpolation::Nearest)?;
/// assert_eq!(n.values::<f32>()?, [0.0, 0.0, 2.0, 2.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[differentiable]
pub fn interpolate(x: &Tensor, size: [usize; 2], mode: Interpolation) -> Result<Tensor> {
    // y(o, p) = sum over taps of wh wv x(i, j)  =>  dx(i, j) += wh wv g(o, p)
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        size: [usize; 2],
        mode: Interpolation,
    ) -> Result<Option<Tensor>> {
        let (planes, rows, cols) = geometry(x, size, mode)?;
        let width = planes.hw[1];
        let sizes = (size[0] * size[1], planes.hw[0] * width);
        let layout = planes.layout(planes.hw)?;
        Ok(Some(map_planes(
            g,
            layout,
            sizes,
            4 * g.size(),
            |gp, dx| {
                for (r, th) in rows.iter().enumerate() {
                    let (top, bottom) = (th.i0 * width, th.i1 * width);
                    for (c, tw) in cols.iter().enumerate() {
                        let v = gp[r * size[1] + c];
                        let (a, b) = (th.w0 * v, th.w1 * v);
                        dx[top + tw.i0] += a * tw.w0;
                        dx[top + tw.i1] += a * tw.w1;
                        dx[bottom + tw.i0] += b * tw.w0;
                        dx[bottom + tw.i1] += b * tw.w1;
                    }
                }
            },
        )?))
    }
    let (planes, rows, cols) = geometry(x, size, mode)?;
    let width = planes.hw[1];
    let sizes = (planes.hw[0] * width, size[0] * size[1]);
    let work = planes.count().saturating_mul(sizes.1).saturating_mul(4);
    map_planes(x, planes.layout(size)?, sizes, work, |xp, out| {
        for (r, th) in rows.iter().enumerate() {
            let (top, bottom) = (&xp[th.i0 * width..], &xp[th.i1 * width..]);
            let out_row = &mut out[r * size[1]..(r + 1) * size[1]];
            for (o, tw) in out_row.iter_mut().zip(&cols) {
                let upper = tw.w0 * top[tw.i0] + tw.w1 * top[tw.i1];
                let lower = tw.w0 * bottom[tw.i0] + tw.w1 * bottom[tw.i1];
                *o = th.w0 * upper + th.w1 * lower;
            }
        }
    })
}

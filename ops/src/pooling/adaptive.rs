//! `adaptive_avg_pool2d`: average pooling to a given output size, with PyTorch's windows
//! (`start = floor(o I / O)`, `end = ceil((o + 1) I / O)`, so windows may overlap).

use std::ops::Range;

use autograd_core::{differentiable, ensure, Result, Tensor};

use super::plane::{map_planes, per_output, Planes};

/// PyTorch's adaptive window `o` of `output` over `input` elements (in u128, where the
/// products cannot overflow; the bounds are at most `input`).
#[inline]
fn window(o: usize, input: usize, output: usize) -> Range<usize> {
    let (o, input, output) = (o as u128, input as u128, output as u128);
    let bound = |v: u128| usize::try_from(v).unwrap_or(usize::MAX);
    bound(o * input / output)..bound(((o + 1) * input).div_ceil(output))
}

/// The windows of every output coordinate along one axis.
fn windows(input: usize, output: usize) -> Result<Vec<Range<usize>>> {
    per_output(output, |o| window(o, input, output))
}

/// The windows of the rows and of the columns.
type Windows = (Vec<Range<usize>>, Vec<Range<usize>>);

/// Checks `x` and `size`; the planes and each axis's windows.
fn geometry(x: &Tensor, size: [usize; 2]) -> Result<(Planes, Windows)> {
    let planes = Planes::of("adaptive_avg_pool2d", x)?;
    let [h, w] = planes.hw;
    ensure!(
        size[0] > 0 && size[1] > 0 && h > 0 && w > 0,
        Value,
        "adaptive_avg_pool2d: the output size {size:?} and the input's last extents [{h}, {w}] must be positive"
    );
    // the output's extents checked before anything is allocated for them
    planes.layout(size)?;
    if planes.count() == 0 {
        // no plane reads a window: an empty batch gives an empty result of any size
        return Ok((planes, (Vec::new(), Vec::new())));
    }
    Ok((planes, (windows(h, size[0])?, windows(w, size[1])?)))
}

/// The mean over adaptive windows of the last two axes of `x` (`[N, C, H, W]` or
/// `[C, H, W]`, Float32) giving `size` `[h, w]` outputs per plane, as PyTorch's
/// `adaptive_avg_pool2d`: output `o` of an axis of `I` inputs and `O` outputs averages inputs
/// `floor(o I / O)` up to `ceil((o + 1) I / O)`. The gradient spreads each cotangent evenly
/// over its window.
///
/// A zero output size or input extent, or a result too large to allocate, is `Error::Value`
/// (an empty batch gives an empty result of any size); rank and dtype as
/// [`max_pool2d`](crate::max_pool2d).
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::adaptive_avg_pool2d;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![1, 1, 2, 3])?;
/// let y = adaptive_avg_pool2d(&x, [1, 2])?;
/// // windows of columns 0..2 and 1..3
/// assert_eq!(y.values::<f32>()?, [3.0, 4.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[differentiable]
pub fn adaptive_avg_pool2d(x: &Tensor, size: [usize; 2]) -> Result<Tensor> {
    // y(o) = mean of x over window(o)  =>  dx(i) += g(o) / |window(o)| for i in window(o)
    fn vjp(g: &Tensor, x: &Tensor, size: [usize; 2]) -> Result<Option<Tensor>> {
        let (planes, (rows, cols)) = geometry(x, size)?;
        let width = planes.hw[1];
        let sizes = (size[0] * size[1], planes.hw[0] * width);
        let work = g.size() * sizes.1.div_ceil(sizes.0.max(1));
        let layout = planes.layout(planes.hw)?;
        Ok(Some(map_planes(g, layout, sizes, work, |gp, dx| {
            for (oh, rh) in rows.iter().enumerate() {
                for (ow, rw) in cols.iter().enumerate() {
                    let share = gp[oh * size[1] + ow] / (rh.len() * rw.len()) as f32;
                    for r in rh.clone() {
                        for d in &mut dx[r * width + rw.start..r * width + rw.end] {
                            *d += share;
                        }
                    }
                }
            }
        })?))
    }
    let (planes, (rows, cols)) = geometry(x, size)?;
    let width = planes.hw[1];
    let sizes = (planes.hw[0] * width, size[0] * size[1]);
    let work = planes.count() * sizes.0.max(sizes.1);
    map_planes(x, planes.layout(size)?, sizes, work, |xp, out| {
        for (oh, rh) in rows.iter().enumerate() {
            for (ow, rw) in cols.iter().enumerate() {
                let mut sum = 0.0f32;
                for r in rh.clone() {
                    sum += xp[r * width + rw.start..r * width + rw.end]
                        .iter()
                        .sum::<f32>();
                }
                out[oh * size[1] + ow] = sum / (rh.len() * rw.len()) as f32;
            }
        }
    })
}

//! `max_pool2d` (with its argmax indices) and `avg_pool2d` over the last two axes, with
//! PyTorch's window rules: padding, dilation, ceil mode and `count_include_pad`. Each kernel
//! walks one plane of the compact input per task; the backward passes scatter the cotangent
//! back through the saved indices (max) or over each window (average).

use std::ops::Range;

use autograd_core::kernel;
use autograd_core::{differentiable, ensure, Result, Tensor};

use super::options::{Pool2dOptions, Span, Window2d};
use super::plane::{each_plane, map_planes, Planes};

/// The kernel taps `k` of a window starting at `start` whose element `start + k dilation` lies
/// inside the input.
#[inline]
fn taps(s: &Span, start: isize) -> Range<usize> {
    let d = s.dilation as isize;
    let lo = if start < 0 { (-start + d - 1) / d } else { 0 };
    let hi = if start >= s.input as isize {
        0
    } else {
        ((s.input as isize - start + d - 1) / d).min(s.kernel as isize)
    };
    // both are in 0..=kernel
    lo as usize..(hi.max(lo)) as usize
}

/// The flat index in its plane of every window's maximum: the first largest element, or the
/// last NaN (PyTorch's rule: an element replaces the best when larger or NaN).
fn argmax_plane(xp: &[f32], g: &Window2d, out: &mut [i64]) {
    if g.h.inside() && g.w.inside() {
        return argmax_inside(xp, g, out);
    }
    let (sh, sw) = (g.h, g.w);
    let width = sw.input;
    for oh in 0..sh.output {
        let hs = sh.start(oh);
        let rows = taps(&sh, hs);
        let out_row = &mut out[oh * sw.output..(oh + 1) * sw.output];
        for (ow, o) in out_row.iter_mut().enumerate() {
            let ws = sw.start(ow);
            let cols = taps(&sw, ws);
            let first_h = hs + (rows.start * sh.dilation) as isize;
            let first_w = ws + (cols.start * sw.dilation) as isize;
            let mut at = (first_h.max(0) as usize) * width + first_w.max(0) as usize;
            let mut best = f32::NEG_INFINITY;
            for i in rows.clone() {
                let r = (hs + (i * sh.dilation) as isize) as usize * width;
                for j in cols.clone() {
                    let c = r + (ws + (j * sw.dilation) as isize) as usize;
                    let v = xp[c];
                    if v > best || v.is_nan() {
                        best = v;
                        at = c;
                    }
                }
            }
            *o = at as i64;
        }
    }
}

/// [`argmax_plane`] when every window lies inside the input: no clipping of taps and no
/// per-window tap ranges to compute. The common 2x2 and 3x3 windows get loops of constant
/// length, unrolled.
fn argmax_inside(xp: &[f32], g: &Window2d, out: &mut [i64]) {
    match (g.h.kernel, g.w.kernel) {
        (2, 2) => argmax_fixed::<2, 2>(xp, g, out),
        (3, 3) => argmax_fixed::<3, 3>(xp, g, out),
        _ => argmax_windows(xp, g, out, g.h.kernel, g.w.kernel),
    }
}

/// [`argmax_windows`] with the window's extents known at compile time.
fn argmax_fixed<const KH: usize, const KW: usize>(xp: &[f32], g: &Window2d, out: &mut [i64]) {
    argmax_windows(xp, g, out, KH, KW);
}

/// The argmax of every `kh x kw` window of a plane whose windows all lie inside it; inlined
/// into [`argmax_fixed`] so that constant extents unroll its loops.
#[allow(clippy::inline_always)]
#[inline(always)]
fn argmax_windows(xp: &[f32], g: &Window2d, out: &mut [i64], kh: usize, kw: usize) {
    let (sh, sw) = (g.h, g.w);
    let width = sw.input;
    for (oh, row) in out.chunks_exact_mut(sw.output).enumerate() {
        let top = oh * sh.stride * width;
        for (ow, o) in row.iter_mut().enumerate() {
            let origin = top + ow * sw.stride;
            let (mut best, mut at) = (xp[origin], origin);
            for i in 0..kh {
                let r = origin + i * sh.dilation * width;
                for j in 0..kw {
                    let c = r + j * sw.dilation;
                    let v = xp[c];
                    let take = v > best || v.is_nan();
                    best = if take { v } else { best };
                    at = if take { c } else { at };
                }
            }
            *o = at as i64;
        }
    }
}

/// The maximum over each window of the last two axes of `x` (`[N, C, H, W]` or `[C, H, W]`,
/// Float32) and where it is: `(values, indices)`, the indices Int64 flat positions `h W + w`
/// in their input plane, as PyTorch's `max_pool2d(..., return_indices=True)`. Ties go to the
/// first element of the window (row-major); a NaN wins (and propagates). The gradient routes
/// each output's cotangent to its index.
///
/// A kernel larger than the padded input, a zero kernel, stride or dilation, or padding more
/// than half the kernel are `Error::Value` with the sizes; a rank other than 3 or 4 is
/// `Error::Value`, another dtype `Error::Type`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{max_pool2d_with_indices, Pool2dOptions};
/// let x = Tensor::from_vec((0..16).map(|v| v as f32).collect::<Vec<_>>(), shape![1, 1, 4, 4])?;
/// let (y, at) = max_pool2d_with_indices(&x, [2, 2], &Pool2dOptions::new())?;
/// assert_eq!(y.values::<f32>()?, [5.0, 7.0, 13.0, 15.0]);
/// assert_eq!(at.values::<i64>()?, [5, 7, 13, 15]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[differentiable]
pub fn max_pool2d_with_indices(
    x: &Tensor,
    kernel: [usize; 2],
    options: &Pool2dOptions,
) -> Result<(Tensor, Tensor)> {
    // y(o) = x(i_o)  =>  dx(i) = sum of g(o) over the outputs o with i_o = i
    fn vjp(
        (g, _): (Option<&Tensor>, Option<&Tensor>),
        x: &Tensor,
        output: (&Tensor, &Tensor),
    ) -> Result<Option<Tensor>> {
        let Some(g) = g else { return Ok(None) };
        let planes = Planes::of("max_pool2d", x)?;
        let in_plane = planes.hw[0] * planes.hw[1];
        let out_dims = output.1.dims();
        let out_plane = out_dims[out_dims.len() - 2] * out_dims[out_dims.len() - 1];
        let layout = planes.layout(planes.hw)?;
        let dx = kernel::read_logical_pair::<f32, i64, _>(g, output.1, |gs, at| {
            kernel::fresh::<f32>(g, layout, |dx| {
                let work = gs.len() + dx.len();
                each_plane(dx, in_plane, work, |p, d| {
                    let span = p * out_plane..(p + 1) * out_plane;
                    for (&gv, &i) in gs[span.clone()].iter().zip(&at[span]) {
                        // indices come from the forward pass: inside the plane
                        d[i as usize] += gv;
                    }
                });
                Ok(())
            })
        })??;
        Ok(Some(dx))
    }
    let planes = Planes::of("max_pool2d", x)?;
    let geo = Window2d::new("max_pool2d", planes.hw, kernel, options)?;
    let (in_plane, out_plane) = (geo.input_plane(), geo.output_plane());
    let layout = planes.layout([geo.h.output, geo.w.output])?;
    let n = planes.count() * out_plane;
    let work = n * kernel[0] * kernel[1];
    kernel::read_logical::<f32, _>(x, |xs| -> Result<(Tensor, Tensor)> {
        let indices = kernel::fresh::<i64>(x, layout.clone(), |at| {
            each_plane(at, out_plane, work, |p, o| {
                argmax_plane(&xs[p * in_plane..(p + 1) * in_plane], &geo, o);
            });
            Ok(())
        })?;
        // the indices are fresh and compact: read in place
        let values = kernel::read_logical::<i64, _>(&indices, |at| {
            kernel::fresh_overwritten::<f32>(x, layout, |out| {
                each_plane(out, out_plane, 2 * n, |p, o| {
                    let xp = &xs[p * in_plane..(p + 1) * in_plane];
                    for (v, &i) in o.iter_mut().zip(&at[p * out_plane..]) {
                        *v = xp[i as usize];
                    }
                });
                Ok(())
            })
        })??;
        Ok((values, indices))
    })?
}

/// The maximum over each window of the last two axes: [`max_pool2d_with_indices`] without the
/// indices, as PyTorch's `max_pool2d`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{max_pool2d, Pool2dOptions};
/// let x = Tensor::from_vec(vec![1.0f32, 5.0, 2.0, 4.0, 0.0, 3.0], shape![1, 2, 3])?;
/// let y = max_pool2d(&x, [2, 2], &Pool2dOptions::new().stride([1, 1]))?;
/// assert_eq!(y.values::<f32>()?, [5.0, 5.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn max_pool2d(x: &Tensor, kernel: [usize; 2], options: &Pool2dOptions) -> Result<Tensor> {
    Ok(max_pool2d_with_indices(x, kernel, options)?.0)
}

/// One axis of an average window: the clipped input range and PyTorch's divisor share
/// (`end - start` before clipping to the input but after clipping to the padding).
#[inline]
fn avg_range(s: &Span, o: usize) -> (Range<usize>, usize) {
    let start = s.start(o);
    let end = (start + s.kernel as isize).min((s.input + s.padding) as isize);
    let padded = (end - start) as usize;
    let (lo, hi) = (start.max(0) as usize, (end.max(0) as usize).min(s.input));
    (lo..hi.max(lo), padded)
}

/// The divisor of output `(oh, ow)` and its clipped window, as PyTorch's `avg_pool2d`.
#[inline]
fn avg_window(
    g: &Window2d,
    oh: usize,
    ow: usize,
    include_pad: bool,
) -> (Range<usize>, Range<usize>, f32) {
    let (rows, ph) = avg_range(&g.h, oh);
    let (cols, pw) = avg_range(&g.w, ow);
    let count = if include_pad {
        ph * pw
    } else {
        rows.len() * cols.len()
    };
    (rows, cols, count as f32)
}

/// Each window's mean for one plane.
fn avg_plane(xp: &[f32], g: &Window2d, include_pad: bool, out: &mut [f32]) {
    let width = g.w.input;
    for oh in 0..g.h.output {
        for ow in 0..g.w.output {
            let (rows, cols, div) = avg_window(g, oh, ow, include_pad);
            if rows.is_empty() || cols.is_empty() {
                // a ceil-mode window wholly in the padding: 0, as PyTorch's
                continue;
            }
            let mut sum = 0.0f32;
            for r in rows {
                sum += xp[r * width + cols.start..r * width + cols.end]
                    .iter()
                    .sum::<f32>();
            }
            out[oh * g.w.output + ow] = sum / div;
        }
    }
}

/// Each window's cotangent over its divisor, added to its elements, for one plane.
fn avg_plane_backward(gp: &[f32], g: &Window2d, include_pad: bool, dx: &mut [f32]) {
    let width = g.w.input;
    for oh in 0..g.h.output {
        for ow in 0..g.w.output {
            let (rows, cols, div) = avg_window(g, oh, ow, include_pad);
            if rows.is_empty() || cols.is_empty() {
                continue;
            }
            let share = gp[oh * g.w.output + ow] / div;
            for r in rows {
                for d in &mut dx[r * width + cols.start..r * width + cols.end] {
                    *d += share;
                }
            }
        }
    }
}

/// The geometry of an average pooling: as max pooling's, without dilation (PyTorch's
/// `avg_pool2d` has none: a dilation other than 1 is `Error::Value`).
fn avg_geometry(
    x: &Tensor,
    kernel: [usize; 2],
    options: &Pool2dOptions,
) -> Result<(Planes, Window2d)> {
    let planes = Planes::of("avg_pool2d", x)?;
    ensure!(
        options.dilation == [1, 1],
        Value,
        "avg_pool2d: average pooling takes no dilation (as PyTorch's), got {:?}",
        options.dilation
    );
    let geo = Window2d::new("avg_pool2d", planes.hw, kernel, options)?;
    Ok((planes, geo))
}

/// The mean over each window of the last two axes of `x` (`[N, C, H, W]` or `[C, H, W]`,
/// Float32), as PyTorch's `avg_pool2d`: a window's sum divided by its size clipped to the
/// padded input (`count_include_pad`, the default) or to the input itself (without padding);
/// in ceil mode the last window may reach past the padding and is clipped either way. The
/// gradient spreads each output's cotangent over its window with the same divisor.
///
/// Errors as [`max_pool2d_with_indices`]; a dilation other than `[1, 1]` is `Error::Value`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{avg_pool2d, Pool2dOptions};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![1, 1, 2, 2])?;
/// let with_pad = avg_pool2d(&x, [2, 2], &Pool2dOptions::new().padding([1, 1]))?;
/// assert_eq!(with_pad.values::<f32>()?, [0.25, 0.5, 0.75, 1.0]);
/// let without = Pool2dOptions::new().padding([1, 1]).count_include_pad(false);
/// assert_eq!(avg_pool2d(&x, [2, 2], &without)?.values::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[differentiable]
pub fn avg_pool2d(x: &Tensor, kernel: [usize; 2], options: &Pool2dOptions) -> Result<Tensor> {
    // y(o) = sum over the window of x / divisor(o)  =>  dx(i) = sum over windows holding i of
    // g(o) / divisor(o)
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        kernel: [usize; 2],
        options: &Pool2dOptions,
    ) -> Result<Option<Tensor>> {
        let (planes, geo) = avg_geometry(x, kernel, options)?;
        let include_pad = options.count_include_pad;
        let work = g.size() * kernel[0] * kernel[1];
        let sizes = (geo.output_plane(), geo.input_plane());
        Ok(Some(map_planes(
            g,
            planes.layout(planes.hw)?,
            sizes,
            work,
            |gp, dx| {
                avg_plane_backward(gp, &geo, include_pad, dx);
            },
        )?))
    }
    let (planes, geo) = avg_geometry(x, kernel, options)?;
    let include_pad = options.count_include_pad;
    let layout = planes.layout([geo.h.output, geo.w.output])?;
    let work = planes.count() * geo.output_plane() * kernel[0] * kernel[1];
    let sizes = (geo.input_plane(), geo.output_plane());
    map_planes(x, layout, sizes, work, |xp, out| {
        avg_plane(xp, &geo, include_pad, out);
    })
}

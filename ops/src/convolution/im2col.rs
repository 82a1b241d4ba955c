//! im2col and its adjoint: the windows of an image laid out as the columns of a matrix, so
//! that a convolution is one GEMM per group, and those columns summed back into an image.

use std::borrow::Cow;

use autograd_core::kernel::{alloc, Elements};
use autograd_core::Result;

use super::geometry::Geom;

/// An `[n, c, h, w]` tensor read in place: its storage, the offset of its origin and its
/// strides (a permuted NHWC tensor or a channel slice is read where it lies).
#[derive(Debug, Clone)]
pub(crate) struct View<'a> {
    data: Cow<'a, [f32]>,
    offset: usize,
    strides: [usize; 4],
}

impl<'a> View<'a> {
    /// The elements of a rank-4 tensor: in place when its layout is one stride per axis, else
    /// (a nested layout) an internal compact copy.
    pub fn of(e: &Elements<'a, f32>) -> Result<View<'a>> {
        let layout = e.layout();
        if layout.rank() == 4 && layout.is_flat() && layout.leaves().len() == 4 {
            let (data, offset) = e.storage();
            let l = layout.leaves();
            return Ok(View {
                data: Cow::Borrowed(data),
                offset,
                strides: [l[0].stride, l[1].stride, l[2].stride, l[3].stride],
            });
        }
        let dims = layout.dims();
        let mut copy = alloc::filled(e.len(), 0.0f32)?;
        e.copy_range(0, &mut copy);
        let mut strides = [0usize; 4];
        let mut acc = 1;
        for (s, &d) in strides.iter_mut().zip(&dims).rev() {
            *s = acc;
            acc *= d;
        }
        Ok(View {
            data: Cow::Owned(copy),
            offset: 0,
            strides,
        })
    }
}

/// The output positions `lo..hi` (of `ow`) along one axis whose input position
/// `o stride + off` lies in `0..w`; `off` is a tap's `k dilation - pad` (may be negative).
fn valid_range(ow: usize, w: usize, s: usize, off: isize) -> (usize, usize) {
    let s_i = s as isize;
    let lo = if off >= 0 {
        0
    } else {
        usize::try_from((-off + s_i - 1) / s_i).unwrap_or(0)
    };
    let last = w as isize - 1 - off;
    let hi = if last < 0 {
        0
    } else {
        usize::try_from(last / s_i + 1).unwrap_or(0).min(ow)
    };
    (lo.min(ow), hi.max(lo.min(ow)))
}

/// Where each kernel tap reads: its offsets from an output position's origin in the input and
/// the output rows and columns whose reads fall inside the input (the rest read padding).
/// Computed once per geometry, not per row of columns.
#[derive(Debug, Clone, Copy)]
struct Tap {
    off_y: isize,
    off_x: isize,
    rows: (usize, usize),
    cols: (usize, usize),
}

/// The taps of `g`'s kernel, row-major (`ki kw + kj`).
fn taps(g: &Geom) -> Vec<Tap> {
    (0..g.k())
        .map(|kk| {
            let (ki, kj) = (kk / g.kw, kk % g.kw);
            let off_y = (ki * g.dil[0]) as isize - g.pad[0] as isize;
            let off_x = (kj * g.dil[1]) as isize - g.pad[1] as isize;
            Tap {
                off_y,
                off_x,
                rows: valid_range(g.oh, g.h, g.stride[0], off_y),
                cols: valid_range(g.ow, g.w, g.stride[1], off_x),
            }
        })
        .collect()
}

/// Writes the windows of image `img` of `x` into `cols` (`[c k, l]` row-major, row
/// `(c kh + ki) kw + kj`); padding reads zeros.
pub(crate) fn im2col(x: &View<'_>, img: usize, g: &Geom, cols: &mut [f32]) {
    let taps = taps(g);
    for (r, row) in cols.chunks_exact_mut(g.l()).enumerate() {
        window_row(x, img, r, g, &taps, row);
    }
}

/// Writes row `r` (channel `r / k`, tap `r % k`) of image `img`'s columns into `out` (`l`
/// elements): the input values that tap reads at each output position, zeros in the padding.
fn window_row(x: &View<'_>, img: usize, r: usize, g: &Geom, taps: &[Tap], out: &mut [f32]) {
    let [sn, sc, sh, sw] = x.strides;
    let data = &x.data[..];
    let tap = taps[r % g.k()];
    let ((y0, y1), (lo, hi)) = (tap.rows, tap.cols);
    if y0 == y1 || lo == hi {
        out.fill(0.0);
        return;
    }
    out[..y0 * g.ow].fill(0.0);
    out[y1 * g.ow..].fill(0.0);
    let base = x.offset + img * sn + (r / g.k()) * sc;
    let x0 = ((lo * g.stride[1]) as isize + tap.off_x).unsigned_abs();
    let step = g.stride[1] * sw;
    for oy in y0..y1 {
        let line = &mut out[oy * g.ow..(oy + 1) * g.ow];
        line[..lo].fill(0.0);
        line[hi..].fill(0.0);
        let iy = ((oy * g.stride[0]) as isize + tap.off_y).unsigned_abs();
        let first = base + iy * sh + x0 * sw;
        if step == 1 {
            // short runs (small images) copy faster element by element than through memcpy
            for (o, &v) in line[lo..hi].iter_mut().zip(&data[first..first + (hi - lo)]) {
                *o = v;
            }
        } else {
            for (j, o) in line[lo..hi].iter_mut().enumerate() {
                *o = data[first + j * step];
            }
        }
    }
}

/// `dst` (`cols x rows`, row-major) = `src` (`rows x cols`, row-major) transposed, in
/// square blocks so that both sides stay in cache.
pub(crate) fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    const BLOCK: usize = 16;
    for r0 in (0..rows).step_by(BLOCK) {
        let r1 = (r0 + BLOCK).min(rows);
        for c0 in (0..cols).step_by(BLOCK) {
            let c1 = (c0 + BLOCK).min(cols);
            for r in r0..r1 {
                let line = &src[r * cols + c0..r * cols + c1];
                for (c, &v) in (c0..c1).zip(line) {
                    dst[c * rows + r] = v;
                }
            }
        }
    }
}

/// Adds the windows in `cols` (as [`im2col`] lays them out) into the dense `[c, h, w]` image
/// `img`: the adjoint of [`im2col`].
pub(crate) fn col2im(cols: &[f32], g: &Geom, img: &mut [f32]) {
    let taps = taps(g);
    for (r, row) in cols.chunks_exact(g.l()).enumerate() {
        add_window_row(row, r, g, &taps, img);
    }
}

/// Adds row `r` of an image's columns (`l` elements, as [`window_row`] writes them) into the
/// dense `[c, h, w]` image `img`: the adjoint of [`window_row`].
fn add_window_row(row: &[f32], r: usize, g: &Geom, taps: &[Tap], img: &mut [f32]) {
    let tap = taps[r % g.k()];
    let ((y0, y1), (lo, hi)) = (tap.rows, tap.cols);
    if y0 == y1 || lo == hi {
        return;
    }
    let base = (r / g.k()) * g.h * g.w;
    let x0 = ((lo * g.stride[1]) as isize + tap.off_x).unsigned_abs();
    for oy in y0..y1 {
        let src = &row[oy * g.ow + lo..oy * g.ow + hi];
        let iy = ((oy * g.stride[0]) as isize + tap.off_y).unsigned_abs();
        let first = base + iy * g.w + x0;
        if g.stride[1] == 1 {
            for (d, &s) in img[first..first + (hi - lo)].iter_mut().zip(src) {
                *d += s;
            }
        } else {
            for (j, &s) in src.iter().enumerate() {
                img[first + j * g.stride[1]] += s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_range_cuts_padding_and_the_far_edge() {
        // w 5, stride 1, offset -1 (padding 1): ox 0 reads column -1, ox 1..6 read 0..5
        assert_eq!(valid_range(5, 5, 1, -1), (1, 5));
        // offset 1: ox 0..4 read 1..5
        assert_eq!(valid_range(5, 5, 1, 1), (0, 4));
        // stride 2, offset -3: ox 2 reads column 1 first; ox 3 reads 3; ox 4 would read 5
        assert_eq!(valid_range(6, 5, 2, -3), (2, 4));
        // nothing valid
        assert_eq!(valid_range(3, 2, 1, 5), (0, 0));
    }
}

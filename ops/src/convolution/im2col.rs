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

/// The valid output columns `lo..hi` of kernel column `kj`: those whose input column
/// `ox stride + kj dilation - pad` lies in `0..w`, and that input column's offset `off` at
/// `ox = 0` (may be negative).
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

/// Writes the windows of channels `c0..c0 + rows / k` of image `img` of `x` into `cols`
/// (`[channels k, l]` row-major, row `(c kh + ki) kw + kj`); padding reads zeros.
pub(crate) fn im2col(x: &View<'_>, img: usize, c0: usize, g: &Geom, cols: &mut [f32]) {
    let l = g.l();
    let [sn, sc, sh, sw] = x.strides;
    let data = &x.data[..];
    for (r, row) in cols.chunks_exact_mut(l).enumerate() {
        let (c, kk) = (c0 + r / g.k(), r % g.k());
        let (ki, kj) = (kk / g.kw, kk % g.kw);
        let base = x.offset + img * sn + c * sc;
        let off_y = (ki * g.dil[0]) as isize - g.pad[0] as isize;
        let off_x = (kj * g.dil[1]) as isize - g.pad[1] as isize;
        let (lo, hi) = valid_range(g.ow, g.w, g.stride[1], off_x);
        for (oy, out) in row.chunks_exact_mut(g.ow).enumerate() {
            let iy = (oy * g.stride[0]) as isize + off_y;
            if iy < 0 || iy >= g.h as isize || lo == hi {
                out.fill(0.0);
                continue;
            }
            out[..lo].fill(0.0);
            out[hi..].fill(0.0);
            let start = base + iy.unsigned_abs() * sh;
            let x0 = (lo * g.stride[1]) as isize + off_x;
            let first = start + x0.unsigned_abs() * sw;
            if g.stride[1] == 1 && sw == 1 {
                out[lo..hi].copy_from_slice(&data[first..first + (hi - lo)]);
            } else {
                let step = g.stride[1] * sw;
                for (j, o) in out[lo..hi].iter_mut().enumerate() {
                    *o = data[first + j * step];
                }
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

/// Adds the windows in `cols` (as [`im2col`] lays them out, channels `c0..`) into the dense
/// `[c, h, w]` image `img`: the adjoint of [`im2col`].
pub(crate) fn col2im(cols: &[f32], c0: usize, g: &Geom, img: &mut [f32]) {
    let l = g.l();
    let plane = g.h * g.w;
    for (r, row) in cols.chunks_exact(l).enumerate() {
        let (c, kk) = (c0 + r / g.k(), r % g.k());
        let (ki, kj) = (kk / g.kw, kk % g.kw);
        let base = c * plane;
        let off_y = (ki * g.dil[0]) as isize - g.pad[0] as isize;
        let off_x = (kj * g.dil[1]) as isize - g.pad[1] as isize;
        let (lo, hi) = valid_range(g.ow, g.w, g.stride[1], off_x);
        if lo == hi {
            continue;
        }
        for (oy, src) in row.chunks_exact(g.ow).enumerate() {
            let iy = (oy * g.stride[0]) as isize + off_y;
            if iy < 0 || iy >= g.h as isize {
                continue;
            }
            let x0 = (lo * g.stride[1]) as isize + off_x;
            let first = base + iy.unsigned_abs() * g.w + x0.unsigned_abs();
            if g.stride[1] == 1 {
                for (d, &s) in img[first..first + (hi - lo)].iter_mut().zip(&src[lo..hi]) {
                    *d += s;
                }
            } else {
                for (j, &s) in src[lo..hi].iter().enumerate() {
                    img[first + j * g.stride[1]] += s;
                }
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

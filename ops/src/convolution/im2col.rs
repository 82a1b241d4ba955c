//! im2col and its adjoint: the windows of an image laid out as the columns of a matrix, so
//! that a convolution is one GEMM per group, and those columns summed back into an image. Wide
//! rows copy run by run, clipped at the padding; narrow ones (small images) first copy each
//! channel inside a zero border, then copy whole runs.

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
    // in i128, where no sum of these overflows ([`Geom::checked`] bounds them by isize::MAX)
    let (s, off) = (s.max(1) as i128, off as i128);
    let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
    let last = w as i128 - 1 - off;
    let hi = if last < 0 { 0 } else { last / s + 1 };
    let clamp = |v: i128| usize::try_from(v.min(ow as i128)).unwrap_or(0);
    let lo = clamp(lo);
    (lo, clamp(hi).max(lo))
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

/// Output rows at most this wide read from a bordered copy of each channel ([`Border`]):
/// their runs inside the input are too short for per-run clipping to pay (the 4x4 and 8x8
/// planes of a small CNN).
const NARROW: usize = 16;

/// Elements a bordered plane may hold.
const BORDERED_MAX: usize = 1 << 14;

/// The extents of a channel plane copied inside a zero border wide enough for every tap's
/// reads, so that each output row of a tap is one unclipped run: the plan for narrow rows.
#[derive(Debug, Clone, Copy)]
struct Border {
    hp: usize,
    wp: usize,
}

impl Border {
    /// The border of `g`'s planes, when its output rows are narrow and the planes small.
    fn of(g: &Geom) -> Option<Border> {
        if g.ow > NARROW || g.l() == 0 || g.k() == 0 {
            return None;
        }
        // the rows (columns) the last tap of the last output reads, and the input's own
        let hp = ((g.oh - 1) * g.stride[0] + (g.kh - 1) * g.dil[0] + 1).max(g.pad[0] + g.h);
        let wp = ((g.ow - 1) * g.stride[1] + (g.kw - 1) * g.dil[1] + 1).max(g.pad[1] + g.w);
        let small = hp.checked_mul(wp).is_some_and(|n| n <= BORDERED_MAX);
        small.then_some(Border { hp, wp })
    }

    /// How far apart in the bordered plane output rows start: `stride wp` (an output of one
    /// row never steps, and its stride may be any size).
    fn row_step(&self, g: &Geom) -> usize {
        if g.oh > 1 {
            // (oh - 1) stride < hp, so the step is within the plane
            g.stride[0] * self.wp
        } else {
            0
        }
    }

    /// Where in the bordered plane each tap's first output row starts reading (taps
    /// row-major); output row `oy` reads `oy stride wp` further.
    fn tap_starts(&self, g: &Geom) -> Vec<usize> {
        (0..g.k())
            .map(|kk| (kk / g.kw) * g.dil[0] * self.wp + (kk % g.kw) * g.dil[1])
            .collect()
    }

    /// Where in the bordered plane input row `y` starts.
    #[inline]
    fn interior(&self, g: &Geom, y: usize) -> usize {
        (y + g.pad[0]) * self.wp + g.pad[1]
    }
}

/// How the runs of a bordered plane move: `W` contiguous elements when `W > 0` (the common
/// narrow widths at stride 1, single vector moves), else `len` elements `step` apart.
#[derive(Debug, Clone, Copy)]
struct Run<const W: usize> {
    len: usize,
    step: usize,
}

impl<const W: usize> Run<W> {
    /// `out[j] = src[j step]` for the run's `j`.
    #[inline]
    fn copy(self, src: &[f32], out: &mut [f32]) {
        if W > 0 {
            if let (Some(o), Some(s)) = (out.first_chunk_mut::<W>(), src.first_chunk::<W>()) {
                *o = *s;
            }
        } else {
            for (j, o) in out[..self.len].iter_mut().enumerate() {
                *o = src[j * self.step];
            }
        }
    }

    /// `dst[j step] += run[j]`: the adjoint of [`Run::copy`].
    #[inline]
    fn add(self, run: &[f32], dst: &mut [f32]) {
        if W > 0 {
            if let (Some(d), Some(r)) = (dst.first_chunk_mut::<W>(), run.first_chunk::<W>()) {
                for (d, &v) in d.iter_mut().zip(r) {
                    *d += v;
                }
            }
        } else {
            for (j, &v) in run[..self.len].iter().enumerate() {
                dst[j * self.step] += v;
            }
        }
    }
}

/// Calls `$body` with `$run` bound to the [`Run`] of `len` elements `step` apart, its width a
/// constant for the common narrow widths at stride 1.
macro_rules! with_run {
    ($len:expr, $step:expr, |$run:ident| $body:expr) => {{
        let (len, step) = ($len, $step);
        match (step, len) {
            (1, 4) => {
                let $run = Run::<4> { len, step };
                $body
            }
            (1, 8) => {
                let $run = Run::<8> { len, step };
                $body
            }
            (1, 16) => {
                let $run = Run::<16> { len, step };
                $body
            }
            _ => {
                let $run = Run::<0> { len, step };
                $body
            }
        }
    }};
}

/// im2col over one input: the windows of any of its images laid out as columns (`[c k, l]`
/// row-major, row `(c kh + ki) kw + kj`; padding reads zeros), the geometry's taps worked out
/// once for all images.
pub(crate) struct Unfolder<'v, 'a> {
    x: &'v View<'a>,
    windows: Windows,
}

/// What [`Unfolder`] and [`Folder`] work out once per geometry: each tap's reach, and for
/// narrow rows the border and each tap's start in it.
struct Windows {
    g: Geom,
    taps: Vec<Tap>,
    border: Option<(Border, Vec<usize>)>,
}

impl Windows {
    /// The windows of geometry `g`.
    fn new(g: &Geom) -> Self {
        Windows {
            g: *g,
            taps: taps(g),
            border: Border::of(g).map(|b| (b, b.tap_starts(g))),
        }
    }
}

impl<'v, 'a> Unfolder<'v, 'a> {
    /// The plan for reading `x`'s windows of geometry `g`.
    pub(crate) fn new(x: &'v View<'a>, g: &Geom) -> Self {
        Unfolder {
            x,
            windows: Windows::new(g),
        }
    }

    /// Writes image `img`'s columns into `cols` (`c k l` elements, every one written).
    pub(crate) fn write(&self, img: usize, cols: &mut [f32]) {
        let Windows { g, taps, border } = &self.windows;
        let Some((border, starts)) = border else {
            for (r, row) in cols.chunks_exact_mut(g.l()).enumerate() {
                window_row(self.x, img, r, g, taps, row);
            }
            return;
        };
        with_run!(g.ow, g.stride[1], |run| self.write_bordered(
            img,
            cols,
            (*border, starts),
            run
        ));
    }

    /// [`Unfolder::write`] for narrow rows: each channel copied inside the border, then every
    /// tap's output rows copied as whole runs.
    fn write_bordered<const W: usize>(
        &self,
        img: usize,
        cols: &mut [f32],
        (border, starts): (Border, &[usize]),
        run: Run<W>,
    ) {
        let g = &self.windows.g;
        let [sn, sc, sh, sw] = self.x.strides;
        let (k, l, row_step) = (g.k(), g.l(), border.row_step(g));
        let line = Run::<0> { len: g.w, step: sw };
        // the border stays zero: only the interior is written, channel after channel
        let mut plane = vec![0.0f32; border.hp * border.wp];
        for (ci, block) in cols.chunks_exact_mut(k * l).enumerate() {
            let base = self.x.offset + img * sn + ci * sc;
            for y in 0..g.h {
                let at = border.interior(g, y);
                line.copy(&self.x.data[base + y * sh..], &mut plane[at..]);
            }
            for (rows, &start) in block.chunks_exact_mut(l).zip(starts) {
                for (oy, out) in rows.chunks_exact_mut(g.ow).enumerate() {
                    run.copy(&plane[start + oy * row_step..], out);
                }
            }
        }
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
    // (hi - lo - 1) stride < w where a row has two outputs or more: a real step; a row of one
    // output never steps, and its stride may be any size
    let step = if hi - lo > 1 { g.stride[1] * sw } else { 1 };
    for oy in y0..y1 {
        let line = &mut out[oy * g.ow..(oy + 1) * g.ow];
        line[..lo].fill(0.0);
        line[hi..].fill(0.0);
        let iy = ((oy * g.stride[0]) as isize + tap.off_y).unsigned_abs();
        let first = base + iy * sh + x0 * sw;
        if step == 1 {
            line[lo..hi].copy_from_slice(&data[first..first + (hi - lo)]);
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

/// col2im for one geometry: columns (as [`Unfolder`] lays them out) summed back into dense
/// `[c, h, w]` images, the adjoint of [`Unfolder::write`], the taps worked out once.
pub(crate) struct Folder(Windows);

impl Folder {
    /// The plan for folding columns of geometry `g`.
    pub(crate) fn new(g: &Geom) -> Self {
        Folder(Windows::new(g))
    }

    /// Adds image columns `cols` (`c k l` elements) into the dense image `img` (`c h w`).
    pub(crate) fn add(&self, cols: &[f32], img: &mut [f32]) {
        let Windows { g, taps, border } = &self.0;
        let Some((border, starts)) = border else {
            for (r, row) in cols.chunks_exact(g.l()).enumerate() {
                add_window_row(row, r, g, taps, img);
            }
            return;
        };
        with_run!(g.ow, g.stride[1], |run| self.add_bordered(
            cols,
            img,
            (*border, starts),
            run
        ));
    }

    /// [`Folder::add`] for narrow rows: every tap's output rows added as whole runs into a
    /// bordered plane per channel, whose interior is then added into the image.
    fn add_bordered<const W: usize>(
        &self,
        cols: &[f32],
        img: &mut [f32],
        (border, starts): (Border, &[usize]),
        run: Run<W>,
    ) {
        let g = &self.0.g;
        let (k, l, plane) = (g.k(), g.l(), g.h * g.w);
        if plane == 0 {
            return;
        }
        let (row_step, line) = (border.row_step(g), Run::<0> { len: g.w, step: 1 });
        let mut acc = vec![0.0f32; border.hp * border.wp];
        for (block, channel) in cols.chunks_exact(k * l).zip(img.chunks_exact_mut(plane)) {
            acc.fill(0.0);
            for (rows, &start) in block.chunks_exact(l).zip(starts) {
                for (oy, r) in rows.chunks_exact(g.ow).enumerate() {
                    run.add(r, &mut acc[start + oy * row_step..]);
                }
            }
            for (y, dst) in channel.chunks_exact_mut(g.w).enumerate() {
                line.add(&acc[border.interior(g, y)..], dst);
            }
        }
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

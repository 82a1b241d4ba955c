//! The convolution's three products on the GEMM, image by image: the output
//! (`Y = W · cols(X)`), the input's gradient (`dX = fold(Wᵀ · dY)`) and the weight's
//! (`dW = Σ dY · cols(X)ᵀ`). Images are spread over the kernel threads, each with its own
//! column scratch; a single image gives its threads to the GEMM instead.

use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};

use autograd_core::kernel::{self, alloc, gemm_f32, sum_f64, MatMut, MatRef};
use autograd_core::{simd, Error, Result};

use super::geometry::Geom;
use super::im2col::{transpose, Folder, Unfolder, View};

thread_local! {
    /// Each thread's column matrix, kept between images and calls.
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's column scratch of `len` elements (contents unspecified).
fn with_cols<R>(len: usize, f: impl FnOnce(&mut [f32]) -> Result<R>) -> Result<R> {
    COLS.with(|cell| {
        let mut buf = cell.try_borrow_mut().map_err(|_| {
            Error::Runtime(
                "convolution: the column scratch is already in use on this thread".to_owned(),
            )
        })?;
        if buf.len() < len {
            alloc::resize(&mut buf, len, 0.0)?;
        }
        f(&mut buf[..len])
    })
}

/// The first error of a parallel loop, kept for after it.
#[derive(Debug, Default)]
struct FirstError(Mutex<Option<Error>>);

impl FirstError {
    fn keep(&self, r: Result<()>) {
        if let Err(e) = r {
            let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            slot.get_or_insert(e);
        }
    }
    fn result(self) -> Result<()> {
        match self.0.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Whether images go to threads (several images and threads) and the GEMM threads each call
/// then gets.
fn split(n: usize) -> (bool, usize) {
    let threads = kernel::threads();
    if n >= 2 && threads > 1 {
        (true, 1)
    } else {
        (false, threads)
    }
}

/// `f(image, chunk)` for every image's chunk of `out` (`size` elements each), over threads
/// when [`split`] says so; the first error is returned.
fn per_image(
    out: &mut [f32],
    size: usize,
    n: usize,
    f: impl Fn(usize, &mut [f32]) -> Result<()> + Sync,
) -> Result<()> {
    if size == 0 {
        return Ok(());
    }
    if split(n).0 {
        let first = FirstError::default();
        kernel::for_each_chunk_mut(out, size, |i, chunk| first.keep(f(i, chunk)));
        first.result()
    } else {
        out.chunks_exact_mut(size)
            .enumerate()
            .try_for_each(|(i, chunk)| f(i, chunk))
    }
}

/// Writes the output `[n, cout, oh, ow]` (dense, every element: `y` may hold stale values)
/// of the convolution of `x` with `w` (`[cout, cin_g, kh, kw]`, dense) plus `bias`.
pub(crate) fn forward(
    x: &View<'_>,
    w: &[f32],
    bias: Option<&[f32]>,
    g: &Geom,
    y: &mut [f32],
) -> Result<()> {
    let (l, rows_g, cout_g) = (g.l(), g.cin_g() * g.k(), g.cout_g());
    let threads = split(g.n).1;
    let unfolder = Unfolder::new(x, g);
    per_image(y, g.out_len(), g.n, |i, yi| {
        if let Some(b) = bias {
            for (row, &bv) in yi.chunks_exact_mut(l).zip(b) {
                row.fill(bv);
            }
        }
        with_cols(g.c * g.k() * l, |cols| {
            unfolder.write(i, cols);
            for grp in 0..g.groups {
                let a = MatRef {
                    offset: grp * cout_g * rows_g,
                    ..MatRef::row_major(w, cout_g, rows_g)
                };
                let b = MatRef {
                    offset: grp * rows_g * l,
                    ..MatRef::row_major(cols, rows_g, l)
                };
                let c = MatMut {
                    offset: grp * cout_g * l,
                    ..MatMut::row_major(yi, cout_g, l)
                };
                gemm_f32(a, b, c, bias.is_some(), threads)?;
            }
            Ok(())
        })
    })
}

/// Writes the input's gradient `[n, c, h, w]` (dense, every element: `gx` may hold stale
/// values) from the output's `gy` (dense): per image and group `cols = Wᵀ · dY`, folded back
/// into the image.
pub(crate) fn input_grad(gy: &[f32], w: &[f32], g: &Geom, gx: &mut [f32]) -> Result<()> {
    let (l, rows_g, cout_g) = (g.l(), g.cin_g() * g.k(), g.cout_g());
    let threads = split(g.n).1;
    let folder = Folder::new(g);
    per_image(gx, g.in_len(), g.n, |i, gxi| {
        let gyi = &gy[i * g.out_len()..(i + 1) * g.out_len()];
        with_cols(g.c * g.k() * l, |cols| {
            for grp in 0..g.groups {
                // Wᵀ of the group: its [cout_g, rows_g] block with the strides swapped
                let a = MatRef {
                    offset: grp * cout_g * rows_g,
                    ..MatRef::row_major(w, cout_g, rows_g)
                }
                .t();
                let b = MatRef {
                    offset: grp * cout_g * l,
                    ..MatRef::row_major(gyi, cout_g, l)
                };
                let c = MatMut {
                    offset: grp * rows_g * l,
                    ..MatMut::row_major(cols, rows_g, l)
                };
                gemm_f32(a, b, c, false, threads)?;
            }
            gxi.fill(0.0);
            folder.add(cols, gxi);
            Ok(())
        })
    })
}

/// The weight's gradient `[cout, cin_g, kh, kw]` from the input `x` and the output's `gy`
/// (dense): `Σ_images dY · cols(X)ᵀ` per group, each thread summing its own images.
pub(crate) fn weight_grad(x: &View<'_>, gy: &[f32], g: &Geom) -> Result<Vec<f32>> {
    let (parallel, threads) = split(g.n);
    let tasks = if parallel {
        kernel::threads().min(g.n)
    } else {
        1
    };
    let per = g.n.div_ceil(tasks.max(1)).max(1);
    let unfolder = Unfolder::new(x, g);
    let partial = |t: usize| -> Result<Vec<f32>> {
        let mut dw = alloc::filled(g.weight_len(), 0.0f32)?;
        for i in (t * per)..((t + 1) * per).min(g.n) {
            accumulate_weight_grad(&unfolder, gy, i, g, &mut dw, threads)?;
        }
        Ok(dw)
    };
    let mut parts = if tasks > 1 {
        kernel::map_tasks(tasks, partial)
    } else {
        vec![partial(0)]
    }
    .into_iter();
    let mut dw = parts.next().unwrap_or_else(|| Ok(Vec::new()))?;
    for p in parts {
        for (d, v) in dw.iter_mut().zip(p?) {
            *d += v;
        }
    }
    // each group's block was accumulated column-major: lay it out row-major
    let (rows_g, cout_g) = (g.cin_g() * g.k(), g.cout_g());
    let mut out = alloc::filled(dw.len(), 0.0f32)?;
    if rows_g * cout_g == 0 {
        return Ok(out);
    }
    for (src, dst) in dw
        .chunks_exact(rows_g * cout_g)
        .zip(out.chunks_exact_mut(rows_g * cout_g))
    {
        transpose(src, rows_g, cout_g, dst);
    }
    Ok(out)
}

/// Adds image `i`'s `dY · cols(X)ᵀ` into `dw`, whose group blocks are column-major here
/// ([`weight_grad`] lays them out at the end): with a row-major destination the GEMM would
/// repack the columns transposed, which took more time than the product. `dY` goes in
/// transposed (column-major) too: the GEMM then reads it as it lies instead of packing it
/// again for every block of `dw`'s columns (W9a's weight gradient: 90 -> 114 GFLOP/s).
fn accumulate_weight_grad(
    unfolder: &Unfolder<'_, '_>,
    gy: &[f32],
    i: usize,
    g: &Geom,
    dw: &mut [f32],
    threads: usize,
) -> Result<()> {
    let (l, ck) = (g.l(), g.c * g.k());
    let (rows_g, cout_g) = (g.cin_g() * g.k(), g.cout_g());
    let gyi = &gy[i * g.out_len()..(i + 1) * g.out_len()];
    with_cols(ck * l + cout_g * l, |scratch| {
        let (cols, gyt) = scratch.split_at_mut(ck * l);
        unfolder.write(i, cols);
        for grp in 0..g.groups {
            let block = &gyi[grp * cout_g * l..(grp + 1) * cout_g * l];
            transpose(block, cout_g, l, gyt);
            let a = MatRef {
                data: &*gyt,
                offset: 0,
                rows: cout_g,
                cols: l,
                row_stride: 1,
                col_stride: cout_g,
            };
            let b = MatRef {
                offset: grp * rows_g * l,
                ..MatRef::row_major(cols, rows_g, l)
            }
            .t();
            // the group's block of dw column-major
            let c = MatMut {
                data: &mut *dw,
                offset: grp * cout_g * rows_g,
                rows: cout_g,
                cols: rows_g,
                row_stride: 1,
                col_stride: cout_g,
            };
            gemm_f32(a, b, c, true, threads)?;
        }
        Ok(())
    })
}

/// The bias's gradient: `gy` (`[n, channels, plane]`, dense) summed over images and
/// positions, per channel: each plane in eight f64 lanes, channels spread over the kernel
/// threads.
pub(crate) fn channel_sums(gy: &[f32], n: usize, channels: usize, plane: usize) -> Vec<f32> {
    kernel::map_tasks(channels, |c| {
        (0..n)
            .filter_map(|i| gy.get((i * channels + c) * plane..(i * channels + c + 1) * plane))
            .map(|row| simd!(len = row.len(); sum_f64(row)))
            .sum::<f64>() as f32
    })
}

/// Dense `[n, c * kh * kw, l]` columns of every image of `x` (groups ignored): `unfold`.
pub(crate) fn unfold_all(x: &View<'_>, g: &Geom) -> Result<Vec<f32>> {
    let size = g.c * g.k() * g.l();
    let mut out = alloc::filled(g.n * size, 0.0f32)?;
    let unfolder = Unfolder::new(x, g);
    per_image(&mut out, size, g.n, |i, o| {
        unfolder.write(i, o);
        Ok(())
    })?;
    Ok(out)
}

/// Dense `[n, c, h, w]` images summed from the dense columns `cols` (`[n, c kh kw, l]`):
/// `fold`.
pub(crate) fn fold_all(cols: &[f32], g: &Geom) -> Result<Vec<f32>> {
    let size = g.c * g.k() * g.l();
    let mut out = alloc::filled(g.n * g.in_len(), 0.0f32)?;
    let folder = Folder::new(g);
    per_image(&mut out, g.in_len(), g.n, |i, o| {
        folder.add(&cols[i * size..(i + 1) * size], o);
        Ok(())
    })?;
    Ok(out)
}

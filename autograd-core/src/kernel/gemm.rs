//! Dense `f32` matrix multiply over strided views: the one door to the GEMM kernel.
//!
//! The kernel is the `gemm` crate, picked by measurement for issue 11 (512³ f32, interleaved with
//! PyTorch's W5 on the same machine: about 110 GFLOP/s on one core and 218 on two, at or above
//! PyTorch, ahead of `matrixmultiply` on two cores, and within a few percent of `faer` at a
//! fraction of its build time). Its thread count is a per-call argument, where `matrixmultiply`
//! reads one process-wide count from the environment. It picks its kernels at run time from the
//! CPU's features (AVX2/FMA on x86-64, NEON on aarch64, a portable fallback otherwise), so
//! nothing here needs `-C target-cpu`. Its AVX-512 kernels (feature `x86-v4`, which needs Rust
//! 1.89) are enabled: on the AVX-512 machines the project runs on they are the kernels picked,
//! at up to about 165 GFLOP/s on one core at 512³.
//!
//! Operands are plain strided views of slices: a transposed operand is the same slice with its
//! strides swapped, so it reaches the kernel without a copy. Every addressed element is checked to
//! lie inside its slice before the kernel, which works on raw pointers, is called.

use super::gemm_operand::{Geometry, MatMut, MatRef};
use crate::error::{ensure, Result};

/// `C = A·B`, or `C += A·B` when `accumulate`, for any strides: a transposed operand is just
/// swapped strides, with no copy. Stride-0 (broadcast) and overlapping inputs are fine.
///
/// `threads` is the number of threads the kernel may use (0 and 1 both mean sequential); the
/// products split in bands across the kernel team ([`crate::kernel::for_each_task`]). Zero-size dimensions are fine: with `k == 0` the
/// product is zero, so `C` is zeroed (or left as is when accumulating).
///
/// Errors ([`crate::Error::Value`]): inner or outer dimensions that do not match, an operand
/// addressing an element outside its slice, or `C` strides that make two elements alias.
pub fn gemm_f32(
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: MatMut<'_>,
    accumulate: bool,
    threads: usize,
) -> Result<()> {
    ensure!(
        a.cols == b.rows && c.rows == a.rows && c.cols == b.cols,
        Value,
        "gemm: shapes do not match: A is {}x{}, B is {}x{}, C is {}x{}",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        c.rows,
        c.cols
    );
    let ga = Geometry::checked("A", a.data.len(), a.offset, a.shape(), a.strides())?;
    let gb = Geometry::checked("B", b.data.len(), b.offset, b.shape(), b.strides())?;
    let gc = Geometry::checked(
        "C",
        c.data.len(),
        c.offset,
        (c.rows, c.cols),
        (c.row_stride, c.col_stride),
    )?;
    ensure!(
        !gc.aliases(),
        Value,
        "gemm: C ({}x{}) strides ({}, {}) make distinct elements share a slot",
        c.rows,
        c.cols,
        c.row_stride,
        c.col_stride
    );
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let c_data = c.data;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    c_data[strided(gc, i, j)] = 0.0;
                }
            }
        }
        return Ok(());
    }
    // C column-major, written by the crate and transposed into place: a pooled buffer, as a
    // result of this size would be (a GPT-2 head's logits take 51 MB, which a fresh block
    // would fault in page by page on every step), taken here where its size is still an error
    let scratch = if through_column_major(ga, gb, gc, accumulate) {
        crate::storage::pool::overwritable(m * n)?
    } else {
        Vec::new()
    };
    let scratch = kernel(
        (a.data, ga),
        (b.data, gb),
        (c_data, gc),
        (accumulate, scratch),
        threads,
    );
    crate::storage::pool::recycle(scratch);
    Ok(())
}

/// The slot of element `(i, j)` of a checked, in-bounds geometry.
fn strided(g: Geometry, i: usize, j: usize) -> usize {
    g.offset + i * g.row_stride as usize + j * g.col_stride as usize
}

/// The `gemm` crate's kernel on operands checked by [`gemm_f32`]; `m, n, k >= 1`. `scratch`
/// holds `m * n` floats when C goes through a column-major copy ([`through_column_major`]),
/// and comes back for reuse.
fn kernel(
    (a, ga): (&[f32], Geometry),
    (b, gb): (&[f32], Geometry),
    (c, gc): (&mut [f32], Geometry),
    (accumulate, mut scratch): (bool, Vec<f32>),
    threads: usize,
) -> Vec<f32> {
    // the gemm crate allocates its packing buffers on every call
    super::heap::retain_freed_blocks();
    let a_ptr = a[ga.offset..].as_ptr();
    let b_ptr = b[gb.offset..].as_ptr();
    let c_ptr = c[gc.offset..].as_mut_ptr();
    let transposed = through_column_major(ga, gb, gc, accumulate);
    assert!(
        !transposed || scratch.len() >= ga.rows * gb.cols,
        "gemm: the column-major scratch was not sized"
    );
    // (its values are stale or zero: the crate writes every element before any is read)
    let scratch_at = scratch.as_mut_ptr() as usize;
    // B copied row-major when the crate would gather it along a stride that maps its rows onto
    // a few cache sets (allocated, then every element written before the crate reads it)
    let mut b_rows: Vec<f32> = Vec::new();
    let (b_ptr, gb) = if !transposed && gathers_along_a_critical_stride(ga, gb, gc) {
        let (k, n, ld) = (gb.rows, gb.cols, gb.col_stride as usize);
        b_rows.reserve_exact(k * n);
        let (src, dst) = (b_ptr as usize, b_rows.as_mut_ptr() as usize);
        // B's columns in parts across the threads; each writes its own columns of the copy
        let parts = if threads > 1 {
            threads.min(n / BAND_MIN).max(1)
        } else {
            1
        };
        let per = n.div_ceil(parts);
        crate::kernel::for_each_task(n.div_ceil(per), |part| {
            let first = part * per;
            let len = per.min(n - first);
            // SAFETY: column `j` of B (`first <= j < first + len <= n`) is the `k` elements
            // at `b + j * ld`, inside the checked operand, and the copy has room for `k * n`
            // elements, of which this part writes `(p, j)` at `p * n + j`: its own columns.
            unsafe {
                super::transpose::transpose_raw(
                    (src as *const f32).add(first * ld),
                    ld,
                    (len, k),
                    (dst as *mut f32).add(first),
                    n,
                );
            }
        });
        let row_major = Geometry {
            offset: 0,
            rows: k,
            cols: n,
            row_stride: n as isize,
            col_stride: 1,
        };
        (b_rows.as_ptr(), row_major)
    } else {
        (b_ptr, gb)
    };
    // Several threads take a band each: of C's rows (A's rows with them), or of C's columns
    // (B's columns) when C is wide and short. (Inside the `gemm` crate, small products split
    // poorly, and its rayon workers sleep between products.)
    let by_rows = ga.rows >= gb.cols;
    // the scratch holds whole columns of C: bands must be of columns (`2 m <= n` routes it)
    debug_assert!(!(transposed && by_rows), "a column-major C split by rows");
    let long = if by_rows { ga.rows } else { gb.cols };
    let wanted = if threads > 1 {
        threads.min(long / BAND_MIN)
    } else {
        1
    };
    // `per` rows (or columns) a band, and as many bands as that takes: every band starts
    // below `long` and is non-empty (`wanted` bands of `per` could overshoot: 35 bands of
    // 33 for 1121 rows would start the last at 1122)
    let per = long.div_ceil(wanted.max(1));
    let bands = long.div_ceil(per);
    // Addresses cross threads as integers; a band reads its part of A (rows) or B
    // (columns) and all of the other, and writes its part of C.
    let (a_at, b_at, c_at) = (a_ptr as usize, b_ptr as usize, c_ptr as usize);
    let band = |band: usize| {
        let first = band * per;
        let len = per.min(long - first);
        let (mut band_a, mut band_b, mut band_c) = (ga, gb, gc);
        let (a_shift, b_shift, c_shift) = if by_rows {
            band_a.rows = len;
            band_c.rows = len;
            (
                first * ga.row_stride as usize,
                0,
                first * gc.row_stride as usize,
            )
        } else {
            band_b.cols = len;
            band_c.cols = len;
            (
                0,
                first * gb.col_stride as usize,
                first * gc.col_stride as usize,
            )
        };
        // SAFETY (both calls): `gemm::gemm` reads `A[i, p]` at `a + i*row_stride +
        // p*col_stride` for `i < m`, `p < k` (B likewise, `k x n`) and reads (when
        // accumulating) and writes `C[i, j]` for `i < m`, `j < n`. Before this call `gemm_f32`
        // established:
        // - shapes: A is `m x k`, B is `k x n`, C is `m x n`, with `m, n, k >= 1`;
        // - bounds (`Geometry::checked`): for each operand, `offset + (rows-1)*row_stride +
        //   (cols-1)*col_stride < len` of its slice, computed with checked arithmetic; strides
        //   are non-negative, so that is the largest index addressed and every element lies
        //   inside the slice. The base pointers are `slice[offset..]` (bounds-checked), the
        //   strides are at most `len` (so they fit `isize`), and a dimension of extent 1 gets
        //   stride 0;
        // - aliasing: C is the only `&mut` borrow, so it is disjoint from A and B, and its
        //   strides send distinct `(i, j)` to distinct slots (`Geometry::aliases`). A and B are
        //   only read, so stride 0 and overlapping elements there are sound (and tested against
        //   a naive loop).
        // A band is the sub-matrices of rows (or columns) `first..first + len` (`band < bands
        // = ceil(long / per)`, so `first = band * per < long` and `len >= 1`: `long - first`
        // cannot wrap): their base elements lie inside the checked operands (strides are
        // non-negative and the shifted element is one the full operand addresses), and the
        // bands of C are disjoint, so no two threads write one slot. With `read_dst ==
        // accumulate` the kernel computes `C = C + A·B` or `C = A·B`.
        unsafe {
            let (a, b) = (
                (a_at as *const f32).add(a_shift),
                (b_at as *const f32).add(b_shift),
            );
            let c = (c_at as *mut f32).add(c_shift);
            if transposed {
                // the band's columns of C, column-major in the scratch (`m * n` floats
                // held; columns by bands, so the bands' parts are disjoint), then
                // transposed into C's rows of unit-stride elements
                let part = (scratch_at as *mut f32).add(first * ga.rows);
                let column_major = Geometry {
                    offset: 0,
                    rows: ga.rows,
                    cols: len,
                    row_stride: 1,
                    col_stride: if len > 1 { ga.rows as isize } else { 0 },
                };
                call(
                    a,
                    band_a,
                    b,
                    band_b,
                    part,
                    column_major,
                    false,
                    gemm::Parallelism::None,
                );
                super::transpose::transpose_raw(
                    part,
                    ga.rows,
                    (len, ga.rows),
                    c,
                    gc.row_stride as usize,
                );
            } else {
                call(
                    a,
                    band_a,
                    b,
                    band_b,
                    c,
                    band_c,
                    accumulate,
                    gemm::Parallelism::None,
                );
            }
        }
    };
    if bands > 1 {
        crate::kernel::for_each_task(bands, band);
    } else {
        // narrow and short (both sides under two bands): one thread
        band(0);
    }
    scratch
}

/// Whether C is computed column-major into a scratch and transposed into place. For a
/// row-major C the `gemm` crate packs B whole up front, and a B that is a transposed
/// row-major matrix (a weight in `x·Wᵀ`) it gathers element by element; with C
/// column-major it packs A instead. When B has at least twice the columns A has rows, the
/// gather saved outweighs transposing the smaller C (measured on the crate's AVX-512
/// kernels: 5-15% of the product at 64-128 rows of A and 256-512 columns of B with a depth of
/// 784; a loss at equal sizes).
fn through_column_major(ga: Geometry, gb: Geometry, gc: Geometry, accumulate: bool) -> bool {
    !accumulate
        && gc.col_stride == 1
        && gb.row_stride == 1
        && gb.col_stride as usize >= gb.rows
        && ga.rows >= TRANSPOSED_MIN
        && 2 * ga.rows <= gb.cols
        && ga.cols >= TRANSPOSED_MIN
}

/// Rows of A and depth a product needs before C goes through a column-major scratch.
const TRANSPOSED_MIN: usize = 64;

/// Whether B is copied row-major first: C is row-major (so the crate packs B whole up front),
/// B is a transposed row-major matrix (which the crate gathers element by element, down a
/// panel of its rows at once) and that matrix's row stride is a multiple of 2 KiB, which puts
/// the panel's rows in at most two sets of the L1 cache, so that the gather misses on nearly
/// every element (measured: 11% of the product at a stride of 512 floats, 22% at 3,072 and
/// 34% at 1,024; a multiple of 1 KiB such as 768 floats lost up to 7% with the copy).
fn gathers_along_a_critical_stride(ga: Geometry, gb: Geometry, gc: Geometry) -> bool {
    let stride = gb.col_stride as usize;
    gc.col_stride == 1
        && gc.row_stride > 1
        && gb.row_stride == 1
        && stride >= gb.rows
        && stride.is_multiple_of(CRITICAL_STRIDE)
        && ga.rows >= 16
        && gb.cols >= 16
        && gb.rows >= TRANSPOSED_MIN
        && gb.rows * gb.cols <= COPIED_MAX
}

/// Floats in 2 KiB: a row stride of a multiple of this is critical for the L1 cache.
const CRITICAL_STRIDE: usize = 512;

/// The most elements of B copied row-major (16 MiB).
const COPIED_MAX: usize = 1 << 22;

/// Rows (or columns) a band of a product split across threads has at least.
const BAND_MIN: usize = 32;

/// The `gemm` crate's kernel on raw operands.
///
/// # Safety
/// As [`kernel`] establishes for its call: every element the shapes and strides address lies
/// inside its allocation, and C's elements are distinct slots no one else accesses.
#[allow(clippy::too_many_arguments)]
unsafe fn call(
    a: *const f32,
    ga: Geometry,
    b: *const f32,
    gb: Geometry,
    c: *mut f32,
    gc: Geometry,
    accumulate: bool,
    parallelism: gemm::Parallelism,
) {
    // SAFETY: the caller's contract is `gemm::gemm`'s.
    unsafe {
        gemm::gemm(
            ga.rows,
            gb.cols,
            ga.cols,
            c,
            gc.col_stride,
            gc.row_stride,
            accumulate,
            a,
            ga.col_stride,
            ga.row_stride,
            b,
            gb.col_stride,
            gb.row_stride,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use proptest::prelude::*;

    /// How an operand is laid out in its slice.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Lay {
        /// Dense row-major.
        RowMajor,
        /// Dense column-major: the transpose of a row-major matrix, seen through swapped strides.
        Transposed,
        /// One stored row broadcast over all rows (`row_stride == 0`).
        BroadcastRow,
        /// One stored column broadcast over all columns (`col_stride == 0`).
        BroadcastCol,
        /// Row-major with padded rows and a leading offset (a slice of a bigger matrix).
        Padded,
        /// Overlapping elements: `a[i][j] = data[i + 2j]` (inputs only).
        Overlapping,
    }

    const LAYS: [Lay; 6] = [
        Lay::RowMajor,
        Lay::Transposed,
        Lay::BroadcastRow,
        Lay::BroadcastCol,
        Lay::Padded,
        Lay::Overlapping,
    ];
    /// Layouts a written matrix may have (no aliasing).
    const OUT_LAYS: [Lay; 3] = [Lay::RowMajor, Lay::Transposed, Lay::Padded];

    /// `(offset, row_stride, col_stride, len)` for a `rows x cols` matrix laid out as `lay`,
    /// with `len` exactly one past the last addressed element (no slack to hide a stray read).
    fn geometry(lay: Lay, rows: usize, cols: usize) -> (usize, usize, usize, usize) {
        let (offset, rs, cs) = match lay {
            Lay::RowMajor => (0, cols, 1),
            Lay::Transposed => (0, 1, rows),
            Lay::BroadcastRow => (0, 0, 1),
            Lay::BroadcastCol => (0, 1, 0),
            Lay::Padded => (3, cols + 2, 1),
            Lay::Overlapping => (1, 1, 2),
        };
        let len = if rows == 0 || cols == 0 {
            offset
        } else {
            offset + (rows - 1) * rs + (cols - 1) * cs + 1
        };
        (offset, rs, cs, len)
    }

    /// A small deterministic generator (xorshift), values in [-1, 1).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn value(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
        fn values(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.value()).collect()
        }
    }

    fn mat(data: &[f32], lay: Lay, rows: usize, cols: usize) -> MatRef<'_> {
        let (offset, row_stride, col_stride, _) = geometry(lay, rows, cols);
        MatRef {
            data,
            offset,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    /// The checked geometry of a `rows x cols` operand laid out as `lay`.
    fn geo(name: &str, lay: Lay, rows: usize, cols: usize) -> Geometry {
        let (offset, rs, cs, len) = geometry(lay, rows, cols);
        Geometry::checked(name, len, offset, (rows, cols), (rs, cs)).unwrap()
    }

    /// Runs one case and compares against a naive triple loop with f64 accumulation; also checks
    /// that slots of C's slice outside the view are untouched.
    fn check(
        (m, k, n): (usize, usize, usize),
        (la, lb, lc): (Lay, Lay, Lay),
        accumulate: bool,
        threads: usize,
        seed: u64,
    ) {
        let mut rng = Rng(seed | 1);
        let (.., a_len) = geometry(la, m, k);
        let (.., b_len) = geometry(lb, k, n);
        let (c_off, c_rs, c_cs, c_len) = geometry(lc, m, n);
        let a_data = rng.values(a_len);
        let b_data = rng.values(b_len);
        let mut c_data = rng.values(c_len);
        if !accumulate {
            // Overwriting must not read C: NaNs there must not leak into the result.
            for (i, x) in c_data.iter_mut().enumerate() {
                if i.is_multiple_of(3) {
                    *x = f32::NAN;
                }
            }
        }
        let before = c_data.clone();
        let a = mat(&a_data, la, m, k);
        let b = mat(&b_data, lb, k, n);
        let c = MatMut {
            data: &mut c_data,
            offset: c_off,
            rows: m,
            cols: n,
            row_stride: c_rs,
            col_stride: c_cs,
        };
        gemm_f32(a, b, c, accumulate, threads).unwrap();
        let mut in_view = vec![false; c_len];
        for i in 0..m {
            for j in 0..n {
                let mut sum = 0f64;
                let mut mag = 0f64;
                for p in 0..k {
                    let x = f64::from(a_data[a.offset + i * a.row_stride + p * a.col_stride])
                        * f64::from(b_data[b.offset + p * b.row_stride + j * b.col_stride]);
                    sum += x;
                    mag += x.abs();
                }
                let slot = c_off + i * c_rs + j * c_cs;
                in_view[slot] = true;
                if accumulate {
                    sum += f64::from(before[slot]);
                    mag += f64::from(before[slot]).abs();
                }
                let got = f64::from(c_data[slot]);
                assert!(
                    (got - sum).abs() <= 1e-5 * (mag + 1.0),
                    "C[{i},{j}] = {got}, want {sum}: m,k,n = {m},{k},{n}, layouts {la:?} \
                     {lb:?} {lc:?}, accumulate {accumulate}, threads {threads}"
                );
            }
        }
        for (slot, &inside) in in_view.iter().enumerate() {
            if !inside {
                assert!(
                    c_data[slot].to_bits() == before[slot].to_bits(),
                    "slot {slot} outside the view was written: m,k,n = {m},{k},{n}, {lc:?}"
                );
            }
        }
    }

    #[test]
    fn matches_naive_over_shapes_layouts_and_threads() {
        let shapes = [
            (0, 0, 0),
            (0, 3, 2),
            (2, 0, 3),
            (3, 2, 0),
            (1, 1, 1),
            (1, 7, 1),
            (1, 5, 9),
            (9, 5, 1),
            (2, 3, 4),
            (7, 13, 5),
            (17, 1, 33),
            (33, 31, 17),
            (65, 9, 63),
        ];
        let mut seed = 7;
        for &shape in &shapes {
            for la in LAYS {
                for lb in LAYS {
                    for lc in OUT_LAYS {
                        for accumulate in [false, true] {
                            for threads in [1, 2] {
                                seed += 1;
                                check(shape, (la, lb, lc), accumulate, threads, seed);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Thread counts whose bands would overshoot the extent if `threads` bands were cut: 35
    /// bands of 33 for 1121 rows (the last would start at 1122), 34 bands of 33 for 1089 (the
    /// last empty), and the same for columns.
    #[test]
    fn many_threads_cut_only_bands_inside_the_extent() {
        for (shape, threads) in [
            ((1121, 2, 1), 35),
            ((1089, 3, 2), 34),
            ((1, 2, 1121), 35),
            ((2, 1, 3905), 64),
        ] {
            check(
                shape,
                (Lay::RowMajor, Lay::RowMajor, Lay::RowMajor),
                false,
                threads,
                5,
            );
            check(
                shape,
                (Lay::Transposed, Lay::RowMajor, Lay::Padded),
                true,
                threads,
                6,
            );
        }
    }

    /// Big enough for the kernel to split the work over threads and to block over k.
    #[test]
    fn larger_products_transposed_and_threaded() {
        for (la, lb) in [
            (Lay::RowMajor, Lay::RowMajor),
            (Lay::Transposed, Lay::RowMajor),
            (Lay::RowMajor, Lay::Transposed),
            (Lay::Transposed, Lay::Transposed),
            (Lay::BroadcastRow, Lay::Padded),
        ] {
            for threads in [1, 2] {
                check((131, 300, 97), (la, lb, Lay::RowMajor), false, threads, 11);
                check((96, 257, 160), (la, lb, Lay::Transposed), true, threads, 12);
            }
        }
    }

    #[test]
    fn mlp_shapes() {
        // Forward X·W, then dW = Xᵀ·dH and dX = dH·Wᵀ through swapped strides.
        check(
            (128, 784, 256),
            (Lay::RowMajor, Lay::RowMajor, Lay::RowMajor),
            false,
            2,
            3,
        );
        check(
            (784, 128, 256),
            (Lay::Transposed, Lay::RowMajor, Lay::RowMajor),
            true,
            1,
            4,
        );
        check(
            (128, 256, 784),
            (Lay::RowMajor, Lay::Transposed, Lay::RowMajor),
            false,
            2,
            5,
        );
    }

    #[test]
    fn transpose_and_constructors() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // 2x3; its transpose is 3x2 [[1, 1], [0, 1], [0, 1]]
        let mut c = [0.0; 4];
        gemm_f32(
            MatRef::row_major(&a, 2, 3),
            MatRef::row_major(&b, 2, 3).t(),
            MatMut::row_major(&mut c, 2, 2),
            false,
            1,
        )
        .unwrap();
        assert_eq!(c, [1.0, 1.0 + 2.0 + 3.0, 4.0, 4.0 + 5.0 + 6.0]);
        // Zero extents with empty slices.
        gemm_f32(
            MatRef::row_major(&[], 0, 3),
            MatRef::row_major(&b, 3, 2),
            MatMut::row_major(&mut [], 0, 2),
            false,
            2,
        )
        .unwrap();
        // k == 0: the product is zero.
        let mut c = [5.0; 4];
        gemm_f32(
            MatRef::row_major(&[], 2, 0),
            MatRef::row_major(&[], 0, 2),
            MatMut::row_major(&mut c, 2, 2),
            true,
            1,
        )
        .unwrap();
        assert_eq!(c, [5.0; 4]);
        gemm_f32(
            MatRef::row_major(&[], 2, 0),
            MatRef::row_major(&[], 0, 2),
            MatMut::row_major(&mut c, 2, 2),
            false,
            1,
        )
        .unwrap();
        assert_eq!(c, [0.0; 4]);
    }

    fn err_kind(r: Result<()>) -> ErrorKind {
        r.expect_err("expected an error").kind()
    }

    #[test]
    fn bad_shapes_bounds_and_aliasing_are_errors() {
        let a = [1.0f32; 6];
        let b = [1.0f32; 6];
        let mut c = [0.0f32; 4];
        let run = |a: MatRef<'_>, b: MatRef<'_>, c: MatMut<'_>| gemm_f32(a, b, c, false, 2);
        // Inner dimension mismatch, and C of the wrong shape.
        assert_eq!(
            err_kind(run(
                MatRef::row_major(&a, 2, 3),
                MatRef::row_major(&b, 2, 3),
                MatMut::row_major(&mut c, 2, 2)
            )),
            ErrorKind::Value
        );
        assert_eq!(
            err_kind(run(
                MatRef::row_major(&a, 2, 3),
                MatRef::row_major(&b, 3, 2),
                MatMut::row_major(&mut c, 1, 2)
            )),
            ErrorKind::Value
        );
        // A one element too short, offset past the end, a stride that overflows usize.
        let ok_b = MatRef::row_major(&b, 3, 2);
        assert_eq!(
            err_kind(run(
                MatRef::row_major(&a[..5], 2, 3),
                ok_b,
                MatMut::row_major(&mut c, 2, 2)
            )),
            ErrorKind::Value
        );
        assert_eq!(
            err_kind(run(
                MatRef {
                    offset: 1,
                    ..MatRef::row_major(&a, 2, 3)
                },
                ok_b,
                MatMut::row_major(&mut c, 2, 2)
            )),
            ErrorKind::Value
        );
        assert_eq!(
            err_kind(run(
                MatRef {
                    row_stride: usize::MAX,
                    ..MatRef::row_major(&a, 2, 3)
                },
                ok_b,
                MatMut::row_major(&mut c, 2, 2)
            )),
            ErrorKind::Value
        );
        assert_eq!(
            err_kind(run(
                MatRef {
                    offset: usize::MAX,
                    ..MatRef::row_major(&a, 2, 3)
                },
                ok_b,
                MatMut::row_major(&mut c, 2, 2)
            )),
            ErrorKind::Value
        );
        assert_eq!(
            err_kind(run(
                MatRef::row_major(&a, 2, 3),
                MatRef {
                    col_stride: 3,
                    ..ok_b
                },
                MatMut::row_major(&mut c, 2, 2)
            )),
            ErrorKind::Value
        );
        // C past its slice, and C with aliasing strides (stride 0, overlapping rows).
        assert_eq!(
            err_kind(run(
                MatRef::row_major(&a, 2, 3),
                ok_b,
                MatMut {
                    offset: 1,
                    ..MatMut::row_major(&mut c, 2, 2)
                }
            )),
            ErrorKind::Value
        );
        for (row_stride, col_stride) in [(0, 1), (1, 0), (1, 1), (2, 1), (1, 2)] {
            let mut c = [0.0f32; 8];
            let c = MatMut {
                row_stride,
                col_stride,
                ..MatMut::row_major(&mut c, 2, 3)
            };
            assert_eq!(
                err_kind(run(
                    MatRef::row_major(&a, 2, 3),
                    MatRef::row_major(&b, 3, 3),
                    c
                )),
                ErrorKind::Value,
                "C strides ({row_stride}, {col_stride})"
            );
        }
        // Unused strides of unit dimensions are ignored, however large.
        let mut c1 = [0.0f32; 2];
        run(
            MatRef {
                row_stride: usize::MAX,
                ..MatRef::row_major(&a, 1, 3)
            },
            ok_b,
            MatMut {
                row_stride: usize::MAX,
                ..MatMut::row_major(&mut c1, 1, 2)
            },
        )
        .unwrap();
        assert_eq!(c1, [3.0, 3.0]);
    }

    /// `route` of a product of `shape` with A and C row-major and B laid out as `lb`.
    fn of_shape(
        (m, k, n): (usize, usize, usize),
        lb: Lay,
        route: impl Fn(Geometry, Geometry, Geometry) -> bool,
    ) -> bool {
        let c = geo("C", Lay::RowMajor, m, n);
        route(geo("A", Lay::RowMajor, m, k), geo("B", lb, k, n), c)
    }

    /// For each shape, with B a transposed row-major matrix and C row-major or padded: `route`
    /// holds of the geometries, and the products with A laid out as each of `las`, on one to
    /// three threads, overwriting and accumulating, match the naive product.
    fn check_route(
        shapes: &[(usize, usize, usize)],
        las: &[Lay],
        seed: u64,
        route: impl Fn(Geometry, Geometry, Geometry) -> bool,
    ) {
        for &(m, k, n) in shapes {
            for lc in [Lay::RowMajor, Lay::Padded] {
                let (ga, gb, gc) = (
                    geo("A", Lay::RowMajor, m, k),
                    geo("B", Lay::Transposed, k, n),
                    geo("C", lc, m, n),
                );
                assert!(route(ga, gb, gc), "{m}x{k}x{n} {lc:?}");
                for &la in las {
                    for threads in [1, 2, 3] {
                        for accumulate in [false, true] {
                            let lays = (la, Lay::Transposed, lc);
                            check((m, k, n), lays, accumulate, threads, seed);
                        }
                    }
                }
            }
        }
    }

    /// Products that go through a column-major scratch (C row-major or padded, B a transposed
    /// row-major matrix with at least twice A's rows in columns), with edges that are not whole
    /// eight-by-eight blocks, split over up to three threads, the scratch a reused buffer of
    /// stale values: they match the naive product and leave C's padding alone. The same
    /// products accumulating take the direct route.
    #[test]
    fn products_through_a_column_major_scratch() {
        let shapes = [
            (64, 64, 128),
            (67, 70, 201),
            (129, 100, 300),
            (64, 784, 256),
        ];
        let las = [
            Lay::RowMajor,
            Lay::Transposed,
            Lay::Padded,
            Lay::BroadcastRow,
        ];
        // the scratch comes from the buffer pool as it was left: held buffers of NaNs, which
        // would reach C if the kernel read any element before writing it
        for &(m, _, n) in &shapes {
            for _ in 0..las.len() {
                crate::storage::pool::recycle(vec![f32::NAN; m * n]);
            }
        }
        check_route(&shapes, &las, 13, |a, b, c| {
            through_column_major(a, b, c, false) && !through_column_major(a, b, c, true)
        });
        // the route's limits: not twice as wide, too few rows, too shallow, B row-major
        for (shape, lb) in [
            ((64, 100, 127), Lay::Transposed),
            ((63, 100, 200), Lay::Transposed),
            ((64, 63, 200), Lay::Transposed),
            ((64, 100, 200), Lay::RowMajor),
        ] {
            assert!(!of_shape(shape, lb, |a, b, c| through_column_major(
                a, b, c, false
            )));
        }
    }

    /// Products whose B is copied row-major first (a transposed row-major matrix with a row
    /// stride of a multiple of 512 floats, C row-major or padded), split over up to three
    /// threads, overwriting and accumulating: they match the naive product.
    #[test]
    fn products_with_b_copied_row_major() {
        let shapes = [(96, 512, 64), (70, 1024, 131), (16, 512, 16)];
        let las = [Lay::RowMajor, Lay::Transposed, Lay::BroadcastRow];
        check_route(&shapes, &las, 17, |a, b, c| {
            !through_column_major(a, b, c, false) && gathers_along_a_critical_stride(a, b, c)
        });
        // a stride of 768 floats (1 KiB multiple) and a row-major B keep the direct route
        for (shape, lb) in [
            ((64, 768, 64), Lay::Transposed),
            ((64, 512, 64), Lay::RowMajor),
        ] {
            assert!(!of_shape(shape, lb, gathers_along_a_critical_stride));
        }
    }

    fn lay() -> impl Strategy<Value = Lay> {
        proptest::sample::select(LAYS.to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn prop_matches_naive(
            m in 0usize..24,
            k in 0usize..40,
            n in 0usize..24,
            la in lay(),
            lb in lay(),
            lc in proptest::sample::select(OUT_LAYS.to_vec()),
            accumulate in any::<bool>(),
            threads in 1usize..3,
            seed in any::<u64>(),
        ) {
            check((m, k, n), (la, lb, lc), accumulate, threads, seed);
        }
    }
}

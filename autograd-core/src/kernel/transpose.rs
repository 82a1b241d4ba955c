//! Transposing a block of `f32`: eight by eight in registers where the CPU has AVX2, element by
//! element elsewhere (and at the edges). The GEMM door uses it to hand the `gemm` crate the
//! layout it packs cheaply; kernels such as attention's use it to pack transposed operands.

use crate::error::{ensure, Result};

/// `dst[p * ld_dst + j] = src[j * ld_src + p]` for `j < rows`, `p < cols`: the `rows x cols`
/// block at the start of `src` (row stride `ld_src`) written transposed into `dst` (row stride
/// `ld_dst`), eight by eight in registers where the CPU has AVX2. Elements of `dst` outside the
/// block are left as they are.
///
/// Errors ([`crate::Error::Value`]): a block that reaches past either slice, or an `ld_dst`
/// under `rows` (rows of the result would overlap).
pub fn transpose_f32(
    src: &[f32],
    ld_src: usize,
    (rows, cols): (usize, usize),
    dst: &mut [f32],
    ld_dst: usize,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // the last element each side addresses, without overflow
    let last = |ld: usize, outer: usize, inner: usize| {
        (outer - 1)
            .checked_mul(ld)
            .and_then(|o| o.checked_add(inner - 1))
    };
    ensure!(
        last(ld_src, rows, cols).is_some_and(|i| i < src.len()),
        Value,
        "transpose: a {rows}x{cols} block with row stride {ld_src} reaches past a source of {}",
        src.len()
    );
    ensure!(
        (cols == 1 || ld_dst >= rows) && last(ld_dst, cols, rows).is_some_and(|i| i < dst.len()),
        Value,
        "transpose: a {cols}x{rows} result with row stride {ld_dst} overlaps itself or reaches \
         past a destination of {}",
        dst.len()
    );
    // SAFETY: every element addressed is inside its slice (checked above), the written ones
    // are distinct (`ld_dst >= rows`), and `dst` is the only borrow of its slice.
    unsafe { transpose_raw(src.as_ptr(), ld_src, (rows, cols), dst.as_mut_ptr(), ld_dst) };
    Ok(())
}

/// [`transpose_f32`] on raw pointers.
///
/// # Safety
/// Every `src[j * ld_src + p]` and `dst[p * ld_dst + j]` addressed must lie inside its
/// allocation, the written elements must be distinct slots (`ld_dst >= rows` when `cols > 1`)
/// that nothing else accesses during the call, and the two blocks must not overlap.
pub(crate) unsafe fn transpose_raw(
    src: *const f32,
    ld_src: usize,
    (rows, cols): (usize, usize),
    dst: *mut f32,
    ld_dst: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if super::isa::wide() {
        // SAFETY: the CPU has AVX2 (checked above); the caller's contract is passed on.
        unsafe { blocks_avx2(src, ld_src, (rows, cols), dst, ld_dst) };
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { elements(src, ld_src, (0..rows, 0..cols), dst, ld_dst) };
}

/// The element-by-element transpose of rows `rows` and columns `cols` of the block.
///
/// # Safety
/// As [`transpose_raw`], for the elements in the given ranges.
unsafe fn elements(
    src: *const f32,
    ld_src: usize,
    (rows, cols): (std::ops::Range<usize>, std::ops::Range<usize>),
    dst: *mut f32,
    ld_dst: usize,
) {
    for j in rows {
        for p in cols.clone() {
            // SAFETY: in bounds and disjoint by the caller's contract.
            unsafe { *dst.add(p * ld_dst + j) = *src.add(j * ld_src + p) };
        }
    }
}

/// Columns of `src` a pass walks down all rows with: the eight-by-eight blocks of one pass
/// write `BAND` rows of `dst` at once, a few cache lines each.
#[cfg(target_arch = "x86_64")]
const BAND: usize = 32;

/// [`transpose_raw`] in eight-by-eight blocks, the edges element by element.
///
/// # Safety
/// As [`transpose_raw`]; the CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn blocks_avx2(
    src: *const f32,
    ld_src: usize,
    (rows, cols): (usize, usize),
    dst: *mut f32,
    ld_dst: usize,
) {
    let (rows8, cols8) = (rows / 8 * 8, cols / 8 * 8);
    for band in (0..cols8).step_by(BAND) {
        let end = (band + BAND).min(cols8);
        for j in (0..rows8).step_by(8) {
            for p in (band..end).step_by(8) {
                // SAFETY: `j + 8 <= rows` and `p + 8 <= cols`, so the block is inside both
                // matrices (the caller's contract); AVX2 is enabled on this function.
                unsafe {
                    block8(
                        src.add(j * ld_src + p),
                        ld_src,
                        dst.add(p * ld_dst + j),
                        ld_dst,
                    );
                }
            }
        }
    }
    // SAFETY: the caller's contract, for the columns and rows past the whole blocks.
    unsafe {
        elements(src, ld_src, (0..rows, cols8..cols), dst, ld_dst);
        elements(src, ld_src, (rows8..rows, 0..cols8), dst, ld_dst);
    }
}

/// One eight-by-eight block: eight rows loaded, interleaved in three rounds of shuffles, and
/// stored as eight columns.
///
/// # Safety
/// `src + r * ld_src + 0..8` and `dst + r * ld_dst + 0..8` for `r < 8` must be in bounds; the
/// CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::many_single_char_names)]
unsafe fn block8(src: *const f32, ld_src: usize, dst: *mut f32, ld_dst: usize) {
    use std::arch::x86_64::{
        _mm256_loadu_ps, _mm256_permute2f128_ps, _mm256_shuffle_ps, _mm256_storeu_ps,
        _mm256_unpackhi_ps, _mm256_unpacklo_ps,
    };
    // SAFETY: the eight rows of eight read and the eight written are in bounds (the contract).
    unsafe {
        let r = |i: usize| _mm256_loadu_ps(src.add(i * ld_src));
        let (r0, r1, r2, r3, r4, r5, r6, r7) = (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
        // pairs of rows interleaved: t0 = a0 b0 a1 b1 | a4 b4 a5 b5, ...
        let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
        let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
        // quads: u0 = a0 b0 c0 d0 | a4 b4 c4 d4, ...
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        // halves joined: column c of the block is row c of the result
        let w = |i: usize, v| _mm256_storeu_ps(dst.add(i * ld_dst), v);
        w(0, _mm256_permute2f128_ps::<0x20>(u0, u4));
        w(1, _mm256_permute2f128_ps::<0x20>(u1, u5));
        w(2, _mm256_permute2f128_ps::<0x20>(u2, u6));
        w(3, _mm256_permute2f128_ps::<0x20>(u3, u7));
        w(4, _mm256_permute2f128_ps::<0x31>(u0, u4));
        w(5, _mm256_permute2f128_ps::<0x31>(u1, u5));
        w(6, _mm256_permute2f128_ps::<0x31>(u2, u6));
        w(7, _mm256_permute2f128_ps::<0x31>(u3, u7));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_past_a_slice_or_overlapping_rows_are_errors() {
        let src = vec![1.0f32; 20];
        let mut dst = vec![0.0f32; 20];
        // 4 rows of 5 fit exactly; one more column reaches past the source
        assert!(transpose_f32(&src, 5, (4, 5), &mut dst, 4).is_ok());
        assert_eq!(dst, vec![1.0; 20]);
        let mut dst = vec![0.0f32; 20];
        assert!(transpose_f32(&src, 5, (4, 6), &mut dst, 4).is_err());
        // rows of the result 3 apart for 4 elements each would overlap
        assert!(transpose_f32(&src, 5, (4, 5), &mut dst, 3).is_err());
        // a destination one element short
        assert!(transpose_f32(&src, 5, (4, 5), &mut dst[..19], 4).is_err());
        assert!(transpose_f32(&src, usize::MAX, (2, 1), &mut dst, 2).is_err());
        assert_eq!(dst, vec![0.0; 20], "a refused transpose writes nothing");
        assert!(transpose_f32(&[], 0, (0, 3), &mut [], 0).is_ok());
    }

    /// Every size around the block edges, strides with slack on both sides: each element lands
    /// where the definition says, and slots between rows stay untouched.
    #[test]
    fn transposes_every_edge_case() {
        for rows in [0usize, 1, 7, 8, 9, 16, 31, 33, 40] {
            for cols in [0usize, 1, 5, 8, 15, 32, 33, 70] {
                let (ld_src, ld_dst) = (cols + 3, rows + 5);
                let src: Vec<f32> = (0..rows * ld_src).map(|i| i as f32).collect();
                let mut dst = vec![-1.0f32; cols * ld_dst];
                // SAFETY: both buffers hold every addressed element; they are distinct.
                unsafe {
                    transpose_raw(src.as_ptr(), ld_src, (rows, cols), dst.as_mut_ptr(), ld_dst);
                }
                for p in 0..cols {
                    for j in 0..ld_dst {
                        let want = if j < rows { src[j * ld_src + p] } else { -1.0 };
                        assert_eq!(dst[p * ld_dst + j], want, "{rows}x{cols} at ({p}, {j})");
                    }
                }
            }
        }
    }
}

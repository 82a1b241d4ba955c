//! The arithmetic of one head, tile by tile: score tiles `A · Bᵀ` of `BLOCK x BLOCK`, products
//! accumulated into `BLOCK x D` row panels, a vectorisable `exp`, and row reductions.
//!
//! Every function here is `#[inline(always)]` and generic over [`Madd`], so that the per-head
//! kernels instantiated inside a `#[target_feature]` wrapper (`simd!`) are compiled, loops and
//! all, with that wrapper's vector instructions; accumulators are fixed-size arrays the compiler
//! keeps in registers. Operands are padded to whole blocks by the caller, so no tile has a ragged
//! edge.
// The whole point of these helpers is to be inlined into the ISA-specific wrappers.
#![allow(clippy::inline_always)]

use autograd_core::kernel::Madd;

/// Rows (queries) and columns (keys) of one tile. The causal mask follows block boundaries:
/// a query block sees the key blocks up to and including its own.
pub(super) const BLOCK: usize = 32;

/// Columns of `D` one register tile covers.
const DC: usize = 32;

/// Half a tile's columns: a score micro-tile is 2 rows by `HALF` columns.
const HALF: usize = BLOCK / 2;

/// `s[r][c] = Σ_x a[r·d + x] · bt[x·ldb + c]` for `r, c < BLOCK`: the scores of a block of
/// rows of `a` (`BLOCK x d`, row-major) against `BLOCK` columns of a transposed operand `bt`
/// (`d` rows of stride `ldb`, starting at the block's first column). On a `diagonal` tile only
/// entries with `c <= r` are needed: register tiles wholly above the diagonal are left zero.
#[inline(always)]
pub(super) fn scores<M: Madd>(
    a: &[f32],
    bt: &[f32],
    ldb: usize,
    d: usize,
    diagonal: bool,
    s: &mut [f32; BLOCK * BLOCK],
) {
    // register tiles of four rows by HALF columns (eight accumulator vectors with AVX2), or by
    // the whole BLOCK where registers have 16 lanes (eight with AVX-512)
    for r in (0..BLOCK).step_by(ROWS) {
        let Some(a) = a.get(r * d..(r + ROWS) * d) else {
            return;
        };
        // the register tile's rows, each exactly `d` long, so that the loop over `x < d`
        // reads them without a bounds check (one against a spilled length per FMA made the
        // loop wait on loads rather than on its multiply-adds)
        let rows: [&[f32]; ROWS] = std::array::from_fn(|k| &a[k * d..][..d]);
        // on a diagonal tile, rows below HALF see none of the columns from HALF on
        let right_hidden = diagonal && r + ROWS <= HALF;
        if M::LANES >= HALF && !right_hidden {
            let Some([left, right]) = score_tile_pair::<M>(&rows, bt, ldb, d) else {
                return;
            };
            for (k, (left, right)) in left.iter().zip(&right).enumerate() {
                let at = (r + k) * BLOCK;
                s[at..at + HALF].copy_from_slice(left);
                s[at + HALF..at + BLOCK].copy_from_slice(right);
            }
            continue;
        }
        for half in 0..2 {
            let at = r * BLOCK + half * HALF;
            if right_hidden && half == 1 {
                for k in 0..ROWS {
                    s[at + k * BLOCK..at + k * BLOCK + HALF].fill(0.0);
                }
                continue;
            }
            let Some(acc) = score_tile::<M>(&rows, bt, (ldb, half * HALF), d) else {
                return;
            };
            for (k, acc) in acc.iter().enumerate() {
                s[at + k * BLOCK..at + k * BLOCK + HALF].copy_from_slice(acc);
            }
        }
    }
}

/// Both halves of a register tile row of [`scores`] at once, in two accumulator arrays (one
/// array of the whole width, or loops over iterators, left them in memory, not in registers).
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn score_tile_pair<M: Madd>(
    rows: &[&[f32]; ROWS],
    bt: &[f32],
    ldb: usize,
    d: usize,
) -> Option<[[[f32; HALF]; ROWS]; 2]> {
    let rows: [&[f32]; ROWS] = std::array::from_fn(|k| &rows[k][..d]);
    let (mut left, mut right) = ([[0.0f32; HALF]; ROWS], [[0.0f32; HALF]; ROWS]);
    for x in 0..d {
        let b = bt.get(x * ldb..)?.first_chunk::<BLOCK>()?;
        let p: [f32; ROWS] = std::array::from_fn(|k| rows[k][x]);
        for k in 0..ROWS {
            for c in 0..HALF {
                left[k][c] = M::madd(p[k], b[c], left[k][c]);
            }
        }
        for k in 0..ROWS {
            for c in 0..HALF {
                right[k][c] = M::madd(p[k], b[HALF + c], right[k][c]);
            }
        }
    }
    Some([left, right])
}

/// One half-width register tile of [`scores`]: `rows` against the `HALF` columns of `bt` from
/// `col` on (`bt`'s rows `ldb` apart); `None` when `bt` is too short.
#[inline(always)]
fn score_tile<M: Madd>(
    rows: &[&[f32]; ROWS],
    bt: &[f32],
    (ldb, col): (usize, usize),
    d: usize,
) -> Option<[[f32; HALF]; ROWS]> {
    let mut acc = [[0.0f32; HALF]; ROWS];
    for x in 0..d {
        let b = bt.get(x * ldb + col..)?.first_chunk::<HALF>()?;
        for (acc, row) in acc.iter_mut().zip(rows) {
            let p = row[x];
            for c in 0..HALF {
                acc[c] = M::madd(p, b[c], acc[c]);
            }
        }
    }
    Some(acc)
}

/// Rows of one score register tile.
const ROWS: usize = 4;

/// A coefficient matrix read with strides: entry `(i, j)` is `data[i·row + j·col]`, so a tile
/// and its transpose are the same data.
#[derive(Debug, Clone, Copy)]
pub(super) struct Coef<'a> {
    pub data: &'a [f32],
    pub row: usize,
    pub col: usize,
}

/// Which coefficients of a product may be nonzero (causal tiles are triangular).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tri {
    /// All of them.
    Full,
    /// `coef(i, j)` with `j <= i + offset` (a probability tile: key `j` visible to query `i`).
    Lower(usize),
    /// `coef(i, j)` with `j >= i` (a transposed diagonal probability tile).
    Upper,
}

/// `out[i·d + y] += Σ_{j < inner} coef(i, j) · b[j·d + y]` for `i < BLOCK`, `y < d`: a product
/// accumulated into a `BLOCK x d` row-major panel, `b` being `inner x d` row-major; terms that
/// `tri` says are zero are skipped.
#[inline(always)]
pub(super) fn accumulate<M: Madd>(
    out: &mut [f32],
    coef: Coef<'_>,
    b: &[f32],
    (inner, tri): (usize, Tri),
    d: usize,
) {
    let full = d / DC * DC;
    for i in (0..BLOCK).step_by(2) {
        let (c0, c1) = (i * coef.row, (i + 1) * coef.row);
        let (lo, hi) = match tri {
            Tri::Full => (0, inner),
            Tri::Lower(offset) => (0, (i + 2 + offset).min(inner)),
            Tri::Upper => (i.min(inner), inner),
        };
        for y0 in (0..full).step_by(DC) {
            let mut acc = [[0.0f32; DC]; 2];
            for j in lo..hi {
                let (Some(&p), Some(&q), Some(row)) = (
                    coef.data.get(c0 + j * coef.col),
                    coef.data.get(c1 + j * coef.col),
                    b.get(j * d + y0..).and_then(<[f32]>::first_chunk::<DC>),
                ) else {
                    return;
                };
                for y in 0..DC {
                    acc[0][y] = M::madd(p, row[y], acc[0][y]);
                    acc[1][y] = M::madd(q, row[y], acc[1][y]);
                }
            }
            for (k, a) in acc.iter().enumerate() {
                let at = (i + k) * d + y0;
                for (o, a) in out[at..at + DC].iter_mut().zip(a) {
                    *o += a;
                }
            }
        }
        if full < d {
            for k in 0..2 {
                let start = (i + k) * d;
                let Some(o) = out.get_mut(start + full..start + d) else {
                    return;
                };
                for j in lo..hi {
                    let (Some(&p), Some(row)) = (
                        coef.data.get(c0 + k * coef.row + j * coef.col),
                        b.get(j * d + full..(j + 1) * d),
                    ) else {
                        return;
                    };
                    for (o, &x) in o.iter_mut().zip(row) {
                        *o = M::madd(p, x, *o);
                    }
                }
            }
        }
    }
}

/// `e^x` to about 2 ulp for `x` in Float32's range (clamped to it; `-inf` gives a tiny positive
/// number, so callers zero masked entries themselves). Cephes' `expf`: `x = n ln 2 + r`,
/// `|r| <= ln 2 / 2`, a degree-6 polynomial for `e^r`, and `2^n` built from its exponent bits.
/// The same polynomial as the kernel layer's `exp_f32`, but with the kernels' fused
/// multiply-add where the copy has FMA: calling `exp_f32` instead made W8 measurably slower.
#[inline(always)]
pub(super) fn exp<M: Madd>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2^23: adding it rounds to an integer, held in the low mantissa bits
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let big = M::madd(x, LOG2E, ROUND);
    let n = big - ROUND;
    let bits = big.to_bits().wrapping_sub(ROUND.to_bits());
    let r = M::madd(n, -LN2_HI, x);
    let r = M::madd(n, -LN2_LO, r);
    let mut p = 1.987_569_2e-4f32;
    p = M::madd(p, r, 1.398_199_9e-3);
    p = M::madd(p, r, 8.333_452e-3);
    p = M::madd(p, r, 4.166_579_6e-2);
    p = M::madd(p, r, 0.166_666_65);
    p = M::madd(p, r, 0.5);
    let e = M::madd(p, r * r, r) + 1.0;
    e * f32::from_bits(bits.wrapping_add(127) << 23)
}

/// `x = e^(x - shift)` for every `x` of `xs`.
#[inline(always)]
pub(super) fn exp_shifted<M: Madd>(xs: &mut [f32], shift: f32) {
    for x in xs {
        *x = exp::<M>(*x - shift);
    }
}

/// [`exp_shifted`] where a mask may have removed entries: a `-inf` entry, and every entry
/// under an infinite shift (a row that sees no key), becomes exactly 0.
#[inline(always)]
pub(super) fn exp_shifted_masked<M: Madd>(xs: &mut [f32], shift: f32) {
    let all_removed = shift == f32::INFINITY;
    for x in xs {
        *x = if *x == f32::NEG_INFINITY || all_removed {
            0.0
        } else {
            exp::<M>(*x - shift)
        };
    }
}

/// A score tile row's softmax numerators in place: `row[c] = e^(row[c] - shift)` for the
/// `visible` keys `c < visible`, 0 for the rest; with `masked`, also 0 for a `-inf` entry and
/// for every entry under an infinite shift (as [`exp_shifted_masked`]). Returns their sum.
/// The whole row is computed and the hidden entries selected away, so the loops have a fixed
/// length and run as whole vectors, where a loop over the visible prefix (ragged on diagonal
/// tiles) ran its remainder one element at a time.
#[inline(always)]
pub(super) fn exp_row<M: Madd>(
    row: &mut [f32; BLOCK],
    visible: usize,
    shift: f32,
    masked: bool,
) -> f32 {
    let removed = masked && shift == f32::INFINITY;
    for (c, x) in row.iter_mut().enumerate() {
        let keep = c < visible && !removed && !(masked && *x == f32::NEG_INFINITY);
        let e = exp::<M>(*x - shift);
        *x = if keep { e } else { 0.0 };
    }
    let mut lanes = [0.0f32; HALF];
    for (c, lane) in lanes.iter_mut().enumerate() {
        *lane = row[c] + row[c + HALF];
    }
    fold_lanes(lanes, |a, b| a + b)
}

/// The largest of a score tile row's `visible` first entries (`-inf` for none), over the whole
/// row at once as [`exp_row`] works.
#[inline(always)]
pub(super) fn row_max(row: &[f32; BLOCK], visible: usize) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; HALF];
    for (c, lane) in lanes.iter_mut().enumerate() {
        let a = if c < visible {
            row[c]
        } else {
            f32::NEG_INFINITY
        };
        let b = if c + HALF < visible {
            row[c + HALF]
        } else {
            f32::NEG_INFINITY
        };
        *lane = a.max(b);
    }
    fold_lanes(lanes, f32::max)
}

/// `lanes` folded pairwise with `f`, halving the width each time.
#[inline(always)]
fn fold_lanes(mut lanes: [f32; HALF], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut width = HALF;
    while width > 1 {
        width /= 2;
        for c in 0..width {
            lanes[c] = f(lanes[c], lanes[c + width]);
        }
    }
    lanes[0]
}

/// The largest of `xs` (`-inf` for none), with eight running maxima so it vectorises.
#[inline(always)]
pub(super) fn max(xs: &[f32]) -> f32 {
    let mut m = [f32::NEG_INFINITY; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            m[l] = m[l].max(c[l]);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    m.iter().fold(tail, |a, &b| a.max(b))
}

/// `Σ xs`, with eight running sums so it vectorises.
#[inline(always)]
pub(super) fn sum(xs: &[f32]) -> f32 {
    let mut s = [0.0f32; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            s[l] += c[l];
        }
    }
    chunks.remainder().iter().sum::<f32>() + s.iter().sum::<f32>()
}

/// `Σ a[i] · b[i]`, with eight running sums so it vectorises.
#[inline(always)]
pub(super) fn dot<M: Madd>(a: &[f32], b: &[f32]) -> f32 {
    let mut s = [0.0f32; 8];
    let (mut ca, mut cb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..8 {
            s[l] = M::madd(x[l], y[l], s[l]);
        }
    }
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    tail + s.iter().sum::<f32>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use autograd_core::kernel::{Fused512, Split};

    #[test]
    fn exp_is_close_to_std_over_the_range_softmax_uses() {
        let mut worst = 0.0f64;
        for i in 0..=20_000 {
            let x = -87.0 + f64::from(i) * (87.0 + 10.0) / 20_000.0;
            let got = f64::from(exp::<Split>(x as f32));
            let want = (x as f32 as f64).exp();
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 1e-6, "relative error {worst}");
        assert_eq!(exp::<Split>(0.0), 1.0);
        assert!(exp::<Split>(f32::NEG_INFINITY) < 1e-37);
    }

    /// Every copy's tile shapes: half-width score tiles (baseline, AVX2) and whole-width ones
    /// (AVX-512), which must give the same sums.
    #[test]
    fn tiles_match_plain_loops() {
        tiles_match_plain_loops_with::<Split>();
        tiles_match_plain_loops_with::<Fused512>();
    }

    fn tiles_match_plain_loops_with<M: Madd>() {
        let d = 37; // one full register tile of D and a ragged rest
        let a: Vec<f32> = (0..BLOCK * d)
            .map(|i| ((i * 7) % 13) as f32 - 6.0)
            .collect();
        let ldb = BLOCK + 5;
        let bt: Vec<f32> = (0..d * ldb).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
        let mut s = [0.0f32; BLOCK * BLOCK];
        scores::<M>(&a, &bt, ldb, d, false, &mut s);
        for r in 0..BLOCK {
            for c in 0..BLOCK {
                let want: f32 = (0..d).map(|x| a[r * d + x] * bt[x * ldb + c]).sum();
                assert_eq!(s[r * BLOCK + c], want);
            }
        }
        // out += sᵀ · b, with s read transposed through its strides
        let inner = BLOCK;
        let b: Vec<f32> = (0..inner * d).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
        let mut out = vec![1.0f32; BLOCK * d];
        let coef = Coef {
            data: &s,
            row: 1,
            col: BLOCK,
        };
        accumulate::<M>(&mut out, coef, &b, (inner, Tri::Full), d);
        for i in 0..BLOCK {
            for y in 0..d {
                let want: f32 = 1.0
                    + (0..inner)
                        .map(|j| s[j * BLOCK + i] * b[j * d + y])
                        .sum::<f32>();
                assert_eq!(out[i * d + y], want, "({i}, {y})");
            }
        }
    }

    #[test]
    fn triangular_products_skip_only_zero_terms() {
        let d = 40;
        let inner = 2 * BLOCK;
        let b: Vec<f32> = (0..inner * d).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
        // coef(i, j) zero above j = i + BLOCK (Lower(BLOCK)) or below j = i (Upper)
        for (tri, keep) in [
            (
                Tri::Lower(BLOCK),
                (|i, j| j <= i + BLOCK) as fn(usize, usize) -> bool,
            ),
            (Tri::Upper, |i, j| j >= i),
        ] {
            let coef: Vec<f32> = (0..BLOCK * inner)
                .map(|p| {
                    let (i, j) = (p / inner, p % inner);
                    if keep(i, j) {
                        ((p * 5) % 9) as f32 - 4.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let c = Coef {
                data: &coef,
                row: inner,
                col: 1,
            };
            let (mut full, mut part) = (vec![0.0f32; BLOCK * d], vec![0.0f32; BLOCK * d]);
            accumulate::<Split>(&mut full, c, &b, (inner, Tri::Full), d);
            accumulate::<Split>(&mut part, c, &b, (inner, tri), d);
            assert_eq!(full, part, "{tri:?}");
        }
    }

    #[test]
    fn diagonal_scores_keep_every_entry_on_or_below_the_diagonal() {
        diagonal_scores_with::<Split>();
        diagonal_scores_with::<Fused512>();
    }

    fn diagonal_scores_with<M: Madd>() {
        let d = 5;
        let a: Vec<f32> = (0..BLOCK * d)
            .map(|i| ((i * 7) % 13) as f32 - 6.0)
            .collect();
        let bt: Vec<f32> = (0..d * BLOCK)
            .map(|i| ((i * 5) % 11) as f32 - 5.0)
            .collect();
        let (mut full, mut diag) = ([0.0f32; BLOCK * BLOCK], [0.0f32; BLOCK * BLOCK]);
        scores::<M>(&a, &bt, BLOCK, d, false, &mut full);
        scores::<M>(&a, &bt, BLOCK, d, true, &mut diag);
        for r in 0..BLOCK {
            assert_eq!(
                full[r * BLOCK..=r * BLOCK + r],
                diag[r * BLOCK..=r * BLOCK + r]
            );
        }
    }

    /// A whole-row softmax numerator equals the prefix one: the visible entries' exponentials
    /// (masked ones 0), zeros after them, and their sum; the row maximum sees the prefix only.
    #[test]
    fn whole_rows_agree_with_their_visible_prefix() {
        let base: [f32; BLOCK] = std::array::from_fn(|c| ((c * 7) % 11) as f32 * 0.37 - 2.0);
        for masked in [false, true] {
            for visible in [0, 1, 5, HALF, HALF + 3, BLOCK] {
                let mut row = base;
                if masked && visible > 2 {
                    row[1] = f32::NEG_INFINITY;
                }
                let want_max = row[..visible]
                    .iter()
                    .fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                assert_eq!(row_max(&row, visible), want_max, "visible {visible}");
                let shift = 0.25;
                let mut prefix = row;
                if masked {
                    exp_shifted_masked::<Split>(&mut prefix[..visible], shift);
                } else {
                    exp_shifted::<Split>(&mut prefix[..visible], shift);
                }
                prefix[visible..].fill(0.0);
                let sum = exp_row::<Split>(&mut row, visible, shift, masked);
                assert_eq!(row, prefix, "visible {visible}, masked {masked}");
                let want: f32 = prefix.iter().sum();
                assert!(
                    (sum - want).abs() <= 1e-6 * want.max(1.0),
                    "{sum} vs {want}"
                );
            }
        }
        // under an infinite shift (a row that sees no key) a masked row is all zeros
        let mut row = base;
        assert_eq!(exp_row::<Split>(&mut row, BLOCK, f32::INFINITY, true), 0.0);
        assert_eq!(row, [0.0; BLOCK]);
    }
}

//! Helpers shared by the elementwise op tests (`mod elementwise_support;` in `ops_unary.rs`,
//! `ops_binary.rs`, `ops_compare_cast.rs`, `ops_operators.rs`): deterministic values and leaves
//! with the layouts the issue asks every op to handle. Non-contiguous leaves are built with
//! `Tensor::from_parts`, never through view methods, so they are leaves whatever the views do.
//!
//! Cargo also builds this file as a test target of its own; it holds no tests.
#![allow(dead_code)]

use autograd_core::{CpuCarrier, Layout, Shape, Stride, Tensor};

/// `n` values in `[lo, hi)` from a fixed-seed xorshift generator.
pub fn uniform(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// `n` values with `|v|` in `[0.2, 1.2)` and random signs: away from the kinks at 0.
pub fn signed_away_from_zero(n: usize, seed: u64) -> Vec<f32> {
    uniform(n, seed, -1.0, 1.0)
        .into_iter()
        .map(|u| if u < 0.0 { u - 0.2 } else { u + 0.2 })
        .collect()
}

/// A Float32 leaf of flat `dims` over `storage` seen through `strides` at `offset`.
pub fn strided(storage: Vec<f32>, dims: &[usize], strides: &[usize], offset: usize) -> Tensor {
    let layout = Layout::new(Shape::from(dims), Stride::from(strides)).expect("valid layout");
    Tensor::from_parts(CpuCarrier::from_vec(storage), layout, offset).expect("fits its storage")
}

/// The layouts each op is checked on, all of logical shape `[r, c]` holding `values` (row-major
/// order of length r * c) except the broadcast one, whose rows all repeat `values[..c]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// compact row-major
    Dense,
    /// the transpose of a compact `[c, r]` matrix (strides `[1, r]`)
    Transposed,
    /// the middle of a wider matrix (strides `[c + 3, 1]`, offset 2)
    Sliced,
    /// one row repeated through a stride-0 mode (strides `[0, 1]`)
    Broadcast,
}

/// Every [`Kind`].
pub const KINDS: [Kind; 4] = [Kind::Dense, Kind::Transposed, Kind::Sliced, Kind::Broadcast];

/// A leaf of logical shape `[r, c]` and layout `kind` whose logical values (row-major) are
/// `values`, except for [`Kind::Broadcast`] (row 0 repeated).
pub fn leaf(values: &[f32], r: usize, c: usize, kind: Kind) -> Tensor {
    assert_eq!(values.len(), r * c);
    match kind {
        Kind::Dense => strided(values.to_vec(), &[r, c], &[c, 1], 0),
        Kind::Transposed => {
            let mut s = vec![0.0; r * c];
            for i in 0..r {
                for j in 0..c {
                    s[j * r + i] = values[i * c + j];
                }
            }
            strided(s, &[r, c], &[1, r], 0)
        }
        Kind::Sliced => {
            let w = c + 3;
            let mut s = vec![-7.0; 2 + r * w];
            for i in 0..r {
                for j in 0..c {
                    s[2 + i * w + j] = values[i * c + j];
                }
            }
            strided(s, &[r, c], &[w, 1], 2)
        }
        Kind::Broadcast => strided(values[..c].to_vec(), &[r, c], &[0, 1], 0),
    }
}

/// The logical values of a Float32 tensor.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().expect("Float32 tensor")
}

/// Asserts `got` and `want` agree within `tol` relative (or absolute near 0), NaN with NaN.
pub fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}[{i}]: got {g}, want NaN");
            continue;
        }
        if w.is_infinite() {
            assert_eq!(f64::from(g), w, "{what}[{i}]");
            continue;
        }
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

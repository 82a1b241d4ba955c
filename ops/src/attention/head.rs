//! One head at a time: the inputs read once as compact values, per-head buffers padded to whole
//! blocks (reused across the heads a thread handles), and the split of heads across threads.

use std::sync::Arc;

use autograd_core::{kernel, Layout, Result, Tensor};
use rayon::prelude::*;

use super::geometry::Dims;
use super::tile::BLOCK;

/// One head's `T x D` slices of q, k and v (row-major).
#[derive(Debug, Clone, Copy)]
pub(super) struct Head<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
}

/// The gradients of one head's q, k and v (`T x D` each, row-major), and which are wanted.
#[derive(Debug)]
pub(super) struct HeadGrads<'a> {
    pub dq: &'a mut [f32],
    pub dk: &'a mut [f32],
    pub dv: &'a mut [f32],
    pub want: Want,
}

/// Which of q, k and v need a gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Want {
    pub q: bool,
    pub k: bool,
    pub v: bool,
}

/// Per-thread buffers of one head, padded to `T_p = blocks · BLOCK` rows (padding rows are
/// zero, so padded queries and keys contribute nothing that is kept).
#[derive(Debug)]
pub(super) struct Scratch {
    /// `T_p x D`: the queries times the scale.
    pub q: Vec<f32>,
    /// `T_p x D`: the keys.
    pub k: Vec<f32>,
    /// `D x T_p`: the keys transposed (score tiles read key columns as rows).
    pub kt: Vec<f32>,
    /// `T_p x D`: the values.
    pub v: Vec<f32>,
    /// `D x T_p`: the values transposed.
    pub vt: Vec<f32>,
    /// `T_p x D`: the cotangent of the context.
    pub go: Vec<f32>,
    /// `T_p x D` accumulators: the context, or the gradients of q, k and v.
    pub acc_q: Vec<f32>,
    pub acc_k: Vec<f32>,
    pub acc_v: Vec<f32>,
    /// `T_p` row statistics (logsumexp, delta).
    pub lse: Vec<f32>,
    pub delta: Vec<f32>,
    /// `BLOCK x T_p` rows of probabilities and of their cotangents (materialised form).
    pub panel: Vec<f32>,
    pub dpanel: Vec<f32>,
    /// `BLOCK x BLOCK` tiles.
    pub s: Box<[f32; BLOCK * BLOCK]>,
    pub ds: Box<[f32; BLOCK * BLOCK]>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            q: Vec::new(),
            k: Vec::new(),
            kt: Vec::new(),
            v: Vec::new(),
            vt: Vec::new(),
            go: Vec::new(),
            acc_q: Vec::new(),
            acc_k: Vec::new(),
            acc_v: Vec::new(),
            lse: Vec::new(),
            delta: Vec::new(),
            panel: Vec::new(),
            dpanel: Vec::new(),
            s: Box::new([0.0; BLOCK * BLOCK]),
            ds: Box::new([0.0; BLOCK * BLOCK]),
        }
    }
}

/// `dst` (`T_p x D`) = `factor · src` (`T x D`) with zero padding rows.
pub(super) fn pack_rows(dst: &mut Vec<f32>, src: &[f32], g: &Dims, factor: f32) {
    let n = g.padded() * g.d;
    dst.clear();
    dst.extend(src.iter().map(|&x| factor * x));
    dst.resize(n, 0.0);
}

/// `dst` (`D x T_p`) = `srcᵀ` (`src` is `T x D`) with zero padding columns.
pub(super) fn pack_transposed(dst: &mut Vec<f32>, src: &[f32], g: &Dims) {
    let (tp, d) = (g.padded(), g.d);
    dst.clear();
    dst.resize(d * tp, 0.0);
    for (r, row) in src.chunks_exact(d).enumerate() {
        for (x, &value) in row.iter().enumerate() {
            dst[x * tp + r] = value;
        }
    }
}

/// `buf` as `len` zeros.
pub(super) fn zeroed(buf: &mut Vec<f32>, len: usize) {
    buf.clear();
    buf.resize(len, 0.0);
}

/// A tensor's elements in logical (row-major) order: one compact copy, read through the kernel
/// layer whatever the layout.
pub(super) fn compact(t: &Tensor) -> Result<Vec<f32>> {
    kernel::read::<f32, _>(t, |e| {
        e.as_slice().map_or_else(
            || {
                let mut out = vec![0.0; e.len()];
                e.copy_range(0, &mut out);
                out
            },
            <[f32]>::to_vec,
        )
    })
}

/// A compact row-major Float32 tensor of `dims` holding `values`, in `like`'s carrier class.
pub(super) fn tensor(like: &Tensor, values: Vec<f32>, dims: &[usize]) -> Result<Tensor> {
    like.f32_with_layout(values, Arc::new(Layout::row_major(dims)?))
}

/// Runs `f` on every item (one per head) with a scratch of its thread: across rayon's threads
/// (`kernel::threads()`, sized by `RAYON_NUM_THREADS`) when the work is large enough to pay for
/// the split, else in order on the calling thread.
pub(super) fn for_each_head<T: Send>(g: &Dims, items: Vec<T>, f: impl Fn(T, &mut Scratch) + Sync) {
    if items.len() > 1 && kernel::threads() > 1 && g.work() >= kernel::PARALLEL_THRESHOLD {
        items
            .into_par_iter()
            .with_max_len(1)
            .for_each_init(Scratch::default, |s, item| f(item, s));
    } else {
        let mut s = Scratch::default();
        for item in items {
            f(item, &mut s);
        }
    }
}

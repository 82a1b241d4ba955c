//! The shape of an attention call: validation of q, k and v, and the sizes every kernel uses.

use autograd_core::{bail, ensure, DType, Result, Tensor};

use super::tile::BLOCK;

/// `B x H` heads of `T_q` queries against `T_k` keys of `D` features, the score scale, and
/// whether a query sees only the keys up to its own position (PyTorch's `is_causal`: the
/// top-left triangle, query `i` seeing keys `0..=i`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Dims {
    pub batch: usize,
    pub heads_per_batch: usize,
    pub tq: usize,
    pub tk: usize,
    pub d: usize,
    pub scale: f32,
    pub causal: bool,
}

/// The query side or the key side of a head: which rows a per-head buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    /// `T_q` rows: q, the context and their gradients.
    Query,
    /// `T_k` rows: k, v and their gradients.
    Key,
}

impl Dims {
    /// Checks `q` (`[B, H, T_q, D]`), `k` and `v` (`[B, H, T_k, D]`) for `op` and resolves the
    /// scale (default `1 / sqrt(D)`): Float32 (else `Error::Type`), rank 4, one batch, head and
    /// feature extent and one key length, `D >= 1`, and a finite scale (else `Error::Value`).
    /// Nothing is read or written.
    pub fn of(op: &str, [q, k, v]: [&Tensor; 3], scale: Option<f32>, causal: bool) -> Result<Dims> {
        for (name, x) in [("q", q), ("k", k), ("v", v)] {
            ensure!(
                x.dtype() == &DType::Float32,
                Type,
                "{op}: {name} is {}; attention takes Float32",
                x.dtype()
            );
            ensure!(
                x.dims().len() == 4,
                Value,
                "{op}: {name} of shape {} needs four axes [B, H, T, D]",
                x.shape()
            );
        }
        let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
        ensure!(
            kd == vd,
            Value,
            "{op}: k and v need one shape [B, H, T_k, D], got {} and {}",
            k.shape(),
            v.shape()
        );
        if qd[..2] != kd[..2] || qd[3] != kd[3] {
            bail!(
                Value,
                "{op}: q [B, H, T_q, D] and k, v [B, H, T_k, D] need one B, H and D, got {}, {} and {}",
                q.shape(),
                k.shape(),
                v.shape()
            );
        }
        let d = qd[3];
        ensure!(
            d >= 1,
            Value,
            "{op}: the feature axis D of shape {} is empty",
            q.shape()
        );
        let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
        ensure!(
            scale.is_finite(),
            Value,
            "{op}: scale {scale} is not finite"
        );
        Ok(Dims {
            batch: qd[0],
            heads_per_batch: qd[1],
            tq: qd[2],
            tk: kd[2],
            d,
            scale,
            causal,
        })
    }

    /// The number of heads, `B · H`.
    pub fn heads(&self) -> usize {
        self.batch * self.heads_per_batch
    }

    /// Whether there is nothing to compute (some extent is zero).
    pub fn is_empty(&self) -> bool {
        self.heads() == 0 || self.tq == 0
    }

    /// The rows of `side`: `T_q` or `T_k`.
    pub fn rows(&self, side: Side) -> usize {
        match side {
            Side::Query => self.tq,
            Side::Key => self.tk,
        }
    }

    /// Blocks of `side` per head.
    pub fn blocks(&self, side: Side) -> usize {
        self.rows(side).div_ceil(BLOCK)
    }

    /// The rows of `side` rounded up to whole blocks: the row count of padded per-head buffers.
    pub fn padded(&self, side: Side) -> usize {
        self.blocks(side) * BLOCK
    }

    /// Elements of one head of `side` (`T · D`).
    pub fn head_len(&self, side: Side) -> usize {
        self.rows(side) * self.d
    }

    /// The key blocks query block `i` visits: up to its own under the causal mask (and no
    /// further than the last), else all.
    pub fn key_blocks(&self, i: usize) -> std::ops::Range<usize> {
        let all = self.blocks(Side::Key);
        if self.causal {
            0..(i + 1).min(all)
        } else {
            0..all
        }
    }

    /// The query blocks that visit key block `j` (the transpose of [`Dims::key_blocks`]).
    pub fn query_blocks(&self, j: usize) -> std::ops::Range<usize> {
        let all = self.blocks(Side::Query);
        if self.causal {
            j.min(all)..all
        } else {
            0..all
        }
    }

    /// Whether tile `(i, j)` straddles the causal diagonal (only its lower triangle is seen).
    pub fn diagonal(&self, i: usize, j: usize) -> bool {
        self.causal && i == j
    }

    /// The leading columns of row `r` of tile `(i, j)` that are real keys the query may see:
    /// the causal mask and the padding past `T_k` both cut a row's tail.
    pub fn visible(&self, i: usize, j: usize, r: usize) -> usize {
        let cap = BLOCK.min(self.tk - j * BLOCK);
        if self.causal {
            let row = i * BLOCK + r;
            if j * BLOCK > row {
                0
            } else {
                cap.min(row - j * BLOCK + 1)
            }
        } else {
            cap
        }
    }

    /// Multiply-adds of one pass over every head (`T_q · T_k · D` per head), for the choice to
    /// split heads across threads.
    pub fn work(&self) -> usize {
        self.heads()
            .saturating_mul(self.tq)
            .saturating_mul(self.tk)
            .saturating_mul(self.d)
    }

    /// `[B, H, T_q, D]`.
    pub fn context_dims(&self) -> [usize; 4] {
        [self.batch, self.heads_per_batch, self.tq, self.d]
    }

    /// `[B, H, T_k, D]`.
    pub fn key_dims(&self) -> [usize; 4] {
        [self.batch, self.heads_per_batch, self.tk, self.d]
    }

    /// `[B, H, T_q]`, the per-row statistics.
    pub fn row_dims(&self) -> [usize; 3] {
        [self.batch, self.heads_per_batch, self.tq]
    }

    /// `[B, H, T_q, T_k]`, the probabilities.
    pub fn probability_dims(&self) -> [usize; 4] {
        [self.batch, self.heads_per_batch, self.tq, self.tk]
    }
}

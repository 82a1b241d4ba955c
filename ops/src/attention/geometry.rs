//! The shape of an attention call: validation of q, k and v, and the sizes every kernel uses.

use autograd_core::{ensure, DType, Result, Tensor};

use super::tile::BLOCK;

/// `B x H` heads of `T` positions and `D` features, and the score scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Dims {
    pub batch: usize,
    pub heads_per_batch: usize,
    pub t: usize,
    pub d: usize,
    pub scale: f32,
}

impl Dims {
    /// Checks `q`, `k` and `v` for `op` and resolves the scale (default `1 / sqrt(D)`): Float32
    /// (else `Error::Type`), rank 4 and one shape `[B, H, T, D]` with `D >= 1`, and a finite
    /// scale (else `Error::Value`). Nothing is read or written.
    pub fn of(op: &str, q: &Tensor, k: &Tensor, v: &Tensor, scale: Option<f32>) -> Result<Dims> {
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
        let dims = q.dims();
        ensure!(
            k.dims() == dims && v.dims() == dims,
            Value,
            "{op}: q, k and v need one shape [B, H, T, D] (causal self-attention), got {}, {} and {}",
            q.shape(),
            k.shape(),
            v.shape()
        );
        let d = dims[3];
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
            batch: dims[0],
            heads_per_batch: dims[1],
            t: dims[2],
            d,
            scale,
        })
    }

    /// The number of heads, `B · H`.
    pub fn heads(&self) -> usize {
        self.batch * self.heads_per_batch
    }

    /// Whether there is nothing to compute (some extent is zero).
    pub fn is_empty(&self) -> bool {
        self.heads() == 0 || self.t == 0
    }

    /// Query and key blocks per head.
    pub fn blocks(&self) -> usize {
        self.t.div_ceil(BLOCK)
    }

    /// `T` rounded up to whole blocks: the row count of the padded per-head buffers.
    pub fn padded(&self) -> usize {
        self.blocks() * BLOCK
    }

    /// Elements of one head of q, k, v or the context: `T · D`.
    pub fn head_len(&self) -> usize {
        self.t * self.d
    }

    /// Multiply-adds of one pass over every head (`T² · D` per head), for the choice to split
    /// heads across threads.
    pub fn work(&self) -> usize {
        self.heads()
            .saturating_mul(self.t)
            .saturating_mul(self.t)
            .saturating_mul(self.d)
    }

    /// `[B, H, T, D]`.
    pub fn context_dims(&self) -> [usize; 4] {
        [self.batch, self.heads_per_batch, self.t, self.d]
    }

    /// `[B, H, T]`, the per-row statistics.
    pub fn row_dims(&self) -> [usize; 3] {
        [self.batch, self.heads_per_batch, self.t]
    }

    /// `[B, H, T, T]`, the probabilities.
    pub fn probability_dims(&self) -> [usize; 4] {
        [self.batch, self.heads_per_batch, self.t, self.t]
    }
}

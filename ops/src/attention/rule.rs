//! How scores become probabilities beyond the softmax: the mask normalised to an additive bias
//! the kernels read row by row, and the dropout mask regenerated from its seed.

use autograd_core::{bail, ensure, Captured, DType, Result, Tensor};

use super::geometry::Dims;
use super::options::{AttentionDropout, AttentionMask};
use super::tile::BLOCK;

/// Which convention a mask tensor follows (see [`AttentionMask`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MaskKind {
    Attend,
    KeyPadding,
}

/// What an attention node records besides its tensors: the op's name for messages, the scale,
/// causality, the mask's convention and the dropout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Spec {
    pub op: &'static str,
    pub scale: Option<f32>,
    pub causal: bool,
    pub kind: MaskKind,
    pub dropout: Option<AttentionDropout>,
}

impl Captured for Spec {}

impl Spec {
    /// The spec of `options` and the mask tensor it names.
    pub fn of<'a>(
        op: &'static str,
        options: &'a super::AttentionOptions,
    ) -> (Spec, Option<&'a Tensor>) {
        let (kind, mask) = match &options.mask {
            None => (MaskKind::Attend, None),
            Some(AttentionMask::Attend(m)) => (MaskKind::Attend, Some(m)),
            Some(AttentionMask::KeyPadding(m)) => (MaskKind::KeyPadding, Some(m)),
        };
        let dropout = options.dropout.filter(|d| d.p > 0.0);
        let spec = Spec {
            op,
            scale: options.scale,
            causal: options.causal,
            kind,
            dropout,
        };
        (spec, mask)
    }

    /// The dims of `q`, `k`, `v` under this spec, and the mask's bias (both validated).
    pub fn resolve(&self, qkv: [&Tensor; 3], mask: Option<&Tensor>) -> Result<(Dims, Rule)> {
        let g = Dims::of(self.op, qkv, self.scale, self.causal)?;
        let bias = mask
            .map(|m| Bias::of(self.op, m, self.kind, &g))
            .transpose()?;
        Ok((
            g,
            Rule {
                bias,
                dropout: self.dropout.map(|d| Dropout::new(d, &g)),
            },
        ))
    }
}

/// The per-call state the kernels read: the bias rows and the dropout.
#[derive(Debug)]
pub(super) struct Rule {
    pub bias: Option<Bias>,
    pub dropout: Option<Dropout>,
}

impl Rule {
    /// Whether a mask removes every entry of tile `(i, j)` of head `head`.
    pub fn skips(&self, head: usize, g: &Dims, tile: (usize, usize)) -> bool {
        self.bias
            .as_ref()
            .is_some_and(|b| b.removes_tile(head, g, tile))
    }
}

/// A mask as the bias added to the scaled scores, compact over `[B', H', T_q', T_k]` where
/// each primed extent is 1 (broadcast) or the full one: a key-padding mask holds `B · T_k`
/// floats, so the flash form stays `O(B·H·T)` with it.
#[derive(Debug)]
pub(super) struct Bias {
    values: Vec<f32>,
    /// `[B', H', T_q']`.
    extents: [usize; 3],
    tk: usize,
    heads_per_batch: usize,
    /// The mask's extents right-aligned to rank 4 (what its gradient is summed back to).
    aligned: [usize; 4],
}

impl Bias {
    /// Validates `mask` against `g` and normalises it (`Error::Type` for a dtype other than
    /// Bool and Float32, `Error::Value` for a shape that does not broadcast).
    fn of(op: &str, mask: &Tensor, kind: MaskKind, g: &Dims) -> Result<Bias> {
        let dims = mask.dims();
        let full = g.probability_dims();
        let aligned: [usize; 4] = match kind {
            MaskKind::KeyPadding => {
                ensure!(
                    dims == [g.batch, g.tk],
                    Value,
                    "{op}: a key-padding mask has shape [B, T_k] = [{}, {}], got {}",
                    g.batch,
                    g.tk,
                    mask.shape()
                );
                [g.batch, 1, 1, g.tk]
            }
            MaskKind::Attend => {
                ensure!(
                    dims.len() <= 4,
                    Value,
                    "{op}: a mask of shape {} has more than four axes",
                    mask.shape()
                );
                let mut a = [1; 4];
                a[4 - dims.len()..].copy_from_slice(&dims);
                for (x, f) in a.iter().zip(full) {
                    ensure!(
                        *x == 1 || *x == f,
                        Value,
                        "{op}: a mask of shape {} does not broadcast to the scores' {full:?}",
                        mask.shape()
                    );
                }
                a
            }
        };
        let source: Vec<f32> = match mask.dtype() {
            DType::Bool => {
                // the removed scores: false for an attend mask, true for key padding
                let removed = kind == MaskKind::KeyPadding;
                mask.values::<bool>()?
                    .into_iter()
                    .map(|b| if b == removed { f32::NEG_INFINITY } else { 0.0 })
                    .collect()
            }
            DType::Float32 => mask.values::<f32>()?,
            other => bail!(Type, "{op}: a mask is Bool or Float32, not {other}"),
        };
        let (tk, rows) = (g.tk, aligned[0] * aligned[1] * aligned[2]);
        let values = if aligned[3] == tk {
            source
        } else {
            // one value per row, repeated along the keys
            let Some(all) = rows.checked_mul(tk) else {
                bail!(
                    Value,
                    "{op}: a mask of {rows} rows of {tk} keys is too large to index"
                );
            };
            let mut v = autograd_core::kernel::alloc::with_capacity(all)?;
            for x in source {
                v.extend(std::iter::repeat_n(x, tk));
            }
            v
        };
        Ok(Bias {
            values,
            extents: [aligned[0], aligned[1], aligned[2]],
            tk,
            heads_per_batch: g.heads_per_batch,
            aligned,
        })
    }

    /// The `T_k` biases of query `row` of head `head` (`b · H + h`).
    #[inline]
    pub fn row(&self, head: usize, row: usize) -> &[f32] {
        let [bs, hs, rs] = self.extents;
        let (b, h) = (head / self.heads_per_batch, head % self.heads_per_batch);
        let pick = |i: usize, extent: usize| if extent == 1 { 0 } else { i };
        let at = ((pick(b, bs) * hs + pick(h, hs)) * rs + pick(row, rs)) * self.tk;
        &self.values[at..at + self.tk]
    }

    /// Whether the mask removes every entry of tile `(i, j)` of head `head` (query block `i`,
    /// key block `j`): the flash kernels skip such a tile, so padding keys cost nothing.
    pub fn removes_tile(&self, head: usize, g: &Dims, (i, j): (usize, usize)) -> bool {
        let rows = if self.extents[2] == 1 {
            0..1
        } else {
            i * BLOCK..g.tq.min((i + 1) * BLOCK)
        };
        let cols = j * BLOCK..g.tk.min((j + 1) * BLOCK);
        rows.into_iter().all(|r| {
            self.row(head, r)[cols.clone()]
                .iter()
                .all(|&x| x == f32::NEG_INFINITY)
        })
    }

    /// The mask's gradient from the scores' gradient `ds` (`[B, H, T_q, T_k]`, row-major):
    /// summed over the axes the mask broadcast along, in the mask's shape.
    pub fn gradient(&self, ds: Vec<f32>, g: &Dims, mask: &Tensor) -> Result<Tensor> {
        let full = g.probability_dims();
        let ds = Tensor::from_vec(ds, autograd_core::Shape::from(&full[..]))?;
        let axes: Vec<usize> = (0..4).filter(|&a| self.aligned[a] != full[a]).collect();
        let summed = if axes.is_empty() {
            ds
        } else {
            ds.sum_axes(axes.as_slice(), true)?
        };
        summed.reshape(mask.dims().as_slice())
    }
}

/// The dropout of one call: entry `(head, row, col)` is kept, scaled by `1 / (1 - p)`, when a
/// hash of the seed and the position lands at or above `p`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dropout {
    seed: u64,
    /// `p` as a threshold on the hash's top 24 bits.
    threshold: u32,
    scale: f32,
    tq: u64,
    tk: u64,
}

impl Dropout {
    fn new(d: AttentionDropout, g: &Dims) -> Dropout {
        Dropout {
            seed: d.seed,
            threshold: (f64::from(d.p) * f64::from(1u32 << 24)).ceil() as u32,
            scale: if d.p < 1.0 { 1.0 / (1.0 - d.p) } else { 0.0 },
            tq: g.tq as u64,
            tk: g.tk as u64,
        }
    }

    /// The factor of entry `(head, row, col)`: 0 or `1 / (1 - p)`.
    #[inline]
    pub fn factor(&self, head: usize, row: usize, col: usize) -> f32 {
        let at = ((head as u64 * self.tq) + row as u64) * self.tk + col as u64;
        // splitmix64's finaliser of the seeded position: every bit depends on every input bit
        let mut z = self
            .seed
            .wrapping_add(at.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        if ((z >> 40) as u32) >= self.threshold {
            self.scale
        } else {
            0.0
        }
    }
}

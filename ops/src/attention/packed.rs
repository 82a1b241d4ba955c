//! Causal self-attention over a packed projection: q, k and v side by side in one `[B, T, 3C]`
//! tensor, as one linear layer makes them (GPT-2's `c_attn`). Heads are read in place, the
//! context is written straight into `[B, T, C]` (heads side by side again) and the gradient is
//! one `[B, T, 3C]` tensor: no head permutes on either side, and no gradients of three views
//! summed into their base.

use autograd_core::{
    differentiable, ensure, shape, stride, Captured, DType, Layout, Result, Tensor,
};

use super::causal_spec;
use super::flash::{backward_head, forward_head, pack_backward};
use super::geometry::{Dims, Side};
use super::head::{for_each_head, pack_forward, results2, sized, HeadGrads, Input, Want};
use super::rule::Spec;

/// Causal self-attention over `qkv` `[B, T, 3C]` (Float32): q, k and v are its three
/// consecutive blocks of `C` features, each split into `heads` heads of `C / heads`, as
/// PyTorch's `q, k, v = qkv.split(C, dim=2)` viewed as `[B, heads, T, C / heads]`. Returns the
/// context `[B, T, C]` with the heads side by side again, the same values and gradients as
/// [`flash_causal_attention`](super::flash_causal_attention) on those three views followed by
/// merging the heads, without the copies that permuting heads back and forth takes. `scale`
/// defaults to `1 / sqrt(C / heads)`.
///
/// Errors: a dtype other than Float32 (`Error::Type`); a rank other than 3, no head, a last
/// extent that is not `3 · heads · D` for some `D >= 1`, or a scale that is not finite
/// (`Error::Value`). `qkv` may be a strided view.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::flash_causal_attention_qkv;
/// // one sequence of 3 positions, two heads of 2 features: q, k and v 4 wide each
/// let qkv = Tensor::from_vec((0..36).map(|i| i as f32 / 36.0).collect::<Vec<_>>(), shape![1, 3, 12])?;
/// let context = flash_causal_attention_qkv(&qkv, 2, None)?;
/// assert_eq!(context.dims(), [1, 3, 4]);
/// // the first position attends only to itself: its context is its own v
/// assert_eq!(context.values::<f32>()?[..4], qkv.values::<f32>()?[8..12]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn flash_causal_attention_qkv(
    qkv: &Tensor,
    heads: usize,
    scale: Option<f32>,
) -> Result<Tensor> {
    const OP: &str = "flash_causal_attention_qkv";
    let packing = Packing::of(OP, qkv, heads)?;
    packed(qkv, packing, causal_spec(OP, scale))
}

/// The extents of a packed projection `[B, T, 3 · H · D]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packing {
    batch: usize,
    time: usize,
    heads: usize,
    d: usize,
}

impl Captured for Packing {}

impl Packing {
    /// Checks `qkv`'s dtype, rank and last extent against `heads`; nothing is read.
    fn of(op: &str, qkv: &Tensor, heads: usize) -> Result<Packing> {
        ensure!(
            qkv.dtype() == &DType::Float32,
            Type,
            "{op}: qkv is {}; attention takes Float32",
            qkv.dtype()
        );
        let dims = qkv.dims();
        let &[batch, time, width] = dims.as_slice() else {
            autograd_core::bail!(
                Value,
                "{op}: qkv of shape {} needs three axes [B, T, 3C]",
                qkv.shape()
            )
        };
        ensure!(heads > 0, Value, "{op}: heads must be at least 1");
        let thirds = heads.checked_mul(3).filter(|&t| width.is_multiple_of(t));
        let Some(thirds) = thirds.filter(|_| width > 0) else {
            autograd_core::bail!(
                Value,
                "{op}: the last extent {width} of qkv is not 3 x {heads} heads x D for a D >= 1"
            )
        };
        Ok(Packing {
            batch,
            time,
            heads,
            d: width / thirds,
        })
    }

    /// The width `C` of one of q, k and v.
    fn c(&self) -> usize {
        self.heads * self.d
    }

    /// `t`'s compact row-major storage: itself, or a copy (which has no autograd state).
    fn compact(t: &Tensor) -> Result<Tensor> {
        let l = t.layout();
        if t.subtensor_count() == 1 && l.size() == l.cosize() && l.is_row_major_contiguous() {
            Ok(t.clone())
        } else {
            t.contiguous()
        }
    }

    /// `[B, H, T, D]` views (outside the graph) of the `parts` consecutive blocks of `C`
    /// features of `t` (`[B, T, parts · C]`).
    fn heads_of<const N: usize>(&self, t: &Tensor) -> Result<[Tensor; N]> {
        let base = Packing::compact(t)?;
        let (c, width) = (self.c(), N * self.c());
        let layout = Layout::new(
            shape![self.batch, self.heads, self.time, self.d],
            stride![self.time * width, self.d, width, 1],
        )?;
        let mut views = Vec::with_capacity(N);
        for part in 0..N {
            // an empty tensor's views stay at its offset (nothing is addressed)
            let offset = base.offset() + if base.size() > 0 { part * c } else { 0 };
            views.push(base.with_layout_detached(layout.clone(), offset)?);
        }
        match views.try_into() {
            Ok(views) => Ok(views),
            Err(_) => autograd_core::bail!(Runtime, "attention: a head view is missing"),
        }
    }

    /// q, k and v of `qkv` as `[B, H, T, D]` views outside the graph.
    fn parts(&self, qkv: &Tensor) -> Result<[Tensor; 3]> {
        self.heads_of::<3>(qkv)
    }

    /// The heads of a `[B, T, C]` tensor (the context or its cotangent) as a `[B, H, T, D]` view.
    fn context_heads(&self, t: &Tensor) -> Result<Tensor> {
        let [heads] = self.heads_of::<1>(t)?;
        Ok(heads)
    }
}

#[differentiable]
fn packed(qkv: &Tensor, packing: Packing, spec: Spec) -> Result<Tensor> {
    let [q, k, v] = packing.parts(qkv)?;
    let (dims, rule) = spec.resolve([&q, &k, &v], None)?;
    let (q, k, v) = (Input::new(&q)?, Input::new(&k)?, Input::new(&v)?);
    let c = packing.c();
    let (context, stats) = results2(
        qkv,
        &[packing.batch, packing.time, c],
        &dims.row_dims(),
        |o, lse| {
            if dims.is_empty() {
                return Ok(());
            }
            let items: Vec<_> = head_rows::<1>(o, &dims)
                .into_iter()
                .zip(lse.chunks_mut(dims.tq))
                .enumerate()
                .collect();
            for_each_head(&dims, items, |(b, ([mut rows], lse)), s| {
                s.reserve_accumulators(&dims)?;
                pack_forward(s, [&q, &k, &v], b, &dims)?;
                // the context through the thread's results buffer (every element written)
                let mut o = std::mem::take(&mut s.results);
                sized(&mut o, dims.head_len(Side::Query))?;
                forward_head(&dims, (&rule, b), &mut o, lse, s);
                scatter(&o, &mut rows);
                s.results = o;
                Ok(())
            })
        },
    )?;
    #[residual]
    let lse = stats;
    fn vjp(
        g: &Tensor,
        qkv: &Tensor,
        packing: Packing,
        spec: Spec,
        output: &Tensor,
        lse: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<Option<Tensor>> {
        if !needs.input(0) {
            return Ok(None);
        }
        backward(qkv, packing, spec, [output, lse, g]).map(Some)
    }
    Ok(context)
}

/// The gradient `[B, T, 3C]` of `qkv` from the saved context and logsumexps and the cotangent
/// `go` of the context.
fn backward(
    qkv: &Tensor,
    packing: Packing,
    spec: Spec,
    [output, lse, go]: [&Tensor; 3],
) -> Result<Tensor> {
    let [q, k, v] = packing.parts(qkv)?;
    let (g, rule) = spec.resolve([&q, &k, &v], None)?;
    let (q, k, v) = (Input::new(&q)?, Input::new(&k)?, Input::new(&v)?);
    let (o_heads, go_heads) = (packing.context_heads(output)?, packing.context_heads(go)?);
    let (o, lse, go) = (
        Input::new(&o_heads)?,
        Input::new(lse)?,
        Input::new(&go_heads)?,
    );
    let want = Want {
        q: true,
        k: true,
        v: true,
        mask: false,
    };
    let dims = [packing.batch, packing.time, 3 * packing.c()];
    autograd_core::kernel::fresh_overwritten::<f32>(qkv, Layout::row_major(&dims)?.into(), |dqkv| {
        if g.is_empty() {
            return Ok(());
        }
        let items: Vec<_> = head_rows::<3>(dqkv, &g).into_iter().enumerate().collect();
        for_each_head(
            &g,
            items,
            |(b, [mut dq_rows, mut dk_rows, mut dv_rows]), s| {
                s.reserve_accumulators(&g)?;
                pack_backward(s, [&q, &k, &v], [&o, &lse, &go], b, &g)?;
                // dq, dk and dv through the thread's results buffer (every element written)
                let n = g.head_len(Side::Query);
                let mut grads = std::mem::take(&mut s.results);
                sized(&mut grads, 3 * n)?;
                let (dq, rest) = grads.split_at_mut(n);
                let (dk, dv) = rest.split_at_mut(n);
                backward_head(
                    &g,
                    (&rule, b),
                    HeadGrads {
                        dq,
                        dk,
                        dv,
                        ds: None,
                        want,
                    },
                    s,
                );
                let (dq, rest) = grads.split_at(n);
                let (dk, dv) = rest.split_at(n);
                scatter(dq, &mut dq_rows);
                scatter(dk, &mut dk_rows);
                scatter(dv, &mut dv_rows);
                s.results = grads;
                Ok(())
            },
        )
    })
}

/// The rows of every head in a `[B, T, N · H · D]` buffer (`N` blocks of heads side by side):
/// for head `b · H + h`, for each block, its `T` rows of `D` in order.
fn head_rows<'a, const N: usize>(buf: &'a mut [f32], g: &Dims) -> Vec<[Vec<&'a mut [f32]>; N]> {
    let (h, t) = (g.heads_per_batch, g.tq);
    let mut heads: Vec<[Vec<&mut [f32]>; N]> = (0..g.heads())
        .map(|_| std::array::from_fn(|_| Vec::with_capacity(t)))
        .collect();
    // row i of D is head i % H of block (i / H) % N at position (i / (H N)) % T of batch
    // (i / (H N T)): positions rise with i, so each head's rows arrive in order
    for (i, row) in buf.chunks_exact_mut(g.d).enumerate() {
        let (head, rest) = (i % h, i / h);
        let (block, bt) = (rest % N, rest / N);
        heads[(bt / t) * h + head][block].push(row);
    }
    heads
}

/// Copies consecutive rows of `src` into `rows` (all of one length).
fn scatter(src: &[f32], rows: &mut [&mut [f32]]) {
    let Some(n) = rows.first().map(|r| r.len()) else {
        return;
    };
    for (row, from) in rows.iter_mut().zip(src.chunks_exact(n)) {
        autograd_core::kernel::copy_short(row, from);
    }
}

//! Materialised causal attention: the context and the full `T x T` probabilities per head (two
//! differentiable outputs); backward reads the probabilities the forward returned.
// The per-head kernels are inlined into the ISA wrappers that `simd!` generates.
#![allow(clippy::inline_always)]

use autograd_core::kernel::Madd;
use autograd_core::{differentiable, simd, Result, Tensor};

use super::geometry::Dims;
use super::head::{
    for_each_head, pack_forward, pack_rows, pack_transposed, results2, results3, rezero, HeadGrads,
    Input, Scratch, Want,
};
use super::tile::{self, Coef, Tri, BLOCK};

/// Causal scaled-dot-product attention over `[B, H, T, D]` (Float32), keeping the
/// probabilities: returns `(context, probabilities)` where
/// `probabilities = softmax(scale · q kᵀ + causal mask)` is `[B, H, T, T]` with zeros above the
/// diagonal and `context = probabilities · v` is `[B, H, T, D]`; `scale` defaults to
/// `1 / sqrt(D)`.
///
/// Both results are differentiable: a gradient reaching the probabilities (an attention-map
/// penalty, say) flows back to q and k. The graph keeps the probabilities, `B·H·T²` floats;
/// [`flash_causal_attention`](super::flash_causal_attention) keeps `O(B·H·T)` instead. q, k and
/// v must share one shape (`Error::Value`) and be Float32 (`Error::Type`); they may be strided
/// views. Heads run in parallel on the kernel threads above a size threshold.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::causal_attention;
/// let x = Tensor::from_vec((0..24).map(|i| i as f32 / 24.0).collect::<Vec<_>>(), shape![1, 2, 3, 4])?;
/// let (o, p) = causal_attention(&x, &x, &x, Some(0.5))?;
/// assert_eq!((o.dims(), p.dims()), (vec![1, 2, 3, 4], vec![1, 2, 3, 3]));
/// let p = p.values::<f32>()?;
/// assert_eq!(p[..3], [1.0, 0.0, 0.0]); // the first query sees only the first key
/// assert!((p[3] + p[4] - 1.0).abs() < 1e-6 && p[5] == 0.0);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[differentiable]
pub fn causal_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f32>,
) -> Result<(Tensor, Tensor)> {
    // With S = scale q kᵀ (masked), P = softmax(S) row by row and O = P v, for cotangents
    // gO (of O) and gP (of P), either possibly absent:
    //   dv = Pᵀ gO,  dP = gO vᵀ + gP,  dS = P ∘ (dP - rowsum(P ∘ dP)),
    //   dq = scale dS k,  dk = scale dSᵀ q.
    // Masked entries have P = 0, so their dS is 0 whatever gP holds there.
    fn vjp(
        g: (Option<&Tensor>, Option<&Tensor>),
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        scale: Option<f32>,
        output: (&Tensor, &Tensor),
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let want = Want {
            q: needs.input(0),
            k: needs.input(1),
            v: needs.input(2),
        };
        backward([q, k, v], output.1, g, scale, want)
    }
    let dims = Dims::of("causal_attention", q, k, v, scale)?;
    forward(q, k, v, &dims)
}

/// The context and the probabilities of every head.
fn forward(q: &Tensor, k: &Tensor, v: &Tensor, g: &Dims) -> Result<(Tensor, Tensor)> {
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    results2(
        q.tensor(),
        &g.context_dims(),
        &g.probability_dims(),
        |o, p| {
            if g.is_empty() {
                return Ok(());
            }
            let items: Vec<_> = o
                .chunks_mut(g.head_len())
                .zip(p.chunks_mut(g.t * g.t))
                .enumerate()
                .collect();
            for_each_head(g, items, |(b, (o, p)), s| {
                s.reserve_accumulators(g)?;
                pack_forward(s, [&q, &k, &v], b, g)?;
                forward_head(g, o, p, s);
                Ok(())
            })
        },
    )
}

/// The wanted gradients of q, k and v from the probabilities and the cotangents of the
/// context and of the probabilities.
fn backward(
    [q, k, v]: [&Tensor; 3],
    p: &Tensor,
    (go, gp): (Option<&Tensor>, Option<&Tensor>),
    scale: Option<f32>,
    want: Want,
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    if !(want.q || want.k || want.v) {
        return Ok((None, None, None));
    }
    let g = Dims::of("causal_attention", q, k, v, scale)?;
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    let p = Input::new(p)?;
    let go = go.map(Input::new).transpose()?;
    let gp = gp.map(Input::new).transpose()?;
    let (dq, dk, dv) = results3(q.tensor(), &g.context_dims(), |dq, dk, dv| {
        if g.is_empty() {
            return Ok(());
        }
        let n = g.head_len();
        let items: Vec<_> = dq
            .chunks_mut(n)
            .zip(dk.chunks_mut(n))
            .zip(dv.chunks_mut(n))
            .enumerate()
            .collect();
        for_each_head(&g, items, |(b, ((dq, dk), dv)), s| {
            s.reserve_accumulators(&g)?;
            pack_rows(&mut s.q, &q, b, &g, g.scale)?;
            pack_rows(&mut s.k, &k, b, &g, 1.0)?;
            if let Some(go) = &go {
                pack_transposed(&mut s.vt, &mut s.tmp, &v, b, &g)?;
                pack_rows(&mut s.go, go, b, &g, 1.0)?;
            }
            let cot = Cotangents {
                head: b,
                p: &p,
                go: go.is_some(),
                gp: gp.as_ref(),
            };
            backward_head(&g, cot, HeadGrads { dq, dk, dv, want }, s)
        })
    })?;
    Ok((
        want.q.then_some(dq),
        want.k.then_some(dk),
        want.v.then_some(dv),
    ))
}

/// One head's probabilities and the cotangents that reached the probabilities (read row by
/// row) and the context (packed in the scratch when present).
#[derive(Debug, Clone, Copy)]
struct Cotangents<'a> {
    head: usize,
    p: &'a Input<'a>,
    go: bool,
    gp: Option<&'a Input<'a>>,
}

simd!(fn forward_head(g: &Dims, o: &mut [f32], p: &mut [f32], s: &mut Scratch) => forward_kernel);
simd!(fn backward_head(g: &Dims, cot: Cotangents<'_>, grads: HeadGrads<'_>, s: &mut Scratch) -> Result<()> => backward_kernel);

/// One head forward (q scaled, kᵀ and v packed in `s`): for each query block, its scores
/// against every visible key block in a `BLOCK x T_p` panel, an exact softmax per row, then the
/// context rows `P v`.
#[inline(always)]
fn forward_kernel<M: Madd>(g: &Dims, o: &mut [f32], p: &mut [f32], s: &mut Scratch) {
    let (t, d, tp) = (g.t, g.d, g.padded());
    rezero(&mut s.panel, BLOCK * tp);
    rezero(&mut s.acc_q, BLOCK * d);
    for i in 0..g.blocks() {
        let cols = (i + 1) * BLOCK;
        let qi = &s.q[i * BLOCK * d..(i + 1) * BLOCK * d];
        for j in 0..=i {
            tile::scores::<M>(qi, &s.kt[j * BLOCK..], tp, d, j == i, &mut s.s);
            for (r, row) in s.s.chunks_exact(BLOCK).enumerate() {
                let at = r * tp + j * BLOCK;
                s.panel[at..at + BLOCK].copy_from_slice(row);
            }
        }
        for r in 0..BLOCK {
            let visible = i * BLOCK + r + 1;
            let row = &mut s.panel[r * tp..r * tp + cols];
            let mx = tile::max(&row[..visible]);
            for x in &mut row[..visible] {
                *x = tile::exp::<M>(*x - mx);
            }
            let inv = 1.0 / tile::sum(&row[..visible]);
            for x in &mut row[..visible] {
                *x *= inv;
            }
            row[visible..].fill(0.0);
        }
        s.acc_q.fill(0.0);
        let coef = Coef {
            data: &s.panel[..],
            row: tp,
            col: 1,
        };
        let tri = Tri::Lower(i * BLOCK);
        tile::accumulate::<M>(&mut s.acc_q, coef, &s.v[..cols * d], (cols, tri), d);
        for r in 0..BLOCK.min(t - i * BLOCK) {
            let gr = i * BLOCK + r;
            o[gr * d..(gr + 1) * d].copy_from_slice(&s.acc_q[r * d..(r + 1) * d]);
            p[gr * t..=gr * t + gr].copy_from_slice(&s.panel[r * tp..=r * tp + gr]);
            // the keys after the query: masked out (the result buffer is not zeroed)
            p[gr * t + gr + 1..(gr + 1) * t].fill(0.0);
        }
    }
}

/// One head backward, one query block at a time: the block's probability rows and their
/// cotangents `dP = gO vᵀ + gP` in `BLOCK x T_p` panels, `dS = P ∘ (dP - rowsum(P ∘ dP))`, then
/// the contributions to dv, dk (visible key blocks) and dq (this query block).
#[inline(always)]
fn backward_kernel<M: Madd>(
    g: &Dims,
    cot: Cotangents<'_>,
    HeadGrads { dq, dk, dv, want }: HeadGrads<'_>,
    s: &mut Scratch,
) -> Result<()> {
    let (t, d, tp) = (g.t, g.d, g.padded());
    rezero(&mut s.panel, BLOCK * tp);
    rezero(&mut s.dpanel, BLOCK * tp);
    rezero(&mut s.acc_q, tp * d);
    rezero(&mut s.acc_k, tp * d);
    rezero(&mut s.acc_v, tp * d);
    for i in 0..g.blocks() {
        let cols = (i + 1) * BLOCK;
        let qi = i * BLOCK * d..(i + 1) * BLOCK * d;
        let rows = BLOCK.min(t - i * BLOCK);
        let seen = cols.min(t);
        s.panel.fill(0.0);
        s.dpanel.fill(0.0);
        for r in 0..rows {
            let from = (cot.head * t + i * BLOCK + r) * t;
            cot.p.copy_out(from, &mut s.panel[r * tp..r * tp + seen])?;
            if let Some(gp) = cot.gp {
                gp.copy_out(from, &mut s.dpanel[r * tp..r * tp + seen])?;
            }
        }
        if cot.go {
            // dP += gO_i v_jᵀ
            for j in 0..=i {
                tile::scores::<M>(
                    &s.go[qi.clone()],
                    &s.vt[j * BLOCK..],
                    tp,
                    d,
                    j == i,
                    &mut s.s,
                );
                for (r, row) in s.s.chunks_exact(BLOCK).enumerate() {
                    let at = r * tp + j * BLOCK;
                    for (x, &y) in s.dpanel[at..at + BLOCK].iter_mut().zip(row) {
                        *x += y;
                    }
                }
            }
        }
        for r in 0..BLOCK {
            let (p, dp) = (
                &s.panel[r * tp..r * tp + cols],
                &mut s.dpanel[r * tp..r * tp + cols],
            );
            let delta = tile::dot::<M>(p, dp);
            for (x, &p) in dp.iter_mut().zip(p) {
                *x = p * (*x - delta);
            }
        }
        for j in 0..=i {
            let kj = j * BLOCK * d..(j + 1) * BLOCK * d;
            let tri = if j == i { Tri::Upper } else { Tri::Full };
            if want.v && cot.go {
                // dv_j += P_ijᵀ gO_i
                let p_t = Coef {
                    data: &s.panel[j * BLOCK..],
                    row: 1,
                    col: tp,
                };
                tile::accumulate::<M>(
                    &mut s.acc_v[kj.clone()],
                    p_t,
                    &s.go[qi.clone()],
                    (BLOCK, tri),
                    d,
                );
            }
            if want.k {
                // dk_j += dS_ijᵀ (scale q_i)
                let ds_t = Coef {
                    data: &s.dpanel[j * BLOCK..],
                    row: 1,
                    col: tp,
                };
                tile::accumulate::<M>(&mut s.acc_k[kj], ds_t, &s.q[qi.clone()], (BLOCK, tri), d);
            }
        }
        if want.q {
            // dq_i += dS_i k (times scale below)
            let ds = Coef {
                data: &s.dpanel[..],
                row: tp,
                col: 1,
            };
            tile::accumulate::<M>(
                &mut s.acc_q[qi],
                ds,
                &s.k[..cols * d],
                (cols, Tri::Lower(i * BLOCK)),
                d,
            );
        }
    }
    let n = t * d;
    for (o, a) in dq.iter_mut().zip(&s.acc_q[..n]) {
        *o = g.scale * a;
    }
    dk.copy_from_slice(&s.acc_k[..n]);
    dv.copy_from_slice(&s.acc_v[..n]);
    Ok(())
}

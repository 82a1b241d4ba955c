//! Flash-style causal attention: the context only, computed block by block with an online
//! softmax; backward keeps just the per-row logsumexp `[B, H, T]` (plus q, k, v and the context)
//! and recomputes each probability tile from it.
// The per-head kernels are inlined into the ISA wrappers that `dispatch!` generates.
#![allow(clippy::inline_always)]

use autograd_core::{differentiable, Result, Tensor};

use super::geometry::Dims;
use super::head::{
    compact, for_each_head, pack_rows, pack_transposed, tensor, zeroed, Head, HeadGrads, Scratch,
    Want,
};
use super::isa::dispatch;
use super::tile::{self, Coef, Madd, BLOCK};

/// Causal scaled-dot-product attention over `[B, H, T, D]` (Float32) without materialising the
/// `T x T` probabilities: `softmax(scale · q kᵀ + causal mask) v`, `scale` defaulting to
/// `1 / sqrt(D)`. Returns the context `[B, H, T, D]`.
///
/// Forward walks key blocks of 64 with an online softmax; the graph keeps q, k, v, the context
/// and one logsumexp per row, `O(B·H·T·D)` bytes, and backward recomputes the probabilities
/// block by block. Values and gradients agree with [`causal_attention`](super::causal_attention)
/// to about 1e-5. q, k and v must share one shape (`Error::Value`) and be Float32
/// (`Error::Type`); they may be strided views. Heads run in parallel on rayon's pool above a
/// size threshold.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::flash_causal_attention;
/// let x = Tensor::from_vec((0..24).map(|i| i as f32 / 24.0).collect::<Vec<_>>(), shape![1, 2, 3, 4])?;
/// let o = flash_causal_attention(&x, &x, &x, None)?;
/// assert_eq!(o.dims(), [1, 2, 3, 4]);
/// // the first position attends only to itself
/// assert_eq!(o.values::<f32>()?[..4], x.values::<f32>()?[..4]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[differentiable]
pub fn flash_causal_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f32>,
) -> Result<Tensor> {
    let dims = Dims::of("flash_causal_attention", q, k, v, scale)?;
    let (context, stats) = forward(q, k, v, &dims)?;
    #[residual]
    let lse = stats;
    // With S = scale q kᵀ (masked), P = softmax(S) = exp(S - lse), O = P v and dO = g:
    //   dv = Pᵀ dO,  dP = dO vᵀ,  dS = P ∘ (dP - delta) with delta = rowsum(P ∘ dP) = rowsum(dO ∘ O),
    //   dq = scale dS k,  dk = scale dSᵀ q.
    fn vjp(
        g: &Tensor,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        scale: Option<f32>,
        output: &Tensor,
        lse: &Tensor,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let want = Want {
            q: needs.input(0),
            k: needs.input(1),
            v: needs.input(2),
        };
        backward([q, k, v], [output, lse, g], scale, want)
    }
    Ok(context)
}

/// The context and the per-row logsumexp of every head.
fn forward(q: &Tensor, k: &Tensor, v: &Tensor, g: &Dims) -> Result<(Tensor, Tensor)> {
    let (qv, kv, vv) = (compact(q)?, compact(k)?, compact(v)?);
    let n = g.head_len();
    let mut o = vec![0.0f32; g.heads() * n];
    let mut lse = vec![0.0f32; g.heads() * g.t];
    if !g.is_empty() {
        let items: Vec<_> = o
            .chunks_mut(n)
            .zip(lse.chunks_mut(g.t))
            .enumerate()
            .collect();
        for_each_head(g, items, |(b, (o, lse)), s| {
            let at = b * n..(b + 1) * n;
            let head = Head {
                q: &qv[at.clone()],
                k: &kv[at.clone()],
                v: &vv[at],
            };
            forward_head(g, head, o, lse, s);
        });
    }
    Ok((
        tensor(q, o, &g.context_dims())?,
        tensor(q, lse, &g.row_dims())?,
    ))
}

/// The wanted gradients of q, k and v from the saved context and logsumexp and the cotangent
/// `[output, lse, g]`.
fn backward(
    [q, k, v]: [&Tensor; 3],
    [output, lse, go]: [&Tensor; 3],
    scale: Option<f32>,
    want: Want,
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    if !(want.q || want.k || want.v) {
        return Ok((None, None, None));
    }
    let g = Dims::of("flash_causal_attention", q, k, v, scale)?;
    let (qv, kv, vv) = (compact(q)?, compact(k)?, compact(v)?);
    let (ov, lv, gv) = (compact(output)?, compact(lse)?, compact(go)?);
    let n = g.head_len();
    let total = g.heads() * n;
    let (mut dq, mut dk, mut dv) = (vec![0.0f32; total], vec![0.0; total], vec![0.0; total]);
    if !g.is_empty() {
        let items: Vec<_> = dq
            .chunks_mut(n)
            .zip(dk.chunks_mut(n))
            .zip(dv.chunks_mut(n))
            .enumerate()
            .collect();
        for_each_head(&g, items, |(b, ((dq, dk), dv)), s| {
            let at = b * n..(b + 1) * n;
            let head = Head {
                q: &qv[at.clone()],
                k: &kv[at.clone()],
                v: &vv[at.clone()],
            };
            let saved = Saved {
                o: &ov[at.clone()],
                lse: &lv[b * g.t..(b + 1) * g.t],
                go: &gv[at],
            };
            let grads = HeadGrads { dq, dk, dv, want };
            backward_head(&g, head, saved, grads, s);
        });
    }
    let dims = g.context_dims();
    let out = |wanted: bool, values: Vec<f32>| wanted.then(|| tensor(q, values, &dims)).transpose();
    Ok((out(want.q, dq)?, out(want.k, dk)?, out(want.v, dv)?))
}

/// One head's context, logsumexp and cotangent (`T x D`, `T`, `T x D`).
#[derive(Debug, Clone, Copy)]
struct Saved<'a> {
    o: &'a [f32],
    lse: &'a [f32],
    go: &'a [f32],
}

dispatch!(fn forward_head(g: &Dims, h: Head<'_>, o: &mut [f32], lse: &mut [f32], s: &mut Scratch) => forward_kernel);
dispatch!(fn backward_head(g: &Dims, h: Head<'_>, saved: Saved<'_>, grads: HeadGrads<'_>, s: &mut Scratch) => backward_kernel);

/// One head forward: for each query block, the key blocks up to the diagonal with a running
/// row maximum `m` and normaliser `l` (the online softmax), then `O = acc / l`, `lse = m + ln l`.
#[inline(always)]
fn forward_kernel<M: Madd>(g: &Dims, h: Head<'_>, o: &mut [f32], lse: &mut [f32], s: &mut Scratch) {
    let (t, d, tp) = (g.t, g.d, g.padded());
    pack_rows(&mut s.q, h.q, g, g.scale);
    pack_transposed(&mut s.kt, h.k, g);
    pack_rows(&mut s.v, h.v, g, 1.0);
    zeroed(&mut s.acc_q, BLOCK * d);
    let (mut m, mut l) = ([0.0f32; BLOCK], [0.0f32; BLOCK]);
    for i in 0..g.blocks() {
        m.fill(f32::NEG_INFINITY);
        l.fill(0.0);
        s.acc_q.fill(0.0);
        let qi = &s.q[i * BLOCK * d..(i + 1) * BLOCK * d];
        for j in 0..=i {
            tile::scores::<M>(qi, &s.kt[j * BLOCK..], tp, d, &mut s.s);
            for r in 0..BLOCK {
                // the diagonal block: key c is visible to query r when c <= r
                let visible = if j == i { r + 1 } else { BLOCK };
                let row = &mut s.s[r * BLOCK..(r + 1) * BLOCK];
                let mx = tile::max(&row[..visible]).max(m[r]);
                let corr = tile::exp::<M>(m[r] - mx);
                for x in &mut row[..visible] {
                    *x = tile::exp::<M>(*x - mx);
                }
                row[visible..].fill(0.0);
                l[r] = M::madd(l[r], corr, tile::sum(&row[..visible]));
                m[r] = mx;
                if corr != 1.0 {
                    for a in &mut s.acc_q[r * d..(r + 1) * d] {
                        *a *= corr;
                    }
                }
            }
            let coef = Coef {
                data: &s.s[..],
                row: BLOCK,
                col: 1,
            };
            let vj = &s.v[j * BLOCK * d..(j + 1) * BLOCK * d];
            tile::accumulate::<M>(&mut s.acc_q, coef, vj, BLOCK, d);
        }
        for r in 0..BLOCK.min(t - i * BLOCK) {
            let (at, inv) = ((i * BLOCK + r) * d, 1.0 / l[r]);
            for (o, a) in o[at..at + d].iter_mut().zip(&s.acc_q[r * d..(r + 1) * d]) {
                *o = a * inv;
            }
            lse[i * BLOCK + r] = m[r] + l[r].ln();
        }
    }
}

/// One head backward: for each key block `j` and each query block `i >= j`, the probability
/// tile `exp(S - lse)` again, then its contributions to dv, dk and dq. Padding rows have a zero
/// cotangent and delta, so they add nothing.
#[inline(always)]
fn backward_kernel<M: Madd>(
    g: &Dims,
    h: Head<'_>,
    saved: Saved<'_>,
    grads: HeadGrads<'_>,
    s: &mut Scratch,
) {
    let (t, d, tp, nb) = (g.t, g.d, g.padded(), g.blocks());
    let want = grads.want;
    pack_rows(&mut s.q, h.q, g, g.scale);
    pack_transposed(&mut s.kt, h.k, g);
    pack_rows(&mut s.k, h.k, g, 1.0);
    pack_transposed(&mut s.vt, h.v, g);
    pack_rows(&mut s.go, saved.go, g, 1.0);
    zeroed(&mut s.lse, tp);
    s.lse[..t].copy_from_slice(saved.lse);
    zeroed(&mut s.delta, tp);
    for (r, dl) in s.delta[..t].iter_mut().enumerate() {
        *dl = tile::dot::<M>(&saved.go[r * d..(r + 1) * d], &saved.o[r * d..(r + 1) * d]);
    }
    zeroed(&mut s.acc_q, tp * d);
    zeroed(&mut s.acc_k, tp * d);
    zeroed(&mut s.acc_v, tp * d);
    for j in 0..nb {
        let kj = j * BLOCK * d..(j + 1) * BLOCK * d;
        for i in j..nb {
            let qi = i * BLOCK * d..(i + 1) * BLOCK * d;
            tile::scores::<M>(&s.q[qi.clone()], &s.kt[j * BLOCK..], tp, d, &mut s.s);
            for r in 0..BLOCK {
                let visible = if i == j { r + 1 } else { BLOCK };
                let stat = s.lse[i * BLOCK + r];
                let row = &mut s.s[r * BLOCK..(r + 1) * BLOCK];
                for x in &mut row[..visible] {
                    *x = tile::exp::<M>(*x - stat);
                }
                row[visible..].fill(0.0);
            }
            if want.v {
                // dv_j += P_ijᵀ dO_i
                let p_t = Coef {
                    data: &s.s[..],
                    row: 1,
                    col: BLOCK,
                };
                tile::accumulate::<M>(&mut s.acc_v[kj.clone()], p_t, &s.go[qi.clone()], BLOCK, d);
            }
            if want.q || want.k {
                // dS = P ∘ (dO_i v_jᵀ - delta)
                tile::scores::<M>(&s.go[qi.clone()], &s.vt[j * BLOCK..], tp, d, &mut s.ds);
                for r in 0..BLOCK {
                    let dl = s.delta[i * BLOCK + r];
                    let (p, ds) = (
                        &s.s[r * BLOCK..(r + 1) * BLOCK],
                        &mut s.ds[r * BLOCK..(r + 1) * BLOCK],
                    );
                    for (x, &p) in ds.iter_mut().zip(p) {
                        *x = p * (*x - dl);
                    }
                }
                if want.k {
                    // dk_j += dS_ijᵀ (scale q_i)
                    let ds_t = Coef {
                        data: &s.ds[..],
                        row: 1,
                        col: BLOCK,
                    };
                    tile::accumulate::<M>(
                        &mut s.acc_k[kj.clone()],
                        ds_t,
                        &s.q[qi.clone()],
                        BLOCK,
                        d,
                    );
                }
                if want.q {
                    // dq_i += dS_ij k_j (times scale below)
                    let ds = Coef {
                        data: &s.ds[..],
                        row: BLOCK,
                        col: 1,
                    };
                    tile::accumulate::<M>(&mut s.acc_q[qi], ds, &s.k[kj.clone()], BLOCK, d);
                }
            }
        }
    }
    let n = t * d;
    for (o, a) in grads.dq.iter_mut().zip(&s.acc_q[..n]) {
        *o = g.scale * a;
    }
    grads.dk.copy_from_slice(&s.acc_k[..n]);
    grads.dv.copy_from_slice(&s.acc_v[..n]);
}

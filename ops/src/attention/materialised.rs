//! Materialised causal attention: the context and the full `T x T` probabilities per head (two
//! differentiable outputs); backward reads the probabilities the forward returned.
// The per-head kernels are inlined into the ISA wrappers that `simd!` generates.
#![allow(clippy::inline_always)]

use autograd_core::kernel::Madd;
use autograd_core::{differentiable, simd, Result, Tensor};

use super::causal_self_attention;
use super::geometry::{Dims, Side};
use super::head::{
    for_each_head, gradients, pack_forward, pack_rows, pack_transposed, results2, rezero,
    Gradients, HeadGrads, Input, Scratch, Want,
};
use super::options::AttentionOptions;
use super::rule::{Rule, Spec};
use super::tile::{self, Coef, Tri, BLOCK};

/// Scaled-dot-product attention keeping the probabilities: returns `(context, probabilities)`
/// where `probabilities = softmax(scale · q kᵀ + mask)` is `[B, H, T_q, T_k]` (before
/// dropout) and `context = dropout(probabilities) · v` is `[B, H, T_q, D]`, for q
/// `[B, H, T_q, D]` and k, v `[B, H, T_k, D]` (Float32), with the [`AttentionOptions`] of
/// [`scaled_dot_product_attention`](super::scaled_dot_product_attention) (same dropout mask
/// for the same options).
///
/// Both results are differentiable: a gradient reaching the probabilities (an attention-map
/// penalty, say) flows back to q, k and an additive mask. The graph keeps the probabilities,
/// `B·H·T_q·T_k` floats. Errors as `scaled_dot_product_attention`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{attention_with_probabilities, AttentionMask, AttentionOptions};
/// let q = Tensor::from_vec(vec![0.0f32; 8], shape![1, 1, 2, 4])?;
/// let kv = Tensor::from_vec(vec![1.0f32; 12], shape![1, 1, 3, 4])?;
/// // the first query may see the first two keys, the second only the last
/// let m = Tensor::from_vec(vec![true, true, false, false, false, true], shape![2, 3])?;
/// let options = AttentionOptions::new().mask(AttentionMask::Attend(m));
/// let (_, p) = attention_with_probabilities(&q, &kv, &kv, &options)?;
/// assert_eq!(p.values::<f32>()?, [0.5, 0.5, 0.0, 0.0, 0.0, 1.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn attention_with_probabilities(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &AttentionOptions,
) -> Result<(Tensor, Tensor)> {
    let (spec, mask) = Spec::of("attention_with_probabilities", options);
    materialised(q, k, v, mask, spec)
}

/// Causal scaled-dot-product self-attention over `[B, H, T, D]` (Float32), keeping the
/// probabilities: returns `(context, probabilities)` where
/// `probabilities = softmax(scale · q kᵀ + causal mask)` is `[B, H, T, T]` with zeros above the
/// diagonal and `context = probabilities · v` is `[B, H, T, D]`; `scale` defaults to
/// `1 / sqrt(D)`.
///
/// [`attention_with_probabilities`] with `causal` set, for q, k and v of one shape
/// (`Error::Value` otherwise; `Error::Type` for a dtype other than Float32); they may be
/// strided views. [`flash_causal_attention`](super::flash_causal_attention) keeps `O(B·H·T)`
/// instead of the probabilities.
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
pub fn causal_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f32>,
) -> Result<(Tensor, Tensor)> {
    let spec = causal_self_attention("causal_attention", [q, k, v], scale)?;
    materialised(q, k, v, None, spec)
}

#[differentiable]
fn materialised(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    spec: Spec,
) -> Result<(Tensor, Tensor)> {
    // With S = scale q kᵀ + mask, P = softmax(S) row by row, Z the dropout's factors and
    // O = (P ∘ Z) v, for cotangents gO (of O) and gP (of P), either possibly absent:
    //   dv = (P ∘ Z)ᵀ gO,  dP = (gO vᵀ) ∘ Z + gP,  dS = P ∘ (dP - rowsum(P ∘ dP)),
    //   dq = scale dS k,  dk = scale dSᵀ q,  dmask = dS summed to the mask's shape.
    // Removed entries have P = 0, so their dS is 0 whatever gP holds there.
    #[allow(clippy::type_complexity)]
    fn vjp(
        g: (Option<&Tensor>, Option<&Tensor>),
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        spec: Spec,
        output: (&Tensor, &Tensor),
        needs: &NeedsGrad,
    ) -> Result<(
        Option<Tensor>,
        Option<Tensor>,
        Option<Tensor>,
        Option<Tensor>,
    )> {
        let want = Want {
            q: needs.input(0),
            k: needs.input(1),
            v: needs.input(2),
            mask: mask.is_some() && needs.input(3),
        };
        backward([q, k, v], mask, output.1, g, spec, want)
    }
    let (dims, rule) = spec.resolve([q, k, v], mask)?;
    forward([q, k, v], &dims, &rule)
}

/// The context and the probabilities of every head.
fn forward([q, k, v]: [&Tensor; 3], g: &Dims, rule: &Rule) -> Result<(Tensor, Tensor)> {
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    results2(
        q.tensor(),
        &g.context_dims(),
        &g.probability_dims(),
        |o, p| {
            if g.is_empty() {
                return Ok(());
            }
            if g.tk == 0 {
                // no key to attend to: every row is zero, as PyTorch's
                o.fill(0.0);
                return Ok(());
            }
            let items: Vec<_> = o
                .chunks_mut(g.head_len(Side::Query))
                .zip(p.chunks_mut(g.tq * g.tk.max(1)))
                .enumerate()
                .collect();
            for_each_head(g, items, |(b, (o, p)), s| {
                s.reserve_accumulators(g)?;
                pack_forward(s, [&q, &k, &v], b, g)?;
                forward_head(g, (rule, b), o, p, s);
                Ok(())
            })
        },
    )
}

/// The wanted gradients of q, k, v and the mask from the probabilities and the cotangents of
/// the context and of the probabilities.
fn backward(
    [q, k, v]: [&Tensor; 3],
    mask: Option<&Tensor>,
    p: &Tensor,
    (go, gp): (Option<&Tensor>, Option<&Tensor>),
    spec: Spec,
    want: Want,
) -> Result<Gradients> {
    if !(want.q || want.k || want.v || want.mask) {
        return Ok((None, None, None, None));
    }
    let (g, rule) = spec.resolve([q, k, v], mask)?;
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    let p = Input::new(p)?;
    let go = go.map(Input::new).transpose()?;
    let gp = gp.map(Input::new).transpose()?;
    gradients(&g, &rule, (q.tensor(), mask), want, |b, grads, s| {
        pack_rows(&mut s.q, &q, (b, Side::Query), &g, g.scale)?;
        pack_rows(&mut s.k, &k, (b, Side::Key), &g, 1.0)?;
        if let Some(go) = &go {
            pack_transposed(&mut s.vt, &mut s.tmp, &v, b, &g)?;
            pack_rows(&mut s.go, go, (b, Side::Query), &g, 1.0)?;
        }
        let cot = Cotangents {
            rule: &rule,
            head: b,
            p: &p,
            go: go.is_some(),
            gp: gp.as_ref(),
        };
        backward_head(&g, cot, grads, s)
    })
}

/// One head's rule and probabilities and the cotangents that reached the probabilities (read
/// row by row) and the context (packed in the scratch when present).
#[derive(Debug, Clone, Copy)]
struct Cotangents<'a> {
    rule: &'a Rule,
    head: usize,
    p: &'a Input<'a>,
    go: bool,
    gp: Option<&'a Input<'a>>,
}

simd!(fn forward_head(g: &Dims, head: (&Rule, usize), o: &mut [f32], p: &mut [f32], s: &mut Scratch) => forward_kernel);
simd!(fn backward_head(g: &Dims, cot: Cotangents<'_>, grads: HeadGrads<'_>, s: &mut Scratch) -> Result<()> => backward_kernel);

/// The keys query `row` sees before any mask: up to itself when causal, else all.
fn visible_keys(g: &Dims, row: usize) -> usize {
    if g.causal {
        (row + 1).min(g.tk)
    } else {
        g.tk
    }
}

/// `zpanel = panel ∘ Z` over the first `rows` rows and `cols` columns of query block `i`.
fn drop_panel(
    cot: (&Rule, usize),
    g: &Dims,
    i: usize,
    (rows, cols): (usize, usize),
    s: &mut Scratch,
) {
    let (rule, head) = cot;
    let kp = g.padded(Side::Key);
    if let Some(z) = rule.dropout {
        s.zpanel.fill(0.0);
        for r in 0..rows {
            let at = r * kp;
            for c in 0..cols {
                let p = s.panel[at + c];
                if p != 0.0 {
                    s.zpanel[at + c] = p * z.factor(head, i * BLOCK + r, c);
                }
            }
        }
    }
}

/// One head forward (q scaled, kᵀ and v packed in `s`): for each query block, its scores
/// against every key block it sees in a `BLOCK x T_kp` panel, an exact softmax per row (a row
/// that sees no key is all zeros), then the context rows `(P ∘ Z) v`.
#[inline(always)]
fn forward_kernel<M: Madd>(
    g: &Dims,
    (rule, head): (&Rule, usize),
    o: &mut [f32],
    p: &mut [f32],
    s: &mut Scratch,
) {
    let (tq, tk, d, kp) = (g.tq, g.tk, g.d, g.padded(Side::Key));
    rezero(&mut s.panel, BLOCK * kp);
    rezero(&mut s.zpanel, BLOCK * kp);
    rezero(&mut s.acc_q, BLOCK * d);
    for i in 0..g.blocks(Side::Query) {
        let rows = BLOCK.min(tq - i * BLOCK);
        let keys = g.key_blocks(i);
        let cols = keys.end * BLOCK;
        let qi = &s.q[i * BLOCK * d..(i + 1) * BLOCK * d];
        for j in keys {
            tile::scores::<M>(qi, &s.kt[j * BLOCK..], kp, d, g.diagonal(i, j), &mut s.s);
            for (r, row) in s.s.chunks_exact(BLOCK).enumerate() {
                let at = r * kp + j * BLOCK;
                s.panel[at..at + BLOCK].copy_from_slice(row);
            }
        }
        for r in 0..BLOCK {
            let row = &mut s.panel[r * kp..r * kp + cols];
            if r >= rows {
                row.fill(0.0);
                continue;
            }
            let visible = visible_keys(g, i * BLOCK + r);
            let seen = &mut row[..visible];
            let bias = rule.bias.as_ref().map(|b| b.row(head, i * BLOCK + r));
            if let Some(bias) = bias {
                for (x, b) in seen.iter_mut().zip(bias) {
                    *x += b;
                }
            }
            let mx = tile::max(seen);
            if mx == f32::NEG_INFINITY {
                row.fill(0.0);
                continue;
            }
            if bias.is_some() {
                tile::exp_shifted_masked::<M>(seen, mx);
            } else {
                tile::exp_shifted::<M>(seen, mx);
            }
            let inv = 1.0 / tile::sum(seen);
            for x in seen.iter_mut() {
                *x *= inv;
            }
            row[visible..].fill(0.0);
        }
        for r in 0..rows {
            let gr = i * BLOCK + r;
            let seen = cols.min(tk);
            p[gr * tk..gr * tk + seen].copy_from_slice(&s.panel[r * kp..r * kp + seen]);
            // the keys past the causal limit (the result buffer is not zeroed)
            p[gr * tk + seen..(gr + 1) * tk].fill(0.0);
        }
        drop_panel((rule, head), g, i, (rows, cols.min(tk)), s);
        s.acc_q.fill(0.0);
        let coef = Coef {
            data: if rule.dropout.is_some() {
                &s.zpanel[..]
            } else {
                &s.panel[..]
            },
            row: kp,
            col: 1,
        };
        let tri = if g.causal {
            Tri::Lower(i * BLOCK)
        } else {
            Tri::Full
        };
        tile::accumulate::<M>(&mut s.acc_q, coef, &s.v[..cols * d], (cols, tri), d);
        for r in 0..rows {
            let gr = i * BLOCK + r;
            o[gr * d..(gr + 1) * d].copy_from_slice(&s.acc_q[r * d..(r + 1) * d]);
        }
    }
}

/// One head backward, one query block at a time: the block's probability rows and their
/// cotangents `dP = (gO vᵀ) ∘ Z + gP` in `BLOCK x T_kp` panels, `dS = P ∘ (dP - rowsum(P ∘
/// dP))`, then the contributions to dv, dk (key blocks seen), dq (this query block) and the
/// mask.
#[inline(always)]
fn backward_kernel<M: Madd>(
    g: &Dims,
    cot: Cotangents<'_>,
    HeadGrads {
        dq,
        dk,
        dv,
        mut ds,
        want,
    }: HeadGrads<'_>,
    s: &mut Scratch,
) -> Result<()> {
    let (tq, tk, d) = (g.tq, g.tk, g.d);
    let (qp, kp) = (g.padded(Side::Query), g.padded(Side::Key));
    rezero(&mut s.panel, BLOCK * kp);
    rezero(&mut s.dpanel, BLOCK * kp);
    rezero(&mut s.zpanel, BLOCK * kp);
    rezero(&mut s.acc_q, qp * d);
    rezero(&mut s.acc_k, kp * d);
    rezero(&mut s.acc_v, kp * d);
    for i in 0..g.blocks(Side::Query) {
        let keys = g.key_blocks(i);
        let cols = keys.end * BLOCK;
        let qi = i * BLOCK * d..(i + 1) * BLOCK * d;
        let rows = BLOCK.min(tq - i * BLOCK);
        let seen = cols.min(tk);
        s.panel.fill(0.0);
        s.dpanel.fill(0.0);
        for r in 0..rows {
            let from = (cot.head * tq + i * BLOCK + r) * tk;
            cot.p.copy_out(from, &mut s.panel[r * kp..r * kp + seen])?;
            if let Some(gp) = cot.gp {
                gp.copy_out(from, &mut s.dpanel[r * kp..r * kp + seen])?;
            }
        }
        if cot.go {
            // dP += (gO_i v_jᵀ) ∘ Z
            for j in keys.clone() {
                tile::scores::<M>(
                    &s.go[qi.clone()],
                    &s.vt[j * BLOCK..],
                    kp,
                    d,
                    g.diagonal(i, j),
                    &mut s.s,
                );
                for (r, row) in s.s.chunks_exact(BLOCK).enumerate().take(rows) {
                    let at = r * kp + j * BLOCK;
                    let n = BLOCK.min(tk - j * BLOCK);
                    let dp = &mut s.dpanel[at..at + n];
                    match cot.rule.dropout {
                        Some(z) => {
                            for (c, (x, &y)) in dp.iter_mut().zip(row).enumerate() {
                                *x += y * z.factor(cot.head, i * BLOCK + r, j * BLOCK + c);
                            }
                        }
                        None => {
                            for (x, &y) in dp.iter_mut().zip(row) {
                                *x += y;
                            }
                        }
                    }
                }
            }
        }
        for r in 0..BLOCK {
            let (p, dp) = (
                &s.panel[r * kp..r * kp + cols],
                &mut s.dpanel[r * kp..r * kp + cols],
            );
            let delta = tile::dot::<M>(p, dp);
            for (x, &p) in dp.iter_mut().zip(p) {
                *x = p * (*x - delta);
            }
        }
        if let Some(out) = ds.as_deref_mut() {
            for r in 0..rows {
                let at = (i * BLOCK + r) * tk;
                out[at..at + seen].copy_from_slice(&s.dpanel[r * kp..r * kp + seen]);
            }
        }
        drop_panel((cot.rule, cot.head), g, i, (rows, seen), s);
        let pz = if cot.rule.dropout.is_some() {
            &s.zpanel
        } else {
            &s.panel
        };
        for j in keys {
            let kj = j * BLOCK * d..(j + 1) * BLOCK * d;
            let tri = if g.diagonal(i, j) {
                Tri::Upper
            } else {
                Tri::Full
            };
            if want.v && cot.go {
                // dv_j += (P ∘ Z)_ijᵀ gO_i
                let p_t = Coef {
                    data: &pz[j * BLOCK..],
                    row: 1,
                    col: kp,
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
                    col: kp,
                };
                tile::accumulate::<M>(&mut s.acc_k[kj], ds_t, &s.q[qi.clone()], (BLOCK, tri), d);
            }
        }
        if want.q {
            // dq_i += dS_i k (times scale below)
            let ds = Coef {
                data: &s.dpanel[..],
                row: kp,
                col: 1,
            };
            let tri = if g.causal {
                Tri::Lower(i * BLOCK)
            } else {
                Tri::Full
            };
            tile::accumulate::<M>(&mut s.acc_q[qi], ds, &s.k[..cols * d], (cols, tri), d);
        }
    }
    for (o, a) in dq.iter_mut().zip(&s.acc_q[..tq * d]) {
        *o = g.scale * a;
    }
    dk.copy_from_slice(&s.acc_k[..tk * d]);
    dv.copy_from_slice(&s.acc_v[..tk * d]);
    Ok(())
}

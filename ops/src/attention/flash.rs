//! Flash-style causal attention: the context only, computed block by block with an online
//! softmax; backward keeps just the per-row logsumexp `[B, H, T]` (plus q, k, v and the context)
//! and recomputes each probability tile from it.
// The per-head kernels are inlined into the ISA wrappers that `simd!` generates.
#![allow(clippy::inline_always)]

use autograd_core::kernel::Madd;
use autograd_core::{differentiable, simd, Result, Tensor};

use super::causal_self_attention;
use super::geometry::{Dims, Side};
use super::head::{
    for_each_head, gradients, pack_forward, pack_rows, pack_transposed, results2, rezero,
    transpose_keys, zeroed, Gradients, HeadGrads, Input, Scratch, Want,
};
use super::options::AttentionOptions;
use super::rule::{Rule, Spec};
use super::tile::{self, Coef, Tri, BLOCK};

/// Scaled-dot-product attention over q `[B, H, T_q, D]` and k, v `[B, H, T_k, D]` (Float32),
/// as PyTorch's `scaled_dot_product_attention`, without materialising the `T_q x T_k`
/// probabilities: `dropout(softmax(scale · q kᵀ + mask)) v`. Returns the context
/// `[B, H, T_q, D]`.
///
/// [`AttentionOptions`] add the causal mask (top-left, as `is_causal`), a Bool or additive
/// [`AttentionMask`](super::AttentionMask) (full or key-padding; a query with no key left gets a
/// zero context and zero gradients, not NaN), a scale and dropout on the probabilities. Forward
/// walks key blocks of 32 with an online softmax; the graph keeps q, k, v, the mask, the
/// context and one logsumexp per row, `O(B·H·T·D)` bytes plus the mask, and backward recomputes
/// the probabilities (and the dropout mask) block by block. An additive mask gets its gradient
/// summed back to its own shape (that gradient alone materialises `B·H·T_q·T_k` floats while it
/// is computed). Errors: a dtype other than Float32 (`Error::Type`), extents that disagree, a
/// mask that does not broadcast, a scale that is not finite (`Error::Value`); inputs may be
/// strided views.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{scaled_dot_product_attention, AttentionMask, AttentionOptions};
/// let q = Tensor::from_vec(vec![0.5f32; 4], shape![1, 1, 1, 4])?;
/// let kv = Tensor::from_vec((0..12).map(|i| i as f32).collect::<Vec<_>>(), shape![1, 1, 3, 4])?;
/// // scale 0 scores every key alike; the third is padding, so the query averages the first two
/// let pad = Tensor::from_vec(vec![false, false, true], shape![1, 3])?;
/// let options = AttentionOptions::new().mask(AttentionMask::KeyPadding(pad)).scale(0.0);
/// let o = scaled_dot_product_attention(&q, &kv, &kv, &options)?;
/// assert_eq!(o.values::<f32>()?, [2.0, 3.0, 4.0, 5.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &AttentionOptions,
) -> Result<Tensor> {
    let (spec, mask) = Spec::of("scaled_dot_product_attention", options);
    flash(q, k, v, mask, spec)
}

/// Causal scaled-dot-product self-attention over `[B, H, T, D]` (Float32) without
/// materialising the `T x T` probabilities: `softmax(scale · q kᵀ + causal mask) v`, `scale`
/// defaulting to `1 / sqrt(D)`. Returns the context `[B, H, T, D]`.
///
/// [`scaled_dot_product_attention`] with `causal` set, for q, k and v of one shape
/// (`Error::Value` otherwise; `Error::Type` for a dtype other than Float32). Values and
/// gradients agree with [`causal_attention`](super::causal_attention) to about 1e-5.
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
pub fn flash_causal_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f32>,
) -> Result<Tensor> {
    let spec = causal_self_attention("flash_causal_attention", [q, k, v], scale)?;
    flash(q, k, v, None, spec)
}

#[differentiable]
fn flash(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, spec: Spec) -> Result<Tensor> {
    let (dims, rule) = spec.resolve([q, k, v], mask)?;
    let (context, stats) = forward([q, k, v], &dims, &rule)?;
    #[residual]
    let lse = stats;
    // With S = scale q kᵀ + mask, P = softmax(S) = exp(S - lse), Z the dropout's factors,
    // O = (P ∘ Z) v and dO = g:
    //   dv = (P ∘ Z)ᵀ dO,  dP = (dO vᵀ) ∘ Z,  dS = P ∘ (dP - delta) with
    //   delta = rowsum(P ∘ dP) = rowsum(dO ∘ O),  dq = scale dS k,  dk = scale dSᵀ q,
    //   dmask = dS summed to the mask's shape.
    #[allow(clippy::type_complexity)]
    fn vjp(
        g: &Tensor,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        spec: Spec,
        output: &Tensor,
        lse: &Tensor,
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
        backward([q, k, v], mask, [output, lse, g], spec, want)
    }
    Ok(context)
}

/// The context and the per-row logsumexp of every head.
fn forward([q, k, v]: [&Tensor; 3], g: &Dims, rule: &Rule) -> Result<(Tensor, Tensor)> {
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    results2(q.tensor(), &g.context_dims(), &g.row_dims(), |o, lse| {
        if g.is_empty() {
            return Ok(());
        }
        let items: Vec<_> = o
            .chunks_mut(g.head_len(Side::Query))
            .zip(lse.chunks_mut(g.tq))
            .enumerate()
            .collect();
        for_each_head(g, items, |(b, (o, lse)), s| {
            s.reserve_accumulators(g)?;
            pack_forward(s, [&q, &k, &v], b, g)?;
            forward_head(g, (rule, b), o, lse, s);
            Ok(())
        })
    })
}

/// The wanted gradients of q, k, v and the mask from the saved context and logsumexp and the
/// cotangent `go`.
fn backward(
    [q, k, v]: [&Tensor; 3],
    mask: Option<&Tensor>,
    [output, lse, go]: [&Tensor; 3],
    spec: Spec,
    want: Want,
) -> Result<Gradients> {
    if !(want.q || want.k || want.v || want.mask) {
        return Ok((None, None, None, None));
    }
    let (g, rule) = spec.resolve([q, k, v], mask)?;
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    let (o, lse, go) = (Input::new(output)?, Input::new(lse)?, Input::new(go)?);
    gradients(&g, &rule, (q.tensor(), mask), want, |b, grads, s| {
        pack_backward(s, [&q, &k, &v], [&o, &lse, &go], b, &g)?;
        backward_head(&g, (&rule, b), grads, s);
        Ok(())
    })
}

/// Packs what a backward pass over head `head` reads: scaled q rows, k rows and kᵀ, vᵀ, the
/// cotangent's rows, the context's rows (for `delta = rowsum(dO ∘ O)`) and the logsumexps.
pub(super) fn pack_backward(
    s: &mut Scratch,
    [q, k, v]: [&Input<'_>; 3],
    [o, lse, go]: [&Input<'_>; 3],
    head: usize,
    g: &Dims,
) -> Result<()> {
    pack_rows(&mut s.q, q, (head, Side::Query), g, g.scale)?;
    // k read once: its rows, then kᵀ from them
    pack_rows(&mut s.k, k, (head, Side::Key), g, 1.0)?;
    transpose_keys(&mut s.kt, &s.k, g)?;
    pack_transposed(&mut s.vt, &mut s.tmp, v, head, g)?;
    pack_rows(&mut s.go, go, (head, Side::Query), g, 1.0)?;
    pack_rows(&mut s.acc_v, o, (head, Side::Query), g, 1.0)?;
    zeroed(&mut s.lse, g.padded(Side::Query))?;
    lse.copy_out(head * g.tq, &mut s.lse[..g.tq])
}

simd!(pub(super) fn forward_head(g: &Dims, head: (&Rule, usize), o: &mut [f32], lse: &mut [f32], s: &mut Scratch) => forward_kernel);
simd!(pub(super) fn backward_head(g: &Dims, head: (&Rule, usize), grads: HeadGrads<'_>, s: &mut Scratch) => backward_kernel);

/// One head forward (q scaled, kᵀ and v packed in `s`): for each query block, the key blocks
/// it sees with a running row maximum `m` and normaliser `l` (the online softmax), then
/// `O = acc / l`, `lse = m + ln l`; a row that sees no key gets `O = 0` and `lse = +inf` (so
/// backward finds probability 0 everywhere in it).
#[inline(always)]
fn forward_kernel<M: Madd>(
    g: &Dims,
    (rule, head): (&Rule, usize),
    o: &mut [f32],
    lse: &mut [f32],
    s: &mut Scratch,
) {
    let (tq, d, kp) = (g.tq, g.d, g.padded(Side::Key));
    rezero(&mut s.acc_q, BLOCK * d);
    let (mut m, mut l) = ([0.0f32; BLOCK], [0.0f32; BLOCK]);
    for i in 0..g.blocks(Side::Query) {
        m.fill(f32::NEG_INFINITY);
        l.fill(0.0);
        s.acc_q.fill(0.0);
        let rows = BLOCK.min(tq - i * BLOCK);
        let qi = &s.q[i * BLOCK * d..(i + 1) * BLOCK * d];
        for j in g.key_blocks(i) {
            if rule.skips(head, g, (i, j)) {
                continue;
            }
            let diagonal = g.diagonal(i, j);
            tile::scores::<M>(qi, &s.kt[j * BLOCK..], kp, d, diagonal, &mut s.s);
            for (r, row) in s.s.as_chunks_mut::<BLOCK>().0.iter_mut().enumerate() {
                if r >= rows {
                    // a padding query
                    row.fill(0.0);
                    continue;
                }
                let visible = g.visible(i, j, r);
                let bias = rule
                    .bias
                    .as_ref()
                    .map(|b| &b.row(head, i * BLOCK + r)[j * BLOCK..]);
                if let Some(bias) = bias {
                    for (x, b) in row[..visible].iter_mut().zip(bias) {
                        *x += b;
                    }
                }
                let mx = tile::row_max(row, visible).max(m[r]);
                if mx == f32::NEG_INFINITY {
                    // nothing seen yet in this row
                    row.fill(0.0);
                    continue;
                }
                let corr = if m[r] == f32::NEG_INFINITY {
                    1.0
                } else {
                    tile::exp::<M>(m[r] - mx)
                };
                let sum = tile::exp_row::<M>(row, visible, mx, bias.is_some());
                l[r] = M::madd(l[r], corr, sum);
                m[r] = mx;
                if let Some(z) = rule.dropout {
                    for (c, x) in row[..visible].iter_mut().enumerate() {
                        *x *= z.factor(head, i * BLOCK + r, j * BLOCK + c);
                    }
                }
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
            let tri = if diagonal { Tri::Lower(0) } else { Tri::Full };
            tile::accumulate::<M>(&mut s.acc_q, coef, vj, (BLOCK, tri), d);
        }
        for r in 0..rows {
            let at = (i * BLOCK + r) * d;
            let out = &mut o[at..at + d];
            if l[r] > 0.0 {
                let inv = 1.0 / l[r];
                for (o, a) in out.iter_mut().zip(&s.acc_q[r * d..(r + 1) * d]) {
                    *o = a * inv;
                }
                lse[i * BLOCK + r] = m[r] + l[r].ln();
            } else {
                out.fill(0.0);
                lse[i * BLOCK + r] = f32::INFINITY;
            }
        }
    }
}

/// One head backward (q scaled, k, kᵀ, vᵀ, the cotangent, the context (in `acc_v`) and the
/// logsumexp packed in `s`): for each key block `j` and each query block that sees it, the
/// probability tile `exp(S - lse)` again, then its contributions to dv, dk, dq and the mask.
/// Padding rows and unseen entries have probability 0, so they add nothing.
#[inline(always)]
fn backward_kernel<M: Madd>(
    g: &Dims,
    (rule, head): (&Rule, usize),
    HeadGrads {
        dq,
        dk,
        dv,
        mut ds,
        want,
    }: HeadGrads<'_>,
    s: &mut Scratch,
) {
    let (tq, tk, d) = (g.tq, g.tk, g.d);
    let (qp, kp) = (g.padded(Side::Query), g.padded(Side::Key));
    rezero(&mut s.delta, qp);
    for (r, dl) in s.delta[..tq].iter_mut().enumerate() {
        let at = r * d..(r + 1) * d;
        *dl = tile::dot::<M>(&s.go[at.clone()], &s.acc_v[at]);
    }
    rezero(&mut s.acc_q, qp * d);
    rezero(&mut s.acc_k, kp * d);
    rezero(&mut s.acc_v, kp * d);
    for j in 0..g.blocks(Side::Key) {
        let kj = j * BLOCK * d..(j + 1) * BLOCK * d;
        for i in g.query_blocks(j) {
            if rule.skips(head, g, (i, j)) {
                continue;
            }
            let qi = i * BLOCK * d..(i + 1) * BLOCK * d;
            let rows = BLOCK.min(tq - i * BLOCK);
            let diagonal = g.diagonal(i, j);
            tile::scores::<M>(
                &s.q[qi.clone()],
                &s.kt[j * BLOCK..],
                kp,
                d,
                diagonal,
                &mut s.s,
            );
            for (r, row) in s.s.as_chunks_mut::<BLOCK>().0.iter_mut().enumerate() {
                if r >= rows {
                    row.fill(0.0);
                    continue;
                }
                let visible = g.visible(i, j, r);
                if let Some(bias) = &rule.bias {
                    let bias = &bias.row(head, i * BLOCK + r)[j * BLOCK..];
                    for (x, b) in row[..visible].iter_mut().zip(bias) {
                        *x += b;
                    }
                }
                let stat = s.lse[i * BLOCK + r];
                tile::exp_row::<M>(row, visible, stat, rule.bias.is_some());
            }
            // the probabilities after dropout, where dv and dP need them
            let pz: &[f32; BLOCK * BLOCK] = match rule.dropout {
                Some(z) => {
                    for (at, (x, &p)) in s.pz.iter_mut().zip(s.s.iter()).enumerate() {
                        let (r, c) = (at / BLOCK, at % BLOCK);
                        *x = if p == 0.0 {
                            0.0
                        } else {
                            p * z.factor(head, i * BLOCK + r, j * BLOCK + c)
                        };
                    }
                    &s.pz
                }
                None => &s.s,
            };
            if want.v {
                // dv_j += (P ∘ Z)_ijᵀ dO_i
                let p_t = Coef {
                    data: &pz[..],
                    row: 1,
                    col: BLOCK,
                };
                let tri = if diagonal { Tri::Upper } else { Tri::Full };
                tile::accumulate::<M>(
                    &mut s.acc_v[kj.clone()],
                    p_t,
                    &s.go[qi.clone()],
                    (BLOCK, tri),
                    d,
                );
            }
            if want.q || want.k || want.mask {
                // dS = P ∘ ((dO_i v_jᵀ) ∘ Z - delta), with Z / P = (P ∘ Z) / P read off pz
                tile::scores::<M>(
                    &s.go[qi.clone()],
                    &s.vt[j * BLOCK..],
                    kp,
                    d,
                    diagonal,
                    &mut s.ds,
                );
                for r in 0..BLOCK {
                    let dl = s.delta[i * BLOCK + r];
                    let at = r * BLOCK..(r + 1) * BLOCK;
                    let (p, ds) = (&s.s[at.clone()], &mut s.ds[at.clone()]);
                    if let Some(z) = rule.dropout {
                        for (c, (x, &p)) in ds.iter_mut().zip(p).enumerate() {
                            let f = z.factor(head, i * BLOCK + r, j * BLOCK + c);
                            *x = p * (*x * f - dl);
                        }
                    } else {
                        for (x, &p) in ds.iter_mut().zip(p) {
                            *x = p * (*x - dl);
                        }
                    }
                }
                if let Some(out) = ds.as_deref_mut() {
                    for r in 0..rows {
                        let at = (i * BLOCK + r) * tk + j * BLOCK;
                        let n = BLOCK.min(tk - j * BLOCK);
                        out[at..at + n].copy_from_slice(&s.ds[r * BLOCK..r * BLOCK + n]);
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
                        (BLOCK, if diagonal { Tri::Upper } else { Tri::Full }),
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
                    let tri = if diagonal { Tri::Lower(0) } else { Tri::Full };
                    tile::accumulate::<M>(&mut s.acc_q[qi], ds, &s.k[kj.clone()], (BLOCK, tri), d);
                }
            }
        }
    }
    for (o, a) in dq.iter_mut().zip(&s.acc_q[..tq * d]) {
        *o = g.scale * a;
    }
    dk.copy_from_slice(&s.acc_k[..tk * d]);
    dv.copy_from_slice(&s.acc_v[..tk * d]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::head::{pack_rows, pack_transposed};
    use autograd_core::kernel::{Fused, Fused512, Split};

    /// The kernels compiled for the baseline target (two roundings), with FMA and with
    /// AVX-512's wider tiles agree, so the CPU a run lands on changes results only by rounding.
    #[test]
    fn baseline_and_fma_kernels_agree() -> Result<()> {
        let g = Dims {
            batch: 1,
            heads_per_batch: 1,
            tq: 100,
            tk: 100,
            d: 35,
            scale: 0.3,
            causal: true,
        };
        let rule = Rule {
            bias: None,
            dropout: None,
        };
        let n = g.head_len(Side::Query);
        let value = |i: usize, seed: usize| ((i * 7 + seed) % 23) as f32 / 23.0 - 0.5;
        let tensor = |seed| {
            Tensor::from_vec(
                (0..n).map(|i| value(i, seed)).collect::<Vec<_>>(),
                autograd_core::Shape::from(&[1, 1, 100, 35][..]),
            )
        };
        let (q, k, v, go) = (tensor(1)?, tensor(2)?, tensor(3)?, tensor(4)?);
        let (q, k, v, go) = (
            Input::new(&q)?,
            Input::new(&k)?,
            Input::new(&v)?,
            Input::new(&go)?,
        );
        let mut runs = Vec::new();
        for copy in 0..3 {
            let mut s = Scratch::default();
            s.reserve_accumulators(&g)?;
            pack_rows(&mut s.q, &q, (0, Side::Query), &g, g.scale)?;
            pack_transposed(&mut s.kt, &mut s.tmp, &k, 0, &g)?;
            pack_rows(&mut s.v, &v, (0, Side::Key), &g, 1.0)?;
            let (mut o, mut lse) = (vec![0.0f32; n], vec![0.0f32; g.tq]);
            match copy {
                0 => forward_kernel::<Split>(&g, (&rule, 0), &mut o, &mut lse, &mut s),
                1 => forward_kernel::<Fused>(&g, (&rule, 0), &mut o, &mut lse, &mut s),
                _ => forward_kernel::<Fused512>(&g, (&rule, 0), &mut o, &mut lse, &mut s),
            }
            pack_rows(&mut s.k, &k, (0, Side::Key), &g, 1.0)?;
            pack_transposed(&mut s.vt, &mut s.tmp, &v, 0, &g)?;
            pack_rows(&mut s.go, &go, (0, Side::Query), &g, 1.0)?;
            zeroed(&mut s.acc_v, g.padded(Side::Query) * g.d)?;
            s.acc_v[..n].copy_from_slice(&o);
            zeroed(&mut s.lse, g.padded(Side::Query))?;
            s.lse[..g.tq].copy_from_slice(&lse);
            let (mut dq, mut dk, mut dv) = (vec![0.0f32; n], vec![0.0f32; n], vec![0.0f32; n]);
            let want = Want {
                q: true,
                k: true,
                v: true,
                mask: false,
            };
            let grads = HeadGrads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dv,
                ds: None,
                want,
            };
            match copy {
                0 => backward_kernel::<Split>(&g, (&rule, 0), grads, &mut s),
                1 => backward_kernel::<Fused>(&g, (&rule, 0), grads, &mut s),
                _ => backward_kernel::<Fused512>(&g, (&rule, 0), grads, &mut s),
            }
            runs.push([o, lse, dq, dk, dv]);
        }
        for other in &runs[1..] {
            for (a, b) in runs[0].iter().zip(other) {
                for (x, y) in a.iter().zip(b) {
                    assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs {y}");
                }
            }
        }
        Ok(())
    }
}

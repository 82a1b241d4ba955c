//! Flash-style causal attention: the context only, computed block by block with an online
//! softmax; backward keeps just the per-row logsumexp `[B, H, T]` (plus q, k, v and the context)
//! and recomputes each probability tile from it.
// The per-head kernels are inlined into the ISA wrappers that `simd!` generates.
#![allow(clippy::inline_always)]

use autograd_core::kernel::Madd;
use autograd_core::{differentiable, simd, Result, Tensor};

use super::geometry::Dims;
use super::head::{
    for_each_head, pack_forward, pack_rows, pack_transposed, results2, results3, rezero, zeroed,
    HeadGrads, Input, Scratch, Want,
};
use super::tile::{self, Coef, Tri, BLOCK};

/// Causal scaled-dot-product attention over `[B, H, T, D]` (Float32) without materialising the
/// `T x T` probabilities: `softmax(scale · q kᵀ + causal mask) v`, `scale` defaulting to
/// `1 / sqrt(D)`. Returns the context `[B, H, T, D]`.
///
/// Forward walks key blocks of 32 with an online softmax; the graph keeps q, k, v, the context
/// and one logsumexp per row, `O(B·H·T·D)` bytes, and backward recomputes the probabilities
/// block by block. Values and gradients agree with [`causal_attention`](super::causal_attention)
/// to about 1e-5. q, k and v must share one shape (`Error::Value`) and be Float32
/// (`Error::Type`); they may be strided views. Heads run in parallel on the kernel threads above a
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
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    results2(q.tensor(), &g.context_dims(), &g.row_dims(), |o, lse| {
        if g.is_empty() {
            return Ok(());
        }
        let items: Vec<_> = o
            .chunks_mut(g.head_len())
            .zip(lse.chunks_mut(g.t))
            .enumerate()
            .collect();
        for_each_head(g, items, |(b, (o, lse)), s| {
            s.reserve_accumulators(g)?;
            pack_forward(s, [&q, &k, &v], b, g)?;
            forward_head(g, o, lse, s);
            Ok(())
        })
    })
}

/// The wanted gradients of q, k and v from the saved context and logsumexp and the cotangent
/// `g`.
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
    let (q, k, v) = (Input::new(q)?, Input::new(k)?, Input::new(v)?);
    let (o, lse, go) = (Input::new(output)?, Input::new(lse)?, Input::new(go)?);
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
            pack_transposed(&mut s.kt, &mut s.tmp, &k, b, &g)?;
            pack_rows(&mut s.k, &k, b, &g, 1.0)?;
            pack_transposed(&mut s.vt, &mut s.tmp, &v, b, &g)?;
            pack_rows(&mut s.go, &go, b, &g, 1.0)?;
            // the context rows, for delta = rowsum(dO ∘ O)
            pack_rows(&mut s.acc_v, &o, b, &g, 1.0)?;
            zeroed(&mut s.lse, g.padded())?;
            lse.copy_out(b * g.t, &mut s.lse[..g.t])?;
            backward_head(&g, HeadGrads { dq, dk, dv, want }, s);
            Ok(())
        })
    })?;
    Ok((
        want.q.then_some(dq),
        want.k.then_some(dk),
        want.v.then_some(dv),
    ))
}

simd!(fn forward_head(g: &Dims, o: &mut [f32], lse: &mut [f32], s: &mut Scratch) => forward_kernel);
simd!(fn backward_head(g: &Dims, grads: HeadGrads<'_>, s: &mut Scratch) => backward_kernel);

/// One head forward (q scaled, kᵀ and v packed in `s`): for each query block, the key blocks up
/// to the diagonal with a running row maximum `m` and normaliser `l` (the online softmax), then
/// `O = acc / l`, `lse = m + ln l`.
#[inline(always)]
fn forward_kernel<M: Madd>(g: &Dims, o: &mut [f32], lse: &mut [f32], s: &mut Scratch) {
    let (t, d, tp) = (g.t, g.d, g.padded());
    rezero(&mut s.acc_q, BLOCK * d);
    let (mut m, mut l) = ([0.0f32; BLOCK], [0.0f32; BLOCK]);
    for i in 0..g.blocks() {
        m.fill(f32::NEG_INFINITY);
        l.fill(0.0);
        s.acc_q.fill(0.0);
        let qi = &s.q[i * BLOCK * d..(i + 1) * BLOCK * d];
        for j in 0..=i {
            tile::scores::<M>(qi, &s.kt[j * BLOCK..], tp, d, j == i, &mut s.s);
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
            let tri = if j == i { Tri::Lower(0) } else { Tri::Full };
            tile::accumulate::<M>(&mut s.acc_q, coef, vj, (BLOCK, tri), d);
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

/// One head backward (q scaled, k, kᵀ, vᵀ, the cotangent, the context (in `acc_v`) and the
/// logsumexp packed in `s`): for each key block `j` and each query block `i >= j`, the
/// probability tile `exp(S - lse)` again, then its contributions to dv, dk and dq. Padding rows
/// have a zero cotangent and delta, so they add nothing.
#[inline(always)]
fn backward_kernel<M: Madd>(
    g: &Dims,
    HeadGrads { dq, dk, dv, want }: HeadGrads<'_>,
    s: &mut Scratch,
) {
    let (t, d, tp, nb) = (g.t, g.d, g.padded(), g.blocks());
    rezero(&mut s.delta, tp);
    for (r, dl) in s.delta[..t].iter_mut().enumerate() {
        let at = r * d..(r + 1) * d;
        *dl = tile::dot::<M>(&s.go[at.clone()], &s.acc_v[at]);
    }
    rezero(&mut s.acc_q, tp * d);
    rezero(&mut s.acc_k, tp * d);
    rezero(&mut s.acc_v, tp * d);
    for j in 0..nb {
        let kj = j * BLOCK * d..(j + 1) * BLOCK * d;
        for i in j..nb {
            let qi = i * BLOCK * d..(i + 1) * BLOCK * d;
            let diagonal = i == j;
            tile::scores::<M>(
                &s.q[qi.clone()],
                &s.kt[j * BLOCK..],
                tp,
                d,
                diagonal,
                &mut s.s,
            );
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
                let tri = if diagonal { Tri::Upper } else { Tri::Full };
                tile::accumulate::<M>(
                    &mut s.acc_v[kj.clone()],
                    p_t,
                    &s.go[qi.clone()],
                    (BLOCK, tri),
                    d,
                );
            }
            if want.q || want.k {
                // dS = P ∘ (dO_i v_jᵀ - delta)
                tile::scores::<M>(
                    &s.go[qi.clone()],
                    &s.vt[j * BLOCK..],
                    tp,
                    d,
                    diagonal,
                    &mut s.ds,
                );
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
    let n = t * d;
    for (o, a) in dq.iter_mut().zip(&s.acc_q[..n]) {
        *o = g.scale * a;
    }
    dk.copy_from_slice(&s.acc_k[..n]);
    dv.copy_from_slice(&s.acc_v[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::head::{pack_rows, pack_transposed};
    use autograd_core::kernel::{Fused, Split};

    /// The kernels compiled for the baseline target (two roundings) and with FMA agree, so
    /// the CPU a run lands on changes results only by rounding.
    #[test]
    fn baseline_and_fma_kernels_agree() -> Result<()> {
        let g = Dims {
            batch: 1,
            heads_per_batch: 1,
            t: 100,
            d: 35,
            scale: 0.3,
        };
        let n = g.head_len();
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
        for fused in [false, true] {
            let mut s = Scratch::default();
            s.reserve_accumulators(&g)?;
            pack_rows(&mut s.q, &q, 0, &g, g.scale)?;
            pack_transposed(&mut s.kt, &mut s.tmp, &k, 0, &g)?;
            pack_rows(&mut s.v, &v, 0, &g, 1.0)?;
            let (mut o, mut lse) = (vec![0.0f32; n], vec![0.0f32; g.t]);
            if fused {
                forward_kernel::<Fused>(&g, &mut o, &mut lse, &mut s);
            } else {
                forward_kernel::<Split>(&g, &mut o, &mut lse, &mut s);
            }
            pack_rows(&mut s.k, &k, 0, &g, 1.0)?;
            pack_transposed(&mut s.vt, &mut s.tmp, &v, 0, &g)?;
            pack_rows(&mut s.go, &go, 0, &g, 1.0)?;
            zeroed(&mut s.acc_v, g.padded() * g.d)?;
            s.acc_v[..n].copy_from_slice(&o);
            zeroed(&mut s.lse, g.padded())?;
            s.lse[..g.t].copy_from_slice(&lse);
            let (mut dq, mut dk, mut dv) = (vec![0.0f32; n], vec![0.0f32; n], vec![0.0f32; n]);
            let want = Want {
                q: true,
                k: true,
                v: true,
            };
            let grads = HeadGrads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dv,
                want,
            };
            if fused {
                backward_kernel::<Fused>(&g, grads, &mut s);
            } else {
                backward_kernel::<Split>(&g, grads, &mut s);
            }
            runs.push([o, lse, dq, dk, dv]);
        }
        for (a, b) in runs[0].iter().zip(&runs[1]) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs {y}");
            }
        }
        Ok(())
    }
}

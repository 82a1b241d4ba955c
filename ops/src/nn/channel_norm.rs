//! The kernel batch and group normalisation share: `x` of shape `[N, C, ...]` seen as `N C`
//! planes of `S` elements, each statistic (a channel for batch norm, a sample's group of
//! channels for group norm) gathering whole planes, normalised as `(x - mean) rstd w + b` with
//! per-channel `w` and `b`. The statistics are computed by the caller (batch or running
//! ones) and captured by the node; the VJP differentiates through them when they are the
//! batch's own.

// The per-plane sums are `#[inline(always)]` so that `simd!` compiles them for each
// instruction set.
#![allow(clippy::inline_always)]

use std::ops::Range;
use std::sync::Arc;

use autograd_core::kernel::{self, alloc, lane_sum_runs};
use autograd_core::{differentiable, simd, Captured, Layout, Result, Tensor};

use crate::pooling::plane::each_plane;

/// Which planes share a statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// One statistic per channel over every sample (batch norm).
    Channel,
    /// One statistic per sample and group of `C / groups` consecutive channels (group norm).
    Group(usize),
}

impl Captured for Grouping {}

/// `x`'s extents seen as `[N, C, S]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extents {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) s: usize,
}

impl Captured for Extents {}

impl Extents {
    /// The extents of `dims` (rank at least 2, checked by the caller).
    pub(crate) fn of(dims: &[usize]) -> Extents {
        Extents {
            n: dims[0],
            c: dims[1],
            s: dims[2..].iter().product(),
        }
    }

    /// How many statistics `grouping` computes.
    pub(crate) fn stats(self, grouping: Grouping) -> usize {
        match grouping {
            Grouping::Channel => self.c,
            Grouping::Group(g) => self.n * g,
        }
    }

    /// The statistic of sample `n`'s channel `c`.
    #[inline]
    fn stat_at(self, grouping: Grouping, n: usize, c: usize) -> usize {
        match grouping {
            Grouping::Channel => c,
            Grouping::Group(g) => n * g + c / (self.c / g),
        }
    }

    /// The planes of statistic `k`.
    fn planes_of(self, grouping: Grouping, k: usize) -> Vec<usize> {
        match grouping {
            Grouping::Channel => (0..self.n).map(|n| n * self.c + k).collect(),
            Grouping::Group(g) => {
                let per = self.c / g;
                let first = (k / g) * self.c + (k % g) * per;
                (first..first + per).collect()
            }
        }
    }

    /// The elements of plane `p` in the compact buffer.
    #[inline]
    fn plane(self, p: usize) -> Range<usize> {
        p * self.s..(p + 1) * self.s
    }

    /// The elements of the planes of statistic `k`, as runs.
    fn runs_of(self, grouping: Grouping, k: usize) -> impl Iterator<Item = Range<usize>> {
        self.planes_of(grouping, k)
            .into_iter()
            .map(move |p| self.plane(p))
    }
}

/// Planes below this many elements go to the threads a sample at a time.
const SHORT_PLANE: usize = 256;

/// `f(n, c, plane n C + c of out)` for every plane of the compact `out` (`[N, C, S]`), on
/// the kernel threads when `work` is large: a plane a task, or a sample a task when planes
/// are short (a task per 16-element plane costs more than the plane).
fn each_channel_plane(
    out: &mut [f32],
    ext: Extents,
    work: usize,
    f: impl Fn(usize, usize, &mut [f32]) + Sync,
) {
    if ext.s == 0 || ext.c == 0 {
        return;
    }
    if ext.s >= SHORT_PLANE {
        each_plane(out, ext.s, work, |p, o| f(p / ext.c, p % ext.c, o));
    } else {
        each_plane(out, ext.c * ext.s, work, |n, o| {
            for (c, op) in o.chunks_exact_mut(ext.s).enumerate() {
                f(n, c, op);
            }
        });
    }
}

/// The mean and biased (population) variance of every statistic of `x` (`[N, C, ...]`,
/// Float32), in two passes over its planes on the kernel threads ([`lane_sum_runs`]). The mean is
/// summed relative to the statistic's first element, so a constant channel has its exact mean
/// (and variance 0).
pub(crate) fn statistics(x: &Tensor, ext: Extents, grouping: Grouping) -> Result<Vec<(f64, f64)>> {
    kernel::read_logical::<f32, _>(x, |xs| {
        kernel::map_tasks(ext.stats(grouping), |k| {
            let runs: Vec<Range<usize>> = ext.runs_of(grouping, k).collect();
            let count = (runs.len() * ext.s) as f64;
            let first = runs
                .first()
                .and_then(|r| xs[r.clone()].first())
                .copied()
                .unwrap_or(0.0);
            let shifted =
                simd!(len = count as usize; shifted_sum(&xs, runs.iter().cloned(), first));
            let mean = f64::from(first) + shifted / count;
            let mu = mean as f32;
            let sq = simd!(len = count as usize; squares_about(&xs, runs.iter().cloned(), mu));
            (mean, sq / count)
        })
    })
}

/// `Σ (v - s)` over the runs of `xs`.
#[inline(always)]
fn shifted_sum(xs: &[f32], runs: impl Iterator<Item = Range<usize>>, s: f32) -> f64 {
    lane_sum_runs(xs, xs, runs, |v, _| v - s)
}

/// `Σ (v - mu)²` over the runs of `xs`.
#[inline(always)]
fn squares_about(xs: &[f32], runs: impl Iterator<Item = Range<usize>>, mu: f32) -> f64 {
    lane_sum_runs(xs, xs, runs, |v, _| (v - mu) * (v - mu))
}

/// `(Σ g, Σ g xh)` over the runs of `gs` and `xs`, `xh = (x - mu) r`.
#[inline(always)]
fn grad_sums(
    gs: &[f32],
    xs: &[f32],
    runs: impl Iterator<Item = Range<usize>> + Clone,
    (mu, r): (f32, f32),
) -> (f64, f64) {
    (
        lane_sum_runs(gs, gs, runs.clone(), |g, _| g),
        lane_sum_runs(gs, xs, runs, |g, x| g * ((x - mu) * r)),
    )
}

/// The values of an optional per-channel parameter, or `fill` for each of `c` channels.
fn values_or(t: Option<&Tensor>, c: usize, fill: f32) -> Result<Vec<f32>> {
    match t {
        Some(t) => t.values::<f32>(),
        None => alloc::filled(c, fill),
    }
}

/// `(x - mean) rstd w + b` per element, `mean` and `rstd` per statistic of `grouping`, `w` and
/// `b` per channel (ones and zeros when absent). With `batch`, `mean` and `rstd` are `x`'s own
/// statistics and the gradient flows through them; else they are constants (running ones).
#[differentiable]
pub(crate) fn normalise(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    grouping: Grouping,
    mean: &[f32],
    rstd: &[f32],
    batch: bool,
) -> Result<Tensor> {
    // Per statistic of M elements, xh = (x - mu) r and gh = g w:
    //   batch:    dx = r (gh - mean(gh) - xh mean(gh xh))   (mu and r depend on x)
    //   constant: dx = r gh
    //   dw(c) = sum over the planes of c of g xh,   db(c) = sum of g
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        grouping: Grouping,
        mean: &[f32],
        rstd: &[f32],
        batch: bool,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let ext = Extents::of(&x.dims());
        let w = values_or(weight, ext.c, 1.0)?;
        let want_w = weight.is_some() && needs.input(1);
        let want_b = bias.is_some() && needs.input(2);
        let (dx, sums) = kernel::read_logical_pair::<f32, f32, _>(g, x, |gs, xs| {
            // (Σ g, Σ g xh) per channel (batch norm, whose statistics are channels) or per
            // plane (group norm, whose weights differ within a statistic): the batch terms
            // and the parameters' gradients are both sums of these
            let per_channel = grouping == Grouping::Channel;
            let units: Vec<(f64, f64)> = if (needs.input(0) && batch) || want_w || want_b {
                let count = if per_channel { ext.c } else { ext.n * ext.c };
                kernel::map_tasks(count, |u| {
                    let (k, runs) = if per_channel {
                        (u, ext.runs_of(grouping, u).collect::<Vec<_>>())
                    } else {
                        (
                            ext.stat_at(grouping, u / ext.c, u % ext.c),
                            vec![ext.plane(u)],
                        )
                    };
                    let len = runs.len() * ext.s;
                    let stat = (mean[k], rstd[k]);
                    simd!(len = len; grad_sums(&gs, &xs, runs.iter().cloned(), stat))
                })
            } else {
                Vec::new()
            };
            // the sums over channel c's planes
            let channel_sums = |c: usize| -> (f64, f64) {
                if per_channel {
                    units[c]
                } else {
                    (0..ext.n).fold((0.0, 0.0), |(a, b), n| {
                        let (sg, sgx) = units[n * ext.c + c];
                        (a + sg, b + sgx)
                    })
                }
            };
            let dx = if needs.input(0) {
                // mean(gh) and mean(gh xh) per statistic, gh = g w
                let terms: Vec<(f32, f32)> = if batch {
                    (0..ext.stats(grouping))
                        .map(|k| {
                            let (mut a, mut b) = (0.0f64, 0.0f64);
                            let planes = if per_channel {
                                let wc = f64::from(w[k]);
                                (a, b) = (wc * units[k].0, wc * units[k].1);
                                ext.n
                            } else {
                                let planes = ext.planes_of(grouping, k);
                                for &p in &planes {
                                    let wc = f64::from(w[p % ext.c]);
                                    a += wc * units[p].0;
                                    b += wc * units[p].1;
                                }
                                planes.len()
                            };
                            let m = (planes * ext.s) as f64;
                            ((a / m) as f32, (b / m) as f32)
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let layout = Arc::new(Layout::row_major(&x.dims())?);
                Some(kernel::fresh_overwritten::<f32>(g, layout, |out| {
                    each_channel_plane(out, ext, 4 * gs.len(), |n, c, o| {
                        let k = ext.stat_at(grouping, n, c);
                        let (wc, r, mu) = (w[c], rstd[k], mean[k]);
                        let span = ext.plane(n * ext.c + c);
                        let (gp, xp) = (&gs[span.clone()], &xs[span]);
                        if batch {
                            let (a, b) = terms[k];
                            for ((o, &gv), &xv) in o.iter_mut().zip(gp).zip(xp) {
                                *o = r * (gv * wc - a - (xv - mu) * r * b);
                            }
                        } else {
                            for (o, &gv) in o.iter_mut().zip(gp) {
                                *o = r * gv * wc;
                            }
                        }
                    });
                    Ok(())
                })?)
            } else {
                None
            };
            // dw(c) = Σ g xh and db(c) = Σ g over the planes of channel c
            let sums: Vec<(f64, f64)> = if want_w || want_b {
                (0..ext.c)
                    .map(|c| {
                        let (sg, sgx) = channel_sums(c);
                        (sgx, sg)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Ok::<_, autograd_core::Error>((dx, sums))
        })??;
        let gw = match weight {
            Some(t) if want_w => Some(t.f32_like(sums.iter().map(|s| s.0 as f32).collect())?),
            _ => None,
        };
        let gb = match bias {
            Some(t) if want_b => Some(t.f32_like(sums.iter().map(|s| s.1 as f32).collect())?),
            _ => None,
        };
        Ok((dx, gw, gb))
    }
    let ext = Extents::of(&x.dims());
    let w = values_or(weight, ext.c, 1.0)?;
    let b = values_or(bias, ext.c, 0.0)?;
    let layout = Arc::new(Layout::row_major(&x.dims())?);
    kernel::read_logical::<f32, _>(x, |xs| {
        kernel::fresh_overwritten::<f32>(x, layout, |out| {
            each_channel_plane(out, ext, 2 * xs.len(), |n, c, o| {
                let k = ext.stat_at(grouping, n, c);
                // (x - mu) r w + b = x a + (b - mu a)
                let a = rstd[k] * w[c];
                let shift = b[c] - mean[k] * a;
                for (o, &v) in o.iter_mut().zip(&xs[ext.plane(n * ext.c + c)]) {
                    *o = v * a + shift;
                }
            });
            Ok(())
        })
    })?
}

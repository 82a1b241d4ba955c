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

use autograd_core::kernel::{self, alloc, lane_sum};
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

    /// The statistic plane `p` (`= n C + c`) belongs to.
    #[inline]
    fn stat_of(self, grouping: Grouping, p: usize) -> usize {
        match grouping {
            Grouping::Channel => p % self.c,
            Grouping::Group(g) => (p / self.c) * g + (p % self.c) / (self.c / g),
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
}

/// The mean and biased (population) variance of every statistic of `x` (`[N, C, ...]`,
/// Float32), in two passes over its planes on the kernel threads: f32 lanes within a plane's
/// blocks, f64 across them (`lane_sum`). The mean is summed relative to the statistic's first
/// element, so a constant channel has its exact mean (and variance 0).
pub(crate) fn statistics(x: &Tensor, ext: Extents, grouping: Grouping) -> Result<Vec<(f64, f64)>> {
    kernel::read_logical::<f32, _>(x, |xs| {
        kernel::map_tasks(ext.stats(grouping), |k| {
            let planes = ext.planes_of(grouping, k);
            let count = (planes.len() * ext.s) as f64;
            let first = planes
                .first()
                .and_then(|&p| xs[ext.plane(p)].first())
                .copied()
                .unwrap_or(0.0);
            let shifted: f64 = planes
                .iter()
                .map(|&p| {
                    let xp = &xs[ext.plane(p)];
                    simd!(len = xp.len(); shifted_sum(xp, first))
                })
                .sum();
            let mean = f64::from(first) + shifted / count;
            let mu = mean as f32;
            let sq: f64 = planes
                .iter()
                .map(|&p| {
                    let xp = &xs[ext.plane(p)];
                    simd!(len = xp.len(); squares_about(xp, mu))
                })
                .sum();
            (mean, sq / count)
        })
    })
}

/// `Σ (v - s)` over a plane.
#[inline(always)]
fn shifted_sum(xp: &[f32], s: f32) -> f64 {
    lane_sum(xp, xp, |v, _| v - s)
}

/// `Σ (v - mu)²` over a plane.
#[inline(always)]
fn squares_about(xp: &[f32], mu: f32) -> f64 {
    lane_sum(xp, xp, |v, _| (v - mu) * (v - mu))
}

/// `(Σ g, Σ g xh)` over a plane, `xh = (x - mu) r`.
#[inline(always)]
fn plane_sums(gp: &[f32], xp: &[f32], mu: f32, r: f32) -> (f64, f64) {
    (
        lane_sum(gp, gp, |g, _| g),
        lane_sum(gp, xp, |g, x| g * ((x - mu) * r)),
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
            // (Σ g, Σ g xh) of every plane, in one pass: the batch terms and the parameters'
            // gradients are both sums of these
            let per_plane: Vec<(f64, f64)> = if (needs.input(0) && batch) || want_w || want_b {
                kernel::map_tasks(ext.n * ext.c, |p| {
                    let k = ext.stat_of(grouping, p);
                    let (gp, xp) = (&gs[ext.plane(p)], &xs[ext.plane(p)]);
                    simd!(len = gp.len(); plane_sums(gp, xp, mean[k], rstd[k]))
                })
            } else {
                Vec::new()
            };
            let dx = if needs.input(0) {
                // mean(gh) and mean(gh xh) per statistic, gh = g w
                let terms: Vec<(f32, f32)> = if batch {
                    (0..ext.stats(grouping))
                        .map(|k| {
                            let planes = ext.planes_of(grouping, k);
                            let (mut a, mut b) = (0.0f64, 0.0f64);
                            for &p in &planes {
                                let wc = f64::from(w[p % ext.c]);
                                a += wc * per_plane[p].0;
                                b += wc * per_plane[p].1;
                            }
                            let m = (planes.len() * ext.s) as f64;
                            ((a / m) as f32, (b / m) as f32)
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let layout = Arc::new(Layout::row_major(&x.dims())?);
                Some(kernel::fresh::<f32>(g, layout, |out| {
                    each_plane(out, ext.s, 4 * gs.len(), |p, o| {
                        let k = ext.stat_of(grouping, p);
                        let (wc, r, mu) = (w[p % ext.c], rstd[k], mean[k]);
                        let (gp, xp) = (&gs[ext.plane(p)], &xs[ext.plane(p)]);
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
                        (0..ext.n).fold((0.0, 0.0), |(dw, db), n| {
                            let (sg, sgx) = per_plane[n * ext.c + c];
                            (dw + sgx, db + sg)
                        })
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
        kernel::fresh::<f32>(x, layout, |out| {
            each_plane(out, ext.s, 2 * xs.len(), |p, o| {
                let (k, c) = (ext.stat_of(grouping, p), p % ext.c);
                // (x - mu) r w + b = x a + (b - mu a)
                let a = rstd[k] * w[c];
                let shift = b[c] - mean[k] * a;
                for (o, &v) in o.iter_mut().zip(&xs[ext.plane(p)]) {
                    *o = v * a + shift;
                }
            });
            Ok(())
        })
    })?
}

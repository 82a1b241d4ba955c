//! Gradient averaging in buckets, as PyTorch's DDP does it: the gradients, last parameter
//! first (backward produces them in about that order), are packed into flat `f32` buffers of
//! about `bucket_bytes` each; each bucket's non-blocking all-reduce (`MPI_Iallreduce`) starts
//! as soon as it is packed, so later buckets are packed while earlier ones travel. They are
//! unpacked once all have arrived, so that a failure any bucket reports stops every write. A
//! single bucket has nothing to overlap with and takes the blocking `MPI_Allreduce`, which MPI
//! libraries tune harder.
//!
//! A bucket's buffer holds its gradients' values in logical order, then one presence flag per
//! gradient (1 where this rank has one), then one failure flag (1 when this rank's backward
//! failed or a gradient could not be read). After the sum every rank knows which gradients
//! some rank had (a missing one counts as zeros, as in PyTorch) and whether any rank failed,
//! so every rank takes the same decision.
//! The buffers are kept from step to step ([`Buckets`]).

use std::ops::Range;

use autograd_core::{bail, kernel, Error, Result, Tensor};
use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;

use super::World;

/// Which gradients go into which bucket, the same on every rank (it depends on the sizes and
/// the bucket size only, which the ranks agreed on).
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Each bucket's gradients (indices into the caller's list, descending).
    buckets: Vec<Vec<usize>>,
    /// Each gradient's element count.
    sizes: Vec<usize>,
}

/// The largest buffer one MPI call can carry, in elements.
const MAX_COUNT: usize = i32::MAX as usize;

impl Plan {
    /// Buckets of at most `bucket_bytes` of `f32` values each (a gradient larger than that is
    /// a bucket by itself), filled from the last gradient to the first.
    pub(crate) fn new(sizes: &[usize], bucket_bytes: usize) -> Result<Plan> {
        let cap = (bucket_bytes / std::mem::size_of::<f32>()).max(1);
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        let mut filled = 0usize;
        for i in (0..sizes.len()).rev() {
            let n = sizes[i];
            if n + 2 > MAX_COUNT {
                bail!(
                    NotImplemented,
                    "a gradient of {n} elements does not fit one MPI message of at most {MAX_COUNT}"
                );
            }
            match buckets.last_mut() {
                // the buffer adds a flag per gradient and the failure flag to the values
                Some(b) if filled + n <= cap && filled + n + b.len() + 2 <= MAX_COUNT => {
                    b.push(i);
                }
                _ => {
                    buckets.push(vec![i]);
                    filled = 0;
                }
            }
            filled += n;
        }
        Ok(Plan {
            buckets,
            sizes: sizes.to_vec(),
        })
    }

    /// How many buckets there are.
    pub(crate) fn len(&self) -> usize {
        self.buckets.len()
    }

    /// The buffer length of bucket `b`: values, a flag per gradient, the failure flag.
    fn buffer_len(&self, b: usize) -> usize {
        let items = &self.buckets[b];
        items.iter().map(|&i| self.sizes[i]).sum::<usize>() + items.len() + 1
    }

    /// Where bucket `b`'s gradients lie in its buffer, in bucket order.
    fn spans(&self, b: usize) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        let mut at = 0;
        self.buckets[b].iter().map(move |&i| {
            let span = at..at + self.sizes[i];
            at = span.end;
            (i, span)
        })
    }
}

/// The flat buffers of a [`Plan`]'s buckets, kept from one averaging to the next (a model's
/// worth of send and receive buffers, so that a step neither allocates nor faults in fresh
/// pages for them).
#[derive(Debug)]
pub(crate) struct Buckets {
    plan: Plan,
    sends: Vec<Vec<f32>>,
    recvs: Vec<Vec<f32>>,
}

impl Buckets {
    /// The buffers of `plan`, allocated on first use.
    pub(crate) fn new(plan: Plan) -> Buckets {
        Buckets {
            plan,
            sends: Vec::new(),
            recvs: Vec::new(),
        }
    }

    /// How many buckets there are.
    pub(crate) fn len(&self) -> usize {
        self.plan.len()
    }

    /// Sums `grads` (one per planned gradient, `None` where this rank has none) across ranks,
    /// a bucket at a time, then calls `write(i, sum)` for each gradient that some rank had
    /// (`sum` over ranks in logical order; a rank without one counted zeros); a gradient no
    /// rank had is skipped. `failed` is this rank's failure before averaging; a gradient that
    /// cannot be read while packing is one too. When any rank failed, no `write` runs on any
    /// rank (the flags of every bucket are summed before the first write) and every rank gets
    /// an error: its own, or one saying how many ranks failed. A `write` that fails on some
    /// rank is an error on every rank (and leaves that rank's gradients partly written). No
    /// failure keeps a rank out of a collective, so none makes the others wait forever.
    ///
    /// Every rank must call this with the same plan (the ranks agreed on it); `grads` that do
    /// not match the plan's sizes are this rank's failure (a bug).
    pub(crate) fn all_reduce(
        &mut self,
        world: &World,
        grads: &[Option<Tensor>],
        failed: Option<Error>,
        write: impl FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<()> {
        let plan = &self.plan;
        let mut failed = failed;
        let mismatch = grads.len() != plan.sizes.len()
            || grads
                .iter()
                .zip(&plan.sizes)
                .any(|(g, &n)| g.as_ref().is_some_and(|g| g.size() != n));
        if mismatch {
            failed.get_or_insert(Error::Runtime(format!(
                "gradients of sizes {:?} for buckets planned for {:?}",
                grads
                    .iter()
                    .map(|g| g.as_ref().map(Tensor::size))
                    .collect::<Vec<_>>(),
                plan.sizes
            )));
        }
        if self.sends.len() != plan.len() {
            self.sends = (0..plan.len())
                .map(|b| vec![0.0; plan.buffer_len(b)])
                .collect();
            self.recvs = self.sends.clone();
        }
        let comm = world.comm();
        let mut pack_next = |b: usize, send: &mut [f32]| {
            if failed.is_none() {
                if let Err(e) = pack(plan, b, grads, send) {
                    failed = Some(e);
                }
            }
            if let Some(last) = send.last_mut() {
                *last = f32::from(u8::from(failed.is_some()));
            }
        };
        if let ([send], [recv]) = (&mut self.sends[..], &mut self.recvs[..]) {
            // one bucket overlaps with nothing: the blocking all-reduce, which MPI libraries
            // tune harder than their non-blocking ones
            pack_next(0, send);
            world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        } else {
            mpi::request::multiple_scope(plan.len(), |scope, requests| {
                for (b, (send, recv)) in
                    self.sends.iter_mut().zip(self.recvs.iter_mut()).enumerate()
                {
                    pack_next(b, send);
                    let send: &[f32] = send;
                    requests.add(comm.immediate_all_reduce_into(
                        scope,
                        send,
                        &mut recv[..],
                        SystemOperation::sum(),
                    ));
                }
                requests.wait_all(&mut Vec::new());
            });
        }
        // the most ranks any bucket saw failing: the same number on every rank
        let failures = self
            .recvs
            .iter()
            .map(|r| r.last().copied().unwrap_or(0.0))
            .fold(0.0f32, f32::max);
        let n = world.size();
        let outcome = match failed {
            Some(e) => Err(e),
            None if failures > 0.0 => Err(Error::Runtime(format!(
                "{failures} of the {n} ranks failed before their gradients could be averaged; the gradients are this rank's own"
            ))),
            None => self.write_sums(write),
        };
        // a failed write is this rank's alone: make it every rank's (always a collective, so
        // a plan without buckets still reports a failed backward everywhere)
        super::agreement::all_succeeded(world, outcome, "writing the averaged gradients")
    }

    /// Calls `write(i, sum)` for every gradient some rank had, from the received buckets,
    /// stopping at the first error.
    fn write_sums(&self, mut write: impl FnMut(usize, &[f32]) -> Result<()>) -> Result<()> {
        for (b, summed) in self.recvs.iter().enumerate() {
            let flags = summed.len() - self.plan.buckets[b].len() - 1;
            for (k, (i, span)) in self.plan.spans(b).enumerate() {
                if summed[flags + k] > 0.0 {
                    write(i, &summed[span])?;
                }
            }
        }
        Ok(())
    }
}

/// Writes bucket `b`'s gradients and presence flags into `buf`: values in logical order,
/// zeros where a gradient is missing, then a flag per gradient (1 where present).
fn pack(plan: &Plan, b: usize, grads: &[Option<Tensor>], buf: &mut [f32]) -> Result<()> {
    let flags = buf.len() - plan.buckets[b].len() - 1;
    for (k, (i, span)) in plan.spans(b).enumerate() {
        if let Some(g) = &grads[i] {
            kernel::read_logical::<f32, _>(g, |xs| buf[span].copy_from_slice(xs))?;
            buf[flags + k] = 1.0;
        } else {
            buf[span].fill(0.0);
            buf[flags + k] = 0.0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Plan;

    #[test]
    fn buckets_fill_from_the_last_gradient() {
        // 8 values a bucket: 4 + 2, then 5 + 3
        let plan = Plan::new(&[3, 5, 2, 4], 8 * 4).unwrap();
        assert_eq!(plan.buckets, [vec![3, 2], vec![1, 0]]);
        assert_eq!(plan.buffer_len(0), 6 + 2 + 1);
        let spans: Vec<_> = plan.spans(1).collect();
        assert_eq!(spans, [(1, 0..5), (0, 5..8)]);
        // 7 values a bucket: a gradient never splits, and one too large is alone
        let seven = Plan::new(&[3, 5, 2, 9], 7 * 4).unwrap();
        assert_eq!(seven.buckets, [vec![3], vec![2, 1], vec![0]]);
        let one = Plan::new(&[3, 5, 2, 4], 1 << 20).unwrap();
        assert_eq!(one.buckets, [vec![3, 2, 1, 0]]);
        let each = Plan::new(&[3, 5, 2, 4], 1).unwrap();
        assert_eq!(each.len(), 4);
    }
}

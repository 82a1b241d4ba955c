//! Gradient averaging in buckets, as PyTorch's DDP does it: the gradients, last parameter
//! first (backward produces them in about that order), are packed into flat `f32` buffers of
//! about `bucket_bytes` each; each bucket's non-blocking all-reduce (`MPI_Iallreduce`) starts
//! as soon as it is packed, so later buckets are packed while earlier ones travel, and each is
//! unpacked as soon as it completes, in whatever order.
//!
//! A bucket's buffer holds its gradients' values in logical order, then one presence flag per
//! gradient (1 where this rank has one), then one failure flag (1 when this rank's backward
//! failed). After the sum every rank knows which gradients some rank had (a missing one counts
//! as zeros, as in PyTorch) and whether any rank failed, so every rank takes the same decision.

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
                Some(b) if filled + n <= cap => b.push(i),
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

/// Averages `grads` (one per planned gradient, `None` where this rank has none) across ranks.
/// Returns, for each gradient, the mean over ranks where some rank had it (a rank without
/// counts as zeros) and `None` where no rank had it. `failed` is this rank's own failure,
/// shared through the buckets' failure flags: when any rank failed, every rank gets an error
/// (its own, or one saying how many ranks failed) and nothing is returned.
pub(crate) fn average(
    world: &World,
    plan: &Plan,
    grads: &[Option<Tensor>],
    failed: Option<Error>,
) -> Result<Vec<Option<Vec<f32>>>> {
    if grads.len() != plan.sizes.len() {
        bail!(
            Runtime,
            "{} gradients for a bucket plan of {}",
            grads.len(),
            plan.sizes.len()
        );
    }
    let mut failed = failed;
    let mut sends: Vec<Vec<f32>> = (0..plan.len())
        .map(|b| vec![0.0; plan.buffer_len(b)])
        .collect();
    let mut recvs: Vec<Vec<f32>> = sends.iter().map(|s| vec![0.0; s.len()]).collect();
    let mut out: Vec<Option<Vec<f32>>> = vec![None; grads.len()];
    let mut failures = 0.0f32;
    let n = world.size();
    let comm = world.comm();
    mpi::request::multiple_scope(plan.len(), |scope, requests| {
        for (b, (send, recv)) in sends.iter_mut().zip(recvs.iter_mut()).enumerate() {
            if failed.is_none() {
                if let Err(e) = pack(plan, b, grads, send) {
                    failed = Some(e);
                }
            }
            if let Some(last) = send.last_mut() {
                *last = f32::from(u8::from(failed.is_some()));
            }
            let send: &[f32] = send;
            requests.add(comm.immediate_all_reduce_into(
                scope,
                send,
                &mut recv[..],
                SystemOperation::sum(),
            ));
        }
        while requests.incomplete() > 0 {
            let Some((b, _, summed)) = requests.wait_any() else {
                break;
            };
            failures = failures.max(summed.last().copied().unwrap_or(0.0));
            unpack(plan, b, summed, n, &mut out);
        }
    });
    match failed {
        Some(e) => Err(e),
        None if failures > 0.0 => Err(Error::Runtime(format!(
            "{failures} of the {n} ranks failed before their gradients could be averaged; this rank's .grad holds its local gradients"
        ))),
        None => Ok(out),
    }
}

/// Writes bucket `b`'s gradients and presence flags into `buf` (zeros where a gradient is
/// missing; the buffer starts zeroed).
fn pack(plan: &Plan, b: usize, grads: &[Option<Tensor>], buf: &mut [f32]) -> Result<()> {
    let values_end = buf.len() - plan.buckets[b].len() - 1;
    for (k, (i, span)) in plan.spans(b).enumerate() {
        let Some(g) = &grads[i] else { continue };
        if g.size() != span.len() {
            bail!(
                Value,
                "gradient {i} has {} elements where {} were planned",
                g.size(),
                span.len()
            );
        }
        kernel::read_logical::<f32, _>(g, |xs| buf[span].copy_from_slice(xs))?;
        buf[values_end + k] = 1.0;
    }
    Ok(())
}

/// Reads bucket `b`'s summed buffer into `out`: the mean of each gradient some rank had.
fn unpack(plan: &Plan, b: usize, summed: &[f32], n: usize, out: &mut [Option<Vec<f32>>]) {
    let flags = summed.len() - plan.buckets[b].len() - 1;
    for (k, (i, span)) in plan.spans(b).enumerate() {
        if summed[flags + k] > 0.0 {
            out[i] = Some(summed[span].iter().map(|&s| s / n as f32).collect());
        }
    }
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

//! Gradient averaging. On one machine the gradients go through the ranks' shared memory
//! ([`SharedSlots`]) as one stream, last parameter first, each rank packing its values straight
//! into its slot (from a copy only for a gradient off the CPU, or one whose storage another
//! gradient shares) and the sums written straight from the slots into the gradients. Across
//! machines they go as PyTorch's DDP sends them: packed into flat `f32` buffers of about
//! `bucket_bytes` each, whose non-blocking all-reduces (`MPI_Iallreduce`) start as soon as each
//! is packed, so later buckets are packed while earlier ones travel; each is unpacked as soon
//! as it arrives, while later ones still travel (every gradient is checked readable before the
//! first bucket leaves, so every bucket carries the same failure flag). A single bucket has
//! nothing to overlap with and takes the blocking `MPI_Allreduce`, which MPI libraries tune
//! harder.
//!
//! Either way the ranks first learn, summed with the values or before them, which gradients
//! some rank has (a missing one counts as zeros, as in PyTorch) and whether any rank failed, so
//! every rank takes the same decision: a bucket's buffer holds its values, then one presence
//! flag per gradient, then one failure flag; the shared-memory stream is preceded by a sum of
//! the failure flag and every presence flag. The buffers are kept from step to step
//! ([`Buckets`]).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use autograd_core::{bail, kernel, Error, Result, Tensor};
use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;

use super::shared_slots::SharedSlots;
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

    /// Sums `grads` (one per planned gradient, `None` where this rank has none) across ranks
    /// and calls `write(i, at, sums)` with the sums of elements `at..at + sums.len()` of each
    /// gradient that some rank had (in logical order, a rank without one counted zeros; a
    /// gradient's parts arrive in any order, each element once); a gradient no rank had is
    /// skipped. `failed` is this rank's failure before averaging; a gradient that cannot be
    /// read is one too. When any rank failed before averaging, no `write` runs on any rank and
    /// every rank gets an error: its own, or one saying how many ranks failed. A `write` that
    /// fails on some rank is an error on every rank, and leaves gradients partly written. No
    /// failure keeps a rank out of a collective, so none makes the others wait forever.
    ///
    /// `finish` runs on a rank whose writes all succeeded (on no rank when a rank failed
    /// before averaging), before the ranks agree on the outcome, so that its failure too is
    /// an error on every rank.
    ///
    /// Every rank must call this with the same plan (the ranks agreed on it); `grads` that do
    /// not match the plan's sizes are this rank's failure (a bug).
    pub(crate) fn all_reduce(
        &mut self,
        world: &World,
        grads: &[Option<Tensor>],
        failed: Option<Error>,
        write: impl FnMut(usize, usize, &[f32]) -> Result<()>,
        finish: impl FnOnce() -> Result<()>,
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
        // every gradient checked readable (or copied) before any value leaves: no read fails
        // once another rank may have written a mean
        let staged = staged(grads, &mut failed);
        let bytes = plan.sizes.iter().sum::<usize>() * std::mem::size_of::<f32>();
        let outcome = match world.shared_slots(bytes) {
            Some(slots) => stream(&slots, world.size(), plan, grads, &staged, failed, write),
            None => self.in_buckets(world, grads, &staged, failed, write),
        };
        let outcome = outcome.and_then(|()| finish());
        // a failed write is this rank's alone: make it every rank's (always a collective, so
        // a plan without buckets still reports a failed backward everywhere)
        super::agreement::all_succeeded(
            world,
            outcome,
            "writing the averaged gradients (or stepping with them)",
        )
    }

    /// [`Buckets::all_reduce`] in the library's all-reduces, a bucket at a time: every
    /// bucket's all-reduce starts as soon as it is packed, and each bucket's sums are written
    /// as soon as it arrives, while later ones are still in flight (MPI is asked after each
    /// gradient written whether more have arrived, which also moves them along).
    fn in_buckets(
        &mut self,
        world: &World,
        grads: &[Option<Tensor>],
        staged: &[Option<Vec<f32>>],
        mut failed: Option<Error>,
        mut write: impl FnMut(usize, usize, &[f32]) -> Result<()>,
    ) -> Result<()> {
        let plan = &self.plan;
        // read from `staged`, no bucket can fail to pack once the first has left: every bucket
        // carries the same failure flag, and one that arrives clean may be written at once
        if self.sends.len() != plan.len() {
            self.sends = (0..plan.len())
                .map(|b| vec![0.0; plan.buffer_len(b)])
                .collect();
            self.recvs = self.sends.clone();
        }
        let comm = world.comm();
        let pack_next = |b: usize, send: &mut [f32], failed: &mut Option<Error>| {
            if failed.is_none() {
                if let Err(e) = pack(plan, b, grads, staged, send) {
                    *failed = Some(e);
                }
            }
            if let Some(last) = send.last_mut() {
                *last = f32::from(u8::from(failed.is_some()));
            }
        };
        // the most ranks a bucket saw failing, and the first failed write
        let mut failures = 0.0f32;
        let mut written = Ok(());
        if let ([send], [recv]) = (&mut self.sends[..], &mut self.recvs[..]) {
            // one bucket overlaps with nothing: the blocking all-reduce, which MPI libraries
            // tune harder than their non-blocking ones
            pack_next(0, send, &mut failed);
            world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            failures = recv.last().copied().unwrap_or(0.0);
            if failures == 0.0 && failed.is_none() {
                written = write_bucket(plan, 0, recv, &mut write, &mut || {});
            }
        } else {
            mpi::request::multiple_scope(plan.len(), |scope, requests| {
                for (b, (send, recv)) in
                    self.sends.iter_mut().zip(self.recvs.iter_mut()).enumerate()
                {
                    pack_next(b, send, &mut failed);
                    let send: &[f32] = send;
                    requests.add(comm.immediate_all_reduce_into(
                        scope,
                        send,
                        &mut recv[..],
                        SystemOperation::sum(),
                    ));
                }
                let mut arrived = VecDeque::new();
                while requests.incomplete() > 0 || !arrived.is_empty() {
                    let (b, summed): (usize, &[f32]) = match arrived.pop_front() {
                        Some(next) => next,
                        // (while one is in flight, MPI answers a wait with one)
                        None => match requests.wait_any() {
                            Some((b, _, summed)) => (b, summed),
                            None => break,
                        },
                    };
                    let flag = summed.last().copied().unwrap_or(0.0);
                    failures = failures.max(flag);
                    if flag > 0.0 || failed.is_some() || written.is_err() {
                        continue;
                    }
                    // between gradients, whatever else arrived is queued (never asked with
                    // none in flight: MPI then answers "undefined", which the binding rejects)
                    let mut poll = || {
                        while requests.incomplete() > 0 {
                            let Some((b, _, summed)) = requests.test_any() else {
                                break;
                            };
                            arrived.push_back((b, summed));
                        }
                    };
                    written = write_bucket(plan, b, summed, &mut write, &mut poll);
                }
            });
        }
        match failed {
            Some(e) => Err(e),
            None if failures > 0.0 => Err(ranks_failed(failures, world.size())),
            None => written,
        }
    }
}

/// Calls `write(i, 0, sum)` for every gradient of bucket `b` some rank had, from its received
/// buffer `summed`, and `between()` after each; stops at the first error.
fn write_bucket(
    plan: &Plan,
    b: usize,
    summed: &[f32],
    write: &mut impl FnMut(usize, usize, &[f32]) -> Result<()>,
    between: &mut impl FnMut(),
) -> Result<()> {
    let flags = summed.len() - plan.buckets[b].len() - 1;
    for (k, (i, span)) in plan.spans(b).enumerate() {
        if summed[flags + k] > 0.0 {
            write(i, 0, &summed[span])?;
            between();
        }
    }
    Ok(())
}

/// The error of a rank that did not fail itself when `failures` ranks of `n` did.
fn ranks_failed(failures: f32, n: usize) -> Error {
    Error::Runtime(format!(
        "{failures} of the {n} ranks failed before their gradients could be averaged; the gradients are this rank's own"
    ))
}

/// [`Buckets::all_reduce`] through the shared memory of one machine: first the failure flag and
/// a presence flag per gradient, then the values of every gradient some rank has, last
/// gradient first, as one stream packed straight into the slots and written straight from
/// them.
fn stream(
    slots: &SharedSlots,
    ranks: usize,
    plan: &Plan,
    grads: &[Option<Tensor>],
    staged: &[Option<Vec<f32>>],
    failed: Option<Error>,
    mut write: impl FnMut(usize, usize, &[f32]) -> Result<()>,
) -> Result<()> {
    // the plan's length on every rank, whatever this rank was given
    let head: Vec<f32> = std::iter::once(failed.is_some())
        .chain((0..plan.sizes.len()).map(|i| grads.get(i).is_some_and(Option::is_some)))
        .map(|b| f32::from(u8::from(b)))
        .collect();
    let mut summed = vec![0.0f32; head.len()];
    slots.all_reduce_sum(&head, &mut summed);
    if let Some(e) = failed {
        return Err(e);
    }
    if summed[0] > 0.0 {
        return Err(ranks_failed(summed[0], ranks));
    }
    let order: Vec<usize> = (0..plan.sizes.len())
        .rev()
        .filter(|&i| summed[1 + i] > 0.0)
        .collect();
    let spans = Spans::new(&order, &plan.sizes);
    // a gradient that cannot be read sends zeros, and fails every rank once the stream is done
    let unread = RefCell::new(None);
    let mut outcome = Ok(());
    slots.sum(
        spans.len(),
        |range, dst: &mut [f32]| {
            for (i, from, to) in spans.within(range.clone()) {
                let dst = &mut dst[to.start - range.start..to.end - range.start];
                if let Err(e) = read_part(staged, grads, i, from, dst) {
                    dst.fill(0.0);
                    unread.borrow_mut().get_or_insert(e);
                }
            }
        },
        |at, sums| {
            for (i, from, to) in spans.within(at..at + sums.len()) {
                if outcome.is_ok() && unread.borrow().is_none() {
                    outcome = write(i, from, &sums[to.start - at..to.end - at]);
                }
            }
        },
    );
    match unread.into_inner() {
        Some(e) => Err(e),
        None => outcome,
    }
}

/// Copies, up front, of the gradients the stream cannot read in place (`None` for the others,
/// or when this rank has failed already; a gradient that cannot be read fails it). The stream
/// reads each gradient in several parts and writes the means of a rank's own share before it
/// reads the later parts, so a gradient on a CPU carrier of its own is read in place (checked
/// readable here, before any rank writes a mean), while one off the CPU, or whose carrier
/// another gradient shares (a tensor and its transpose in one list), is copied here. Buckets
/// are packed from the same copies, so that no read fails after the first bucket has left.
/// `failed` may be set here; once it is, every gradient is `None`.
fn staged(grads: &[Option<Tensor>], failed: &mut Option<Error>) -> Vec<Option<Vec<f32>>> {
    let carrier = |g: &Tensor| {
        g.carrier()
            .ok()
            .filter(|_| kernel::is_cpu(g))
            .map(|c| Arc::as_ptr(c).cast::<()>())
    };
    let mut holders: HashMap<*const (), usize> = HashMap::new();
    for c in grads.iter().flatten().filter_map(carrier) {
        *holders.entry(c).or_default() += 1;
    }
    grads
        .iter()
        .map(|g| {
            let g = g.as_ref().filter(|_| failed.is_none())?;
            let read = if carrier(g).is_some_and(|c| holders.get(&c) == Some(&1)) {
                kernel::read::<f32, _>(g, |_| None)
            } else {
                g.values::<f32>().map(Some)
            };
            read.unwrap_or_else(|e| {
                failed.get_or_insert(e);
                None
            })
        })
        .collect()
}

/// Where gradients lie in a stream of them, one after the other.
struct Spans<'a> {
    order: &'a [usize],
    sizes: &'a [usize],
    /// Where each gradient of `order` starts, and the end of the last.
    starts: Vec<usize>,
}

impl<'a> Spans<'a> {
    fn new(order: &'a [usize], sizes: &'a [usize]) -> Spans<'a> {
        let starts = std::iter::once(0)
            .chain(order.iter().scan(0, |at, &i| {
                *at += sizes[i];
                Some(*at)
            }))
            .collect();
        Spans {
            order,
            sizes,
            starts,
        }
    }

    /// The stream's length.
    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The gradients the stream's `range` covers, each as `(i, from, to)`: gradient `i`'s
    /// elements from `from` lie at `to` in the stream.
    fn within(
        &self,
        range: Range<usize>,
    ) -> impl Iterator<Item = (usize, usize, Range<usize>)> + '_ {
        // the first gradient that ends after range.start
        let first = self.starts[1..].partition_point(|&end| end <= range.start);
        self.order[first..]
            .iter()
            .zip(&self.starts[first..])
            .take_while(move |&(_, &start)| start < range.end)
            .map(move |(&i, &start)| {
                let to = range.start.max(start)..range.end.min(start + self.sizes[i]);
                (i, to.start - start, to)
            })
            .filter(|(_, _, to)| !to.is_empty())
    }
}

/// Copies elements `from..from + dst.len()` of gradient `i` (in logical order) into `dst`: from
/// its [`staged`] copy, else read where it lies; zeros for a gradient this rank lacks.
fn read_part(
    staged: &[Option<Vec<f32>>],
    grads: &[Option<Tensor>],
    i: usize,
    from: usize,
    dst: &mut [f32],
) -> Result<()> {
    match (&staged[i], &grads[i]) {
        (Some(xs), _) => {
            dst.copy_from_slice(&xs[from..from + dst.len()]);
            Ok(())
        }
        (None, Some(g)) => kernel::read::<f32, _>(g, |xs| xs.copy_range(from, dst)),
        (None, None) => {
            dst.fill(0.0);
            Ok(())
        }
    }
}

/// Writes bucket `b`'s gradients and presence flags into `buf`: values in logical order,
/// zeros where a gradient is missing, then a flag per gradient (1 where present).
fn pack(
    plan: &Plan,
    b: usize,
    grads: &[Option<Tensor>],
    staged: &[Option<Vec<f32>>],
    buf: &mut [f32],
) -> Result<()> {
    let flags = buf.len() - plan.buckets[b].len() - 1;
    for (k, (i, span)) in plan.spans(b).enumerate() {
        read_part(staged, grads, i, 0, &mut buf[span])?;
        buf[flags + k] = f32::from(u8::from(grads[i].is_some()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Plan, Spans};

    #[test]
    fn spans_cut_a_stream_range_into_gradient_parts() {
        // gradients 3 (4 elements), 1 (2) and 0 (3), in that order: 0..4, 4..6, 6..9
        let sizes = [3, 2, 7, 4];
        let order = [3, 1, 0];
        let spans = Spans::new(&order, &sizes);
        assert_eq!(spans.len(), 9);
        let cut = |r: std::ops::Range<usize>| spans.within(r).collect::<Vec<_>>();
        assert_eq!(cut(0..9), [(3, 0, 0..4), (1, 0, 4..6), (0, 0, 6..9)]);
        assert_eq!(cut(3..5), [(3, 3, 3..4), (1, 0, 4..5)]);
        assert_eq!(cut(4..6), [(1, 0, 4..6)]);
        assert_eq!(cut(5..8), [(1, 1, 5..6), (0, 0, 6..8)]);
        assert_eq!(cut(8..9), [(0, 2, 8..9)]);
        assert!(cut(9..9).is_empty());
        assert!(cut(2..2).is_empty());
        let none = Spans::new(&[], &sizes);
        assert_eq!(none.len(), 0);
        assert!(none.within(0..0).next().is_none());
    }

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

//! One head at a time: inputs read head by head into per-head buffers padded to whole blocks
//! (reused across the heads a thread handles), results in pooled storage, and the split of heads
//! across threads.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};

use autograd_core::{bail, ensure, kernel, Layout, Result, Tensor};

use super::geometry::{Dims, Side};
use super::rule::Rule;
use super::tile::BLOCK;

/// The gradients of one head's q (`T_q x D`), k and v (`T_k x D`), row-major, the scores'
/// gradient (`T_q x T_k`) when the mask's is wanted, and which are wanted.
#[derive(Debug)]
pub(super) struct HeadGrads<'a> {
    pub dq: &'a mut [f32],
    pub dk: &'a mut [f32],
    pub dv: &'a mut [f32],
    pub ds: Option<&'a mut [f32]>,
    pub want: Want,
}

/// Which of q, k, v and an additive mask need a gradient (four independent flags).
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Want {
    pub q: bool,
    pub k: bool,
    pub v: bool,
    pub mask: bool,
}

/// Per-thread buffers of one head, padded to whole blocks of rows (`T_qp` query rows, `T_kp`
/// key rows; padding rows are zero, and the kernels cut padded keys from every row).
#[derive(Debug)]
pub(super) struct Scratch {
    /// `T_qp x D`: the queries times the scale.
    pub q: Vec<f32>,
    /// `T_kp x D`: the keys.
    pub k: Vec<f32>,
    /// `D x T_kp`: the keys transposed (score tiles read key columns as rows).
    pub kt: Vec<f32>,
    /// `T_kp x D`: the values.
    pub v: Vec<f32>,
    /// `D x T_kp`: the values transposed.
    pub vt: Vec<f32>,
    /// `T_qp x D`: the cotangent of the context.
    pub go: Vec<f32>,
    /// Accumulators: the context (`T_qp x D`), or the gradients of q (`T_qp x D`), k and v
    /// (`T_kp x D`).
    pub acc_q: Vec<f32>,
    pub acc_k: Vec<f32>,
    pub acc_v: Vec<f32>,
    /// `T_qp` row statistics (logsumexp, delta).
    pub lse: Vec<f32>,
    pub delta: Vec<f32>,
    /// `BLOCK x T_kp` rows of probabilities and of their cotangents (materialised form), and
    /// the probabilities after dropout.
    pub panel: Vec<f32>,
    pub dpanel: Vec<f32>,
    pub zpanel: Vec<f32>,
    /// One head of an input on its way to a transposed buffer.
    pub tmp: Vec<f32>,
    /// A head's results on their way to their rows of a packed tensor (apart from `tmp`,
    /// whose length differs, so that neither is zeroed again for every head).
    pub results: Vec<f32>,
    /// `BLOCK x BLOCK` tiles.
    pub s: Box<[f32; BLOCK * BLOCK]>,
    pub ds: Box<[f32; BLOCK * BLOCK]>,
    /// A probability tile after dropout.
    pub pz: Box<[f32; BLOCK * BLOCK]>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            q: Vec::new(),
            k: Vec::new(),
            kt: Vec::new(),
            v: Vec::new(),
            vt: Vec::new(),
            go: Vec::new(),
            acc_q: Vec::new(),
            acc_k: Vec::new(),
            acc_v: Vec::new(),
            lse: Vec::new(),
            delta: Vec::new(),
            panel: Vec::new(),
            dpanel: Vec::new(),
            zpanel: Vec::new(),
            tmp: Vec::new(),
            results: Vec::new(),
            s: Box::new([0.0; BLOCK * BLOCK]),
            ds: Box::new([0.0; BLOCK * BLOCK]),
            pz: Box::new([0.0; BLOCK * BLOCK]),
        }
    }
}

/// An input of the attention kernels, read one head at a time: a one-subtensor CPU tensor is
/// read in place, whatever its layout, under a short read lock per access (never two locks at
/// once, so q, k and v may share storage). A head of a strided view (`[B, T, H, D]` permuted
/// to `[B, H, T, D]`) is then gathered a row of `D` at a time straight into the kernel's
/// scratch, which reads each element once, as a compact copy made up front would, without
/// writing and reading that copy. Any other tensor (several subtensors, another carrier) is
/// read through such a copy.
#[derive(Debug)]
pub(super) struct Input<'a> {
    tensor: &'a Tensor,
    /// What heads are read from: `tensor` itself, or its compact copy.
    source: Tensor,
}

impl<'a> Input<'a> {
    pub fn new(tensor: &'a Tensor) -> Result<Input<'a>> {
        // heads of a CPU tensor are read through the kernel layer in place
        let source = if kernel::is_cpu(tensor) {
            tensor.clone()
        } else {
            tensor.contiguous()?
        };
        Ok(Input { tensor, source })
    }

    /// The tensor read.
    pub fn tensor(&self) -> &'a Tensor {
        self.tensor
    }

    /// Copies the elements at logical (row-major) positions `start..start + dst.len()`.
    pub fn copy_out(&self, start: usize, dst: &mut [f32]) -> Result<()> {
        let end = start + dst.len();
        kernel::read::<f32, _>(&self.source, |e| {
            ensure!(
                end <= e.len(),
                Runtime,
                "attention: positions {start}..{end} are out of range"
            );
            match e.as_slice() {
                Some(all) => dst.copy_from_slice(&all[start..end]),
                None => e.copy_range(start, dst),
            }
            Ok(())
        })?
    }
}

/// `dst` (`T_p x D`) = `factor ·` head `head` of `src` (`T x D`, rows of `side`), with zero
/// padding rows.
pub(super) fn pack_rows(
    dst: &mut Vec<f32>,
    src: &Input<'_>,
    (head, side): (usize, Side),
    g: &Dims,
    factor: f32,
) -> Result<()> {
    let n = g.head_len(side);
    sized(dst, g.padded(side) * g.d)?;
    src.copy_out(head * n, &mut dst[..n])?;
    dst[n..].fill(0.0);
    if factor != 1.0 {
        for x in &mut dst[..n] {
            *x *= factor;
        }
    }
    Ok(())
}

/// `dst` (`D x T_kp`) = head `head` of `src` (`T_k x D`) transposed, with zero padding
/// columns; `tmp` holds the head on the way.
pub(super) fn pack_transposed(
    dst: &mut Vec<f32>,
    tmp: &mut Vec<f32>,
    src: &Input<'_>,
    head: usize,
    g: &Dims,
) -> Result<()> {
    sized(tmp, g.head_len(Side::Key))?;
    src.copy_out(head * g.head_len(Side::Key), tmp)?;
    transpose_keys(dst, tmp, g)
}

/// `dst` (`D x T_kp`) = the first `T_k` rows of `rows` (a head's keys or values, `D` wide)
/// transposed, with zero padding columns.
pub(super) fn transpose_keys(dst: &mut Vec<f32>, rows: &[f32], g: &Dims) -> Result<()> {
    let (t, tp, d) = (g.rows(Side::Key), g.padded(Side::Key), g.d);
    sized(dst, d * tp)?;
    kernel::transpose_f32(rows, d, (t, d), dst, tp)?;
    for x in 0..d {
        dst[x * tp + t..(x + 1) * tp].fill(0.0);
    }
    Ok(())
}

/// Packs what a forward pass over head `head` reads: scaled q rows, kᵀ and v rows.
pub(super) fn pack_forward(
    s: &mut Scratch,
    [q, k, v]: [&Input<'_>; 3],
    head: usize,
    g: &Dims,
) -> Result<()> {
    pack_rows(&mut s.q, q, (head, Side::Query), g, g.scale)?;
    pack_transposed(&mut s.kt, &mut s.tmp, k, head, g)?;
    pack_rows(&mut s.v, v, (head, Side::Key), g, 1.0)
}

/// `buf` with `len` elements for a caller that overwrites every one: kept as it is when it
/// already has that length (the scratch of the previous head), else zeros.
pub(super) fn sized(buf: &mut Vec<f32>, len: usize) -> Result<()> {
    if buf.len() == len {
        Ok(())
    } else {
        zeroed(buf, len)
    }
}

/// `buf` as `len` zeros (`Error::Value` when they cannot be allocated: `len` comes from the
/// input's extents).
pub(super) fn zeroed(buf: &mut Vec<f32>, len: usize) -> Result<()> {
    buf.clear();
    autograd_core::kernel::alloc::resize(buf, len, 0.0)
}

/// `buf` as `len` zeros inside a kernel, which cannot return an error: within the capacity
/// [`Scratch::reserve_accumulators`] took fallibly before the kernel ran, so this never
/// allocates.
pub(super) fn rezero(buf: &mut Vec<f32>, len: usize) {
    debug_assert!(buf.capacity() >= len, "kernel scratch was not reserved");
    buf.clear();
    buf.resize(len, 0.0);
}

impl Scratch {
    /// Room for what the kernels zero for one head: `T_p x D` accumulators, `T_qp` row
    /// statistics and `BLOCK x T_kp` panels. Their sizes come from the input's extents, so they
    /// are taken here, where an unallocatable size is still an `Error::Value`.
    pub(super) fn reserve_accumulators(&mut self, g: &Dims) -> Result<()> {
        let (qp, kp) = (g.padded(Side::Query), g.padded(Side::Key));
        let rows = qp.max(kp).saturating_mul(g.d);
        let panel = BLOCK.saturating_mul(kp);
        let room = |buf: &mut Vec<f32>, n: usize| -> Result<()> {
            if buf.capacity() < n {
                *buf = autograd_core::kernel::alloc::with_capacity(n)?;
            }
            Ok(())
        };
        room(&mut self.acc_q, rows)?;
        room(&mut self.acc_k, rows)?;
        room(&mut self.acc_v, rows)?;
        room(&mut self.delta, qp)?;
        room(&mut self.panel, panel)?;
        room(&mut self.dpanel, panel)?;
        room(&mut self.zpanel, panel)
    }
}

/// Two fresh compact row-major Float32 results of extents `a` and `b` in `like`'s carrier
/// class (large ones from the kernel layer's buffer pool, not zeroed), every element of which
/// `f` writes.
pub(super) fn results2(
    like: &Tensor,
    a: &[usize],
    b: &[usize],
    f: impl FnOnce(&mut [f32], &mut [f32]) -> Result<()>,
) -> Result<(Tensor, Tensor)> {
    let mut second = None;
    let first = kernel::fresh_overwritten::<f32>(like, Arc::new(Layout::row_major(a)?), |x| {
        let layout = Arc::new(Layout::row_major(b)?);
        second = Some(kernel::fresh_overwritten::<f32>(like, layout, |y| f(x, y))?);
        Ok(())
    })?;
    match second {
        Some(second) => Ok((first, second)),
        None => bail!(Runtime, "attention: a result was not written"),
    }
}

/// [`results2`] for three results, of extents `first` and `rest` (twice).
pub(super) fn results3(
    like: &Tensor,
    [first, rest]: [&[usize]; 2],
    f: impl FnOnce(&mut [f32], &mut [f32], &mut [f32]) -> Result<()>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let dims = rest;
    let mut rest = None;
    let first = kernel::fresh_overwritten::<f32>(like, Arc::new(Layout::row_major(first)?), |x| {
        rest = Some(results2(like, dims, dims, |y, z| f(x, y, z))?);
        Ok(())
    })?;
    match rest {
        Some((second, third)) => Ok((first, second, third)),
        None => bail!(Runtime, "attention: a result was not written"),
    }
}

/// Scratch a thread keeps between calls when it stays at most this many floats (larger ones,
/// from long sequences, go back to the allocator).
const KEPT_SCRATCH: usize = 1 << 20;

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

impl Scratch {
    /// Floats held by the buffers.
    fn capacity(&self) -> usize {
        [
            &self.q,
            &self.k,
            &self.kt,
            &self.v,
            &self.vt,
            &self.go,
            &self.acc_q,
            &self.acc_k,
            &self.acc_v,
            &self.lse,
            &self.delta,
            &self.panel,
            &self.dpanel,
            &self.zpanel,
            &self.tmp,
            &self.results,
        ]
        .iter()
        .map(|b| b.capacity())
        .sum()
    }
}

/// Runs `f` with this thread's kept scratch (a fresh one the first time), keeping it afterwards
/// when it is small enough.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let kept = SCRATCH
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.take()))
        .ok()
        .flatten();
    let mut scratch = kept.unwrap_or_default();
    let r = f(&mut scratch);
    if scratch.capacity() <= KEPT_SCRATCH {
        let _ = SCRATCH.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                *s = Some(scratch);
            }
        });
    }
    r
}

/// Runs `f` on every item (one per head) with a scratch of its thread: across the kernel threads
/// (`kernel::threads()`, sized by `RAYON_NUM_THREADS`) when the work is large enough to pay for
/// the split, else in order on the calling thread.
pub(super) fn for_each_head<T: Send>(
    g: &Dims,
    items: Vec<T>,
    f: impl Fn(T, &mut Scratch) -> Result<()> + Sync,
) -> Result<()> {
    if items.len() > 1 && kernel::threads() > 1 && g.work() >= kernel::PARALLEL_THRESHOLD {
        // each task moves its own item out (a task runs once, so the item is always there)
        let items: Vec<Mutex<Option<T>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
        kernel::map_tasks(items.len(), |i| {
            let item = items[i]
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            item.map_or(Ok(()), |item| with_scratch(|s| f(item, s)))
        })
        .into_iter()
        .collect()
    } else {
        with_scratch(|s| items.into_iter().try_for_each(|item| f(item, s)))
    }
}

/// The gradients of q, k, v and the mask an attention backward returns.
pub(super) type Gradients = (
    Option<Tensor>,
    Option<Tensor>,
    Option<Tensor>,
    Option<Tensor>,
);

/// The wanted gradients of one backward call: the results of q's, k's and v's shapes (in
/// `like`'s carrier class) split by head with the scores' gradient when the mask's is wanted,
/// `head(b, grads, scratch)` run for every head across the kernel threads, and the scores'
/// gradient summed back to the mask's shape. An empty key axis gives zeros.
pub(super) fn gradients(
    g: &Dims,
    rule: &Rule,
    (like, mask): (&Tensor, Option<&Tensor>),
    want: Want,
    head: impl Fn(usize, HeadGrads<'_>, &mut Scratch) -> Result<()> + Sync,
) -> Result<Gradients> {
    let mut dmask = if want.mask {
        kernel::alloc::filled(g.heads() * g.tq * g.tk, 0.0f32)?
    } else {
        Vec::new()
    };
    let (dq, dk, dv) = results3(like, [&g.context_dims(), &g.key_dims()], |dq, dk, dv| {
        if g.is_empty() || g.tk == 0 {
            // nothing reaches q through an empty key axis; k and v get zeros
            dq.fill(0.0);
            dk.fill(0.0);
            dv.fill(0.0);
            return Ok(());
        }
        let (nq, nk) = (g.head_len(Side::Query), g.head_len(Side::Key));
        let ds: Vec<Option<&mut [f32]>> = if want.mask {
            dmask.chunks_mut(g.tq * g.tk).map(Some).collect()
        } else {
            (0..g.heads()).map(|_| None).collect()
        };
        let items: Vec<_> = dq
            .chunks_mut(nq)
            .zip(dk.chunks_mut(nk))
            .zip(dv.chunks_mut(nk))
            .zip(ds)
            .enumerate()
            .collect();
        for_each_head(g, items, |(b, (((dq, dk), dv), ds)), s| {
            s.reserve_accumulators(g)?;
            let grads = HeadGrads {
                dq,
                dk,
                dv,
                ds,
                want,
            };
            head(b, grads, s)
        })
    })?;
    let dmask = match (want.mask, &rule.bias, mask) {
        (true, Some(bias), Some(mask)) => Some(bias.gradient(dmask, g, mask)?),
        _ => None,
    };
    Ok((
        want.q.then_some(dq),
        want.k.then_some(dk),
        want.v.then_some(dv),
        dmask,
    ))
}

//! All-reduce through memory the ranks share, for when every rank runs on one machine: an MPI
//! shared-memory window (`MPI_Win_allocate_shared`) gives each rank two slots the others can
//! read. A rank writes into its slot the `1/n` shares of its values the other ranks sum; after
//! a barrier it sums its own share, a cache-sized block at a time: its values written into its
//! slot, every other rank's share added (each sum is made once, by one rank, so every rank ends
//! with the same bits) and the sums taken at once; after a second barrier every rank reads the
//! other shares' sums where they lie. Two barriers; each rank writes its values into its slot
//! and reads the other shares' sums out, its own share's in the same pass, where
//! MPI's own all-reduce (or a reduce and a broadcast) copies through the library's
//! shared-memory queues in small fragments with a handshake each. W10's 814 KB of gradients
//! average back to back at 11.5–15.1 GB/s this way (7.8–10.0 with each rank's own share
//! published before the first barrier and read back after the second), against 3.9–5.9 GB/s
//! for MPI's own `MPI_Allreduce`.
//!
//! The small all-gathers every collective agrees through go the same way, with one barrier.
//!
//! The two slots alternate from piece to piece, so a rank that finished one may start the next
//! while another still reads the previous one: the next piece's first barrier is where it
//! waits. A buffer larger than a slot goes through in slot-sized pieces.

use std::cell::Cell;
use std::ops::{Add, Range};
use std::ptr;

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

/// The most bytes one window takes (two slots per rank), in shared memory a container may
/// keep small (Docker's `/dev/shm` is 64 MiB by default).
const MAX_WINDOW_BYTES: usize = 32 << 20;

/// The bytes of a rank's own share summed at a time: a block its values are written into,
/// the other ranks' added to and the sums read out of while it stays in the L2 cache.
const SUM_BLOCK: usize = 64 << 10;

/// Slot sizes are multiples of this (a cache line, which every element type divides).
const ALIGN: usize = 64;

/// A shared-memory window with two slots per rank of the communicator it was made on (whose
/// ranks all share this machine). Freed, collectively, when dropped: every rank drops it at
/// the same point (the [`super::World`] that owns it replaces or drops it in collective calls
/// only).
pub(crate) struct SharedSlots {
    win: ffi::MPI_Win,
    comm: ffi::MPI_Comm,
    /// Each rank's region: its two slots, `slot_bytes` apart.
    regions: Vec<*mut u8>,
    rank: usize,
    slot_bytes: usize,
    /// Which of its two slots each rank writes in the next piece.
    parity: Cell<usize>,
}

impl std::fmt::Debug for SharedSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSlots")
            .field("ranks", &self.regions.len())
            .field("slot_bytes", &self.slot_bytes)
            .finish_non_exhaustive()
    }
}

impl SharedSlots {
    /// The slot size a buffer of `bytes` asks for among `ranks` ranks: its size rounded up to
    /// whole cache lines, at most a window of [`MAX_WINDOW_BYTES`] (larger buffers go through
    /// in pieces).
    pub(crate) fn slot_for(bytes: usize, ranks: usize) -> usize {
        let most = (MAX_WINDOW_BYTES / (2 * ranks.max(1))) / ALIGN * ALIGN;
        bytes
            .div_ceil(ALIGN)
            .max(1)
            .saturating_mul(ALIGN)
            .min(most.max(ALIGN))
    }

    /// The size of each slot.
    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Allocates slots of `slot_bytes` (from [`SharedSlots::slot_for`]) for every rank of
    /// `comm`, whose ranks must all run on this machine. Collective: every rank calls it with
    /// the same size.
    pub(crate) fn allocate(comm: &SimpleCommunicator, slot_bytes: usize) -> SharedSlots {
        let (rank, n) = (comm.rank() as usize, comm.size() as usize);
        let raw = comm.as_raw();
        let mut win: ffi::MPI_Win = unsafe { ffi::RSMPI_WIN_NULL };
        let mut base: *mut u8 = ptr::null_mut();
        // the slots start at most ALIGN bytes into the region (see below)
        // SAFETY: collective over `comm` with the same size on every rank; MPI writes the
        // window handle and this rank's base address into the two out-pointers. Errors abort
        // the job (the communicator's default handler), so the returns are not checked.
        unsafe {
            ffi::MPI_Win_allocate_shared(
                (2 * slot_bytes + ALIGN) as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                raw,
                (&raw mut base).cast(),
                &raw mut win,
            );
            // a passive-target epoch on every rank for the window's life: loads and stores
            // are ordered by `MPI_Win_sync` around barriers (the unified memory model)
            ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as i32, win);
        }
        let regions: Vec<*mut u8> = (0..n)
            .map(|r| {
                let mut size: ffi::MPI_Aint = 0;
                let mut unit: i32 = 0;
                let mut at: *mut u8 = ptr::null_mut();
                // SAFETY: `r` is a rank of the window's group; MPI writes the three outputs
                unsafe {
                    ffi::MPI_Win_shared_query(
                        win,
                        r as i32,
                        &raw mut size,
                        &raw mut unit,
                        (&raw mut at).cast(),
                    );
                }
                // the library's regions start past a header: start the slots on a cache line
                if at.is_null() {
                    at
                } else {
                    at.wrapping_add(at.align_offset(ALIGN))
                }
            })
            .collect();
        let slots = SharedSlots {
            win,
            comm: raw,
            regions,
            rank,
            slot_bytes,
            parity: Cell::new(0),
        };
        // the communicator's error handler aborts the job rather than return without memory
        assert!(
            slots.regions.iter().all(|p| !p.is_null()),
            "MPI_Win_allocate_shared returned without memory"
        );
        slots
    }

    /// `recv = Σ send over ranks`, element by element, on every rank. Collective: every rank
    /// calls it with the same length.
    pub(crate) fn all_reduce_sum<T: Copy + Add<Output = T>>(&self, send: &[T], recv: &mut [T]) {
        assert_eq!(
            send.len(),
            recv.len(),
            "all-reduce buffers of different lengths"
        );
        self.sum(
            send.len(),
            |range, dst| dst.copy_from_slice(&send[range]),
            |at, sums| recv[at..at + sums.len()].copy_from_slice(sums),
        );
    }

    /// Sums a buffer of `len` elements across ranks without a copy of it on either side:
    /// `fill(range, dst)` writes this rank's elements `range` of it into `dst` (a part of a
    /// piece of at most a slot at a time), and `take(at, sums)` reads the sums of elements
    /// `at..at + sums.len()`. Every element's sum is taken exactly once, in parts that do not
    /// arrive in order (this rank's own share of a piece comes first). Collective: every rank
    /// calls it with the same length.
    pub(crate) fn sum<T: Copy + Add<Output = T>>(
        &self,
        len: usize,
        mut fill: impl FnMut(Range<usize>, &mut [T]),
        mut take: impl FnMut(usize, &[T]),
    ) {
        let per_slot = (self.slot_bytes / std::mem::size_of::<T>()).max(1);
        for start in (0..len).step_by(per_slot) {
            let piece = start..len.min(start + per_slot);
            self.sum_piece(piece, &mut fill, &mut take);
        }
    }

    /// One piece of at most a slot: publish the shares the other ranks sum, sum this rank's
    /// own share a block at a time (its values written, every other rank's added and the sums
    /// taken while the block is in cache), then read every other share's sums. A rank's own
    /// share is never published before the first barrier, as no rank reads it before the
    /// second: that halves, on two ranks, the copying every rank does before it can wait for
    /// the slowest.
    fn sum_piece<T: Copy + Add<Output = T>>(
        &self,
        piece: Range<usize>,
        fill: &mut impl FnMut(Range<usize>, &mut [T]),
        take: &mut impl FnMut(usize, &[T]),
    ) {
        let (n, me, len) = (self.regions.len(), self.rank, piece.len());
        let slot = self.next_slots::<T>();
        let share = |r: usize| -> Range<usize> { r * len / n..(r + 1) * len / n };
        let mine = share(me);
        // SAFETY (the blocks below): each slot holds `slot_bytes >= len * size_of::<T>()` bytes
        // aligned for T, and no two ranks' accesses to one element overlap in time: before the
        // first barrier this rank writes every share of its slot but its own, which no rank
        // reads before that barrier; between the barriers rank r reads share r of every other
        // rank's slot (written before the barrier) and writes share r of its own slot, which no
        // other rank touches until the second barrier; after that barrier every rank only
        // reads. The other parity's slots hold the previous piece, which ranks may still be
        // reading: this rank writes them next for the piece after this one, which it starts
        // only after this piece's first barrier, and no rank enters that barrier before it
        // has finished reading the previous piece.
        let own = |part: Range<usize>| unsafe {
            std::slice::from_raw_parts_mut(slot(me).add(part.start), part.len())
        };
        for part in [0..mine.start, mine.end..len] {
            if !part.is_empty() {
                fill(piece.start + part.start..piece.start + part.end, own(part));
            }
        }
        self.barrier();
        let per_block = (SUM_BLOCK / std::mem::size_of::<T>().max(1)).max(1);
        for block in (mine.start..mine.end).step_by(per_block) {
            let part = block..mine.end.min(block + per_block);
            let sums = own(part.clone());
            fill(piece.start + part.start..piece.start + part.end, sums);
            // each sum is made once, by one rank, so every rank reads the same bits
            for r in (0..n).filter(|&r| r != me) {
                let theirs =
                    unsafe { std::slice::from_raw_parts(slot(r).add(part.start), part.len()) };
                for (s, &x) in sums.iter_mut().zip(theirs) {
                    *s = *s + x;
                }
            }
            take(piece.start + part.start, sums);
        }
        self.barrier();
        for r in (0..n).filter(|&r| r != me) {
            let part = share(r);
            let sums = unsafe { std::slice::from_raw_parts(slot(r).add(part.start), part.len()) };
            take(piece.start + part.start, sums);
        }
    }

    /// Every rank's `send`, in rank order, into `recv` (`n` times as long) on every rank; `send`
    /// fits one slot. Collective: every rank calls it with the same length. One barrier: a
    /// rank writes the other parity's slot next, and this one again only after every rank has
    /// entered that next call, so after every rank has read this one.
    pub(crate) fn all_gather<T: Copy>(&self, send: &[T], recv: &mut [T]) {
        let len = send.len();
        assert!(
            std::mem::size_of_val(send) <= self.slot_bytes
                && recv.len() == len * self.regions.len(),
            "all_gather of {len} elements into {} through slots of {} bytes",
            recv.len(),
            self.slot_bytes
        );
        let slot = self.next_slots::<T>();
        // SAFETY: this rank's slot holds `len` elements aligned for T and no rank reads it
        // before the barrier; after it every rank only reads (see `sum_piece` for the parity)
        unsafe { ptr::copy_nonoverlapping(send.as_ptr(), slot(self.rank), len) };
        self.barrier();
        for (r, out) in recv.chunks_exact_mut(len.max(1)).enumerate() {
            // SAFETY: as above
            out.copy_from_slice(unsafe { std::slice::from_raw_parts(slot(r), len) });
        }
    }

    /// The slots of the next piece or gather, by rank (the other parity than the last's).
    fn next_slots<T>(&self) -> impl Fn(usize) -> *mut T + '_ {
        let parity = self.parity.get();
        self.parity.set(parity ^ 1);
        move |r| {
            // SAFETY: within rank r's region of 2 * slot_bytes
            unsafe { self.regions[r].add(parity * self.slot_bytes).cast::<T>() }
        }
    }

    /// Orders this rank's stores to the window before every rank's loads after it.
    fn barrier(&self) {
        // SAFETY: the window and communicator are live for `self`'s life
        unsafe {
            ffi::MPI_Win_sync(self.win);
            ffi::MPI_Barrier(self.comm);
            ffi::MPI_Win_sync(self.win);
        }
    }
}

impl Drop for SharedSlots {
    fn drop(&mut self) {
        // SAFETY: collective, reached on every rank at the same point (see the type's doc)
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&raw mut self.win);
        }
    }
}

//! The MPI environment of one process: initialised once, finalised when [`World`] drops, and
//! the world communicator's rank, size and barrier.

use std::cell::{Cell, RefCell, RefMut};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Add;

use autograd_core::{Error, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use mpi::Threading;

use super::agreement::agree;
use super::shared_slots::SharedSlots;

/// This process's place among the processes `mpirun` started: MPI initialised at the
/// `FUNNELED` threading level (the kernels' worker threads may run, but MPI is called from the
/// thread that made the `World` only, which is why `World` is neither `Send` nor `Sync`), and
/// finalised when the `World` drops. MPI can be initialised once per process, so there is at
/// most one `World`.
///
/// Every rank calls each collective at the same point of its program. A collective called
/// while another runs on this rank is `Error::Runtime`, with nothing sent: that happens to an
/// optimizer that [`Ddp::backward_step`](super::Ddp::backward_step) steps while it averages.
pub struct World {
    // declared before `comm` and `universe`: the window is freed before its communicator, and
    // both before MPI_Finalize
    /// The shared-memory slots of [`World::all_reduce_sum_into`], made on first use when
    /// every rank runs on this machine.
    shared: RefCell<Option<SharedSlots>>,
    comm: SimpleCommunicator,
    _universe: Universe,
    threading: Threading,
    /// Whether every rank runs on this machine (they share memory).
    one_machine: bool,
    /// Whether sums may go through that shared memory ([`World::use_shared_memory`]).
    use_shared: Cell<bool>,
    /// The collective this rank is inside, if any ([`World::enter`]).
    running: Cell<Option<&'static str>>,
    /// Keeps `World` on the thread that initialised MPI.
    _funneled: PhantomData<*const ()>,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("threading", &self.threading)
            .field("one_machine", &self.one_machine)
            .field("use_shared", &self.use_shared.get())
            .finish_non_exhaustive()
    }
}

impl World {
    /// Initialises MPI on this thread. A process in which MPI was already initialised (by an
    /// earlier `World`, or by other code) gets `Error::Runtime`: MPI cannot be initialised
    /// twice, nor again after it was finalised.
    pub fn init() -> Result<World> {
        if mpi::environment::is_finalized() {
            return Err(Error::Runtime(
                "MPI was already finalised in this process (a World was dropped); it cannot be initialised again"
                    .into(),
            ));
        }
        let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Funneled)
        else {
            return Err(Error::Runtime(
                "MPI is already initialised in this process: create one World and pass it by reference"
                    .into(),
            ));
        };
        let comm = universe.world();
        let one_machine = comm.split_shared(0).size() == comm.size();
        Ok(World {
            shared: RefCell::new(None),
            comm,
            _universe: universe,
            threading,
            one_machine,
            use_shared: Cell::new(true),
            running: Cell::new(None),
            _funneled: PhantomData,
        })
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> usize {
        // MPI ranks are non-negative
        self.comm.rank() as usize
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        self.comm.size() as usize
    }

    /// The number of processes (PyTorch's name for [`World::size`]).
    pub fn world_size(&self) -> usize {
        self.size()
    }

    /// Waits until every process has called `barrier`. Like every collective, not to be
    /// called from an optimizer that [`Ddp::backward_step`](super::Ddp::backward_step) steps
    /// while it averages (the collectives that return a `Result` refuse that).
    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// Ends every process of the job with exit `code` (`MPI_Abort`): the way out of an error
    /// that only this rank has seen, which would otherwise leave the others waiting in their
    /// next collective (and this process waiting for them when its `World` drops).
    pub fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }

    /// Whether sums (gradient averaging, [`World::all_reduce`]'s sum and mean) go through the
    /// memory the ranks share when they all run on this machine: on by default, where W10's
    /// averaging takes a third of the time it takes through MPI inside the training step, and
    /// a third to a half of MPI's own all-reduce back to back. Off keeps every collective in
    /// the library's all-reduce (a container whose `/dev/shm` cannot spare the up to 32 MiB it
    /// takes, or a comparison). Every rank calls it with the same value; otherwise every rank
    /// gets `Error::Value` and nothing changes.
    pub fn use_shared_memory(&self, on: bool) -> Result<()> {
        let _running = self.enter("World::use_shared_memory")?;
        agree(
            self,
            &[u64::from(on)],
            "use_shared_memory: the ranks asked for different settings",
            |r| format!("on: {}", r[0] != 0),
        )?;
        self.use_shared.set(on);
        if !on {
            // every rank drops the window here (collectively)
            self.shared.replace(None);
        }
        Ok(())
    }

    /// Enters collective `what` on this rank until the guard drops, or refuses it with
    /// `Error::Runtime` (nothing sent, nothing changed) while another collective runs here.
    /// That happens to an optimizer which [`Ddp::backward_step`](super::Ddp::backward_step)
    /// steps while it averages: the other ranks are inside that averaging, so a collective
    /// called from the step would wait for them forever or mix its messages with theirs.
    pub(crate) fn enter(&self, what: &'static str) -> Result<Running<'_>> {
        if let Some(running) = self.running.get() {
            return Err(Error::Runtime(format!(
                "{what} was called on rank {} while {running} ran there (from an optimizer it steps?): every rank calls a collective at the same point of its program",
                self.rank()
            )));
        }
        self.running.set(Some(what));
        Ok(Running(self))
    }

    /// The world communicator the collectives run on.
    pub(crate) fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// The shared-memory slots every rank of this machine sums through, with slots of at
    /// least `bytes` (up to their largest size; larger sums go through in pieces), or `None`
    /// when the ranks run on several machines (or there is one rank, or
    /// [`World::use_shared_memory`] is off). Collective when it
    /// makes or remakes the window: every rank calls it with the same size.
    pub(crate) fn shared_slots(&self, bytes: usize) -> Option<RefMut<'_, SharedSlots>> {
        if !self.one_machine || self.size() == 1 || !self.use_shared.get() {
            return None;
        }
        let slot = SharedSlots::slot_for(bytes, self.size());
        let mut shared = self.shared.borrow_mut();
        // every rank passes the same size, so every rank takes the same branch
        if shared.as_ref().is_some_and(|s| s.slot_bytes() < slot) {
            // the old window is freed first (collectively)
            *shared = None;
        }
        if shared.is_none() {
            *shared = Some(SharedSlots::allocate(&self.comm, slot));
        }
        RefMut::filter_map(shared, Option::as_mut).ok()
    }

    /// `recv = Σ send over ranks` on every rank, blocking: through [`World::shared_slots`]
    /// when every rank runs on this machine, else [`World::all_reduce_into`].
    pub(crate) fn all_reduce_sum_into<T: Equivalence + Copy + Add<Output = T>>(
        &self,
        send: &[T],
        recv: &mut [T],
    ) {
        match self.shared_slots(std::mem::size_of_val(send)) {
            Some(slots) => slots.all_reduce_sum(send, recv),
            None => self.all_reduce_into(send, recv, SystemOperation::sum()),
        }
    }

    /// Every rank's `send`, in rank order, into `recv` on every rank: through
    /// [`World::shared_slots`] when every rank runs on this machine and `send` fits a slot
    /// (the agreements every collective starts and ends with), else `MPI_Allgather`.
    pub(crate) fn all_gather_into<T: Equivalence + Copy>(&self, send: &[T], recv: &mut [T]) {
        let bytes = std::mem::size_of_val(send);
        match self.shared_slots(bytes) {
            Some(slots) if slots.slot_bytes() >= bytes => slots.all_gather(send, recv),
            _ => self.comm.all_gather_into(send, recv),
        }
    }

    /// `recv = op(send over ranks)` on every rank, blocking. When every rank is on this
    /// machine it is a reduce to rank 0 followed by a broadcast: there the library's
    /// all-reduce (ring or recursive doubling, both ranks copying both ways at once) took
    /// 0.55 ms for W10's 814 KB between training steps against 0.28 ms for the reduce and
    /// broadcast, though back to back they cost the same. Across machines, where links carry
    /// both ways at once, it is the library's `MPI_Allreduce`.
    pub(crate) fn all_reduce_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: SystemOperation,
    ) {
        if !self.one_machine || self.size() == 1 {
            return self.comm.all_reduce_into(send, recv, op);
        }
        let root = self.comm.process_at_rank(0);
        if self.comm.rank() == 0 {
            root.reduce_into_root(send, recv, op);
        } else {
            root.reduce_into(send, op);
        }
        root.broadcast_into(recv);
    }
}

/// This rank's place inside a collective ([`World::enter`]), left when dropped.
pub(crate) struct Running<'a>(&'a World);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.set(None);
    }
}

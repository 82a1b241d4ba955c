//! The kernels' threads: a team of helpers that stay awake between parallel loops.
//!
//! A training step of a small model runs hundreds of parallel loops of a few hundred
//! microseconds each, with serial work between them. A helper that goes to sleep after each
//! loop (as rayon's workers do) must be woken for the next, and on a virtual machine that
//! takes as long as the loop itself, so the second thread rarely helps. The team's helpers
//! spin for a while after a loop before they park, as OpenMP's do, so the next loop finds
//! them running.
//!
//! One loop runs at a time: a loop started while the team is busy (from another thread, or
//! nested inside a task) runs on its caller alone.

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// How long an idle helper spins before it parks.
const SPIN: Duration = Duration::from_millis(2);

/// A loop's body with its lifetime erased, as a pointer: it points at live code and captures
/// only while its loop runs (see [`Team::run`]), so it is dereferenced only for a task claimed
/// in that loop.
#[derive(Clone, Copy)]
struct Body(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync` and is called only while the loop that owns it runs.
unsafe impl Send for Body {}

struct Shared {
    /// The loop being run and its number of tasks, while one runs.
    job: Option<(Body, usize)>,
    /// Helpers parked on the condition variable.
    parked: usize,
}

struct Team {
    /// Helper threads running.
    helpers: AtomicUsize,
    shared: Mutex<Shared>,
    wake: Condvar,
    /// Bumped when a loop starts (what spinning helpers watch).
    generation: AtomicU64,
    /// The current loop's generation (high 32 bits) and next unclaimed task (low 32 bits):
    /// claiming through one word keeps a late helper from claiming a task of a later loop.
    claim: AtomicU64,
    /// Tasks of the current loop that finished.
    done: AtomicUsize,
    /// Whether a task of the current loop panicked.
    panicked: AtomicBool,
    /// The first panic payload of the current loop, raised again by the loop's caller (so a
    /// user's panic message survives whichever thread ran the task).
    payload: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Held by the thread running a loop.
    busy: Mutex<()>,
    /// Bumped to ask spinning helpers to park now ([`park_idle_threads`]).
    rest: AtomicU64,
}

thread_local! {
    /// Whether this thread is running a task (a loop started inside one runs serially).
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

/// The team, once a loop has started it.
static TEAM: OnceLock<&'static Team> = OnceLock::new();

fn team() -> &'static Team {
    TEAM.get_or_init(|| {
        let team: &'static Team = Box::leak(Box::new(Team {
            helpers: AtomicUsize::new(0),
            shared: Mutex::new(Shared {
                job: None,
                parked: 0,
            }),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            claim: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            payload: Mutex::new(None),
            busy: Mutex::new(()),
            rest: AtomicU64::new(0),
        }));
        for i in 0..super::threads().saturating_sub(1) {
            let spawned = std::thread::Builder::new()
                .name(format!("autograd-kernel-{i}"))
                .spawn(move || team.help());
            // a thread the system refuses is one helper fewer; loops still complete
            if spawned.is_ok() {
                team.helpers.fetch_add(1, Ordering::Relaxed);
            }
        }
        team
    })
}

impl Team {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims and runs tasks of loop `generation` until none is left. Tasks are claimed in
    /// blocks of a share of what is left (OpenMP's guided schedule): a loop of thousands of
    /// tiny tasks (a plane of a pooling each) would otherwise pay two contended atomics per
    /// task, more than the task; the blocks shrink to single tasks at the end, which keeps the
    /// threads' finishing times close.
    fn work(&self, generation: u64, body: Body, tasks: usize) {
        let threads = self.helpers.load(Ordering::Relaxed) + 1;
        loop {
            let current = self.claim.load(Ordering::Acquire);
            if current >> 32 != generation & 0xffff_ffff {
                return;
            }
            let index = (current & 0xffff_ffff) as usize;
            if index >= tasks {
                return;
            }
            let block = ((tasks - index) / (2 * threads)).max(1);
            if self
                .claim
                .compare_exchange_weak(
                    current,
                    current + block as u64,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                continue;
            }
            // SAFETY: tasks `index..index + block` of loop `generation` are claimed and not yet
            // counted done, so the loop's caller is still inside `Team::run`, which keeps the
            // body alive.
            let body = unsafe { &*body.0 };
            let previous = IN_TASK.with(|t| t.replace(true));
            let run = || (index..index + block).for_each(body);
            if let Err(payload) = catch_unwind(AssertUnwindSafe(run)) {
                // the rest of the block is skipped: the loop's caller raises the panic again
                self.panicked.store(true, Ordering::Release);
                // The first payload is kept for the caller; later ones are not dropped: a
                // payload whose own drop panics would unwind out of here before `done` counts
                // the tasks, and the caller would return (ending the body's life) while other
                // tasks still run it, or wait forever. A panic's payload is small.
                let mut first = self.payload.lock().unwrap_or_else(PoisonError::into_inner);
                if first.is_none() {
                    *first = Some(payload);
                } else {
                    std::mem::forget(payload);
                }
            }
            IN_TASK.with(|t| t.set(previous));
            self.done.fetch_add(block, Ordering::AcqRel);
        }
    }

    /// A helper's life: wait for a loop (spinning, then parked), help with it, repeat.
    fn help(&self) {
        let mut seen = 0u64;
        loop {
            let started = Instant::now();
            let rest = self.rest.load(Ordering::Relaxed);
            let mut spins = 0u32;
            while self.generation.load(Ordering::Acquire) == seen {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(256)
                    && (started.elapsed() > SPIN || self.rest.load(Ordering::Relaxed) != rest)
                {
                    let mut shared = self.lock();
                    shared.parked += 1;
                    while self.generation.load(Ordering::Acquire) == seen {
                        shared = self
                            .wake
                            .wait(shared)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                    shared.parked -= 1;
                    break;
                }
            }
            let (generation, job) = {
                let shared = self.lock();
                (self.generation.load(Ordering::Acquire), shared.job)
            };
            seen = generation;
            if let Some((body, tasks)) = job {
                self.work(generation, body, tasks);
            }
        }
    }

    /// Runs `body(i)` for every `i < tasks` with the helpers; returns once all ran.
    fn run(&self, tasks: usize, body: &(dyn Fn(usize) + Sync)) {
        let busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            // the lock guards no data: a poisoned one is as free as any
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                (0..tasks).for_each(body);
                return;
            }
        };
        // Only the lifetime is erased (the pointer is dereferenced only for a task of this
        // loop, see `work`), and this function returns only once every task of the loop has
        // finished (`done == tasks`, also when a task panicked); after that no task of this
        // loop can be claimed.
        let ptr: *const (dyn Fn(usize) + Sync + '_) = body;
        // SAFETY: the trait object's lifetime bound changes, nothing else (an `as` cast cannot
        // extend it); the layout of the fat pointer is the same.
        #[allow(clippy::transmute_ptr_to_ptr)]
        let erased = Body(unsafe {
            std::mem::transmute::<
                *const (dyn Fn(usize) + Sync + '_),
                *const (dyn Fn(usize) + Sync + 'static),
            >(ptr)
        });
        let generation = {
            let mut shared = self.lock();
            let generation = self.generation.load(Ordering::Acquire) + 1;
            self.done.store(0, Ordering::Release);
            self.panicked.store(false, Ordering::Release);
            self.claim
                .store((generation & 0xffff_ffff) << 32, Ordering::Release);
            shared.job = Some((erased, tasks));
            self.generation.store(generation, Ordering::Release);
            if shared.parked > 0 {
                self.wake.notify_all();
            }
            generation
        };
        self.work(generation, erased, tasks);
        while self.done.load(Ordering::Acquire) < tasks {
            std::hint::spin_loop();
        }
        self.lock().job = None;
        let panicked = self.panicked.load(Ordering::Acquire);
        let payload = self
            .payload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // released before the panic is raised again, so that it does not poison the lock and
        // later loops still find the team free
        drop(busy);
        if panicked {
            resume_unwind(payload.unwrap_or_else(|| Box::new("a kernel task panicked")));
        }
    }
}

/// Asks the kernel threads spinning after a loop to park now instead of at the end of their
/// spin, for a thread about to block until another thread of the process has computed
/// something (a data loader's batch): the spin would hold the core that thread needs, for up
/// to 2 ms. The next loop wakes them as usual.
pub fn park_idle_threads() {
    if let Some(team) = TEAM.get() {
        team.rest.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `f(i)` for every `i < tasks`, spread over the kernel threads ([`super::threads`]),
/// and returns once every call returned. Serial when there is one task or one thread, or
/// when called from inside a task or while another loop runs. The threads claim tasks in
/// blocks of a share of those left, so a task may be small (a plane of a few dozen
/// elements). A panicking task skips the rest of its block; the panic is raised again here
/// once the claimed blocks have finished.
pub fn for_each_task(tasks: usize, f: impl Fn(usize) + Sync) {
    if tasks <= 1 || super::threads() <= 1 || IN_TASK.with(Cell::get) {
        (0..tasks).for_each(f);
        return;
    }
    let team = team();
    if team.helpers.load(Ordering::Relaxed) == 0 || u32::try_from(tasks).is_err() {
        (0..tasks).for_each(f);
        return;
    }
    team.run(tasks, &f);
}

/// `f(k, chunk)` for the consecutive chunks of `out` of `size` elements (the last may be
/// shorter), chunk `k` starting at element `k * size`, spread like [`for_each_task`].
pub fn for_each_chunk_mut<T: Send>(out: &mut [T], size: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let size = size.max(1);
    let (len, tasks) = (out.len(), out.len().div_ceil(size));
    let base = Base(out.as_mut_ptr());
    for_each_task(tasks, |k| {
        let start = k * size;
        let n = size.min(len - start);
        // SAFETY: `base` points at `len` elements borrowed mutably for this call; the chunks
        // `k * size..k * size + n` of distinct tasks are disjoint and inside them, and every
        // task ends before this function returns.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.at(start), n) };
        f(k, chunk);
    });
}

/// `f(i)` for every `i < tasks`, spread like [`for_each_task`], the results in task order.
pub fn map_tasks<R: Send>(tasks: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..tasks).map(|_| None).collect();
    for_each_chunk_mut(&mut out, 1, |k, slot| slot[0] = Some(f(k)));
    // every task ran before `for_each_chunk_mut` returned, so every slot is filled
    out.into_iter().flatten().collect()
}

/// `f(k, chunk)` for every chunk of `size` elements of `out` (the last may be shorter), spread
/// like [`for_each_chunk_mut`], the results in chunk order.
pub(crate) fn map_chunks_mut<T: Send, R: Send>(
    out: &mut [T],
    size: usize,
    f: impl Fn(usize, &mut [T]) -> R + Sync,
) -> Vec<R> {
    let mut jobs: Vec<(&mut [T], Option<R>)> =
        out.chunks_mut(size.max(1)).map(|c| (c, None)).collect();
    for_each_chunk_mut(&mut jobs, 1, |k, job| {
        let (chunk, result) = &mut job[0];
        *result = Some(f(k, chunk));
    });
    // every task ran before `for_each_chunk_mut` returned, so every result is there
    jobs.into_iter().filter_map(|(_, r)| r).collect()
}

/// A base pointer shared by the tasks of one loop, each of which touches its own elements.
struct Base<T>(*mut T);

impl<T> Base<T> {
    fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

// SAFETY: tasks reach disjoint elements through it (see `for_each_chunk_mut`), and the
// elements themselves are `Send`.
unsafe impl<T: Send> Sync for Base<T> {}

/// `(a(), b())`, the two run side by side on the kernel threads when there are several.
pub fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    let (a, b) = (Slot::new(Some(a)), Slot::new(Some(b)));
    let (ra, rb) = (Slot::new(None), Slot::new(None));
    for_each_task(2, |k| {
        if k == 0 {
            if let Some(a) = a.take() {
                ra.put(a());
            }
        } else if let Some(b) = b.take() {
            rb.put(b());
        }
    });
    match (ra.into_inner(), rb.into_inner()) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("for_each_task runs every task before it returns"),
    }
}

/// A value handed between the tasks of one loop.
struct Slot<T>(Mutex<Option<T>>);

impl<T> Slot<T> {
    fn new(v: Option<T>) -> Slot<T> {
        Slot(Mutex::new(v))
    }
    fn take(&self) -> Option<T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
    fn put(&self, v: T) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(v);
    }
    fn into_inner(self) -> Option<T> {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_and_chunks_cover_the_slice() {
        for tasks in [0, 1, 2, 3, 17, 1000] {
            let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            for_each_task(tasks, |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
        let mut v = vec![0usize; 1001];
        for_each_chunk_mut(&mut v, 64, |k, c| {
            for (j, x) in c.iter_mut().enumerate() {
                *x = k * 64 + j;
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| i == x));
        assert_eq!(join(|| 2 + 2, || "four"), (4, "four"));
        assert_eq!(
            map_tasks(300, |i| i * i),
            (0..300).map(|i| i * i).collect::<Vec<_>>()
        );
    }

    #[test]
    fn loops_after_the_helpers_were_asked_to_park_still_run_every_task() {
        for round in 0..50 {
            let hits: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
            for_each_task(hits.len(), |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            // parked or spinning, the helpers take part in the next loop
            park_idle_threads();
            if round % 2 == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
            for_each_task(hits.len(), |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 2));
        }
    }

    #[test]
    fn loops_from_several_threads_and_nested_loops_all_complete() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        for_each_task(8, |_| {
                            for_each_task(3, |_| {
                                total.fetch_add(1, Ordering::Relaxed);
                            });
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 50 * 8 * 3);
    }

    #[test]
    fn a_panicking_task_panics_the_caller_and_leaves_the_team_working() {
        let ran = AtomicUsize::new(0);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            for_each_task(16, |i| {
                ran.fetch_add(1, Ordering::Relaxed);
                assert!(i != 5, "task 5 fails");
            });
        }));
        assert!(outcome.is_err());
        // on the team every claimed block runs before the panic reaches the caller (the
        // panicking task's block stops at it); a loop that runs serially (the team busy with
        // another test's) stops at the panicking task: tasks 0..=5 ran either way
        assert!(ran.load(Ordering::Relaxed) >= 6);
        // the team still works afterwards
        let again = AtomicUsize::new(0);
        for_each_task(4, |_| {
            again.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(again.load(Ordering::Relaxed), 4);
        // ... as a team: the panic did not poison the lock that tells a free team from a busy
        // one (a poisoned lock read as busy would run every later loop serially)
        assert!(!team().busy.is_poisoned());
    }

    /// A panic payload whose own drop panics.
    struct Bomb;

    impl Drop for Bomb {
        fn drop(&mut self) {
            assert!(std::thread::panicking(), "the payload's drop panics too");
        }
    }

    #[test]
    fn a_task_panicking_with_a_payload_that_panics_on_drop_still_finishes_the_loop() {
        let ran = AtomicUsize::new(0);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            for_each_task(16, |i| {
                ran.fetch_add(1, Ordering::Relaxed);
                if i == 3 {
                    std::panic::panic_any(Bomb);
                }
            });
        }));
        assert!(outcome.is_err());
        // the payload itself arrives (the first one a task raised, when the loop ran on the
        // team); forgotten, since dropping it panics
        std::mem::forget(outcome);
        assert!(ran.load(Ordering::Relaxed) >= 4);
        let again = AtomicUsize::new(0);
        for_each_task(8, |_| {
            again.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(again.load(Ordering::Relaxed), 8);
    }
}

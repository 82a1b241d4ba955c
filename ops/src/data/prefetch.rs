//! The bounded queue between a data loader's thread and the training loop. Waking a sleeping
//! thread is a system call that costs 10-20 µs on a virtual machine, as much as the rest of
//! taking a batch: with `sync_channel` the training loop paid it on every batch, to wake the
//! producer blocked on a full queue. Here the training loop never wakes the producer while
//! there is a batch to take: a producer facing a full queue naps for half the time the
//! consumer takes per item (its measured pace) and refills when it wakes, so the wake-up
//! lands on the producer's own time. Only a consumer that finds the queue empty wakes it.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

struct State<T> {
    queue: VecDeque<T>,
    /// The receiver is gone: the producer stops.
    closed: bool,
    /// The sender is gone (finished or panicked): an empty queue ends the stream.
    done: bool,
    /// Who sleeps on a condition variable and needs a notification.
    waiting: Waiting,
    /// Items the consumer has taken, for the producer's estimate of its pace.
    taken: u64,
}

/// The ends asleep on the queue.
#[derive(Default)]
struct Waiting {
    consumer: bool,
    producer: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// The consumer waits here for an item.
    ready: Condvar,
    /// The producer waits here for room.
    room: Condvar,
    capacity: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // the state stays consistent under a panic: every update is a single assignment
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The producing end, with its estimate of the consumer's pace.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
    pace: Cell<Pace>,
}

/// The shortest and longest nap of a producer facing a full queue.
const MIN_NAP: Duration = Duration::from_micros(20);
const MAX_NAP: Duration = Duration::from_millis(10);

/// How fast the consumer takes items, measured from the producer's side.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// When the producer last saw the count of taken items change, and that count.
    at: Instant,
    taken: u64,
    /// The time one take takes (a running average).
    per_take: Duration,
}

impl Pace {
    /// How long to nap on a full queue, `taken` items having been taken so far: half the time
    /// the consumer takes one item, so the producer looks twice per item taken and refills a
    /// slot soon after it frees (measured: napping a whole take, the queue ran dry often
    /// enough to cost 0.5-1.8% of a W2 step at two threads; napping half, 0.6-0.9%).
    fn nap(&mut self, taken: u64) -> Duration {
        let now = Instant::now();
        if taken > self.taken {
            let sample = (now - self.at) / u32::try_from(taken - self.taken).unwrap_or(u32::MAX);
            self.per_take = (self.per_take + sample) / 2;
            (self.at, self.taken) = (now, taken);
        } else {
            // nothing taken since `at`: a take lasts at least that long
            self.per_take = self.per_take.max(now - self.at).min(MAX_NAP);
        }
        (self.per_take / 2).clamp(MIN_NAP, MAX_NAP)
    }
}

/// The consuming end.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

/// A queue of at most `capacity` (at least 1) items.
pub(crate) fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let capacity = capacity.max(1);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            // grown as batches arrive: `capacity` is the caller's bound, not an allocation
            queue: VecDeque::new(),
            closed: false,
            done: false,
            waiting: Waiting::default(),
            taken: 0,
        }),
        ready: Condvar::new(),
        room: Condvar::new(),
        capacity,
    });
    let pace = Pace {
        at: Instant::now(),
        taken: 0,
        per_take: Duration::from_millis(1),
    };
    let sender = Sender {
        shared: Arc::clone(&shared),
        pace: Cell::new(pace),
    };
    (sender, Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `item`, waiting for room; `false` when the receiver is gone.
    pub(crate) fn send(&self, item: T) -> bool {
        let s = &self.shared;
        let mut state = s.lock();
        while state.queue.len() >= s.capacity && !state.closed {
            state.waiting.producer = true;
            let mut pace = self.pace.get();
            let nap = pace.nap(state.taken);
            self.pace.set(pace);
            state = s
                .room
                .wait_timeout(state, nap)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.waiting.producer = false;
        if state.closed {
            return false;
        }
        state.queue.push_back(item);
        if state.waiting.consumer {
            s.ready.notify_one();
        }
        true
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let s = &self.shared;
        let mut state = s.lock();
        state.done = true;
        if state.waiting.consumer {
            s.ready.notify_one();
        }
    }
}

impl<T> Receiver<T> {
    /// The next item, waiting for it; `None` once the sender is gone and the queue empty.
    pub(crate) fn recv(&self) -> Option<T> {
        let s = &self.0;
        let mut state = s.lock();
        loop {
            if let Some(item) = state.queue.pop_front() {
                // no wake-up: a napping producer finds the room when it wakes
                state.taken += 1;
                return Some(item);
            }
            if state.done {
                return None;
            }
            if state.waiting.producer {
                // the producer napped too long: wake it rather than wait for its nap to end
                s.room.notify_one();
            }
            // the kernel threads' spin after the last step would keep the producer off a core
            autograd_core::kernel::park_idle_threads();
            state.waiting.consumer = true;
            state = s.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.waiting.consumer = false;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let s = &self.0;
        let mut state = s.lock();
        state.closed = true;
        state.queue.clear();
        if state.waiting.producer {
            s.room.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::queue;

    #[test]
    fn every_item_arrives_in_order_and_the_stream_ends() {
        for capacity in [1, 2, 3, 8] {
            let (tx, rx) = queue(capacity);
            let producer = std::thread::spawn(move || {
                for i in 0..1000 {
                    assert!(tx.send(i));
                }
            });
            let got: Vec<i32> = std::iter::from_fn(|| rx.recv()).collect();
            assert_eq!(got, (0..1000).collect::<Vec<_>>(), "capacity {capacity}");
            producer.join().unwrap();
        }
    }

    #[test]
    fn a_dropped_receiver_stops_a_blocked_producer() {
        let (tx, rx) = queue(2);
        let producer = std::thread::spawn(move || (0..100).take_while(|&i| tx.send(i)).count());
        assert_eq!(rx.recv(), Some(0));
        drop(rx);
        assert!(producer.join().unwrap() < 100);
    }

    #[test]
    fn a_panicking_producer_ends_the_stream() {
        let (tx, rx) = queue::<i32>(2);
        let producer = std::thread::spawn(move || {
            assert!(tx.send(1));
            panic!("a dataset failed");
        });
        assert_eq!(rx.recv(), Some(1));
        assert_eq!(rx.recv(), None);
        assert!(producer.join().is_err());
    }
}

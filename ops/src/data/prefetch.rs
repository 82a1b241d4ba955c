//! The bounded queue between a data loader's thread and the training loop. A standard
//! `sync_channel` wakes its blocked sender on every receive, and on a virtual machine that
//! system call costs as much as the rest of taking a batch; here the consumer wakes the
//! producer only once the queue has drained to its low-water mark, so the producer refills
//! several batches per wake-up, and the producer wakes the consumer only when it waits.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

struct State<T> {
    queue: VecDeque<T>,
    /// The receiver is gone: the producer stops.
    closed: bool,
    /// The sender is gone (finished or panicked): an empty queue ends the stream.
    done: bool,
    /// Who sleeps on a condition variable and needs a notification.
    waiting: Waiting,
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
    /// The producer is woken when a take leaves at most this many items.
    low: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // the state stays consistent under a panic: every update is a single assignment
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The producing end.
pub(crate) struct Sender<T>(Arc<Shared<T>>);

/// The consuming end.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

/// A queue of at most `capacity` (at least 1) items.
pub(crate) fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let capacity = capacity.max(1);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::with_capacity(capacity),
            closed: false,
            done: false,
            waiting: Waiting::default(),
        }),
        ready: Condvar::new(),
        room: Condvar::new(),
        capacity,
        low: (capacity - 1) / 2,
    });
    (Sender(Arc::clone(&shared)), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `item`, waiting for room; `false` when the receiver is gone.
    pub(crate) fn send(&self, item: T) -> bool {
        let s = &self.0;
        let mut state = s.lock();
        while state.queue.len() >= s.capacity && !state.closed {
            state.waiting.producer = true;
            state = s.room.wait(state).unwrap_or_else(PoisonError::into_inner);
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
        let s = &self.0;
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
                if state.waiting.producer && state.queue.len() <= s.low {
                    s.room.notify_one();
                }
                return Some(item);
            }
            if state.done {
                return None;
            }
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

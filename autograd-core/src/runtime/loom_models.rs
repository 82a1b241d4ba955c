//! Loom models of the traversal claims and of the `Arc` cache's hand-over between threads,
//! and the bounded configuration every model runs in (the lock models are beside their
//! locks, in `word_lock` and `element_lock`).
//!
//! Built only with `--cfg loom`, where the word lock, the element lock and the claims run on
//! loom's atomics and checked cell ([`crate::runtime::sync`]), a traversal's thread number and the
//! `Arc` cache are loom thread-locals, and waiters yield to loom: loom runs each model once
//! per interleaving of its threads (up to the preemption bound) and fails on a failed
//! assertion, an access to a lock's value not ordered after the previous holder's, a deadlock
//! or a leaked loom object. The bounded run (`.ci/run`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p autograd-core --release --lib loom
//! ```

use std::sync::Arc;

use loom::thread;

use crate::engine::{Claim, Plan};
use crate::error::Result;
use crate::graph::op::{Node, Operation, SavedState};
use crate::runtime::arc_cache::{new_arc, recycle};
use crate::tensor::Tensor;

/// Runs `model` in every interleaving loom explores, preempting a thread at most
/// `LOOM_MAX_PREEMPTIONS` times (2 when unset: every model here then runs in seconds).
pub(crate) fn check(model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    println!("{runs} interleavings explored");
    assert!(runs > 1, "the model has no concurrency to explore");
}

/// A node without inputs: what the claims see of a node is its saved state and identity.
struct Step {
    saved: SavedState,
}

impl Operation for Step {
    fn name(&self) -> &str {
        "step"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, _: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(Vec::new())
    }
}

/// `n` live nodes, in increasing identity order.
fn steps(n: usize) -> Vec<Node> {
    (0..n)
        .map(|_| -> Node {
            Arc::new(Step {
                saved: SavedState::new(&[], Vec::new()),
            })
        })
        .collect()
}

/// A releasing traversal's claims over a plan of `nodes` (discovered in that order), as the
/// engine takes them: the shared nodes in identity order, waiting for racing traversals; the
/// rest before the commit; then the plan's drop releases them.
fn releasing(nodes: Vec<Node>) -> Result<()> {
    let plan = Plan::discover_from(nodes, None)?;
    let mut claim = Claim::begin(&plan)?;
    claim.rest()?;
    claim.finish();
    Ok(())
}

/// A retaining traversal over `nodes`: discovery, then each node's saved state read under
/// its lock, as a VJP reads it, without claiming.
fn retaining(nodes: Vec<Node>) -> Result<()> {
    let plan = Plan::discover_from(nodes.clone(), None)?;
    for node in &nodes {
        node.saved()
            .with_then_claim(node.name(), None, |_| None::<()>)?;
    }
    drop(plan);
    Ok(())
}

/// Whether `result` is the error of a traversal that reached a released node.
fn released(result: &Result<()>) -> bool {
    matches!(result, Err(crate::Error::Runtime(m)) if m.contains("already released"))
}

/// Every node is live or released, and claimed by nobody: a fresh traversal of this thread
/// claims each live one at once.
fn assert_unclaimed(nodes: &[Node]) {
    for node in nodes {
        if !node.is_released() {
            let mine = crate::graph::op::TraversalToken::fresh();
            assert!(
                node.saved().claim(node.name(), mine).is_ok(),
                "a lost claim"
            );
            node.saved().unclaim(mine);
        }
    }
}

/// Two releasing traversals whose plans share a node: exactly one commits and releases its
/// nodes; the other fails having released nothing, and gives back the claim it held.
#[test]
fn two_releasing_traversals_sharing_a_node_commit_exactly_once() {
    check(|| {
        let nodes = steps(3);
        let theirs = vec![nodes[1].clone(), nodes[2].clone()];
        let other = thread::spawn(move || releasing(theirs));
        let mine = releasing(vec![nodes[0].clone(), nodes[1].clone()]);
        let theirs = other.join().expect("no panic");
        assert!(mine.is_ok() != theirs.is_ok(), "{mine:?} {theirs:?}");
        assert!(released(&mine) || released(&theirs));
        assert!(nodes[1].is_released());
        assert_eq!(nodes[0].is_released(), mine.is_ok());
        assert_eq!(nodes[2].is_released(), theirs.is_ok());
        assert_unclaimed(&nodes);
    });
}

/// Two releasing traversals over the same two nodes, discovered in opposite orders: claims
/// taken in identity order cannot deadlock, and exactly one commits.
#[test]
fn traversals_discovering_shared_nodes_in_opposite_orders_do_not_deadlock() {
    check(|| {
        let nodes = steps(2);
        let theirs = vec![nodes[1].clone(), nodes[0].clone()];
        let other = thread::spawn(move || releasing(theirs));
        let mine = releasing(nodes.clone());
        let theirs = other.join().expect("no panic");
        assert!(mine.is_ok() != theirs.is_ok(), "{mine:?} {theirs:?}");
        assert!(nodes.iter().all(|n| n.is_released()));
        assert_unclaimed(&nodes);
    });
}

/// A releasing traversal that fails after claiming (its VJP failed) gives its claims back:
/// a racing traversal waiting for them then has them and commits.
#[test]
fn a_failed_traversal_hands_its_claims_to_the_waiting_one() {
    check(|| {
        let nodes = steps(2);
        let theirs = nodes.clone();
        let failing = thread::spawn(move || {
            let plan = Plan::discover_from(theirs, None)?;
            let claim = Claim::begin(&plan)?;
            // the traversal fails here: dropping the unfinished claim gives its nodes back
            drop(claim);
            Ok::<_, crate::Error>(())
        });
        let mine = releasing(nodes.clone());
        let theirs = failing.join().expect("no panic");
        // the failing one may have found the nodes released already, or claimed them first
        assert!(theirs.is_ok() || released(&theirs), "{theirs:?}");
        assert!(mine.is_ok(), "{mine:?}");
        assert!(nodes.iter().all(|n| n.is_released()));
    });
}

/// A retaining traversal racing a releasing one neither waits for it nor stops it: the
/// releasing one commits, and the retaining one reads every node live or fails naming the
/// release; no claim is left behind.
#[test]
fn a_releasing_traversal_against_a_retaining_one() {
    check(|| {
        let nodes = steps(2);
        let theirs = nodes.clone();
        let reader = thread::spawn(move || retaining(theirs));
        let mine = releasing(nodes.clone());
        let read = reader.join().expect("no panic");
        assert!(mine.is_ok(), "{mine:?}");
        assert!(read.is_ok() || released(&read), "{read:?}");
        assert!(nodes.iter().all(|n| n.is_released()));
    });
}

/// What the hand-over model caches: 8-aligned, of one size class, its drop counted.
struct Payload {
    drops: loom::sync::Arc<loom::sync::atomic::AtomicUsize>,
    value: u64,
}

impl Drop for Payload {
    fn drop(&mut self) {
        self.drops
            .fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
    }
}

/// An `Arc` shared by two threads, each recycling its reference while the other may still
/// hold one: the value is dropped exactly once, by whichever thread's reference went last,
/// and the allocation goes to that thread's cache, where that thread's next `Arc` of the size
/// finds it; the other thread's next one does not. Then each thread's new `Arc` is handed to
/// the other and recycled there, and the caches are dropped with their threads.
///
/// Loom explores every interleaving of the two threads' cache work around the loom points
/// (the spawn, the values' drops, the join); the reference counts inside `std::sync::Arc`
/// are std's atomics, which loom does not see, so it does not preempt a thread between
/// `recycle`'s uniqueness check and the drop (scripts/valgrind-tests.sh runs the unit tests
/// that cover that code on real threads).
#[test]
fn an_arc_recycled_on_another_thread_feeds_that_threads_cache() {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    check(|| {
        let drops = loom::sync::Arc::new(AtomicUsize::new(0));
        let payload = |value| Payload {
            drops: loom::sync::Arc::clone(&drops),
            value,
        };
        let a = new_arc(payload(7));
        let at = Arc::as_ptr(&a) as usize;
        let b = Arc::clone(&a);
        let next = payload(8);
        let other = thread::spawn(move || {
            assert_eq!(b.value, 7);
            recycle(b);
            new_arc(next)
        });
        recycle(a);
        let mine = new_arc(payload(9));
        let theirs = other.join().expect("no panic");
        assert_eq!((mine.value, theirs.value), (9, 8));
        assert_eq!(
            drops.load(Ordering::Relaxed),
            1,
            "the shared value dropped once"
        );
        let reused = [&mine, &theirs].map(|p| Arc::as_ptr(p) as usize == at);
        assert!(
            reused[0] != reused[1],
            "exactly the last recycler's cache held it: {reused:?}"
        );
        let back = thread::spawn(move || recycle(mine));
        recycle(theirs);
        back.join().expect("no panic");
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    });
}

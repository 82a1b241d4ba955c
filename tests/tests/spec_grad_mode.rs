//! Requirement: Graph construction state is thread-local and restorable.
#![allow(non_snake_case)]

mod spec_support;

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use autograd_core::{
    is_grad_enabled, no_grad, record, set_grad_enabled, Operation, Result, SavedState, Tensor,
};
use autograd_ops::{add, mul};
use autograd_tests::t;

#[derive(Debug)]
struct Passthrough {
    saved: SavedState,
}

impl Operation for Passthrough {
    fn name(&self) -> &'static str {
        "passthrough"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.clone())])
    }
}

/// A differentiable identity that reports whether it saved its input (built a node).
fn passthrough(x: &Tensor) -> (Tensor, bool) {
    let built = Cell::new(false);
    let y = record(x.contiguous().unwrap(), &[x], Vec::new(), |saved| {
        built.set(true);
        Passthrough { saved }
    });
    (y, built.get())
}

/// Unwinds without running the panic hook (so the test output stays clean).
fn unwind() -> ! {
    resume_unwind(Box::new("unwinding out of a no_grad block"))
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__defaults_to_enabled_in_every_thread() {
    assert!(std::thread::spawn(is_grad_enabled).join().unwrap());
    assert!(is_grad_enabled());
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__set_grad_enabled_sets_the_state() {
    let x = t(&[1.0, 2.0], &[2]);
    let () = set_grad_enabled(false);
    assert!(!is_grad_enabled());
    let (y, built) = passthrough(&x);
    assert!(y.autograd_ctx().is_none() && !built);
    let () = set_grad_enabled(true);
    assert!(is_grad_enabled());
    let (z, built) = passthrough(&x);
    assert!(z.autograd_ctx().is_some() && built);
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__suppress_graph_construction_inside_a_block(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let w = t(&[3.0, 4.0], &[2]);
    {
        let _guard = no_grad();
        assert!(!is_grad_enabled());
        let y = mul(&x, &w).unwrap();
        assert!(y.autograd_ctx().is_none());
        let (z, built) = passthrough(&x);
        assert!(z.autograd_ctx().is_none());
        assert!(!built, "the operation retains no saved tensor inputs");
    }
    assert!(is_grad_enabled());
    let y = mul(&x, &w).unwrap();
    assert!(y.autograd_ctx().is_some());
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__keep_the_state_local_to_one_thread() {
    let _guard = no_grad();
    let started = std::thread::spawn(is_grad_enabled).join().unwrap();
    assert!(started, "the started thread reports True");
    assert!(
        !is_grad_enabled(),
        "the entering thread still reports False"
    );
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__a_change_in_another_thread_leaves_this_one_unchanged(
) {
    std::thread::spawn(|| {
        set_grad_enabled(false);
        assert!(!is_grad_enabled());
    })
    .join()
    .unwrap();
    assert!(is_grad_enabled());
    let x = t(&[1.0], &[1]);
    assert!(add(&x, &x).unwrap().autograd_ctx().is_some());
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__nested_blocks_restore_their_own_entry_state(
) {
    let x = t(&[1.0], &[1]);
    {
        let _outer = no_grad();
        {
            let _inner = no_grad();
            assert!(!is_grad_enabled());
        }
        assert!(
            !is_grad_enabled(),
            "the inner block restores the outer block's state"
        );
        assert!(add(&x, &x).unwrap().autograd_ctx().is_none());
    }
    assert!(is_grad_enabled());
    assert!(add(&x, &x).unwrap().autograd_ctx().is_some());

    // A block entered while construction was already disabled restores "disabled".
    set_grad_enabled(false);
    {
        let _g = no_grad();
    }
    assert!(!is_grad_enabled());
    // A state changed inside a block is overridden by the state seen on entry.
    set_grad_enabled(true);
    {
        let _g = no_grad();
        set_grad_enabled(true);
        {
            let _inner = no_grad();
        }
        assert!(
            is_grad_enabled(),
            "the inner block restores what it saw: enabled"
        );
    }
    assert!(is_grad_enabled());
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__blocks_restore_their_state_when_the_block_panics(
) {
    let r = catch_unwind(|| {
        let _g = no_grad();
        assert!(!is_grad_enabled());
        unwind();
    });
    assert!(r.is_err());
    assert!(is_grad_enabled());

    // Nested: the inner block unwinds, the outer block keeps its state and then restores its own.
    {
        let _outer = no_grad();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _inner = no_grad();
            unwind();
        }));
        assert!(r.is_err());
        assert!(!is_grad_enabled());
    }
    assert!(is_grad_enabled());

    // Both blocks unwind.
    let r = catch_unwind(|| {
        let _outer = no_grad();
        let _inner = no_grad();
        unwind();
    });
    assert!(r.is_err());
    assert!(is_grad_enabled());

    // Entered while disabled: unwinding restores "disabled".
    set_grad_enabled(false);
    let r = catch_unwind(|| {
        let _g = no_grad();
        unwind();
    });
    assert!(r.is_err());
    assert!(!is_grad_enabled());
    set_grad_enabled(true);
    let x = t(&[2.0], &[1]);
    let (y, built) = passthrough(&x);
    assert!(built && y.autograd_ctx().is_some());
}

#[test]
fn graph_construction_state_is_thread_local_and_restorable__a_result_made_without_graph_construction_is_a_leaf(
) {
    let x = t(&[1.0, 2.0], &[2]);
    let y = {
        let _g = no_grad();
        mul(&x, &x).unwrap()
    };
    assert!(y.autograd_ctx().is_none());
    y.backward_with(Some(&t(&[3.0, 4.0], &[2])), false).unwrap();
    assert_eq!(
        y.grad().unwrap().map(|g| g.values::<f32>().unwrap()),
        Some(vec![3.0, 4.0])
    );
    assert!(x.grad().unwrap().is_none());
}

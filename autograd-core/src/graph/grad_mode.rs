//! Thread-local graph-construction state.

use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether the current thread records autograd graphs. True for a thread that never changed it.
pub fn is_grad_enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// Sets whether the current thread records autograd graphs.
pub fn set_grad_enabled(enabled: bool) {
    ENABLED.with(|e| e.set(enabled));
}

/// Disables graph construction on this thread until the guard drops, then restores the state
/// seen on entry (also while unwinding).
///
/// ```
/// use autograd_core::{is_grad_enabled, no_grad};
/// {
///     let _guard = no_grad();
///     assert!(!is_grad_enabled());
/// }
/// assert!(is_grad_enabled());
/// ```
pub fn no_grad() -> GradModeGuard {
    GradModeGuard::set(false)
}

/// Restores the graph-construction state it saw on creation when dropped.
#[derive(Debug)]
#[must_use = "the state is restored when the guard drops; bind it to a variable"]
pub struct GradModeGuard {
    previous: bool,
    // The state is per thread, so the guard must drop on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl GradModeGuard {
    /// Sets the state to `enabled` until the guard drops.
    pub fn set(enabled: bool) -> GradModeGuard {
        let previous = is_grad_enabled();
        set_grad_enabled(enabled);
        GradModeGuard {
            previous,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.previous);
    }
}

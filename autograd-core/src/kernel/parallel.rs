//! When kernels split work across threads, and how many they use.

/// Elements below which a kernel runs on the calling thread: splitting smaller work costs
/// more in scheduling than it saves.
pub const PARALLEL_THRESHOLD: usize = 1 << 15;

/// The elements one parallel task handles.
pub(crate) const CHUNK: usize = 1 << 13;

/// The threads kernels use (the caller and the kernel team's helpers): as many as rayon's global
/// pool has, sized by `RAYON_NUM_THREADS` (default: every
/// core).
pub fn threads() -> usize {
    rayon::current_num_threads()
}

/// Whether work over `n` elements is split across threads.
pub(crate) fn parallel(n: usize) -> bool {
    n >= PARALLEL_THRESHOLD && threads() > 1
}

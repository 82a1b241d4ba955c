//! Keeps glibc's heap from handing large blocks back to the system between training steps.
//!
//! The `gemm` crate allocates its packing buffers (hundreds of KB to MB) on every product. With
//! glibc's defaults such a block is mapped fresh, or carved from a heap top that the previous
//! free trimmed, so each product faults its buffer in page by page, zeroed: about 40 faults a
//! W2 step, 4–8% of its time. Raising glibc's mmap threshold to 32 MiB and its trim threshold
//! to 64 MiB keeps those blocks in the heap, and up to 64 MiB of freed memory above its top,
//! where the next product finds them (the retention jemalloc or mimalloc have by default).
//! Blocks of 32 MiB and more, large activations among them, are still mapped and unmapped.
//!
//! Applied once, before the first product, on Linux with glibc only, and not at all when the
//! process sets its own malloc tunables (`GLIBC_TUNABLES` naming `glibc.malloc`, or the
//! `MALLOC_MMAP_THRESHOLD_` / `MALLOC_TRIM_THRESHOLD_` variables), which then stand.

/// Applies the thresholds once per process (see the module's doc).
pub(crate) fn retain_freed_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if !user_tuned(|name| std::env::var(name).ok()) {
                glibc::set_thresholds();
            }
        });
    }
}

/// Whether the process chose its own malloc thresholds, from its environment `var`.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn user_tuned(var: impl Fn(&str) -> Option<String>) -> bool {
    var("MALLOC_MMAP_THRESHOLD_").is_some()
        || var("MALLOC_TRIM_THRESHOLD_").is_some()
        || var("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc"))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::ffi::c_int;

    /// `<malloc.h>`'s parameter numbers.
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_THRESHOLD: c_int = -3;

    /// Blocks below this come from the heap.
    const MMAP_THRESHOLD: c_int = 32 << 20;
    /// Freed memory above the heap's top up to this stays with the process.
    const TRIM_THRESHOLD: c_int = 64 << 20;

    unsafe extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }

    pub(super) fn set_thresholds() {
        // SAFETY: `mallopt` takes any parameter and value; glibc serialises it with its own
        // lock, and a value it refuses leaves its setting unchanged (the return is 0).
        unsafe {
            mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::user_tuned;

    #[test]
    fn a_process_with_its_own_malloc_tunables_keeps_them() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        assert!(!user_tuned(env(&[])));
        assert!(!user_tuned(env(&[(
            "GLIBC_TUNABLES",
            "glibc.cpu.hwcaps=-AVX2"
        )])));
        assert!(!user_tuned(env(&[("MALLOC_ARENA_MAX", "2")])));
        assert!(user_tuned(env(&[("MALLOC_TRIM_THRESHOLD_", "0")])));
        assert!(user_tuned(env(&[("MALLOC_MMAP_THRESHOLD_", "65536")])));
        assert!(user_tuned(env(&[(
            "GLIBC_TUNABLES",
            "glibc.cpu.x86_rep_movsb_threshold=1:glibc.malloc.trim_threshold=0"
        )])));
    }
}

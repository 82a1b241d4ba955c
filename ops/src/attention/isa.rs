//! Instruction-set dispatch: each per-head kernel is compiled twice, once with AVX2 and FMA
//! enabled (picked at run time when the CPU has them) and once for the baseline target, so the
//! build needs no `-C target-cpu` and runs on any x86-64 (and on other architectures, the
//! baseline only).

/// `fn name(args) -> R` that runs `kernel::<Fused>(args)` compiled with AVX2 and FMA when the CPU
/// has them, else `kernel::<Split>(args)`. `kernel` must be `#[inline(always)]` (and so must
/// everything it calls) for the wide instantiation to use the wide instructions.
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $kernel:ident) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn wide($($arg: $ty),*) $(-> $ret)? {
                    $kernel::<autograd_core::kernel::Fused>($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: `wide` is plain safe code compiled for AVX2 and FMA; the only
                    // requirement is that the running CPU has both, checked just above.
                    return unsafe { wide($($arg),*) };
                }
            }
            $kernel::<autograd_core::kernel::Split>($($arg),*)
        }
    };
}

pub(super) use dispatch;

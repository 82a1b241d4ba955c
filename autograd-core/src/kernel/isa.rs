//! Instruction-set dispatch for kernels' inner loops, one macro for both crates
//! ([`simd!`](crate::simd)): a loop is compiled for several instruction sets (AVX-512, AVX2 and
//! FMA, the baseline target) and the widest the running CPU has is run, so the build needs no
//! `-C target-cpu` and runs on any x86-64 (elsewhere, the baseline only). The CPU's level is
//! detected once and cached.

/// Loops shorter than this run the baseline copy under `simd!(len = ..; ..)`.
#[doc(hidden)]
pub const SIMD_MIN: usize = 8;

/// The widest instruction set of the running CPU the kernels are compiled for, detected once:
/// one load per dispatch instead of one per feature.
#[cfg(target_arch = "x86_64")]
mod level {
    use std::sync::atomic::{AtomicU8, Ordering};

    const UNKNOWN: u8 = 0;
    pub(super) const BASELINE: u8 = 1;
    pub(super) const AVX2_FMA: u8 = 2;
    pub(super) const AVX512: u8 = 3;

    static LEVEL: AtomicU8 = AtomicU8::new(UNKNOWN);

    #[inline]
    pub(super) fn get() -> u8 {
        match LEVEL.load(Ordering::Relaxed) {
            UNKNOWN => detect(),
            l => l,
        }
    }

    #[cold]
    fn detect() -> u8 {
        let wide = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        let l = match (wide, std::arch::is_x86_feature_detected!("avx512f")) {
            (true, true) => AVX512,
            (true, false) => AVX2_FMA,
            (false, _) => BASELINE,
        };
        LEVEL.store(l, Ordering::Relaxed);
        l
    }
}

/// Whether the running CPU has AVX2 and FMA.
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn wide() -> bool {
    level::get() >= level::AVX2_FMA
}

/// Whether the running CPU has AVX-512F besides AVX2 and FMA.
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn widest() -> bool {
    level::get() == level::AVX512
}

/// [`avx2`] with AVX-512F as well: sixteen lanes.
///
/// # Safety
/// The running CPU must have AVX-512F, AVX2 and FMA ([`widest`]).
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
pub unsafe fn avx512<R>(run: impl FnOnce() -> R) -> R {
    run()
}

/// Runs `run` from a function compiled with AVX2 and FMA: `run`, a closure used once, is
/// inlined into it, and with it every `#[inline(always)]` function it calls.
///
/// # Safety
/// The running CPU must have AVX2 and FMA ([`wide`]).
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
pub unsafe fn avx2<R>(run: impl FnOnce() -> R) -> R {
    run()
}

/// `simd!(body(args..))` is `body(args..)` computed by a copy of `body` compiled for the widest
/// vectors the running CPU has (AVX-512, else AVX2 and FMA, else the baseline). `body` must be an
/// `#[inline(always)]` function; the closures it calls (an elementwise op's) are inlined into
/// either copy and so use its instructions. Compute-bound loops (`tanh`, GELU, row
/// normalisations) run two to three times as fast on such CPUs.
///
/// ```
/// #[inline(always)]
/// fn scale(xs: &mut [f32], c: f32) {
///     xs.iter_mut().for_each(|x| *x *= c);
/// }
/// let mut xs = vec![1.0f32; 100];
/// autograd_core::simd!(scale(&mut xs, 3.0));
/// assert!(xs.iter().all(|&x| x == 3.0));
/// ```
///
/// `simd!(len = n; body(args..))` runs the baseline copy when `n`, the loop's length, is below
/// [`SIMD_MIN`]: a few elements (a scalar loss, a small bias) take less than the dispatch and the
/// vector prologue.
///
/// The item form `simd!(fn name(arg: Type, ..) -> R => kernel)` defines `fn name` that runs
/// `kernel::<Fused512>(args..)` from a copy compiled with AVX-512F and FMA, or else
/// `kernel::<Fused>(args..)` from one compiled with AVX2 and FMA, when the CPU has them, else
/// `kernel::<Split>(args..)` (see [`Madd`]). It is for register-tiled
/// kernels too large to pass through a closure (the attention heads): each vector copy is a
/// function of its own, into which `kernel`, `#[inline(always)]`, and everything it calls is
/// inlined. A tile row of 16 lanes is two AVX2 registers or one AVX-512 register; the wider
/// copy issues half the loads and multiply-adds (W8's attention: 7% less time).
///
/// ```
/// use autograd_core::kernel::Madd;
/// #[inline(always)]
/// fn dot<M: Madd>(a: &[f32], b: &[f32]) -> f32 {
///     a.iter().zip(b).fold(0.0, |s, (&x, &y)| M::madd(x, y, s))
/// }
/// autograd_core::simd!(fn dot_product(a: &[f32], b: &[f32]) -> f32 => dot);
/// assert_eq!(dot_product(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
/// ```
#[macro_export]
macro_rules! simd {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $kernel:ident) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma,avx512f")]
                unsafe fn widest($($arg: $ty),*) $(-> $ret)? {
                    $kernel::<$crate::kernel::Fused512>($($arg),*)
                }
                if $crate::kernel::isa::widest() {
                    // SAFETY: `widest` is plain safe code compiled for AVX-512F, AVX2 and FMA;
                    // the only requirement is that the running CPU has all three, checked just
                    // above.
                    return unsafe { widest($($arg),*) };
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn wide($($arg: $ty),*) $(-> $ret)? {
                    $kernel::<$crate::kernel::Fused>($($arg),*)
                }
                if $crate::kernel::isa::wide() {
                    // SAFETY: `wide` is plain safe code compiled for AVX2 and FMA; the only
                    // requirement is that the running CPU has both, checked just above.
                    return unsafe { wide($($arg),*) };
                }
            }
            $kernel::<$crate::kernel::Split>($($arg),*)
        }
    };
    (len = $n:expr; $body:ident($($arg:expr),* $(,)?)) => {{
        if $n < $crate::kernel::isa::SIMD_MIN {
            $body($($arg),*)
        } else {
            $crate::simd!($body($($arg),*))
        }
    }};
    ($body:ident($($arg:expr),* $(,)?)) => {{
        #[cfg(target_arch = "x86_64")]
        let out = if $crate::kernel::isa::widest() {
            // SAFETY: `avx512` requires AVX-512F, AVX2 and FMA, checked just above.
            unsafe { $crate::kernel::isa::avx512(|| $body($($arg),*)) }
        } else if $crate::kernel::isa::wide() {
            // SAFETY: `avx2` requires AVX2 and FMA, checked just above.
            unsafe { $crate::kernel::isa::avx2(|| $body($($arg),*)) }
        } else {
            $body($($arg),*)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let out = $body($($arg),*);
        out
    }};
}

/// `a * b + c`: fused where the CPU has FMA, two roundings otherwise. A kernel generic over it
/// is instantiated with [`Fused512`] in its AVX-512 copy, [`Fused`] in its AVX2-and-FMA copy
/// and [`Split`] in its baseline copy (the item form of [`simd!`](crate::simd)), so no copy
/// calls libm's `fmaf`.
pub trait Madd {
    /// The Float32 lanes of a vector register in the copy instantiated with this type, so that
    /// a register-tiled kernel can shape its tiles to the registers it has (SSE's 4 unless an
    /// implementation says otherwise).
    const LANES: usize = 4;

    /// `a * b + c`.
    fn madd(a: f32, b: f32, c: f32) -> f32;
}

/// `f32::mul_add`, for code compiled with FMA enabled (a single instruction there).
#[derive(Debug, Clone, Copy)]
pub struct Fused;

/// [`Fused`] for the AVX-512 copy: the same arithmetic, with registers of 16 lanes (and 32 of
/// them, where AVX2 has 16 of 8).
#[derive(Debug, Clone, Copy)]
pub struct Fused512;

/// `a * b + c` with two roundings, for CPUs without FMA (where `mul_add` is a library call).
#[derive(Debug, Clone, Copy)]
pub struct Split;

/// `Madd` by `f32::mul_add` for each FMA copy's type, with its registers' lanes.
macro_rules! fused_madd {
    ($($ty:ty => $lanes:expr),*) => {$(
        impl Madd for $ty {
            const LANES: usize = $lanes;

            #[allow(clippy::inline_always)] // inlined into each instruction-set copy
            #[inline(always)]
            fn madd(a: f32, b: f32, c: f32) -> f32 {
                a.mul_add(b, c)
            }
        }
    )*};
}

fused_madd!(Fused => 8, Fused512 => 16);

impl Madd for Split {
    #[allow(clippy::inline_always)] // inlined into each instruction-set copy
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{wide, widest};

    /// The cached level answers what `std`'s detection does, on the first call and after.
    #[test]
    fn the_cached_level_agrees_with_feature_detection() {
        let avx2_fma = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        let avx512 = avx2_fma && std::arch::is_x86_feature_detected!("avx512f");
        for _ in 0..2 {
            assert_eq!(wide(), avx2_fma);
            assert_eq!(widest(), avx512);
        }
    }
}

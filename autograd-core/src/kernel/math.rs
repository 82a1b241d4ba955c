//! Scalar math for Float32 kernels: `e^x` and `tanh` as plain arithmetic that vectorises
//! (libm's are a call per element), and `erf` in double precision. Ops reach them here, in the
//! kernel layer, as user kernels do (`kernel::exp_f32`).

/// `tanh` for Float32 as a branch-free rational function (Eigen's and PyTorch's vectorised
/// form: a degree-13/6 fit on `[-7.9, 7.9]`, where `tanh` rounds to +-1 beyond), within a few
/// ulps of the exact value. libm's `tanhf` cannot be vectorised and costs several times more.
/// Its multiply-adds are fused (`mul_add`): one instruction each in the kernels' AVX2 and
/// AVX-512 copies (`simd!`), into which it is always inlined, and the same bits from libm's
/// `fmaf` in the baseline copy (loops of a few elements, CPUs without FMA).
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    const CLAMP: f32 = 7.905_311;
    const A1: f32 = 4.893_524_6e-3;
    const A3: f32 = 6.372_619_3e-4;
    const A5: f32 = 1.485_722_4e-5;
    const A7: f32 = 5.122_297e-8;
    const A9: f32 = -8.604_672e-11;
    const A11: f32 = 2.000_188e-13;
    const A13: f32 = -2.760_768_5e-16;
    const B0: f32 = 4.893_525e-3;
    const B2: f32 = 2.268_434_7e-3;
    const B4: f32 = 1.185_347_1e-4;
    const B6: f32 = 1.198_258_4e-6;
    let x = x.clamp(-CLAMP, CLAMP);
    let x2 = x * x;
    let p = x2.mul_add(A13, A11);
    let p = x2.mul_add(p, A9);
    let p = x2.mul_add(p, A7);
    let p = x2.mul_add(p, A5);
    let p = x2.mul_add(p, A3);
    let p = x2.mul_add(p, A1);
    let q = x2.mul_add(B6, B4);
    let q = x2.mul_add(q, B2);
    let q = x2.mul_add(q, B0);
    // at and beyond the clamp exactly +-1 (where the unfused form rounded to), so that, as in
    // PyTorch, GELU's `x (1 + tanh u)` at -inf is NaN
    if x.abs() >= CLAMP {
        1.0f32.copysign(x)
    } else {
        x * p / q
    }
}

/// `e^x` for Float32 as plain arithmetic that vectorises, within 2 ulps of the exact value:
/// Cephes' `expf` (`x = n ln 2 + r`, `|r| <= ln 2 / 2`, a degree-6 polynomial for `e^r`) with
/// `2^n` built from exponent bits in two halves, so that results from the subnormals up to
/// `f32::MAX` keep that accuracy. Overflow gives `inf`, `x < -104` gives 0, NaN stays NaN.
/// libm's `expf` is a call per element and cannot be vectorised. Always inlined, so that a
/// loop compiled for a wider instruction set (`simd!`) vectorises it.
#[allow(
    clippy::inline_always,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const HI: f32 = 88.722_84; // ln f32::MAX
    const LO: f32 = -104.0; // below ln of the smallest subnormal
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding it rounds to an integer, held in the low mantissa bits
    const ROUND: f32 = 12_582_912.0;
    let c = x.clamp(LO, HI);
    let big = c * LOG2E + ROUND;
    let n = big - ROUND;
    // the integer n in [-150, 128] (the low mantissa bits of `big`, as a two's-complement
    // difference), as two halves whose powers of two are both normal
    let k = big.to_bits().wrapping_sub(ROUND.to_bits());
    let half = (k as i32 >> 1) as u32;
    let pow = |e: u32| f32::from_bits(e.wrapping_add(127) << 23);
    let r = c - n * LN2_HI;
    let r = r - n * LN2_LO;
    let mut p = 1.987_569_2e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let e = (p * (r * r) + r + 1.0) * pow(half) * pow(k.wrapping_sub(half));
    if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        e
    }
}

/// The error function (`f64::erf` is not stable yet), correct to about one ulp in double
/// precision (the fdlibm algorithm), so Float64 `erf` and `gelu` are as exact as their dtype.
pub(crate) fn erf(x: f64) -> f64 {
    libm::erf(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // reference values to 17 digits (mpmath)
        for (x, want) in [
            (0.0, 0.0),
            (1e-10, 1.128_379_167_095_512_6e-10),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (-2.0, -0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-6.0, -1.0),
        ] {
            let got = erf(x);
            assert!(
                (got - want).abs() <= 2.0 * f64::EPSILON * want.abs().max(f64::MIN_POSITIVE),
                "erf({x}) = {got}, want {want}"
            );
        }
        assert!(erf(f64::NAN).is_nan());
    }

    #[test]
    fn fast_tanh_is_within_a_few_ulps() {
        let mut worst = 0.0f64;
        for i in -200_000..=200_000 {
            let x = i as f32 * 5e-5;
            let exact = f64::from(x).tanh();
            let err = (f64::from(tanh_f32(x)) - exact).abs();
            worst = worst.max(err / exact.abs().max(1e-30));
        }
        assert!(worst < 1e-6, "relative error {worst}");
        // saturated: exactly +-1
        for (x, want) in [
            (30.0, 1.0),
            (-30.0, -1.0),
            (f32::INFINITY, 1.0),
            (f32::NEG_INFINITY, -1.0),
        ] {
            assert_eq!(tanh_f32(x), want);
        }
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(tanh_f32(0.0), 0.0);
    }

    #[test]
    fn fast_exp_is_within_two_ulps_over_the_whole_range() {
        let mut worst = 0.0f64;
        for i in -1_040_000..=887_228 {
            let x = i as f32 * 1e-4;
            let exact = f64::from(x).exp();
            let got = f64::from(exp_f32(x));
            if exact >= f64::from(f32::MIN_POSITIVE) {
                worst = worst.max((got - exact).abs() / exact);
            } else {
                // subnormal results: within a couple of the smallest steps
                assert!(
                    (got - exact).abs() <= 3.0 * 1.4e-45,
                    "exp({x}) = {got}, not {exact}"
                );
            }
        }
        assert!(worst < 2.5e-7, "relative error {worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(-105.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(88.72).is_finite());
    }
}

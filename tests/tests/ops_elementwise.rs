//! The elementwise ops around the CPU carrier's inline-storage threshold (16 Float32 values):
//! forward values against a plain loop, and every VJP against central differences, for dense,
//! strided and self-aliased (`x * x`) operands.

use autograd_core::{gradcheck, GradcheckOptions, Tensor, SMALL_F32};
use autograd_ops::{add, add_scalar, mul, mul_scalar, sum};
use autograd_tests::{t, vals};

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f32 - n as f32 / 3.0) * scale)
        .collect()
}

const SIZES: [usize; 4] = [1, SMALL_F32, SMALL_F32 + 1, 40];

#[test]
fn forward_values_match_a_plain_loop_on_both_sides_of_the_inline_threshold() {
    for n in SIZES {
        let (a, b) = (ramp(n, 0.5), ramp(n, -0.25));
        let (x, y) = (t(&a, &[n]), t(&b, &[n]));
        let zip = |f: fn(f32, f32) -> f32| -> Vec<f32> {
            a.iter().zip(&b).map(|(&p, &q)| f(p, q)).collect()
        };
        assert_eq!(vals(&add(&x, &y).unwrap()), zip(|p, q| p + q));
        assert_eq!(vals(&mul(&x, &y).unwrap()), zip(|p, q| p * q));
        let squares: Vec<f32> = a.iter().map(|p| p * p).collect();
        assert_eq!(
            vals(&mul(&x, &x).unwrap()),
            squares,
            "one carrier on both sides"
        );
        let scaled: Vec<f32> = a.iter().map(|p| p * 3.0).collect();
        assert_eq!(vals(&mul_scalar(&x, 3.0).unwrap()), scaled);
        let shifted: Vec<f32> = a.iter().map(|p| p + 1.5).collect();
        assert_eq!(vals(&add_scalar(&x, 1.5).unwrap()), shifted);
    }
}

#[test]
fn strided_and_offset_operands_read_their_own_elements() {
    for n in SIZES {
        // a [2, n] matrix: its transpose is strided, its second row starts at an offset
        let m = t(&ramp(2 * n, 1.0), &[2, n]);
        let row = m.select(0, 1).unwrap();
        let want: Vec<f32> = vals(&row).iter().map(|v| v * 2.0).collect();
        assert_eq!(vals(&mul_scalar(&row, 2.0).unwrap()), want);
        let tr = m.transpose(0, 1).unwrap();
        let doubled = add(&tr, &tr).unwrap();
        let want: Vec<f32> = vals(&tr).iter().map(|v| v * 2.0).collect();
        assert_eq!(vals(&doubled), want);
        assert_eq!(doubled.dims(), vec![n, 2]);
    }
}

#[test]
fn every_elementwise_vjp_matches_central_differences() {
    let opts = GradcheckOptions::default();
    for n in SIZES {
        let x = || t(&ramp(n, 0.1), &[n]);
        let y = || t(&ramp(n, -0.07), &[n]);
        gradcheck(|v: &[Tensor]| sum(&add(&v[0], &v[1])?), &[x(), y()], opts).unwrap();
        gradcheck(|v: &[Tensor]| sum(&mul(&v[0], &v[1])?), &[x(), y()], opts).unwrap();
        gradcheck(|v: &[Tensor]| sum(&mul(&v[0], &v[0])?), &[x()], opts).unwrap();
        gradcheck(|v: &[Tensor]| sum(&mul_scalar(&v[0], -2.5)?), &[x()], opts).unwrap();
        gradcheck(|v: &[Tensor]| sum(&add_scalar(&v[0], 0.5)?), &[x()], opts).unwrap();
        // x * x for a strided leaf (a transposed view of its storage)
        let tr = t(&ramp(2 * n, 0.05), &[2, n])
            .transpose(0, 1)
            .unwrap()
            .detach();
        gradcheck(|v: &[Tensor]| sum(&mul(&v[0], &v[0])?), &[tr], opts).unwrap();
    }
}

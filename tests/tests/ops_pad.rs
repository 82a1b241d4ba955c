//! `pad` (issue 38 item 4) in every mode: forward values and gradients against the numbers
//! PyTorch 2.15 prints (`tests/fixtures/index/pad.txt`, written by `gen_pad.py` beside it),
//! a plain-loop reference, gradcheck on contiguous, strided and broadcast inputs, other
//! dtypes, every error (which changes nothing), and a property: cropping with negative pads
//! undoes padding.

use autograd_core::ops::{pad, PadMode};
use autograd_core::{
    grad, gradcheck, shape, ErrorKind, GradOptions, GradcheckOptions, Shape, Tensor,
};
use autograd_tests::fixture::{floats, mismatches, numbers, operand, Tolerance};
use autograd_tests::{broadcast_rows, coords, kind, noise, strided, t, vals};
use proptest::prelude::*;

const PAD: &str = include_str!("../fixtures/index/pad.txt");

const EXACT: Tolerance = Tolerance {
    abs: 1e-6,
    rel: 1e-6,
};

fn mode_named(name: &str, value: f64) -> PadMode {
    match name {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        other => panic!("unknown pad mode {other}"),
    }
}

#[test]
fn pad_gives_pytorchs_values_and_gradients_in_every_mode() {
    let mut cases = 0;
    let mut wrong = Vec::new();
    for line in PAD.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [label, mode, value, pads, x, cotangent, output, want_grad] = f[..] else {
            panic!("a fixture line has eight fields: {line}");
        };
        let mode = mode_named(mode, value.parse().unwrap());
        let pads: Vec<i64> = numbers(pads);
        let (dims, xv) = operand(x).unwrap();
        let x = t(&xv, &dims);
        let y = pad(&x, &pads[..], mode).unwrap();
        let (out_dims, want) = operand(output).unwrap();
        assert_eq!(y.dims(), out_dims, "{label}: shape");
        wrong.extend(mismatches(label, "forward", &vals(&y), &want, EXACT));
        let (_, g) = operand(cotangent).unwrap();
        let dx = grad(&y, &[&x], &t(&g, &out_dims), GradOptions::default()).unwrap()[0]
            .clone()
            .expect("a gradient");
        wrong.extend(mismatches(
            label,
            "gradient",
            &vals(&dx),
            &floats(want_grad),
            EXACT,
        ));
        cases += 1;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(cases, 22);
}

/// `pad` computed one output element at a time from its coordinate: the definition, with no
/// row plan.
fn reference(x: &[f32], dims: &[usize], pads: &[i64], mode: PadMode) -> (Vec<usize>, Vec<f32>) {
    let rank = dims.len();
    let mut pairs = vec![(0i64, 0i64); rank];
    for (k, p) in pads.chunks(2).enumerate() {
        pairs[rank - 1 - k] = (p[0], p[1]);
    }
    let out: Vec<usize> = dims
        .iter()
        .zip(&pairs)
        .map(|(&n, &(lo, hi))| (n as i64 + lo + hi) as usize)
        .collect();
    let size: usize = out.iter().product();
    let mut y = Vec::with_capacity(size);
    for p in 0..size {
        let c = coords(p, &out);
        let mut at = Some(0usize);
        for d in 0..rank {
            let (n, s) = (dims[d] as i64, c[d] as i64 - pairs[d].0);
            let s = if (0..n).contains(&s) {
                Some(s)
            } else {
                match mode {
                    PadMode::Constant(_) => None,
                    PadMode::Reflect => Some(if s < 0 { -s } else { 2 * (n - 1) - s }),
                    PadMode::Replicate => Some(s.clamp(0, n - 1)),
                    // round the window a negative pad leaves, as PyTorch crops first
                    PadMode::Circular => {
                        let first = (-pairs[d].0).max(0);
                        let end = n - (-pairs[d].1).max(0);
                        Some(first + (s - first).rem_euclid(end - first))
                    }
                }
            };
            at = match (at, s) {
                (Some(a), Some(s)) => Some(a * dims[d] + s as usize),
                _ => None,
            };
        }
        y.push(match (at, mode) {
            (Some(a), _) => x[a],
            (None, PadMode::Constant(v)) => v as f32,
            (None, _) => unreachable!("only constant padding leaves a position unread"),
        });
    }
    (out, y)
}

#[test]
fn pad_agrees_with_a_plain_loop_on_contiguous_strided_and_broadcast_inputs() {
    let dims = [2, 3, 4, 5];
    let values = noise(120, 7);
    let modes = [
        PadMode::Constant(-0.5),
        PadMode::Reflect,
        PadMode::Replicate,
        PadMode::Circular,
    ];
    let pad_lists: [&[i64]; 5] = [
        &[1, 2],
        &[3, 0, 2, 2],
        &[-1, 4, 2, -1],
        &[0, 0, 1, 1, 1, 0],
        &[4, 4, 2, 1, 1, 1, 0, 1],
    ];
    for mode in modes {
        for &pads in &pad_lists {
            let too_far = pads
                .chunks(2)
                .enumerate()
                .any(|(k, pair)| pair.iter().any(|&p| p >= dims[dims.len() - 1 - k] as i64));
            if mode == PadMode::Reflect && too_far {
                continue; // reflect needs every pad below its axis's extent
            }
            let (out, want) = reference(&values, &dims, pads, mode);
            for x in [t(&values, &dims), strided(&values, &dims)] {
                let y = pad(&x, pads, mode).unwrap();
                assert_eq!(y.dims(), out, "{mode:?} {pads:?}");
                assert_eq!(vals(&y), want, "{mode:?} {pads:?}");
            }
        }
    }
    // a broadcast (stride-0) input reads as its values
    let row = noise(4, 2);
    let b = broadcast_rows(&row, 3);
    let dense: Vec<f32> = (0..3).flat_map(|_| row.clone()).collect();
    let (_, want) = reference(&dense, &[3, 4], &[2, 1, 1, 1], PadMode::Reflect);
    assert_eq!(
        vals(&pad(&b, &[2, 1, 1, 1], PadMode::Reflect).unwrap()),
        want
    );
}

#[test]
fn a_large_image_split_across_threads_agrees_with_the_plain_loop() {
    // [2, 8, 48, 48] padded to [2, 8, 52, 51]: above the size where the kernel splits rows
    let dims = [2, 8, 48, 48];
    let values = noise(2 * 8 * 48 * 48, 17);
    let x = t(&values, &dims);
    for mode in [PadMode::Constant(0.25), PadMode::Reflect, PadMode::Circular] {
        let pads = [2, 1, 3, 1];
        let (out, want) = reference(&values, &dims, &pads, mode);
        assert!(want.len() > autograd_core::kernel::PARALLEL_THRESHOLD);
        let y = pad(&x, &pads, mode).unwrap();
        assert_eq!(y.dims(), out);
        assert_eq!(vals(&y), want, "{mode:?}");
    }
}

#[test]
fn gradcheck_every_mode_on_contiguous_strided_and_broadcast_inputs() {
    let dims = [2, 3, 4];
    let values = noise(24, 11);
    let row = noise(4, 5);
    for mode in [
        PadMode::Constant(1.5),
        PadMode::Reflect,
        PadMode::Replicate,
        PadMode::Circular,
    ] {
        for x in [
            t(&values, &dims),
            strided(&values, &dims),
            broadcast_rows(&row, 3),
        ] {
            for pads in [&[2, 1][..], &[1, -1, 2, 1][..], &[-1, 3][..]] {
                let report = gradcheck(
                    |v: &[Tensor]| pad(&v[0], pads, mode),
                    std::slice::from_ref(&x),
                    GradcheckOptions::default(),
                );
                assert!(
                    report.is_ok(),
                    "{mode:?} {pads:?} {:?}: {report:?}",
                    x.dims()
                );
            }
        }
    }
}

#[test]
fn reflect_and_replicate_accumulate_into_the_edges() {
    // [a, b, c] reflect-padded by 2 each side reads c b a b c b a: a twice, b three times, c twice
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = pad(&x, &[2, 2], PadMode::Reflect).unwrap();
    assert_eq!(vals(&y), [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
    let ones = t(&[1.0; 7], &[7]);
    let g = grad(&y, &[&x], &ones, GradOptions::default()).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [2.0, 3.0, 2.0]);
    let y = pad(&x, &[2, 1], PadMode::Replicate).unwrap();
    assert_eq!(vals(&y), [1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
    let g = grad(&y, &[&x], &t(&[1.0; 6], &[6]), GradOptions::default()).unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [3.0, 1.0, 2.0]);
    // the method form and the three-axis case agree with the function
    let z = x.pad(&[1, 1], PadMode::Circular).unwrap();
    assert_eq!(vals(&z), [3.0, 1.0, 2.0, 3.0, 1.0]);
}

#[test]
fn other_dtypes_pad_without_gradients() {
    let i = Tensor::from_vec(vec![1i32, 2, 3, 4], shape![2, 2]).unwrap();
    assert_eq!(
        pad(&i, &[1, 0], PadMode::Constant(7.0))
            .unwrap()
            .values::<i32>()
            .unwrap(),
        [7, 1, 2, 7, 3, 4]
    );
    let l = Tensor::from_vec(vec![1i64, 2, 3], shape![3]).unwrap();
    assert_eq!(
        pad(&l, &[1, 2], PadMode::Reflect)
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [2, 1, 2, 3, 2, 1]
    );
    let b = Tensor::from_vec(vec![true, false], shape![2]).unwrap();
    assert_eq!(
        pad(&b, &[1, 1], PadMode::Constant(1.0))
            .unwrap()
            .values::<bool>()
            .unwrap(),
        [true, true, false, true]
    );
    let d = Tensor::from_vec(vec![0.1f64, 0.2], shape![1, 2]).unwrap();
    assert_eq!(
        pad(&d, &[0, 1, 1, 0], PadMode::Replicate)
            .unwrap()
            .values::<f64>()
            .unwrap(),
        [0.1, 0.2, 0.2, 0.1, 0.2, 0.2]
    );
    // a 0-dim tensor takes no pads and comes back as is
    let s = t(&[4.0], &[]);
    assert_eq!(
        vals(&pad(&s, &[0i64; 0][..], PadMode::Reflect).unwrap()),
        [4.0]
    );
}

#[test]
fn bad_pads_are_errors_that_name_the_sizes_and_change_nothing() {
    let x = t(&noise(12, 3), &[3, 4]);
    let before = vals(&x);
    let message = |r: autograd_core::Result<Tensor>| r.unwrap_err().to_string();
    // an odd count, and more pairs than axes
    assert_eq!(
        kind(pad(&x, &[1, 2, 3], PadMode::Constant(0.0))),
        ErrorKind::Value
    );
    assert_eq!(
        kind(pad(&x, &[1, 1, 1, 1, 1, 1], PadMode::Constant(0.0))),
        ErrorKind::Value
    );
    // cropping past nothing
    let e = message(pad(&x, &[-3, -2], PadMode::Constant(0.0)));
    assert!(e.contains("negative extent") && e.contains("[3, 4]"), "{e}");
    // reflect: a pad must be below the extent (4 on the last axis)
    let e = message(pad(&x, &[4, 0], PadMode::Reflect));
    assert!(
        e.contains("reflect padding of 4") && e.contains("extent 4"),
        "{e}"
    );
    assert_eq!(
        kind(pad(&x, &[0, 0, 0, 3], PadMode::Reflect)),
        ErrorKind::Value
    );
    assert!(pad(&x, &[3, 3, 2, 2], PadMode::Reflect).is_ok());
    // circular: at most the extent
    assert_eq!(kind(pad(&x, &[5, 0], PadMode::Circular)), ErrorKind::Value);
    assert!(pad(&x, &[4, 4], PadMode::Circular).is_ok());
    let e = message(pad(&x, &[1, -4], PadMode::Circular));
    assert!(e.contains("at most the 0 elements left"), "{e}");
    assert_eq!(kind(pad(&x, &[3, -2], PadMode::Circular)), ErrorKind::Value);
    // replicate of an empty axis
    let empty = Tensor::from_vec(Vec::<f32>::new(), Shape::from(&[2usize, 0][..])).unwrap();
    assert_eq!(
        kind(pad(&empty, &[1, 0], PadMode::Replicate)),
        ErrorKind::Value
    );
    assert_eq!(
        pad(&empty, &[1, 0], PadMode::Constant(3.0)).unwrap().dims(),
        [2, 1]
    );
    // a constant the dtype cannot hold
    let i = Tensor::from_vec(vec![1i32, 2], shape![2]).unwrap();
    assert_eq!(
        kind(pad(&i, &[1, 1], PadMode::Constant(0.5))),
        ErrorKind::Type
    );
    let b = Tensor::from_vec(vec![true], shape![1]).unwrap();
    assert_eq!(
        kind(pad(&b, &[1, 1], PadMode::Constant(2.0))),
        ErrorKind::Type
    );
    assert_eq!(vals(&x), before);
    assert!(x.grad().unwrap().is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Padding by `p` and then padding by `-p` (a crop) gives the input back, in every mode.
    #[test]
    fn cropping_with_negative_pads_undoes_padding(
        dims in prop::collection::vec(2usize..5, 1..4),
        pads in prop::collection::vec(0i64..2, 6),
        mode in 0usize..4,
    ) {
        let size: usize = dims.iter().product();
        let x = t(&noise(size, size as u64), &dims);
        let pairs = 2 * dims.len().min(3);
        let pads = &pads[..pairs];
        let mode = [PadMode::Constant(9.0), PadMode::Reflect, PadMode::Replicate, PadMode::Circular][mode];
        let back: Vec<i64> = pads.iter().map(|p| -p).collect();
        let y = pad(&pad(&x, pads, mode).unwrap(), &back[..], mode).unwrap();
        prop_assert_eq!(y.dims(), x.dims());
        prop_assert_eq!(vals(&y), vals(&x));
    }
}

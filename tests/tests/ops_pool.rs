//! The pooling and resizing ops of issue 39: `max_pool2d` (with indices), `avg_pool2d`,
//! `adaptive_avg_pool2d` and `interpolate` against the numbers PyTorch 2.15 prints
//! (`tests/fixtures/pool/pool.txt`, written by `gen_pool.py`), against plain loops over every
//! option, by gradcheck on contiguous and strided inputs and batch 1, the `MaxPool2d` and
//! `AvgPool2d` layers, and every error (which changes nothing).

mod pool_fixture;

use autograd_core::{
    gradcheck, shape, DType, ErrorKind, GradcheckOptions, Tensor, VersionSnapshot,
};
use autograd_ops::{
    adaptive_avg_pool2d, avg_pool2d, interpolate, max_pool2d, max_pool2d_with_indices, AvgPool2d,
    Interpolation, MaxPool2d, Module, Pool2dOptions,
};
use autograd_tests::{kind, noise, strided, t, vals};

use pool_fixture::{check, POOL};

#[test]
fn pooling_and_interpolation_match_pytorch_values_indices_and_gradients() {
    let ops = [
        "|max_pool2d|",
        "|avg_pool2d|",
        "|adaptive_avg_pool2d|",
        "|interpolate|",
    ];
    let lines: Vec<&str> = POOL
        .lines()
        .filter(|l| ops.iter().any(|op| l.contains(op)))
        .collect();
    assert_eq!(lines.len(), 22, "the fixture lost pooling cases");
    let wrong: Vec<String> = lines.iter().flat_map(|l| check(l)).collect();
    assert!(
        wrong.is_empty(),
        "{} values differ from PyTorch 2.15:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// One axis's output extent by PyTorch's formula, in floats.
fn extent(input: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> usize {
    let span = (input + 2 * p) as f64 - (d * (k - 1)) as f64 - 1.0;
    let q = span / s as f64;
    let mut out = if ceil { q.ceil() } else { q.floor() } as usize + 1;
    if ceil && (out - 1) * s >= input + p {
        out -= 1;
    }
    out
}

/// Options of one plain-loop case: kernel, stride, padding, dilation, ceil mode.
type Case = ([usize; 2], [usize; 2], [usize; 2], [usize; 2], bool);

/// A plain max pooling of `[planes, h, w]`: values and first-maximum flat indices.
fn plain_max(x: &[f32], planes: usize, [h, w]: [usize; 2], case: Case) -> (Vec<f32>, Vec<i64>) {
    let (k, s, p, d, ceil) = case;
    let oh = extent(h, k[0], s[0], p[0], d[0], ceil);
    let ow = extent(w, k[1], s[1], p[1], d[1], ceil);
    let (mut ys, mut is) = (Vec::new(), Vec::new());
    for q in 0..planes {
        for i in 0..oh {
            for j in 0..ow {
                let mut best: Option<(f32, i64)> = None;
                for a in 0..k[0] {
                    for b in 0..k[1] {
                        let r = (i * s[0] + a * d[0]) as i64 - p[0] as i64;
                        let c = (j * s[1] + b * d[1]) as i64 - p[1] as i64;
                        if r < 0 || c < 0 || r >= h as i64 || c >= w as i64 {
                            continue;
                        }
                        let v = x[q * h * w + r as usize * w + c as usize];
                        if best.is_none_or(|(bv, _)| v > bv) {
                            best = Some((v, r * w as i64 + c));
                        }
                    }
                }
                let (v, at) = best.expect("every window holds an input element");
                ys.push(v);
                is.push(at);
            }
        }
    }
    (ys, is)
}

/// A plain average pooling with PyTorch's divisor rules.
fn plain_avg(x: &[f32], planes: usize, [h, w]: [usize; 2], case: Case, cip: bool) -> Vec<f32> {
    let (k, s, p, _, ceil) = case;
    let oh = extent(h, k[0], s[0], p[0], 1, ceil);
    let ow = extent(w, k[1], s[1], p[1], 1, ceil);
    let mut ys = Vec::new();
    for q in 0..planes {
        for i in 0..oh {
            for j in 0..ow {
                let (r0, c0) = (
                    (i * s[0]) as i64 - p[0] as i64,
                    (j * s[1]) as i64 - p[1] as i64,
                );
                let r1 = (r0 + k[0] as i64).min((h + p[0]) as i64);
                let c1 = (c0 + k[1] as i64).min((w + p[1]) as i64);
                let padded = (r1 - r0) * (c1 - c0);
                let (mut sum, mut count) = (0.0f32, 0);
                for r in r0.max(0)..r1.min(h as i64) {
                    for c in c0.max(0)..c1.min(w as i64) {
                        sum += x[q * h * w + r as usize * w + c as usize];
                        count += 1;
                    }
                }
                ys.push(sum / if cip { padded } else { count } as f32);
            }
        }
    }
    ys
}

/// The cases the plain loops cover: odd sizes, stride over kernel, dilation with padding,
/// ceil mode, and windows wholly inside the input (max pooling's unrolled 2x2 and 3x3 paths,
/// the latter dilated, and a ceil-mode window past the end that must leave them).
const CASES: [Case; 10] = [
    ([2, 2], [2, 2], [0, 0], [1, 1], false),
    ([3, 3], [2, 2], [1, 1], [1, 1], false),
    ([3, 2], [1, 3], [1, 0], [1, 1], true),
    ([2, 3], [4, 5], [1, 1], [1, 1], false),
    ([3, 3], [2, 1], [1, 1], [2, 2], false),
    ([2, 2], [3, 3], [1, 1], [3, 1], true),
    ([3, 1], [2, 2], [1, 0], [1, 1], true),
    ([1, 1], [2, 3], [0, 0], [1, 1], false),
    ([3, 3], [2, 1], [0, 0], [1, 2], false),
    ([2, 2], [2, 2], [0, 0], [1, 1], true),
];

fn options(case: Case) -> Pool2dOptions {
    let (_, s, p, d, ceil) = case;
    Pool2dOptions::new()
        .stride(s)
        .padding(p)
        .dilation(d)
        .ceil_mode(ceil)
}

#[test]
fn max_pool2d_agrees_with_a_plain_loop_for_every_option() {
    let dims = [2, 3, 9, 7];
    let x = noise(dims.iter().product(), 11);
    for case in CASES {
        let (y, at) = max_pool2d_with_indices(&t(&x, &dims), case.0, &options(case)).unwrap();
        let (want, want_at) = plain_max(&x, 6, [9, 7], case);
        assert_eq!(vals(&y), want, "{case:?}");
        assert_eq!(at.values::<i64>().unwrap(), want_at, "{case:?}");
        assert_eq!(at.dtype(), &DType::Int64);
        // the strided input gives the same
        let ys = max_pool2d(&strided(&x, &dims), case.0, &options(case)).unwrap();
        assert_eq!(vals(&ys), want, "{case:?} strided");
    }
}

#[test]
fn avg_pool2d_agrees_with_a_plain_loop_with_and_without_padding_counted() {
    let dims = [2, 2, 8, 11];
    let x = noise(dims.iter().product(), 12);
    for case in CASES.iter().filter(|c| c.3 == [1, 1]) {
        for cip in [true, false] {
            let o = options(*case).count_include_pad(cip);
            let want = plain_avg(&x, 4, [8, 11], *case, cip);
            for input in [t(&x, &dims), strided(&x, &dims)] {
                let got = vals(&avg_pool2d(&input, case.0, &o).unwrap());
                assert_eq!(got.len(), want.len(), "{case:?} {cip}");
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-6, "{case:?} {cip}: {a} vs {b}");
                }
            }
        }
    }
}

#[test]
fn adaptive_avg_pool2d_agrees_with_pytorchs_index_formula() {
    let (h, w) = (7, 5);
    let x = noise(2 * h * w, 13);
    for out in [[3, 2], [7, 5], [1, 1], [10, 8], [4, 5]] {
        let y = vals(&adaptive_avg_pool2d(&t(&x, &[2, h, w]), out).unwrap());
        let mut want = Vec::new();
        for q in 0..2 {
            for i in 0..out[0] {
                let (r0, r1) = (i * h / out[0], ((i + 1) * h).div_ceil(out[0]));
                for j in 0..out[1] {
                    let (c0, c1) = (j * w / out[1], ((j + 1) * w).div_ceil(out[1]));
                    let mut sum = 0.0f32;
                    for r in r0..r1 {
                        for c in c0..c1 {
                            sum += x[q * h * w + r * w + c];
                        }
                    }
                    want.push(sum / ((r1 - r0) * (c1 - c0)) as f32);
                }
            }
        }
        for (a, b) in y.iter().zip(&want) {
            assert!((a - b).abs() < 1e-6, "{out:?}: {a} vs {b}");
        }
        assert_eq!(y.len(), want.len());
    }
}

#[test]
fn interpolate_agrees_with_a_plain_loop_in_every_mode() {
    let (h, w) = (4, 6);
    let x = noise(h * w, 14);
    let at = |r: usize, c: usize| x[r * w + c];
    for size in [[7, 3], [4, 6], [8, 12], [1, 1], [2, 9]] {
        // nearest: floor(o * in / out) clamped (doubling and equal extents included)
        let got = vals(&interpolate(&t(&x, &[1, 1, h, w]), size, Interpolation::Nearest).unwrap());
        let near = |o: usize, i: usize, n: usize| {
            ((o as f32 * (i as f32 / n as f32)).floor() as usize).min(i - 1)
        };
        let mut want = Vec::new();
        for r in 0..size[0] {
            for c in 0..size[1] {
                want.push(at(near(r, h, size[0]), near(c, w, size[1])));
            }
        }
        assert_eq!(got, want, "nearest {size:?}");
        for align_corners in [true, false] {
            let mode = Interpolation::Bilinear { align_corners };
            let got = vals(&interpolate(&strided(&x, &[1, 1, h, w]), size, mode).unwrap());
            let src = |o: usize, i: usize, n: usize| -> (usize, usize, f32) {
                let s = if align_corners {
                    if n > 1 {
                        (i - 1) as f32 / (n - 1) as f32 * o as f32
                    } else {
                        0.0
                    }
                } else {
                    ((o as f32 + 0.5) * (i as f32 / n as f32) - 0.5).max(0.0)
                };
                let i0 = (s.floor() as usize).min(i - 1);
                (i0, (i0 + 1).min(i - 1), s - i0 as f32)
            };
            let mut want = Vec::new();
            for r in 0..size[0] {
                let (r0, r1, lr) = src(r, h, size[0]);
                for c in 0..size[1] {
                    let (c0, c1, lc) = src(c, w, size[1]);
                    let top = at(r0, c0) * (1.0 - lc) + at(r0, c1) * lc;
                    let bottom = at(r1, c0) * (1.0 - lc) + at(r1, c1) * lc;
                    want.push(top * (1.0 - lr) + bottom * lr);
                }
            }
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    (a - b).abs() < 1e-5,
                    "bilinear {size:?} {align_corners}: {a} vs {b}"
                );
            }
            assert_eq!(got.len(), want.len());
        }
    }
}

#[test]
fn max_pool2d_takes_the_first_of_tied_maxima_and_propagates_nan() {
    let x = t(&[1.0, 3.0, 3.0, 3.0, 3.0, 0.0, f32::NAN, 2.0], &[1, 2, 4]);
    let (y, at) = max_pool2d_with_indices(&x, [2, 2], &Pool2dOptions::new()).unwrap();
    let y = vals(&y);
    assert_eq!(y[0], 3.0);
    assert!(y[1].is_nan());
    assert_eq!(at.values::<i64>().unwrap(), [1, 6]);
    // the gradient of a tie goes to the first maximum only
    let x = t(&[2.0, 2.0, 2.0, 2.0], &[1, 1, 2, 2]);
    let y = max_pool2d(&x, [2, 2], &Pool2dOptions::new()).unwrap();
    y.backward_with(Some(&t(&[1.0], &[1, 1, 1, 1])), false)
        .unwrap();
    assert_eq!(vals(&x.grad().unwrap().unwrap()), [1.0, 0.0, 0.0, 0.0]);
}

/// Gradcheck of `f` at `values` laid out as `dims`, contiguous and strided.
fn gradcheck_both(
    what: &str,
    values: &[f32],
    dims: &[usize],
    f: impl Fn(&Tensor) -> autograd_core::Result<Tensor>,
) {
    for x in [t(values, dims), strided(values, dims)] {
        let report = gradcheck(|xs| f(&xs[0]), &[x], GradcheckOptions::default())
            .unwrap_or_else(|e| panic!("{what} on {dims:?}: {e}"));
        assert!(report.slots_checked > 0);
    }
}

#[test]
fn every_pooling_op_passes_gradcheck_on_contiguous_strided_and_batch_one_inputs() {
    for dims in [[2, 3, 7, 6], [1, 2, 5, 8], [1, 1, 6, 5]] {
        let n = dims.iter().product();
        // distinct values 0.01 apart (37 is prime to every n here), further apart than twice
        // the finite-difference step, so that no step reorders a window
        let values: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % n) as f32 - (n / 2) as f32) * 0.01)
            .collect();
        for case in [CASES[1], CASES[2], CASES[4], CASES[5]] {
            gradcheck_both(&format!("max {case:?}"), &values, &dims, |x| {
                max_pool2d(x, case.0, &options(case))
            });
        }
        for case in [CASES[1], CASES[2], CASES[3]] {
            for cip in [true, false] {
                let o = options(case).count_include_pad(cip);
                gradcheck_both(&format!("avg {case:?} {cip}"), &values, &dims, |x| {
                    avg_pool2d(x, case.0, &o)
                });
            }
        }
        for out in [[3, 2], [8, 9], [1, 1]] {
            gradcheck_both(&format!("adaptive {out:?}"), &values, &dims, |x| {
                adaptive_avg_pool2d(x, out)
            });
        }
        for mode in [
            Interpolation::Nearest,
            Interpolation::Bilinear {
                align_corners: true,
            },
            Interpolation::Bilinear {
                align_corners: false,
            },
        ] {
            for size in [[3, 4], [9, 11]] {
                gradcheck_both(&format!("{mode:?} {size:?}"), &values, &dims, |x| {
                    interpolate(x, size, mode)
                });
            }
        }
    }
}

#[test]
fn the_pooling_layers_are_the_ops_with_fixed_options_and_no_tensors() {
    let dims = [2, 2, 7, 7];
    let x = t(&noise(196, 5), &dims);
    let o = Pool2dOptions::new()
        .stride([2, 2])
        .padding([1, 1])
        .ceil_mode(true);
    let mut max = MaxPool2d::with_options([3, 3], o);
    let avg = AvgPool2d::with_options([3, 3], o.count_include_pad(false));
    assert_eq!(
        vals(&max.forward(&x).unwrap()),
        vals(&max_pool2d(&x, [3, 3], &o).unwrap())
    );
    assert_eq!(
        vals(&avg.forward(&x).unwrap()),
        vals(&avg_pool2d(&x, [3, 3], &o.count_include_pad(false)).unwrap())
    );
    assert_eq!(vals(&MaxPool2d::new([7, 7]).forward(&x).unwrap()).len(), 4);
    assert_eq!(
        AvgPool2d::new([2, 2]).forward(&x).unwrap().dims(),
        [2, 2, 3, 3]
    );
    assert!(max.named_tensors().is_empty());
    max.eval();
    assert_eq!(Pool2dOptions::default(), Pool2dOptions::new());
    assert!(Pool2dOptions::new().count_include_pad && Pool2dOptions::new().stride.is_none());
}

#[test]
fn bad_shapes_and_options_are_value_errors_with_the_sizes_and_change_nothing() {
    let x = t(&noise(2 * 5 * 4, 6), &[1, 2, 5, 4]);
    let before = VersionSnapshot::of(&x);
    let none = Pool2dOptions::new();
    // the kernel larger than the padded input
    let e = max_pool2d(&x, [7, 2], &none).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.to_string().contains("[7, 2]") && e.to_string().contains("[5, 4]"),
        "{e}"
    );
    assert_eq!(kind(avg_pool2d(&x, [2, 6], &none)), ErrorKind::Value);
    // with dilation the kernel spans 1 + 2 (3 - 1) = 5 > 4
    assert_eq!(
        kind(max_pool2d(&x, [2, 3], &none.dilation([1, 2]))),
        ErrorKind::Value
    );
    // padding more than half the kernel
    let e = max_pool2d(&x, [3, 3], &none.padding([2, 1])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(
        e.to_string().contains("[2, 1]") && e.to_string().contains("[3, 3]"),
        "{e}"
    );
    assert_eq!(
        kind(avg_pool2d(&x, [2, 2], &none.padding([0, 2]))),
        ErrorKind::Value
    );
    // zero stride, kernel, dilation
    assert_eq!(
        kind(max_pool2d(&x, [2, 2], &none.stride([0, 1]))),
        ErrorKind::Value
    );
    assert_eq!(
        kind(avg_pool2d(&x, [2, 2], &none.stride([1, 0]))),
        ErrorKind::Value
    );
    assert_eq!(kind(max_pool2d(&x, [0, 2], &none)), ErrorKind::Value);
    assert_eq!(
        kind(max_pool2d(&x, [2, 2], &none.dilation([0, 1]))),
        ErrorKind::Value
    );
    // average pooling has no dilation
    assert_eq!(
        kind(avg_pool2d(&x, [2, 2], &none.dilation([2, 1]))),
        ErrorKind::Value
    );
    // ranks
    let flat = t(&noise(20, 1), &[4, 5]);
    assert_eq!(kind(max_pool2d(&flat, [2, 2], &none)), ErrorKind::Value);
    assert_eq!(kind(adaptive_avg_pool2d(&flat, [2, 2])), ErrorKind::Value);
    assert_eq!(
        kind(interpolate(&flat, [2, 2], Interpolation::Nearest)),
        ErrorKind::Value
    );
    let five = t(&noise(32, 1), &[1, 2, 2, 2, 4]);
    assert_eq!(kind(avg_pool2d(&five, [2, 2], &none)), ErrorKind::Value);
    // zero output sizes
    assert_eq!(kind(adaptive_avg_pool2d(&x, [0, 2])), ErrorKind::Value);
    assert_eq!(
        kind(interpolate(&x, [3, 0], Interpolation::Nearest)),
        ErrorKind::Value
    );
    // dtypes
    let ints = Tensor::from_vec((0..16).collect::<Vec<i32>>(), shape![1, 1, 4, 4]).unwrap();
    assert_eq!(kind(max_pool2d(&ints, [2, 2], &none)), ErrorKind::Type);
    assert_eq!(kind(avg_pool2d(&ints, [2, 2], &none)), ErrorKind::Type);
    assert_eq!(kind(adaptive_avg_pool2d(&ints, [2, 2])), ErrorKind::Type);
    let mode = Interpolation::Bilinear {
        align_corners: false,
    };
    assert_eq!(kind(interpolate(&ints, [2, 2], mode)), ErrorKind::Type);
    // nothing changed, and the layers report the same errors
    assert_eq!(VersionSnapshot::of(&x), before);
    assert_eq!(kind(MaxPool2d::new([6, 1]).forward(&x)), ErrorKind::Value);
    assert_eq!(kind(AvgPool2d::new([1, 5]).forward(&x)), ErrorKind::Value);
}

#[test]
fn ceil_mode_keeps_a_last_window_that_starts_inside_the_input() {
    // 5 wide, kernel 2, stride 2: floor 2 windows, ceil 3 (the last covers column 4 alone)
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 5]);
    let o = Pool2dOptions::new().ceil_mode(true);
    assert_eq!(vals(&max_pool2d(&x, [1, 2], &o).unwrap()), [2.0, 4.0, 5.0]);
    // the last window's divisor is clipped to the input (and padding) in both count modes
    assert_eq!(vals(&avg_pool2d(&x, [1, 2], &o).unwrap()), [1.5, 3.5, 5.0]);
    assert_eq!(
        vals(&avg_pool2d(&x, [1, 2], &o.count_include_pad(false)).unwrap()),
        [1.5, 3.5, 5.0]
    );
    // with padding 1 the first window holds one padded element: counted or not
    let p = Pool2dOptions::new().padding([0, 1]);
    assert_eq!(vals(&avg_pool2d(&x, [1, 2], &p).unwrap()), [0.5, 2.5, 4.5]);
    assert_eq!(
        vals(&avg_pool2d(&x, [1, 2], &p.count_include_pad(false)).unwrap()),
        [1.0, 2.5, 4.5]
    );
}

#[test]
fn large_inputs_split_over_threads_agree_with_the_plain_loops() {
    // 2 * 8 planes of 48 x 40: every kernel's work is above the parallel threshold
    let dims = [2, 8, 48, 40];
    let n: usize = dims.iter().product();
    let x = noise(n, 21);
    let case = CASES[1];
    let (y, at) = max_pool2d_with_indices(&strided(&x, &dims), case.0, &options(case)).unwrap();
    let (want, want_at) = plain_max(&x, 16, [48, 40], case);
    assert_eq!(vals(&y), want);
    assert_eq!(at.values::<i64>().unwrap(), want_at);
    let got = vals(&avg_pool2d(&t(&x, &dims), case.0, &options(case)).unwrap());
    for (a, b) in got.iter().zip(plain_avg(&x, 16, [48, 40], case, true)) {
        assert!((a - b).abs() < 1e-6);
    }
    // the backward passes: a max pool's gradient sums to the cotangent's sum, and an average
    // pool with non-overlapping windows spreads g / 4 to each element
    let xt = t(&x, &dims);
    let y = max_pool2d(&xt, [2, 2], &Pool2dOptions::new()).unwrap();
    y.backward_with(Some(&y.f32_like(vec![1.0; y.size()]).unwrap()), false)
        .unwrap();
    let gx = vals(&xt.grad().unwrap().unwrap());
    assert_eq!(gx.iter().sum::<f32>(), y.size() as f32);
    assert!(gx.iter().all(|&g| g == 0.0 || g == 1.0));
    let xa = t(&x, &dims);
    let y = avg_pool2d(&xa, [2, 2], &Pool2dOptions::new()).unwrap();
    y.backward_with(Some(&y.f32_like(vec![1.0; y.size()]).unwrap()), false)
        .unwrap();
    assert!(vals(&xa.grad().unwrap().unwrap())
        .iter()
        .all(|&g| g == 0.25));
    // nearest doubling copies each element to a 2 x 2 block
    let up = vals(&interpolate(&t(&x, &dims), [96, 80], Interpolation::Nearest).unwrap());
    assert_eq!(up[(5 * 96 + 7) * 80 + 13], x[(5 * 48 + 3) * 40 + 6]);
}

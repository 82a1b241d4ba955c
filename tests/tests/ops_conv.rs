//! Convolution (issue 39): `conv2d`, `conv1d`, `conv_transpose2d`, `unfold`, `fold` and the
//! `Conv2d` layer. Forward values against plain-loop references over every option, values and
//! gradients against the numbers PyTorch prints (`tests/fixtures/conv/conv.txt`, written by
//! `gen_conv.py` beside it), gradcheck on contiguous, strided and batch-1 inputs, and every
//! error, which must change nothing.

use autograd_core::{
    grad, gradcheck, shape, DType, ErrorKind, GradOptions, GradcheckOptions, Rng, Tensor,
};
use autograd_ops::{
    conv1d, conv2d, conv_transpose2d, fold, unfold, Conv2d, Conv2dOptions, ConvTranspose2dOptions,
    Module, Padding,
};
use autograd_tests::fixture::{mismatches, operand, Tolerance};
use autograd_tests::{kind, noise, strided, t, vals};

const CONV: &str = include_str!("../fixtures/conv/conv.txt");

/// Plain-loop `conv2d` over row-major values: `x` `[n, c, h, w]`, `w` `[co, c / g, kh, kw]`,
/// padding before each axis `pad` and output extents `out`.
#[allow(clippy::too_many_arguments)]
fn reference_conv2d(
    x: &[f32],
    xd: [usize; 4],
    w: &[f32],
    wd: [usize; 4],
    b: Option<&[f32]>,
    (stride, pad, dil, groups): ([usize; 2], [usize; 2], [usize; 2], usize),
    out: [usize; 2],
) -> Vec<f32> {
    let [n, c, h, wi] = xd;
    let [co, cg, kh, kw] = wd;
    let og = co / groups;
    let mut y = vec![0.0f32; n * co * out[0] * out[1]];
    for i in 0..n {
        for o in 0..co {
            let grp = o / og;
            for oy in 0..out[0] {
                for ox in 0..out[1] {
                    let mut s = b.map_or(0.0, |b| f64::from(b[o]));
                    for ci in 0..cg {
                        let ch = grp * cg + ci;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * stride[0] + ky * dil[0]) as isize - pad[0] as isize;
                                let ix = (ox * stride[1] + kx * dil[1]) as isize - pad[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wi as isize {
                                    continue;
                                }
                                let xv = x[((i * c + ch) * h + iy as usize) * wi + ix as usize];
                                let wv = w[((o * cg + ci) * kh + ky) * kw + kx];
                                s += f64::from(xv) * f64::from(wv);
                            }
                        }
                    }
                    y[((i * co + o) * out[0] + oy) * out[1] + ox] = s as f32;
                }
            }
        }
    }
    y
}

fn close(ours: &[f32], want: &[f32], what: &str) {
    assert_eq!(ours.len(), want.len(), "{what}: lengths");
    for (k, (a, b)) in ours.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
            "{what}[{k}]: {a} vs {b}"
        );
    }
}

/// A `conv2d` case: x dims, w dims, stride, padding, dilation, groups, whether with a bias.
type ConvCase = (
    [usize; 4],
    [usize; 4],
    [usize; 2],
    Padding,
    [usize; 2],
    usize,
    bool,
);

/// A `conv_transpose2d` case: x dims, w dims, stride, padding, dilation, groups.
type TransposeCase = (
    [usize; 4],
    [usize; 4],
    [usize; 2],
    [usize; 2],
    [usize; 2],
    usize,
);

#[test]
fn conv2d_matches_the_plain_loop_over_every_option() {
    // (x dims, w dims, stride, padding, dilation, groups, bias): output rows of at most 16
    // read a bordered copy of each channel (4, 8 and 16 wide at stride 1 as fixed-width
    // runs), wider ones clip their runs at the padding; both kinds are here
    let cases: [ConvCase; 15] = [
        (
            [2, 3, 5, 5],
            [4, 3, 3, 3],
            [1, 1],
            Padding::Explicit([1, 1]),
            [1, 1],
            1,
            true,
        ),
        (
            [1, 2, 7, 6],
            [3, 2, 3, 2],
            [2, 2],
            Padding::Explicit([0, 0]),
            [1, 1],
            1,
            true,
        ),
        (
            [2, 2, 9, 7],
            [2, 2, 2, 2],
            [3, 4],
            Padding::Explicit([0, 1]),
            [1, 1],
            1,
            false,
        ),
        (
            [1, 2, 7, 7],
            [3, 2, 3, 3],
            [1, 2],
            Padding::Explicit([2, 1]),
            [2, 3],
            1,
            true,
        ),
        (
            [3, 4, 5, 6],
            [6, 2, 3, 3],
            [1, 1],
            Padding::Explicit([1, 1]),
            [1, 1],
            2,
            false,
        ),
        (
            [2, 3, 6, 5],
            [3, 1, 3, 3],
            [1, 1],
            Padding::Explicit([1, 1]),
            [1, 1],
            3,
            true,
        ),
        (
            [1, 2, 5, 6],
            [2, 2, 4, 2],
            [1, 1],
            Padding::Same,
            [1, 1],
            1,
            true,
        ),
        (
            [1, 1, 6, 6],
            [2, 1, 3, 2],
            [1, 1],
            Padding::Same,
            [2, 3],
            1,
            false,
        ),
        (
            [1, 2, 4, 5],
            [1, 2, 2, 3],
            [1, 1],
            Padding::Valid,
            [1, 1],
            1,
            true,
        ),
        (
            [2, 2, 4, 4],
            [3, 2, 3, 3],
            [1, 1],
            Padding::Explicit([1, 1]),
            [1, 1],
            1,
            true,
        ),
        (
            [2, 2, 8, 8],
            [3, 2, 3, 3],
            [1, 1],
            Padding::Explicit([1, 1]),
            [1, 1],
            1,
            false,
        ),
        (
            [1, 3, 5, 16],
            [2, 3, 3, 3],
            [1, 1],
            Padding::Same,
            [1, 1],
            1,
            true,
        ),
        (
            [1, 2, 4, 37],
            [3, 2, 3, 3],
            [1, 1],
            Padding::Explicit([1, 1]),
            [1, 1],
            1,
            true,
        ),
        (
            [1, 2, 5, 40],
            [2, 2, 2, 3],
            [2, 2],
            Padding::Explicit([0, 2]),
            [1, 2],
            1,
            false,
        ),
        (
            [2, 4, 3, 18],
            [4, 2, 3, 3],
            [1, 1],
            Padding::Same,
            [1, 1],
            2,
            true,
        ),
    ];
    for (k, (xd, wd, stride, padding, dil, groups, with_bias)) in cases.into_iter().enumerate() {
        let xv = noise(xd.iter().product(), 10 + k as u64);
        let wv = noise(wd.iter().product(), 20 + k as u64);
        let bv = noise(wd[0], 30 + k as u64);
        let (pad, total) = match padding {
            Padding::Explicit(p) => (p, [2 * p[0], 2 * p[1]]),
            Padding::Valid => ([0, 0], [0, 0]),
            Padding::Same => {
                let tot = [dil[0] * (wd[2] - 1), dil[1] * (wd[3] - 1)];
                ([tot[0] / 2, tot[1] / 2], tot)
            }
        };
        let out = [
            (xd[2] + total[0] - dil[0] * (wd[2] - 1) - 1) / stride[0] + 1,
            (xd[3] + total[1] - dil[1] * (wd[3] - 1) - 1) / stride[1] + 1,
        ];
        let b = with_bias.then(|| t(&bv, &[wd[0]]));
        let options = Conv2dOptions::new()
            .stride(stride)
            .padding(padding)
            .dilation(dil)
            .groups(groups);
        let y = conv2d(&t(&xv, &xd), &t(&wv, &wd), b.as_ref(), &options).unwrap();
        assert_eq!(y.dims(), [xd[0], wd[0], out[0], out[1]], "case {k}");
        let want = reference_conv2d(
            &xv,
            xd,
            &wv,
            wd,
            with_bias.then_some(&bv[..]),
            (stride, pad, dil, groups),
            out,
        );
        close(&vals(&y), &want, &format!("case {k}"));
        if matches!(padding, Padding::Same) {
            assert_eq!(out, [xd[2], xd[3]], "same keeps the extents");
        }
    }
}

#[test]
fn conv_transpose2d_is_the_adjoint_of_conv2d() {
    // <conv2d(y, w), x> == <y, conv_transpose2d(x, w)> for every option
    let cases: [TransposeCase; 4] = [
        ([2, 3, 3, 4], [3, 2, 3, 3], [2, 2], [1, 1], [1, 1], 1),
        ([1, 4, 3, 3], [4, 3, 2, 3], [1, 2], [0, 1], [2, 1], 2),
        ([2, 2, 4, 2], [2, 1, 1, 1], [3, 2], [0, 0], [1, 1], 2),
        ([1, 1, 2, 2], [1, 2, 3, 3], [1, 1], [1, 1], [1, 1], 1),
    ];
    for (k, (xd, wd, stride, padding, dil, groups)) in cases.into_iter().enumerate() {
        let x = t(&noise(xd.iter().product(), 40 + k as u64), &xd);
        let w = t(&noise(wd.iter().product(), 50 + k as u64), &wd);
        let opts = ConvTranspose2dOptions::new()
            .stride(stride)
            .padding(padding)
            .dilation(dil)
            .groups(groups);
        let y = conv_transpose2d(&x, &w, None, &opts).unwrap();
        let yd = y.dims();
        for a in 0..2 {
            assert_eq!(
                yd[2 + a],
                (xd[2 + a] - 1) * stride[a] + dil[a] * (wd[2 + a] - 1) + 1 - 2 * padding[a],
                "case {k}"
            );
        }
        let probe = t(&noise(y.size(), 60 + k as u64), &yd);
        let conv_opts = Conv2dOptions::new()
            .stride(stride)
            .padding(Padding::Explicit(padding))
            .dilation(dil)
            .groups(groups);
        let back = conv2d(&probe, &w, None, &conv_opts).unwrap();
        assert_eq!(back.dims(), xd, "case {k}");
        let dot = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(p, q)| f64::from(*p) * f64::from(*q))
                .sum::<f64>()
        };
        let (lhs, rhs) = (dot(&vals(&back), &vals(&x)), dot(&vals(&probe), &vals(&y)));
        assert!(
            (lhs - rhs).abs() < 1e-4 * (1.0 + lhs.abs()),
            "case {k}: {lhs} vs {rhs}"
        );
    }
}

/// The fixture's option pairs: `"1,2"` as `[1, 2]`.
fn pair(field: &str) -> [usize; 2] {
    let v: Vec<usize> = field.split(',').map(|s| s.parse().unwrap()).collect();
    [v[0], v[1]]
}

#[test]
fn every_op_gives_pytorchs_values_and_gradients() {
    let tol = Tolerance {
        abs: 1e-4,
        rel: 1e-4,
    };
    let mut cases = 0;
    for line in CONV.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [label, op, opts, x, w, b, g, y, dx, dw, db] = f[..] else {
            panic!("a fixture line has eleven fields: {line}");
        };
        let o: Vec<&str> = opts.split(' ').collect();
        let tensor = |field: &str| operand(field).map(|(d, v)| t(&v, &d));
        let (x, w, b, g) = (tensor(x).unwrap(), tensor(w), tensor(b), tensor(g).unwrap());
        let (stride, dilation, groups) = (pair(o[0]), pair(o[2]), o[3].parse::<usize>().unwrap());
        let padding = match o[1] {
            "same" => Padding::Same,
            "valid" => Padding::Valid,
            p => Padding::Explicit(pair(p)),
        };
        let options = Conv2dOptions::new()
            .stride(stride)
            .padding(padding)
            .dilation(dilation)
            .groups(groups);
        let out = match op {
            "conv2d" => conv2d(&x, w.as_ref().unwrap(), b.as_ref(), &options),
            "conv1d" => {
                let Padding::Explicit(p) = padding else {
                    panic!("conv1d pads explicitly")
                };
                conv1d(
                    &x,
                    w.as_ref().unwrap(),
                    b.as_ref(),
                    stride[1],
                    p[1],
                    dilation[1],
                    groups,
                )
            }
            "conv_transpose2d" => {
                let Padding::Explicit(p) = padding else {
                    panic!("conv_transpose2d pads explicitly")
                };
                let opts = ConvTranspose2dOptions::new()
                    .stride(stride)
                    .padding(p)
                    .dilation(dilation)
                    .groups(groups)
                    .output_padding(pair(o[4]));
                conv_transpose2d(&x, w.as_ref().unwrap(), b.as_ref(), &opts)
            }
            "unfold" => unfold(&x, pair(o[5]), &options),
            "fold" => fold(&x, pair(o[6]), pair(o[5]), &options),
            other => panic!("unknown op {other}"),
        }
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        let (yd, yv) = operand(y).unwrap();
        assert_eq!(out.dims(), yd, "{label}: shape");
        let mut bad = mismatches(label, "output", &vals(&out), &yv, tol);
        let mut inputs = vec![&x];
        inputs.extend(w.as_ref());
        inputs.extend(b.as_ref());
        let grads = grad(&out, &inputs, &g, GradOptions::default()).unwrap();
        for (k, (what, want)) in [("dx", dx), ("dw", dw), ("db", db)]
            .into_iter()
            .filter(|(_, field)| !field.is_empty())
            .enumerate()
        {
            let ours = vals(grads[k].as_ref().expect("a gradient"));
            bad.extend(mismatches(
                label,
                what,
                &ours,
                &operand(want).unwrap().1,
                tol,
            ));
        }
        assert!(bad.is_empty(), "{bad:#?}");
        cases += 1;
    }
    assert_eq!(cases, 14);
}

/// Options of gradcheck for these sums of many products.
fn checked() -> GradcheckOptions {
    GradcheckOptions {
        eps: 1e-2,
        atol: 2e-2,
        rtol: 2e-2,
        ..GradcheckOptions::default()
    }
}

#[test]
fn gradcheck_every_op_on_contiguous_strided_and_batch_one_inputs() {
    let make = |dims: &[usize], seed: u64, contiguous: bool| {
        let v = noise(dims.iter().product(), seed);
        if contiguous {
            t(&v, dims)
        } else {
            strided(&v, dims)
        }
    };
    for contiguous in [true, false] {
        for n in [1, 2] {
            let x = make(&[n, 4, 5, 4], 1, contiguous);
            let w = make(&[6, 2, 3, 2], 2, contiguous);
            let b = make(&[6], 3, contiguous);
            let options = Conv2dOptions::new()
                .stride([2, 1])
                .padding(Padding::Explicit([1, 1]))
                .dilation([1, 2])
                .groups(2);
            let r = gradcheck(
                |v: &[Tensor]| conv2d(&v[0], &v[1], Some(&v[2]), &options),
                &[x.clone(), w, b],
                checked(),
            );
            assert!(r.is_ok(), "conv2d n {n} contiguous {contiguous}: {r:?}");

            let x1 = make(&[n, 4, 7], 4, contiguous);
            let w1 = make(&[2, 2, 3], 5, contiguous);
            let r = gradcheck(
                |v: &[Tensor]| conv1d(&v[0], &v[1], None, 2, 1, 1, 2),
                &[x1, w1],
                checked(),
            );
            assert!(r.is_ok(), "conv1d n {n} contiguous {contiguous}: {r:?}");

            let wt = make(&[4, 3, 3, 2], 6, contiguous);
            let bt = make(&[6], 7, contiguous);
            let opts = ConvTranspose2dOptions::new()
                .stride([2, 1])
                .padding([1, 0])
                .output_padding([1, 0])
                .groups(2);
            let r = gradcheck(
                |v: &[Tensor]| conv_transpose2d(&v[0], &v[1], Some(&v[2]), &opts),
                &[x.clone(), wt, bt],
                checked(),
            );
            assert!(
                r.is_ok(),
                "conv_transpose2d n {n} contiguous {contiguous}: {r:?}"
            );

            let windows = Conv2dOptions::new()
                .stride([1, 2])
                .padding(Padding::Explicit([1, 0]))
                .dilation([2, 1]);
            let r = gradcheck(
                |v: &[Tensor]| unfold(&v[0], [2, 2], &windows),
                std::slice::from_ref(&x),
                checked(),
            );
            assert!(r.is_ok(), "unfold n {n} contiguous {contiguous}: {r:?}");
            let cols = make(&[n, 8, 10], 8, contiguous);
            let r = gradcheck(
                |v: &[Tensor]| fold(&v[0], [5, 4], [2, 2], &windows),
                &[cols],
                checked(),
            );
            assert!(r.is_ok(), "fold n {n} contiguous {contiguous}: {r:?}");

            // output rows of 20: the clipped-run im2col and col2im
            let xw = make(&[n, 2, 3, 20], 9, contiguous);
            let ww = make(&[2, 2, 2, 3], 10, contiguous);
            let same = Conv2dOptions::new().padding(Padding::Explicit([1, 1]));
            let r = gradcheck(
                |v: &[Tensor]| conv2d(&v[0], &v[1], None, &same),
                &[xw, ww],
                checked(),
            );
            assert!(
                r.is_ok(),
                "wide conv2d n {n} contiguous {contiguous}: {r:?}"
            );
        }
    }
}

#[test]
fn nhwc_views_and_channel_slices_are_read_in_place_with_the_same_values_and_gradients() {
    let (n, c, h, wd) = (2, 6, 5, 4);
    let nhwc = t(&noise(n * h * wd * c, 70), &[n, h, wd, c]);
    let x = nhwc.permute(&[0, 3, 1, 2]).unwrap();
    let dense = t(&vals(&x), &[n, c, h, wd]);
    let w = t(&noise(3 * 6 * 9, 71), &[3, 6, 3, 3]);
    let options = Conv2dOptions::new().padding(Padding::Same);
    let y = conv2d(&x, &w, None, &options).unwrap();
    let y_dense = conv2d(&dense, &w, None, &options).unwrap();
    assert_eq!(vals(&y), vals(&y_dense));
    let g = t(&noise(y.size(), 72), &y.dims());
    let through_view = grad(&y, &[&nhwc, &w], &g, GradOptions::default()).unwrap();
    let direct = grad(&y_dense, &[&dense, &w], &g, GradOptions::default()).unwrap();
    let gx_view = through_view[0]
        .as_ref()
        .unwrap()
        .permute(&[0, 3, 1, 2])
        .unwrap();
    close(&vals(&gx_view), &vals(direct[0].as_ref().unwrap()), "dx");
    close(
        &vals(through_view[1].as_ref().unwrap()),
        &vals(direct[1].as_ref().unwrap()),
        "dw",
    );

    // channels 2..5 of x
    let part = x.narrow(1, 2, 3).unwrap();
    let w3 = t(&noise(2 * 3 * 4, 73), &[2, 3, 2, 2]);
    let y = conv2d(&part, &w3, None, &Conv2dOptions::new()).unwrap();
    let part_dense = t(&vals(&part), &[n, 3, h, wd]);
    let want = conv2d(&part_dense, &w3, None, &Conv2dOptions::new()).unwrap();
    assert_eq!(vals(&y), vals(&want));
}

#[test]
fn zero_channels_and_an_empty_batch_give_the_bias_and_empty_gradients() {
    // no input channel: every output is the bias, and the weight's gradient is empty
    let x = t(&[], &[1, 0, 3, 3]);
    let w = t(&[], &[2, 0, 2, 2]);
    let b = t(&[0.5, -1.0], &[2]);
    let y = conv2d(&x, &w, Some(&b), &Conv2dOptions::new()).unwrap();
    assert_eq!(y.dims(), [1, 2, 2, 2]);
    assert_eq!(vals(&y), [0.5, 0.5, 0.5, 0.5, -1.0, -1.0, -1.0, -1.0]);
    let g = t(&[1.0; 8], &[1, 2, 2, 2]);
    let grads = grad(&y, &[&x, &w, &b], &g, GradOptions::default()).unwrap();
    assert_eq!(grads[1].as_ref().unwrap().dims(), [2, 0, 2, 2]);
    assert_eq!(vals(grads[2].as_ref().unwrap()), [4.0, 4.0]);
    // no image
    let x = t(&[], &[0, 2, 4, 4]);
    let w = t(&noise(2 * 2 * 9, 1), &[2, 2, 3, 3]);
    let y = conv2d(&x, &w, None, &Conv2dOptions::new()).unwrap();
    assert_eq!(y.dims(), [0, 2, 2, 2]);
    let grads = grad(&y, &[&w], &t(&[], &[0, 2, 2, 2]), GradOptions::default()).unwrap();
    assert_eq!(vals(grads[0].as_ref().unwrap()), vec![0.0; 36]);
}

#[test]
fn unfold_and_fold_are_adjoint_and_fold_of_ones_counts_windows() {
    let opts = Conv2dOptions::new()
        .stride([2, 1])
        .padding(Padding::Explicit([1, 2]))
        .dilation([1, 2]);
    let dot = |a: &Tensor, b: &Tensor| {
        vals(a)
            .iter()
            .zip(vals(b))
            .map(|(p, q)| f64::from(*p) * f64::from(q))
            .sum::<f64>()
    };
    // 6 columns give output rows of 8 (a bordered copy per channel), 30 give 32 (clipped runs)
    for width in [6, 30] {
        let x = t(&noise(2 * 3 * 5 * width, 80), &[2, 3, 5, width]);
        let cols = unfold(&x, [3, 2], &opts).unwrap();
        let l = ((5 + 2 - 3) / 2 + 1) * ((width + 4 - 3) + 1);
        assert_eq!(cols.dims(), [2, 18, l]);
        let probe = t(&noise(cols.size(), 81), &cols.dims());
        let back = fold(&probe, [5, width], [3, 2], &opts).unwrap();
        assert_eq!(back.dims(), [2, 3, 5, width]);
        let (lhs, rhs) = (dot(&cols, &probe), dot(&x, &back));
        assert!(
            (lhs - rhs).abs() < 1e-4 * (1.0 + lhs.abs()),
            "width {width}: {lhs} vs {rhs}"
        );
    }
    // 3x3 windows, stride 1, no padding over 4x4: the corner is in 1 window, the centre in 4
    let ones = Tensor::ones(shape![1, 9, 4], &DType::Float32).unwrap();
    let counts = fold(&ones, [4, 4], [3, 3], &Conv2dOptions::new()).unwrap();
    assert_eq!(
        vals(&counts),
        [1.0, 2.0, 2.0, 1.0, 2.0, 4.0, 4.0, 2.0, 2.0, 4.0, 4.0, 2.0, 1.0, 2.0, 2.0, 1.0]
    );
}

/// The kind and message of a failed call, after checking the inputs kept their values and
/// got no gradient.
fn failure<T: std::fmt::Debug>(
    r: autograd_core::Result<T>,
    inputs: &[(&Tensor, Vec<f32>)],
) -> (ErrorKind, String) {
    let e = r.expect_err("expected an error");
    for (x, before) in inputs {
        if x.dtype() == &DType::Float32 {
            assert_eq!(&vals(x), before, "a failed op changed an input");
            assert!(x.grad().unwrap().is_none());
        }
    }
    (e.kind(), e.to_string())
}

#[test]
fn bad_arguments_are_errors_with_the_sizes_and_change_nothing() {
    let x = t(&noise(2 * 4 * 5 * 5, 90), &[2, 4, 5, 5]);
    let w = t(&noise(6 * 2 * 3 * 3, 91), &[6, 2, 3, 3]);
    let b = t(&noise(6, 92), &[6]);
    let keep = || vec![(&x, vals(&x)), (&w, vals(&w)), (&b, vals(&b))];
    let o = Conv2dOptions::new();
    let cases: Vec<(&str, autograd_core::Result<Tensor>, ErrorKind, &[&str])> = vec![
        (
            "kernel larger than the padded input",
            conv2d(&x, &t(&noise(4 * 36, 1), &[1, 4, 6, 6]), None, &o),
            ErrorKind::Value,
            &["6", "5"],
        ),
        (
            "groups not dividing the channels",
            conv2d(
                &x,
                &t(&noise(6 * 4 * 9, 1), &[6, 4, 3, 3]),
                None,
                &o.groups(3),
            ),
            ErrorKind::Value,
            &["4", "groups 3"],
        ),
        (
            "weight channels",
            conv2d(&x, &w, None, &o),
            ErrorKind::Value,
            &["4", "2"],
        ),
        (
            "zero stride",
            conv2d(&x, &w, None, &o.groups(2).stride([0, 1])),
            ErrorKind::Value,
            &["[0, 1]"],
        ),
        (
            "zero dilation",
            conv2d(&x, &w, None, &o.groups(2).dilation([1, 0])),
            ErrorKind::Value,
            &["[1, 0]"],
        ),
        (
            "zero groups",
            conv2d(&x, &w, None, &o.groups(0)),
            ErrorKind::Value,
            &["groups"],
        ),
        (
            "same with stride 2",
            conv2d(
                &x,
                &w,
                None,
                &o.groups(2).padding(Padding::Same).stride([2, 2]),
            ),
            ErrorKind::Value,
            &["Same", "[2, 2]"],
        ),
        (
            "bias shape",
            conv2d(&x, &w, Some(&t(&[0.0; 4], &[4])), &o.groups(2)),
            ErrorKind::Value,
            &["[6]", "(4)"],
        ),
        (
            "input rank",
            conv2d(&t(&noise(20, 1), &[4, 5]), &w, None, &o),
            ErrorKind::Value,
            &["rank 4", "(4,5)"],
        ),
        (
            "integer input",
            conv2d(
                &Tensor::from_vec(vec![1i32; 100], shape![1, 4, 5, 5]).unwrap(),
                &w,
                None,
                &o.groups(2),
            ),
            ErrorKind::Type,
            &["Float32"],
        ),
        (
            "integer weight",
            conv2d(
                &x,
                &Tensor::from_vec(vec![1i32; 9], shape![1, 1, 3, 3]).unwrap(),
                None,
                &o,
            ),
            ErrorKind::Type,
            &["weight"],
        ),
        (
            "conv1d rank",
            conv1d(&x, &w, None, 1, 0, 1, 1),
            ErrorKind::Value,
            &["rank 3"],
        ),
        (
            "conv1d kernel too long",
            conv1d(
                &t(&noise(12, 1), &[1, 2, 6]),
                &t(&noise(16, 2), &[1, 2, 8]),
                None,
                1,
                0,
                1,
                1,
            ),
            ErrorKind::Value,
            &["8", "6"],
        ),
        (
            "conv_transpose2d output padding",
            conv_transpose2d(
                &x,
                &t(&noise(4 * 9, 1), &[4, 1, 3, 3]),
                None,
                &ConvTranspose2dOptions::new().output_padding([1, 0]),
            ),
            ErrorKind::Value,
            &["output_padding"],
        ),
        (
            "conv_transpose2d channels",
            conv_transpose2d(&x, &w, None, &ConvTranspose2dOptions::new()),
            ErrorKind::Value,
            &["4", "6"],
        ),
        (
            "conv_transpose2d empty output",
            conv_transpose2d(
                &x,
                &t(&noise(4 * 9, 1), &[4, 1, 3, 3]),
                None,
                &ConvTranspose2dOptions::new().padding([4, 4]),
            ),
            ErrorKind::Value,
            &["empty"],
        ),
        (
            "unfold groups",
            unfold(&x, [2, 2], &o.groups(2)),
            ErrorKind::Value,
            &["groups"],
        ),
        (
            "unfold kernel",
            unfold(&x, [6, 1], &o),
            ErrorKind::Value,
            &["6", "5"],
        ),
        (
            "fold windows",
            fold(&t(&noise(2 * 8 * 5, 1), &[2, 8, 5]), [4, 4], [2, 2], &o),
            ErrorKind::Value,
            &["5", "9"],
        ),
        (
            "fold rows",
            fold(&t(&noise(2 * 7 * 9, 1), &[2, 7, 9]), [4, 4], [2, 2], &o),
            ErrorKind::Value,
            &["7", "4"],
        ),
    ];
    let count = cases.len();
    for (label, r, want, words) in cases {
        let (got, msg) = failure(r, &keep());
        assert_eq!(got, want, "{label}: {msg}");
        for word in words {
            assert!(
                msg.contains(word),
                "{label}: {msg:?} should mention {word:?}"
            );
        }
    }
    assert_eq!(count, 20);
    assert_eq!(
        kind(Conv2d::new(
            3,
            4,
            [3, 3],
            o.groups(2),
            true,
            &mut Rng::new(0)
        )),
        ErrorKind::Value
    );
    assert_eq!(
        kind(Conv2d::new(3, 4, [0, 3], o, true, &mut Rng::new(0))),
        ErrorKind::Value
    );
}

#[test]
fn the_conv2d_layer_is_initialised_as_pytorch_and_named_weight_and_bias() {
    let mut rng = Rng::new(3);
    let options = Conv2dOptions::new()
        .padding(Padding::Explicit([1, 1]))
        .groups(2);
    let layer = Conv2d::new(4, 6, [3, 2], options, true, &mut rng).unwrap();
    assert_eq!(layer.weight().dims(), [6, 2, 3, 2]);
    let bound = 1.0 / ((2 * 3 * 2) as f32).sqrt();
    for v in vals(layer.weight())
        .into_iter()
        .chain(vals(layer.bias().unwrap()))
    {
        assert!(v.abs() <= bound, "{v} outside +-{bound}");
    }
    // spread over the interval, not stuck at one value
    let w = vals(layer.weight());
    let (lo, hi) = w
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    assert!(hi - lo > bound, "{lo}..{hi}");
    let names: Vec<String> = layer
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["weight", "bias"]);
    let x = t(&noise(2 * 4 * 5 * 5, 5), &[2, 4, 5, 5]);
    let y = layer.forward(&x).unwrap();
    let want = conv2d(&x, layer.weight(), layer.bias(), &options).unwrap();
    assert_eq!(y.dims(), [2, 6, 5, 6]);
    assert_eq!(vals(&y), vals(&want));
    let plain = Conv2d::new(4, 6, [1, 1], Conv2dOptions::new(), false, &mut rng).unwrap();
    assert!(plain.bias().is_none());
    assert_eq!(plain.num_parameters(), 24);
}

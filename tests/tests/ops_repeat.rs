//! `repeat`, `tile`, `flip`, `roll`, `one_hot` and the rectangular identity (issue 38 item 4): values and
//! gradients against the numbers PyTorch 2.15 prints (`tests/fixtures/mask/repeat.txt`,
//! written by `gen_repeat.py` beside it), gradcheck on strided inputs, and errors.

use autograd_core::{
    grad, gradcheck, shape, DType, ErrorKind, GradOptions, GradcheckOptions, Tensor,
};
use autograd_ops::{flip, one_hot, repeat, roll, tile};
use autograd_tests::fixture::numbers;
use autograd_tests::{kind, noise, strided, t, vals};

const REPEAT: &str = include_str!("../fixtures/mask/repeat.txt");

#[test]
fn repeat_tile_one_hot_and_eye_give_pytorchs_numbers() {
    let mut cases = 0;
    for line in REPEAT.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [op, sizes, dims, input, cotangent, out_dims, output, want_grad] = f[..] else {
            panic!("a fixture line has eight fields: {line}");
        };
        // flip's axes and roll's axes may be negative; roll's shifts follow its name
        let axes: Vec<i64> = numbers(sizes);
        let sizes: Vec<usize> = axes
            .iter()
            .map(|&a| usize::try_from(a).unwrap_or(0))
            .collect();
        let (op, shifts) = op.split_once(' ').unwrap_or((op, ""));
        let shifts: Vec<i64> = numbers(shifts);
        let (dims, out_dims): (Vec<usize>, Vec<usize>) = (numbers(dims), numbers(out_dims));
        match op {
            "repeat" | "tile" | "flip" | "roll" => {
                let x = t(&numbers::<f32>(input), &dims);
                let y = match op {
                    "repeat" => repeat(&x, &sizes).unwrap(),
                    "tile" => tile(&x, &sizes).unwrap(),
                    "flip" => flip(&x, &axes[..]).unwrap(),
                    _ => roll(&x, &shifts, &axes[..]).unwrap(),
                };
                assert_eq!(y.dims(), out_dims, "{line}");
                assert_eq!(vals(&y), numbers::<f32>(output), "{op} {sizes:?}");
                let g = t(&numbers::<f32>(cotangent), &out_dims);
                let dx = grad(&y, &[&x], &g, GradOptions::default()).unwrap()[0]
                    .clone()
                    .expect("a gradient");
                let (got, want) = (vals(&dx), numbers::<f32>(want_grad));
                for (a, b) in got.iter().zip(&want) {
                    assert!(
                        (a - b).abs() <= 1e-6,
                        "{op} {sizes:?}: gradient {got:?} vs {want:?}"
                    );
                }
            }
            "one_hot" => {
                let idx = Tensor::from_vec(
                    numbers::<i64>(input),
                    autograd_core::Shape::from(dims.as_slice()),
                )
                .unwrap();
                let y = one_hot(&idx, sizes.first().copied()).unwrap();
                assert_eq!((y.dims(), y.dtype()), (out_dims, &DType::Int64));
                assert_eq!(y.values::<i64>().unwrap(), numbers::<i64>(output));
            }
            "eye" => {
                let y = Tensor::eye_with(sizes[0], sizes[1], &DType::Float32).unwrap();
                assert_eq!(y.dims(), out_dims);
                assert_eq!(vals(&y), numbers::<f32>(output));
            }
            other => panic!("unknown op {other}"),
        }
        cases += 1;
    }
    assert_eq!(cases, 13);
}

#[test]
fn repeat_and_tile_pass_gradcheck_on_strided_inputs() {
    let x = strided(&noise(6, 2), &[2, 3]);
    for sizes in [&[2usize, 1][..], &[1, 1, 3]] {
        let report = gradcheck(
            |v: &[Tensor]| repeat(&v[0], sizes),
            std::slice::from_ref(&x),
            GradcheckOptions::default(),
        );
        assert!(report.is_ok(), "repeat {sizes:?}: {report:?}");
    }
    let report = gradcheck(
        |v: &[Tensor]| roll(&flip(&v[0], &[0])?, &[-1], &[-1]),
        std::slice::from_ref(&x),
        GradcheckOptions::default(),
    );
    assert!(report.is_ok(), "flip and roll: {report:?}");
    let report = gradcheck(
        |v: &[Tensor]| tile(&v[0], &[2]),
        std::slice::from_ref(&x),
        GradcheckOptions::default(),
    );
    assert!(report.is_ok(), "tile: {report:?}");
}

#[test]
fn other_dtypes_and_errors() {
    let i = Tensor::from_vec(vec![1i32, 2], shape![2]).unwrap();
    assert_eq!(
        repeat(&i, &[2]).unwrap().values::<i32>().unwrap(),
        [1, 2, 1, 2]
    );
    assert_eq!(i.tile(&[1, 2]).unwrap().dims(), [1, 4]);
    assert_eq!(
        one_hot(&i, None).unwrap().values::<i64>().unwrap(),
        [0, 1, 0, 0, 0, 1]
    );
    let b = Tensor::eye_with(2, 3, &DType::Bool).unwrap();
    assert_eq!(
        b.values::<bool>().unwrap(),
        [true, false, false, false, true, false]
    );
    assert_eq!(
        Tensor::eye_with(3, 2, &DType::Int64)
            .unwrap()
            .values::<i64>()
            .unwrap(),
        [1, 0, 0, 1, 0, 0]
    );

    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(kind(repeat(&x, &[2])), ErrorKind::Value);
    assert_eq!(kind(flip(&x, &[0, -2])), ErrorKind::Value);
    assert_eq!(kind(flip(&x, &[2])), ErrorKind::Value);
    assert_eq!(kind(roll(&x, &[1, 2], &[0])), ErrorKind::Value);
    assert_eq!(
        x.roll(&[7], &[1]).unwrap().values::<f32>().unwrap(),
        [2.0, 1.0, 4.0, 3.0]
    );
    assert_eq!(kind(one_hot(&x, Some(3))), ErrorKind::Type);
    let out_of_range = Tensor::from_vec(vec![0i64, 3], shape![2]).unwrap();
    assert_eq!(kind(one_hot(&out_of_range, Some(3))), ErrorKind::Value);
    let negative = Tensor::from_vec(vec![-1i64], shape![1]).unwrap();
    assert_eq!(kind(one_hot(&negative, None)), ErrorKind::Value);
    assert_eq!(vals(&x), [1.0, 2.0, 3.0, 4.0]);
    assert!(x.grad().unwrap().is_none());
}

//! `masked_fill`, `tril` and `triu` (issue 38 item 4): forward values and gradients against
//! the numbers PyTorch 2.15 prints (`tests/fixtures/mask/mask.txt`, written by `gen_mask.py`
//! beside it), gradcheck on contiguous and strided inputs, other dtypes, and errors that
//! change nothing.

use autograd_core::{
    grad, gradcheck, shape, ErrorKind, GradOptions, GradcheckOptions, Shape, Tensor,
};
use autograd_ops::{masked_fill, tril, triu};
use autograd_tests::fixture::numbers;
use autograd_tests::{kind, noise, strided, t, vals};

/// An op under test, of one input.
type Op<'a> = dyn Fn(&Tensor) -> autograd_core::Result<Tensor> + 'a;

const MASK: &str = include_str!("../fixtures/mask/mask.txt");

#[test]
fn masked_fill_tril_and_triu_give_pytorchs_values_and_gradients() {
    let mut cases = 0;
    for line in MASK.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let [label, op, param, dims, input, mask_dims, mask, cotangent, output, want_grad] = f[..]
        else {
            panic!("a fixture line has ten fields: {line}");
        };
        let dims: Vec<usize> = numbers(dims);
        let x = t(&numbers::<f32>(input), &dims);
        let param: f64 = param.parse().unwrap();
        let y = match op {
            "masked_fill" => {
                let m: Vec<bool> = numbers::<u8>(mask).into_iter().map(|b| b == 1).collect();
                let m = Tensor::from_vec(m, Shape::from(numbers::<usize>(mask_dims).as_slice()))
                    .unwrap();
                masked_fill(&x, &m, param as f32).unwrap()
            }
            "tril" => tril(&x, param as i64).unwrap(),
            "triu" => triu(&x, param as i64).unwrap(),
            other => panic!("unknown op {other}"),
        };
        assert_eq!(vals(&y), numbers::<f32>(output), "{label}: forward");
        let g = t(&numbers::<f32>(cotangent), &dims);
        let dx = grad(&y, &[&x], &g, GradOptions::default()).unwrap()[0]
            .clone()
            .expect("a gradient");
        assert_eq!(vals(&dx), numbers::<f32>(want_grad), "{label}: gradient");
        cases += 1;
    }
    assert_eq!(cases, 17);
}

#[test]
fn gradcheck_on_contiguous_and_strided_inputs() {
    let values = noise(24, 3);
    for x in [t(&values, &[2, 3, 4]), strided(&values, &[2, 3, 4])] {
        let mask = Tensor::from_vec(
            (0..12).map(|i| i % 3 == 0).collect::<Vec<bool>>(),
            shape![3, 4],
        )
        .unwrap();
        let ops: [(&str, &Op<'_>); 3] = [
            ("masked_fill", &|x| masked_fill(x, &mask, 2.5f32)),
            ("tril", &|x| tril(x, -1)),
            ("triu", &|x| triu(x, 1)),
        ];
        for (name, op) in ops {
            let report = gradcheck(
                |v: &[Tensor]| op(&v[0]),
                std::slice::from_ref(&x),
                GradcheckOptions::default(),
            );
            assert!(report.is_ok(), "{name}: {report:?}");
        }
    }
}

#[test]
fn other_dtypes_and_the_tensor_methods() {
    let a = Tensor::from_vec(vec![1i32, 2, 3, 4], shape![2, 2]).unwrap();
    let m = Tensor::from_vec(vec![true, false], shape![2, 1]).unwrap();
    assert_eq!(
        a.masked_fill(&m, 9i32).unwrap().values::<i32>().unwrap(),
        [9, 9, 3, 4]
    );
    let b = Tensor::from_vec(vec![true; 4], shape![2, 2]).unwrap();
    assert_eq!(
        b.triu(0).unwrap().values::<bool>().unwrap(),
        [true, true, false, true]
    );
    let d = Tensor::from_vec(vec![1.0f64; 6], shape![3, 2]).unwrap();
    assert_eq!(
        d.tril(-1).unwrap().values::<f64>().unwrap(),
        [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    );
    // the mask changes which elements a gradient reaches, and nothing else
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = x
        .masked_fill(
            &Tensor::from_vec(vec![false, true, false], shape![3]).unwrap(),
            0.0f32,
        )
        .unwrap();
    let g = grad(
        &y,
        &[&x],
        &t(&[1.0, 1.0, 1.0], &[3]),
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(vals(g[0].as_ref().unwrap()), [1.0, 0.0, 1.0]);
}

#[test]
fn bad_inputs_are_errors_that_change_nothing() {
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let not_bool = t(&[1.0, 0.0], &[2]);
    assert_eq!(kind(masked_fill(&x, &not_bool, 0.0f32)), ErrorKind::Type);
    // a mask must broadcast to the input's shape, not the other way
    let bigger = Tensor::from_vec(vec![true; 8], shape![2, 2, 2]).unwrap();
    assert_eq!(kind(masked_fill(&x, &bigger, 0.0f32)), ErrorKind::Value);
    let wrong = Tensor::from_vec(vec![true; 3], shape![3]).unwrap();
    assert_eq!(kind(masked_fill(&x, &wrong, 0.0f32)), ErrorKind::Value);
    // a Bool value into a Float32 tensor
    let m = Tensor::from_vec(vec![true, false], shape![2]).unwrap();
    assert_eq!(kind(masked_fill(&x, &m, true)), ErrorKind::Type);
    assert_eq!(kind(tril(&t(&[1.0, 2.0], &[2]), 0)), ErrorKind::Value);
    assert_eq!(kind(triu(&t(&[5.0], &[]), 0)), ErrorKind::Value);
    assert_eq!(vals(&x), [1.0, 2.0, 3.0, 4.0]);
    assert!(x.grad().unwrap().is_none());
}

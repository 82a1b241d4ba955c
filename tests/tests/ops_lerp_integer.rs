//! `lerp` with a tensor weight and the integer forms of `pow`, `floor`, `ceil` and `round`
//! (issue 38 item 2), against values PyTorch 2.15 prints (quoted beside each assertion).

use autograd_core::ops::{ceil, floor, lerp, lerp_tensor, pow, round};
use autograd_core::{grad, gradcheck, shape, DType, GradOptions, GradcheckOptions, Tensor};
use autograd_tests::{noise, strided, t, vals};

#[test]
fn lerp_with_a_tensor_weight_gives_pytorchs_values_and_gradients() {
    let a = t(&[0.0, 10.0, -1.0, 3.0], &[4]);
    let end = t(&[1.0, 20.0, 5.0, -3.0], &[4]);
    let w = t(&[0.25, 1.0, 0.7, -0.4], &[4]);
    let y = lerp_tensor(&a, &end, &w).unwrap();
    // torch.lerp(x, e, w).tolist(): [0.25, 20.0, 3.1999998092651367, 5.400000095367432]
    assert_eq!(vals(&y), [0.25, 20.0, 3.2f32.next_down(), 5.4]);
    let g = t(&[1.0, 2.0, -1.0, 0.5], &[4]);
    let grads = grad(&y, &[&a, &end, &w], &g, GradOptions::default()).unwrap();
    let got: Vec<Vec<f32>> = grads.iter().map(|g| vals(g.as_ref().unwrap())).collect();
    assert_eq!(got[0], [0.75, 0.0, -0.3, 0.7]);
    assert_eq!(got[1], [0.25, 2.0, -0.7, -0.2]);
    assert_eq!(got[2], [1.0, 20.0, -6.0, -3.0]);
    // a constant weight and a full tensor of it agree
    let same = lerp(&a, &end, 0.7).unwrap();
    let w7 = t(&[0.7; 4], &[4]);
    assert_eq!(vals(&lerp_tensor(&a, &end, &w7).unwrap()), vals(&same));
}

#[test]
fn gradcheck_of_lerp_with_broadcast_and_strided_operands() {
    let a = strided(&noise(12, 1), &[3, 4]);
    let end = t(&noise(4, 2), &[4]);
    let w = t(&noise(3, 3), &[3, 1]);
    gradcheck(
        |x| lerp_tensor(&x[0], &x[1], &x[2]),
        &[a, end, w],
        GradcheckOptions::default(),
    )
    .unwrap();
    let e = lerp_tensor(
        &t(&[1.0], &[1]),
        &t(&[2.0], &[1]),
        &t(&[1.0, 2.0], &[2, 1, 1]),
    )
    .unwrap();
    assert_eq!(e.dims(), [2, 1, 1]);
    assert_eq!(vals(&e), [2.0, 3.0]);
    let ints = Tensor::from_vec(vec![1i32], shape![1]).unwrap();
    assert_eq!(
        lerp_tensor(&t(&[1.0], &[1]), &t(&[2.0], &[1]), &ints)
            .unwrap_err()
            .kind(),
        autograd_core::ErrorKind::Type
    );
}

#[test]
fn integer_pow_wraps_and_follows_pytorch_for_negative_exponents() {
    let a = Tensor::from_vec(vec![2i32, -3, 0, 1, -1, 7], shape![6]).unwrap();
    let b = Tensor::from_vec(vec![3i32, 2, 0, 100, 5, 12], shape![6]).unwrap();
    // torch.pow(a, b).tolist() with int32 tensors
    assert_eq!(
        pow(&a, &b).unwrap().values::<i32>().unwrap(),
        [8, 9, 1, 1, -1, 956_385_313]
    );
    let a = Tensor::from_vec(vec![3i64, -2, 10], shape![3]).unwrap();
    let b = Tensor::from_vec(vec![40i64, 63, 20], shape![3]).unwrap();
    assert_eq!(
        pow(&a, &b).unwrap().values::<i64>().unwrap(),
        [
            -6_289_078_614_652_622_815,
            i64::MIN,
            7_766_279_631_452_241_920
        ]
    );
    let a = Tensor::from_vec(vec![2i32, -3, 1, -1, -1, 0], shape![6]).unwrap();
    let b = Tensor::from_vec(vec![-1i32, -1, -5, -3, -2, -1], shape![6]).unwrap();
    assert_eq!(
        pow(&a, &b).unwrap().values::<i32>().unwrap(),
        [0, 0, 1, -1, 1, 0]
    );
    // broadcasting, and a dtype mismatch refused
    let col = Tensor::from_vec(vec![2i32, 3], shape![2, 1]).unwrap();
    let row = Tensor::from_vec(vec![0i32, 1, 2], shape![3]).unwrap();
    assert_eq!(
        pow(&col, &row).unwrap().values::<i32>().unwrap(),
        [1, 2, 4, 1, 3, 9]
    );
    assert_eq!(
        pow(&col, &t(&[1.0], &[1])).unwrap_err().kind(),
        autograd_core::ErrorKind::Type
    );
}

#[test]
fn rounding_an_integer_tensor_copies_it() {
    for dtype in [DType::Int32, DType::Int64] {
        let x = Tensor::from_vec(vec![2i64, -3, 0, 7], shape![2, 2])
            .unwrap()
            .to_dtype(&dtype)
            .unwrap();
        for y in [floor(&x), ceil(&x), round(&x)] {
            let y = y.unwrap();
            assert_eq!(*y.dtype(), dtype);
            assert_eq!(y.dims(), [2, 2]);
            assert!(!y.same_tensor(&x));
            let y = y.to_dtype(&DType::Int64).unwrap().values::<i64>().unwrap();
            assert_eq!(y, [2, -3, 0, 7]);
        }
    }
}

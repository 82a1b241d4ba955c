//! Empty tensors through the op library: an empty tensor may sit anywhere up to the very end of
//! its carrier (never past it), and every kernel handles it at any such offset without touching
//! storage.

use autograd_core::{shape, stride, CpuCarrier, ErrorKind, Layout, Tensor};
use autograd_ops::{add, add_scalar, mul, mul_scalar, sum};
use autograd_tests::{grad_vals, kind, vals};

/// An empty Float32 tensor of `layout` at `offset` in a carrier of `len` elements.
fn empty_at(len: usize, layout: Layout, offset: usize) -> autograd_core::Result<Tensor> {
    Tensor::from_parts(CpuCarrier::from_vec(vec![1.0f32; len]), layout, offset)
}

#[test]
fn an_empty_tensor_past_the_end_of_its_carrier_is_refused() {
    let e = empty_at(2, Layout::row_major(&[0]).unwrap(), 5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("offset 5"), "{e}");
    // the same through with_layout, and with a nested empty layout
    let t = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
    assert_eq!(
        kind(t.with_layout_detached(Layout::row_major(&[0]).unwrap(), 3)),
        ErrorKind::Value
    );
    let nested = Layout::new(shape![2, [0, 3]], stride![1, [1, 7]]).unwrap();
    assert_eq!(kind(empty_at(4, nested, 5)), ErrorKind::Value);
}

#[test]
fn an_empty_tensor_may_sit_at_the_very_end() {
    for offset in 0..=2 {
        let e = empty_at(2, Layout::row_major(&[0]).unwrap(), offset).unwrap();
        assert_eq!((e.size(), e.offset()), (0, offset));
        assert!(vals(&e).is_empty());
    }
}

#[test]
fn sum_of_an_empty_tensor_at_any_offset_is_zero() {
    for offset in 0..=3 {
        for layout in [
            Layout::row_major(&[0]).unwrap(),
            Layout::row_major(&[3, 0]).unwrap(),
            Layout::new(shape![0, 4], stride![1, 0]).unwrap(),
        ] {
            let e = empty_at(3, layout, offset).unwrap();
            assert_eq!(vals(&sum(&e).unwrap()), vec![0.0]);
        }
    }
}

#[test]
fn elementwise_kernels_on_empty_tensors_at_the_end_give_empty_results() {
    // 20 elements: beyond the small inline storage as well
    for len in [3usize, 20] {
        let a = empty_at(len, Layout::row_major(&[2, 0]).unwrap(), len).unwrap();
        let b = empty_at(len, Layout::row_major(&[2, 0]).unwrap(), 1).unwrap();
        for r in [
            add(&a, &b).unwrap(),
            mul(&b, &a).unwrap(),
            add_scalar(&a, 1.0).unwrap(),
            mul_scalar(&a, 2.0).unwrap(),
        ] {
            assert_eq!(r.dims(), vec![2, 0]);
            assert!(vals(&r).is_empty());
        }
    }
}

#[test]
fn backward_through_an_empty_tensor_at_the_end_gives_an_empty_gradient() {
    let x = empty_at(4, Layout::row_major(&[0]).unwrap(), 4).unwrap();
    let y = mul_scalar(&add(&x, &x).unwrap(), 3.0).unwrap();
    let loss = sum(&y).unwrap();
    loss.backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![]));
    assert_eq!(vals(&loss), vec![0.0]);
}

#[test]
fn empty_views_at_the_end_of_a_row_feed_the_kernels() {
    // a column of a 2 x 60 matrix narrowed to nothing past its last element: the view's own
    // offset would lie past the carrier, so it is placed at the carrier's end
    let m = Tensor::from_vec((0..120).map(|i| i as f32).collect(), shape![2, 60]).unwrap();
    let col = m.select(1, 5).unwrap();
    let none = col.narrow(0, 2, 0).unwrap();
    assert_eq!(none.dims(), vec![0]);
    assert!(none.offset() <= 120);
    assert_eq!(vals(&sum(&none).unwrap()), vec![0.0]);
    assert!(vals(&add_scalar(&none, 1.0).unwrap()).is_empty());
}

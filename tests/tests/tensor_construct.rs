//! Constructors and readers: `arange`, `linspace`, `eye`, seeded `rand`/`randn` and the
//! `_like` forms (shape, dtype and carrier class kept), `item`, `to_vec`, and `Display`
//! (dtype, shape, and a numpy-style summary of large tensors).

mod spec_support;

use autograd_core::{
    shape, CpuCarrier, DType, ErrorKind, Layout, Rng, Scalar, Shape, Stride, Tensor,
};
use autograd_tests::{t, vals};
use spec_support::{expect_err, on_test_carrier, tc};

#[test]
fn arange_and_linspace_list_their_values() {
    assert_eq!(
        vals(&Tensor::arange(0.0, 5.0, 1.0).unwrap()),
        [0.0, 1.0, 2.0, 3.0, 4.0]
    );
    assert_eq!(
        vals(&Tensor::arange(1.0, 2.0, 0.3).unwrap()),
        [1.0, 1.3, 1.6, 1.9]
    );
    assert_eq!(vals(&Tensor::arange(3.0, 0.0, -1.5).unwrap()), [3.0, 1.5]);
    assert_eq!(Tensor::arange(2.0, 2.0, 1.0).unwrap().dims(), [0]);
    expect_err(Tensor::arange(0.0, 1.0, 0.0), ErrorKind::Value, &["step"]);
    expect_err(Tensor::arange(0.0, 1.0, -1.0), ErrorKind::Value, &["away"]);
    expect_err(
        Tensor::arange(0.0, f64::NAN, 1.0),
        ErrorKind::Value,
        &["finite"],
    );
    assert_eq!(
        vals(&Tensor::linspace(-1.0, 1.0, 5).unwrap()),
        [-1.0, -0.5, 0.0, 0.5, 1.0]
    );
    assert_eq!(vals(&Tensor::linspace(2.0, 3.0, 1).unwrap()), [2.0]);
    assert_eq!(Tensor::linspace(2.0, 3.0, 0).unwrap().size(), 0);
    let l = Tensor::linspace(0.0, 0.7, 8).unwrap();
    assert_eq!(vals(&l)[7], 0.7, "the end is exact");
}

#[test]
fn eye_is_the_identity() {
    let e = Tensor::eye(3).unwrap();
    assert_eq!(e.dims(), [3, 3]);
    assert_eq!(e.dtype(), &DType::Float32);
    assert_eq!(vals(&e), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(Tensor::eye(0).unwrap().size(), 0);
}

#[test]
fn the_same_seed_gives_the_same_values_and_another_seed_others() {
    let a = Tensor::rand(shape![4, 5], &mut Rng::new(42)).unwrap();
    let b = Tensor::rand(shape![4, 5], &mut Rng::new(42)).unwrap();
    let c = Tensor::rand(shape![4, 5], &mut Rng::new(43)).unwrap();
    assert_eq!(vals(&a), vals(&b));
    assert_ne!(vals(&a), vals(&c));
    assert_eq!(
        vals(&Tensor::randn(shape![7], &mut Rng::new(1)).unwrap()),
        vals(&Tensor::randn(shape![7], &mut Rng::new(1)).unwrap())
    );
    // one generator continues its stream
    let mut rng = Rng::new(42);
    let first = Tensor::rand(shape![20], &mut rng).unwrap();
    let second = Tensor::rand(shape![20], &mut rng).unwrap();
    assert_eq!(vals(&first), vals(&a));
    assert_ne!(vals(&first), vals(&second));
}

#[test]
fn rand_is_uniform_in_the_unit_interval_and_randn_standard_normal() {
    let mut rng = Rng::new(2024);
    let u = vals(&Tensor::rand(shape![100, 100], &mut rng).unwrap());
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    let mean = u.iter().map(|&x| f64::from(x)).sum::<f64>() / u.len() as f64;
    assert!((mean - 0.5).abs() < 0.02, "uniform mean {mean}");
    let z = vals(&Tensor::randn(shape![10_000], &mut rng).unwrap());
    let n = z.len() as f64;
    let mean = z.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = z
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0);
    assert!(mean.abs() < 0.05, "normal mean {mean}");
    assert!((var.sqrt() - 1.0).abs() < 0.05, "normal std {}", var.sqrt());
    let tails = z.iter().filter(|x| x.abs() > 1.96).count() as f64 / n;
    assert!(
        (tails - 0.05).abs() < 0.015,
        "two-sided 5% tail mass {tails}"
    );
}

#[test]
fn like_forms_keep_shape_dtype_and_carrier_class() {
    let x = tc(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let mut rng = Rng::new(5);
    for (y, want) in [
        (x.zeros_like().unwrap(), Some(0.0)),
        (x.ones_like().unwrap(), Some(1.0)),
        (x.full_like(2.5f32).unwrap(), Some(2.5)),
        (x.full_like(7i32).unwrap(), Some(7.0)),
        (x.rand_like(&mut rng).unwrap(), None),
        (x.randn_like(&mut rng).unwrap(), None),
    ] {
        assert_eq!(y.dims(), [2, 3]);
        assert_eq!(y.dtype(), &DType::Float32);
        assert!(on_test_carrier(&y));
        assert!(y.autograd_ctx().is_none());
        if let Some(w) = want {
            assert_eq!(vals(&y), [w; 6]);
        }
    }
    // a transposed input gets a compact result of its (transposed) shape
    let tr = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .transpose(0, 1)
        .unwrap();
    let z = tr.zeros_like().unwrap();
    assert_eq!(z.dims(), [3, 2]);
    assert_eq!(z.layout().to_string(), "(3,2):(2,1)");
    let ints = Tensor::from_vec(vec![1i32, 2, 3], shape![3]).unwrap();
    assert_eq!(
        ints.ones_like().unwrap().values::<i32>().unwrap(),
        [1, 1, 1]
    );
    assert_eq!(ints.full_like(9i32).unwrap().dtype(), &DType::Int32);
    let bools = Tensor::from_vec(vec![false, true], shape![2]).unwrap();
    assert_eq!(
        bools.ones_like().unwrap().values::<bool>().unwrap(),
        [true, true]
    );
    expect_err(ints.rand_like(&mut rng), ErrorKind::Type, &["Int32"]);
    expect_err(ints.full_like(1.5f32), ErrorKind::Type, &["Int32"]);
    // the existing constructors keep their signatures
    assert_eq!(
        vals(&Tensor::zeros(shape![2], &DType::Float32).unwrap()),
        [0.0, 0.0]
    );
    assert_eq!(
        vals(&Tensor::ones(shape![2], &DType::Float32).unwrap()),
        [1.0, 1.0]
    );
    assert_eq!(vals(&Tensor::full(shape![2], 3.0f32).unwrap()), [3.0, 3.0]);
}

#[test]
fn item_reads_a_one_element_tensor_and_to_vec_every_element() {
    assert_eq!(Tensor::scalar(1.5).item().unwrap(), Scalar::F32(1.5));
    let one = t(&[4.0], &[1, 1]);
    assert_eq!(one.item().unwrap().to_f64(), 4.0);
    let i = Tensor::from_vec(vec![3i32], shape![1]).unwrap();
    assert_eq!(i.item().unwrap(), Scalar::I32(3));
    expect_err(
        t(&[1.0, 2.0], &[2]).item(),
        ErrorKind::Value,
        &["one-element", "2 elements"],
    );
    expect_err(t(&[], &[0]).item(), ErrorKind::Value, &["0 elements"]);
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]).transpose(0, 1).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
    expect_err(x.to_vec::<i32>(), ErrorKind::Type, &["Float32"]);
}

#[test]
fn display_shows_values_and_the_alternate_form_dtype_and_shape() {
    // `{}`: the values on one line, as before this issue
    let m = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(m.to_string(), "[[1, 2], [3, 4]]");
    assert_eq!(t(&[1.0, 2.5, -3.0], &[3]).to_string(), "[1, 2.5, -3]");
    // `{:#}`: PyTorch's layout, with the dtype and the shape
    assert_eq!(
        format!("{:#}", t(&[1.0, 2.5, -3.0], &[3])),
        "tensor([1, 2.5, -3], dtype=Float32, shape=(3))"
    );
    assert_eq!(
        format!("{m:#}"),
        "tensor([[1, 2],\n        [3, 4]], dtype=Float32, shape=(2,2))"
    );
    let ints = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6, 7, 8], shape![2, 2, 2]).unwrap();
    assert_eq!(
        format!("{ints:#}"),
        "tensor([[[1, 2],\n         [3, 4]],\n        [[5, 6],\n         [7, 8]]], dtype=Int32, shape=(2,2,2))"
    );
    // a view shows its own logical order
    let tr = m.transpose(0, 1).unwrap();
    assert_eq!(tr.to_string(), "[[1, 3], [2, 4]]");
}

#[test]
fn display_summarises_large_tensors_with_their_edges() {
    let x = Tensor::arange(0.0, 2000.0, 1.0).unwrap();
    assert_eq!(x.to_string(), "[0, 1, 2, ..., 1997, 1998, 1999]");
    assert_eq!(
        format!("{x:#}"),
        "tensor([0, 1, 2, ..., 1997, 1998, 1999], dtype=Float32, shape=(2000))"
    );
    let m = Tensor::from_vec((0..100 * 20).map(|i| i as f32).collect(), shape![100, 20]).unwrap();
    let s = format!("{m:#}");
    assert!(
        s.starts_with(
            "tensor([[0, 1, 2, ..., 17, 18, 19],\n        [20, 21, 22, ..., 37, 38, 39],"
        ),
        "{s}"
    );
    assert!(
        s.contains("\n        ...,\n        [1940, 1941, 1942, ..., 1957, 1958, 1959],"),
        "{s}"
    );
    assert!(
        s.ends_with("[1980, 1981, 1982, ..., 1997, 1998, 1999]], dtype=Float32, shape=(100,20))"),
        "{s}"
    );
    assert!(m
        .to_string()
        .starts_with("[[0, 1, 2, ..., 17, 18, 19], [20, 21, 22,"));
    // small axes of a large tensor are shown in full
    let wide = Tensor::from_vec(vec![0.5f32; 2 * 600], shape![2, 600]).unwrap();
    assert_eq!(wide.to_string().matches("...").count(), 2);
}

#[test]
fn display_of_a_tensor_too_big_or_too_deep_to_write_shows_its_count() {
    // 2^40 elements in one storage slot: every axis is short, so summarising axes cannot help
    let huge = Tensor::from_parts(
        CpuCarrier::from_vec(vec![1.0f32]),
        Layout::new(
            Shape::from(vec![2usize; 40]),
            Stride::from(vec![0usize; 40]),
        )
        .unwrap(),
        0,
    )
    .unwrap();
    assert_eq!(huge.to_string(), "[... 1099511627776 elements ...]");
    assert!(
        format!("{huge:#}").starts_with("tensor([... 1099511627776 elements ...], dtype=Float32")
    );
    // a hundred thousand unit axes: writing them would nest as deep
    let deep = Tensor::from_vec(vec![1.0f32], Shape::from(vec![1usize; 100_000])).unwrap();
    assert_eq!(deep.to_string(), "[... 1 elements ...]");
    // at the limits, values as before
    let wide = Tensor::from_vec(vec![0.0f32; 1 << 12], Shape::from(vec![2usize; 12])).unwrap();
    assert!(wide.to_string().starts_with("[[[["), "{}", wide.to_string());
}

#[test]
fn arange_and_linspace_of_unallocatable_sizes_are_value_errors() {
    let e = Tensor::arange(0.0, (1u64 << 39) as f64, 1.0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    let e = Tensor::linspace(0.0, 1.0, 1 << 40).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    let e = Tensor::linspace(0.0, 1.0, usize::MAX).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
}

//! The kernel layer (issue 11): maps, zips, reductions and row maps read any layout
//! (transposed, sliced, broadcast, nested) without copying, agree with plain loops over
//! `values()`, run in parallel above the threshold, and keep the first input's carrier class.

mod spec_support;

use autograd_core::{kernel, shape, stride, CpuCarrier, ErrorKind, Layout, Tensor};
use autograd_tests::{t, vals};
use proptest::prelude::*;
use spec_support::tc;

/// A view of fresh storage: `dims` (1 to 3 axes) permuted by `perm`, optionally narrowed on
/// axis 0 and broadcast along a new leading axis.
fn view(dims: &[usize], perm: &[usize], narrow: bool, lead: usize) -> Tensor {
    let n: usize = dims.iter().product();
    let base = t(
        &(0..n).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<_>>(),
        dims,
    );
    let mut v = base.permute(&perm[..dims.len()]).unwrap();
    if narrow && v.dims()[0] > 1 {
        v = v.narrow(0, 1, v.dims()[0] - 1).unwrap();
    }
    if lead > 1 {
        let mut to = vec![lead];
        to.extend(v.dims());
        v = v.broadcast_to(&to).unwrap();
    }
    v
}

fn layouts() -> impl Strategy<Value = Tensor> {
    (
        prop::collection::vec(1usize..5, 1..4),
        Just([0usize, 1, 2]).prop_shuffle(),
        any::<bool>(),
        0usize..3,
    )
        .prop_map(|(dims, perm, narrow, lead)| {
            let rank = dims.len();
            let perm: Vec<usize> = perm.into_iter().filter(|&p| p < rank).collect();
            view(&dims, &perm, narrow, lead)
        })
}

proptest! {
    #[test]
    fn map_reads_any_layout_in_logical_order(x in layouts()) {
        let y = kernel::map(&x, |v: f32| 2.0 * v + 1.0).unwrap();
        let want: Vec<f32> = vals(&x).iter().map(|v| 2.0 * v + 1.0).collect();
        prop_assert_eq!(vals(&y), want);
        prop_assert_eq!(y.shape(), x.shape());
        prop_assert!(y.layout().is_row_major_contiguous());
    }

    #[test]
    fn zip_pairs_positions_of_two_layouts(x in layouts()) {
        // the same values in a compact copy: a different layout of the same shape
        let c = x.contiguous().unwrap();
        let y = kernel::zip(&x, &c, |p: f32, q: f32| p * q - p).unwrap();
        let want: Vec<f32> = vals(&x).iter().map(|p| p * p - p).collect();
        prop_assert_eq!(vals(&y), want);
        // the dense operand first: operands keep their order whichever one is strided
        let shifted = kernel::map(&c, |v: f32| v + 1.0).unwrap();
        let z = kernel::zip(&shifted, &x, |p: f32, q: f32| 2.0 * p - 3.0 * q).unwrap();
        let want: Vec<f32> = vals(&x).iter().map(|p| 2.0 * (p + 1.0) - 3.0 * p).collect();
        prop_assert_eq!(vals(&z), want);
    }

    #[test]
    fn sum_f32_sums_any_layout(x in layouts()) {
        let want: f64 = vals(&x).iter().map(|&v| f64::from(v)).sum();
        let got = kernel::sum_f32(&x).unwrap();
        prop_assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{} vs {}", got, want);
    }

    #[test]
    fn reduce_sums_any_axes(x in layouts(), mask in 0u8..16, keepdim in any::<bool>()) {
        let dims = x.dims();
        let axes: Vec<usize> = (0..dims.len()).filter(|i| mask & (1 << i) != 0).collect();
        let s = kernel::reduce(&x, &axes, keepdim, || 0.0f64, |a, v: f32| a + f64::from(v), |a, _| a as f32).unwrap();
        prop_assert_eq!(s.dims(), kernel::reduced_dims(&dims, &axes, keepdim).unwrap());
        // the reference: bucket every element by its kept coordinate
        let values = vals(&x);
        let kept: Vec<usize> = (0..dims.len()).filter(|i| !axes.contains(i)).collect();
        let out_n: usize = kept.iter().map(|&i| dims[i]).product();
        let mut want = vec![0.0f64; out_n];
        let mut coord = vec![0usize; dims.len()];
        for v in values {
            let k = kept.iter().fold(0, |acc, &i| acc * dims[i] + coord[i]);
            want[k] += f64::from(v);
            for a in (0..dims.len()).rev() {
                coord[a] += 1;
                if coord[a] < dims[a] { break; }
                coord[a] = 0;
            }
        }
        let got = vals(&s);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((f64::from(*g) - w).abs() < 1e-4, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn map_rows_sees_each_last_axis_row(x in layouts()) {
        let y = kernel::map_rows(&x, |row: &[f32], out: &mut [f32]| {
            let total: f32 = row.iter().sum();
            for (o, v) in out.iter_mut().zip(row) { *o = v - total; }
        }).unwrap();
        let n = *x.dims().last().unwrap();
        let want: Vec<f32> = vals(&x).chunks(n).flat_map(|r| {
            let total: f32 = r.iter().sum();
            r.iter().map(move |v| v - total)
        }).collect();
        prop_assert_eq!(vals(&y), want);
    }
}

#[test]
fn large_strided_inputs_take_the_parallel_path_and_agree() {
    let n = 300;
    let a = t(
        &(0..n * n).map(|i| (i % 97) as f32).collect::<Vec<_>>(),
        &[n, n],
    );
    let at = a.transpose(0, 1).unwrap();
    let y = kernel::map(&at, |v: f32| v + 1.0).unwrap();
    let want: Vec<f32> = vals(&at).iter().map(|v| v + 1.0).collect();
    assert_eq!(vals(&y), want);
    let z = kernel::zip(&at, &a, |p: f32, q: f32| p - q).unwrap();
    let want: Vec<f32> = vals(&at).iter().zip(vals(&a)).map(|(p, q)| p - q).collect();
    assert_eq!(vals(&z), want);
    let cols = kernel::reduce(
        &a,
        &[0],
        false,
        || 0.0f64,
        |s, v: f32| s + f64::from(v),
        |s, _| s as f32,
    )
    .unwrap();
    let want: Vec<f32> = (0..n)
        .map(|j| (0..n).map(|i| ((i * n + j) % 97) as f64).sum::<f64>() as f32)
        .collect();
    assert_eq!(vals(&cols), want);
}

#[test]
fn results_keep_the_first_inputs_carrier_class() {
    let x = tc(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let y = kernel::map(&x, |v: f32| v * 3.0).unwrap();
    assert_eq!(y.carrier().unwrap().class_name(), "TestCarrier");
    assert_eq!(vals(&y), [3.0, 6.0, 9.0, 12.0]);
    let s = kernel::reduce(&x, &[0, 1], false, || 0.0f32, |a, v: f32| a + v, |a, _| a).unwrap();
    assert_eq!(s.carrier().unwrap().class_name(), "TestCarrier");
    assert_eq!(vals(&s), [10.0]);
}

#[test]
fn elements_expose_slices_runs_and_array_views() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    kernel::read::<f32, _>(&a, |e| {
        assert_eq!(e.as_slice(), Some(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0][..]));
    })
    .unwrap();
    let at = a.transpose(0, 1).unwrap();
    kernel::read::<f32, _>(&at, |e| {
        assert!(e.as_slice().is_none());
        let mut runs = Vec::new();
        e.for_each_run_in(0, e.len(), |r| runs.push((r.start, r.len, r.stride)));
        assert_eq!(runs, [(0, 2, 3), (1, 2, 3), (2, 2, 3)]);
        let v = e.array_view().unwrap();
        assert_eq!(v.shape(), &[3, 2]);
        assert_eq!(v[[2, 1]], 6.0);
    })
    .unwrap();
    // a broadcast leaf: one run of stride 0
    let b = Tensor::from_parts(
        CpuCarrier::from_vec(vec![7.0f32]),
        Layout::new(shape![4], stride![0]).unwrap(),
        0,
    )
    .unwrap();
    kernel::read::<f32, _>(&b, |e| {
        let mut runs = Vec::new();
        e.for_each_run_in(1, 2, |r| runs.push((r.start, r.len, r.stride)));
        assert_eq!(runs, [(0, 2, 0)]);
    })
    .unwrap();
}

#[test]
fn bad_inputs_are_errors_of_the_right_kind() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[1.0, 2.0, 3.0], &[3]);
    let zipped = kernel::zip(&a, &b, |p: f32, q: f32| p + q);
    assert_eq!(zipped.unwrap_err().kind(), ErrorKind::Value);
    let reduce =
        |axes: &[usize]| kernel::reduce(&a, axes, false, || 0.0f32, |s, v: f32| s + v, |s, _| s);
    assert_eq!(reduce(&[1]).unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(reduce(&[0, 0]).unwrap_err().kind(), ErrorKind::Value);
    let wrong_type = kernel::map(&a, |v: i32| v);
    assert_eq!(wrong_type.unwrap_err().kind(), ErrorKind::Type);
}

/// A user kernel on the public matrix view: batch `i` of a sliced, transposed `[3, 4, 2]`
/// tensor times a broadcast matrix, through `gemm_f32` without copying either operand.
#[test]
fn matrix_views_reach_gemm_through_their_strides() {
    let base = t(
        &(0..36).map(|i| i as f32 * 0.25 - 2.0).collect::<Vec<_>>(),
        &[3, 2, 6],
    );
    // [3, 6, 2] transposed, then rows 1..5: a [3, 4, 2] view with no contiguous matrix
    let a = base.transpose(1, 2).unwrap().narrow(1, 1, 4).unwrap();
    let b = t(&[1.0, -1.0, 0.5], &[1, 3]).broadcast_to(&[2, 3]).unwrap();
    let (av, bv) = (vals(&a), vals(&b));
    for i in 0..3 {
        let mut c = vec![0.0f32; 12];
        kernel::read_pair::<f32, f32, _>(&a, &b, |ea, eb| -> autograd_core::Result<()> {
            let ma = ea.matrix(&[i], false)?.expect("flat modes");
            let mb = eb.matrix(&[], false)?.expect("flat modes");
            kernel::gemm_f32(ma, mb, kernel::MatMut::row_major(&mut c, 4, 3), false, 1)
        })
        .unwrap()
        .unwrap();
        for r in 0..4 {
            for col in 0..3 {
                let want: f32 = (0..2)
                    .map(|p| av[i * 8 + r * 2 + p] * bv[p * 3 + col])
                    .sum();
                assert!((c[r * 3 + col] - want).abs() < 1e-5, "{c:?}");
            }
        }
    }
    // a batch coordinate of the wrong length is refused
    let err = kernel::read::<f32, _>(&a, |ea| ea.matrix(&[], false).map(|_| ())).unwrap();
    assert_eq!(err.unwrap_err().kind(), ErrorKind::Value);
}

/// A strided tensor on a carrier kernels cannot borrow from arrives as a compact copy; the
/// reduction must permute the copy's modes, not the original layout's.
#[test]
fn reductions_of_strided_tensors_on_other_carriers_read_the_copy_in_its_own_layout() {
    // [[1, 2, 3], [4, 5, 6]] stored column-major on the test carrier
    let base = tc(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0], &[3, 2]);
    let a = base.transpose(0, 1).unwrap();
    assert_eq!(vals(&a), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let sum = |axes: &[usize]| {
        kernel::reduce(
            &a,
            axes,
            false,
            || 0.0f64,
            |s, v: f32| s + f64::from(v),
            |s, _| s as f32,
        )
        .unwrap()
    };
    assert_eq!(vals(&sum(&[0])), [5.0, 7.0, 9.0]);
    assert_eq!(vals(&sum(&[1])), [6.0, 15.0]);
    assert_eq!(vals(&sum(&[0, 1])), [21.0]);
}

#[test]
#[should_panic(expected = "reach past the 0 elements")]
fn positions_past_an_empty_tensor_are_refused_with_a_message() {
    let empty = Tensor::zeros(shape![0], &autograd_core::DType::Float32).unwrap();
    let _ = kernel::read::<f32, _>(&empty, |e| e.for_each_in(0, 1, |_| {}));
}

#[test]
#[should_panic(expected = "reach past the 6 elements")]
fn copying_more_positions_than_a_tensor_has_is_refused_not_wrapped_around() {
    let x = Tensor::from_vec((0..6).map(|i| i as f32).collect::<Vec<_>>(), shape![2, 3])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let _ = kernel::read::<f32, _>(&x, |e| e.copy_range(0, &mut [0.0; 10]));
}

#[test]
fn reduce_folds_each_group_in_logical_order_however_the_axes_are_listed() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let digits = |axes: &[usize]| {
        let r = kernel::reduce(
            &a,
            axes,
            false,
            || 0.0f64,
            |s, x: f32| s * 10.0 + f64::from(x),
            |s, _| s as f32,
        )
        .unwrap();
        vals(&r)
    };
    assert_eq!(digits(&[0, 1]), [1234.0]);
    assert_eq!(digits(&[1, 0]), [1234.0]);
}

#[test]
fn a_users_panic_in_a_parallel_kernel_keeps_its_message() {
    let x = Tensor::from_vec(vec![1.0f32; 1 << 18], shape![1 << 18]).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        kernel::map(&x, |_v: f32| -> f32 { panic!("user message 42") })
    }))
    .unwrap_err();
    let message = caught
        .downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| caught.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(message.contains("user message 42"), "{message:?}");
    // and the team still works afterwards
    assert_eq!(kernel::sum_f32(&x).unwrap(), (1 << 18) as f64);
}

#[test]
fn a_kernel_over_an_unallocatable_broadcast_is_an_error() {
    let x = Tensor::from_parts(
        CpuCarrier::from_vec(vec![1.0f32]),
        Layout::new(shape![1usize << 62], stride![0usize]).unwrap(),
        0,
    )
    .unwrap();
    let e = kernel::map(&x, |v: f32| v).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
}

proptest! {
    /// `update_reading` hands `f` the target's elements and the source's, both in logical
    /// order, whatever their layouts, and keeps what `f` leaves as the target's elements.
    #[test]
    fn update_reading_pairs_logical_positions_of_any_two_layouts(
        x in layouts(),
        transposed in any::<bool>(),
    ) {
        // a writable target of x's shape: compact, or a transposed view of fresh storage
        let dims = x.dims();
        let n = x.size();
        let target = if transposed && dims.len() >= 2 {
            let mut rev = dims.clone();
            rev.reverse();
            let perm: Vec<usize> = (0..dims.len()).rev().collect();
            t(&vec![0.0f32; n], &rev).permute(&perm).unwrap()
        } else {
            t(&vec![0.0f32; n], &dims)
        };
        let want: Vec<f32> = vals(&x).iter().enumerate().map(|(i, v)| v * 2.0 + i as f32).collect();
        kernel::update_reading::<f32, f32, _>(&target, &x, |out, e| {
            let mut src = vec![0.0f32; e.len()];
            e.copy_range(0, &mut src);
            for (i, (o, s)) in out.iter_mut().zip(src).enumerate() {
                *o = s * 2.0 + i as f32;
            }
            Ok(())
        })
        .unwrap();
        prop_assert_eq!(vals(&target), want);
    }
}

#[test]
fn update_reading_a_view_of_its_own_target_or_another_carrier_class_reads_the_old_values() {
    // the source is the target shifted by one, in the same carrier: each element must be read
    // as it was before the update (and the one carrier is not locked twice)
    let p = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let (target, source) = (p.narrow(0, 1, 3).unwrap(), p.narrow(0, 0, 3).unwrap());
    kernel::update_reading::<f32, f32, _>(&target, &source, |out, e| {
        let mut i = 0;
        e.for_each_in(0, 3, |v: f32| {
            out[i] += v;
            i += 1;
        });
        Ok(())
    })
    .unwrap();
    assert_eq!(vals(&p), [1.0, 3.0, 5.0, 7.0]);
    // a source in another carrier class is read through a copy
    let q = t(&[1.0, 1.0, 1.0, 1.0], &[2, 2]);
    let g = tc(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    kernel::update_reading::<f32, f32, _>(&q, &g, |out, e| {
        let mut i = 0;
        e.for_each_in(0, 4, |v: f32| {
            out[i] -= v;
            i += 1;
        });
        Ok(())
    })
    .unwrap();
    assert_eq!(vals(&q), [0.0, -1.0, -2.0, -3.0]);
}

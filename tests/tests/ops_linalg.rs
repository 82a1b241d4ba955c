//! Matrix products (issue 11): matmul of strided operands without copies, batched with
//! broadcast batch axes, and linear with an optional bias, checked against plain loops and
//! central differences.

use autograd_core::ops::{linear, matmul, sum};
use autograd_core::{
    grad, gradcheck, CpuCarrier, ErrorKind, GradOptions, GradcheckOptions, Layout, Shape, Stride,
    Tensor,
};
use autograd_tests::{t, vals};
use proptest::prelude::*;

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + 3) % 11) as f32 * scale - 0.4)
        .collect()
}

/// The plain-loop product of row-major `[m, k]` and `[k, n]` value lists.
fn reference(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                c[i * n + j] += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            }
        }
    }
    c.into_iter().map(|v| v as f32).collect()
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{got:?} vs {want:?}"
        );
    }
}

/// A `[rows, cols]` leaf whose storage is column-major (a transposed operand).
fn column_major(values_row_major: &[f32], rows: usize, cols: usize) -> Tensor {
    let mut storage = vec![0.0f32; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            storage[j * rows + i] = values_row_major[i * cols + j];
        }
    }
    let layout = Layout::new(Shape::from(&[rows, cols][..]), Stride::from(&[1, rows][..])).unwrap();
    Tensor::from_parts(CpuCarrier::from_vec(storage), layout, 0).unwrap()
}

proptest! {
    #[test]
    fn matmul_matches_loops_for_any_operand_layout(m in 1usize..6, k in 1usize..6, n in 1usize..6, ta in any::<bool>(), tb in any::<bool>()) {
        let (av, bv) = (seq(m * k, 0.3), seq(k * n, 0.2));
        let a = if ta { column_major(&av, m, k) } else { t(&av, &[m, k]) };
        let b = if tb { column_major(&bv, k, n) } else { t(&bv, &[k, n]) };
        let c = matmul(&a, &b).unwrap();
        prop_assert_eq!(c.dims(), vec![m, n]);
        close(&vals(&c), &reference(&av, &bv, m, k, n));
        gradcheck(|x| sum(&matmul(&x[0], &x[1])?), &[a.clone(), b.clone()], GradcheckOptions::default()).unwrap();
        let w = t(&seq(m * n, 0.5), &[m, n]);
        gradcheck(|x| sum(&autograd_core::ops::mul(&matmul(&x[0], &x[1])?, &w)?), &[a, b], GradcheckOptions::default()).unwrap();
    }
}

#[test]
fn batched_matmul_broadcasts_batch_axes_and_sums_their_gradients() {
    // a: [2, 3, 4] times b: [4, 5] broadcast over the batch
    let a = t(&seq(24, 0.1), &[2, 3, 4]);
    let b = t(&seq(20, 0.2), &[4, 5]);
    let c = matmul(&a, &b).unwrap();
    assert_eq!(c.dims(), vec![2, 3, 5]);
    let av = vals(&a);
    let bv = vals(&b);
    let mut want = reference(&av[..12], &bv, 3, 4, 5);
    want.extend(reference(&av[12..], &bv, 3, 4, 5));
    close(&vals(&c), &want);
    let w = t(&seq(30, 0.3), &[2, 3, 5]);
    gradcheck(
        |x| sum(&autograd_core::ops::mul(&matmul(&x[0], &x[1])?, &w)?),
        &[a, b],
        GradcheckOptions::default(),
    )
    .unwrap();
}

/// Central differences of `sum(linear(x, w, b) * g)` over `[x, w, b]`.
fn gradcheck_linear_with_bias(inputs: &[Tensor], g: &Tensor) {
    gradcheck(
        |v| {
            sum(&autograd_core::ops::mul(
                &linear(&v[0], &v[1], Some(&v[2]))?,
                g,
            )?)
        },
        inputs,
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn linear_matches_x_wt_plus_b_and_passes_gradcheck() {
    let x = t(&seq(6, 0.5), &[2, 3]);
    let w = t(&seq(12, 0.25), &[4, 3]);
    let b = t(&[0.5, -1.0, 2.0, 0.0], &[4]);
    let y = linear(&x, &w, Some(&b)).unwrap();
    assert_eq!(y.dims(), vec![2, 4]);
    let (xv, wv, bv) = (vals(&x), vals(&w), vals(&b));
    let want: Vec<f32> = (0..2)
        .flat_map(|i| {
            let (xv, wv, bv) = (&xv, &wv, &bv);
            (0..4).map(move |o| (0..3).map(|p| xv[i * 3 + p] * wv[o * 3 + p]).sum::<f32>() + bv[o])
        })
        .collect();
    close(&vals(&y), &want);
    let g = t(&seq(8, 0.7), &[2, 4]);
    gradcheck_linear_with_bias(&[x.clone(), w.clone(), b], &g);
    gradcheck(
        |v| sum(&autograd_core::ops::mul(&linear(&v[0], &v[1], None)?, &g)?),
        &[x, w],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn linear_over_leading_axes_and_parameter_only_grad() {
    let x = t(&seq(24, 0.1), &[2, 3, 4]);
    let w = t(&seq(8, 0.3), &[2, 4]);
    let y = linear(&x, &w, None).unwrap();
    assert_eq!(y.dims(), vec![2, 3, 2]);
    let loss = sum(&y).unwrap();
    let g = grad(&loss, &[&w], &Tensor::scalar(1.0), GradOptions::default()).unwrap();
    // d sum(x wᵀ)/dw[o, p] = the sum of x[..., p] over every row
    let xv = vals(&x);
    let col: Vec<f32> = (0..4)
        .map(|p| (0..6).map(|r| xv[r * 4 + p]).sum())
        .collect();
    let mut want = col.clone();
    want.extend(col);
    close(&vals(g[0].as_ref().unwrap()), &want);
}

#[test]
fn mismatched_shapes_are_value_errors() {
    let a = t(&seq(6, 1.0), &[2, 3]);
    let b = t(&seq(8, 1.0), &[2, 4]);
    assert_eq!(matmul(&a, &b).unwrap_err().kind(), ErrorKind::Value);
    let v = t(&seq(3, 1.0), &[3]);
    assert_eq!(matmul(&v, &a).unwrap_err().kind(), ErrorKind::Value);
    let w = t(&seq(8, 1.0), &[4, 2]);
    assert_eq!(linear(&a, &w, None).unwrap_err().kind(), ErrorKind::Value);
    let w = t(&seq(12, 1.0), &[4, 3]);
    let bad_bias = t(&seq(3, 1.0), &[3]);
    assert_eq!(
        linear(&a, &w, Some(&bad_bias)).unwrap_err().kind(),
        ErrorKind::Value
    );
    let c = t(&seq(24, 1.0), &[2, 3, 4]);
    let d = t(&seq(60, 1.0), &[3, 4, 5]);
    assert_eq!(matmul(&c, &d).unwrap_err().kind(), ErrorKind::Value);
}

#[test]
fn vector_operands_are_promoted_and_the_promoted_axis_removed() {
    let (av, vv, wv) = (seq(6, 0.3), seq(3, 0.2), seq(2, 0.5));
    let a = t(&av, &[2, 3]);
    let v = t(&vv, &[3]);
    let w = t(&wv, &[2]);
    let av_ = matmul(&a, &v).unwrap();
    assert_eq!(av_.dims(), [2]);
    close(&vals(&av_), &reference(&av, &vv, 2, 3, 1));
    let wa = matmul(&w, &a).unwrap();
    assert_eq!(wa.dims(), [3]);
    close(&vals(&wa), &reference(&wv, &av, 1, 2, 3));
    let dot = matmul(&v, &v).unwrap();
    assert!(dot.dims().is_empty(), "two vectors give a scalar");
    close(&vals(&dot), &[vv.iter().map(|x| x * x).sum()]);
    // a vector against a batch of matrices: [3] x [4, 3, 2] -> [4, 2]
    let batch = t(&seq(24, 0.1), &[4, 3, 2]);
    assert_eq!(matmul(&v, &batch).unwrap().dims(), [4, 2]);
    assert_eq!(
        matmul(&batch.transpose(1, 2).unwrap(), &v).unwrap().dims(),
        [4, 2]
    );
    for (x, y) in [(&a, &v), (&w, &a), (&v, &v)] {
        gradcheck(
            |p: &[Tensor]| matmul(&p[0], &p[1]),
            &[x.clone(), y.clone()],
            GradcheckOptions::default(),
        )
        .unwrap();
    }
    let s = Tensor::scalar(2.0f32);
    assert_eq!(matmul(&s, &v).unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(matmul(&a, &s).unwrap_err().kind(), ErrorKind::Value);
}

/// `values` as a tensor of the nested `shape`, compact.
fn nested(values: &[f32], shape: autograd_core::Shape) -> Tensor {
    let layout = autograd_core::Layout::compact_row_major(shape).unwrap();
    Tensor::from_parts(
        autograd_core::CpuCarrier::from_vec(values.to_vec()),
        layout,
        0,
    )
    .unwrap()
}

#[test]
fn nested_shape_operands_get_gradients_of_their_own_shape() {
    use autograd_core::shape;
    // x of shape ((2,3),4): six rows of four, its first mode nested
    let x = nested(&seq(24, 0.1), shape![[2, 3], 4]);
    let w = t(&seq(20, 0.2), &[5, 4]);
    let b = t(&seq(5, 0.3), &[5]);
    let g = t(&seq(30, 0.05), &[6, 5]);
    let loss =
        sum(&autograd_core::ops::mul(&linear(&x, &w, Some(&b)).unwrap(), &g).unwrap()).unwrap();
    loss.backward().unwrap();
    let gx = x.grad().unwrap().unwrap();
    assert_eq!(gx.shape(), x.shape());
    // d/dx sum(g * (x wᵀ + b)) = g w, row by row in logical order
    let (gv, wv) = (vals(&g), vals(&w));
    let want: Vec<f32> = (0..6)
        .flat_map(|r| {
            let (gv, wv) = (&gv, &wv);
            (0..4).map(move |p| (0..5).map(|o| gv[r * 5 + o] * wv[o * 4 + p]).sum::<f32>())
        })
        .collect();
    close(&vals(&gx), &want);
    gradcheck_linear_with_bias(&[x, w, b], &g);
    // a nested batch mode of a batched product
    let a = nested(&seq(24, 0.1), shape![[2, 1], 3, 4]);
    let c = t(&seq(24, 0.3), &[2, 4, 3]);
    gradcheck(
        |v| sum(&matmul(&v[0], &v[1])?),
        &[a, c],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn batched_grad_through_linear_and_matmul_takes_nested_operands() {
    let x = Tensor::from_vec(
        (0..12).map(|i| i as f32 * 0.1).collect(),
        autograd_core::shape![[2, 2], 3],
    )
    .unwrap();
    let w = t(&[1.0, 0.5, -1.0, 2.0, 0.0, 1.0], &[2, 3]);
    let y = linear(&x, &w, None).unwrap();
    let k = 2;
    let basis: Vec<f32> = (0..k * 8).map(|i| (i % 5) as f32 - 2.0).collect();
    let shape = autograd_core::batch::batched_shape(y.shape(), k).unwrap();
    let cot = Tensor::from_vec(basis.clone(), shape).unwrap();
    let keep = GradOptions {
        batched: true,
        retain_graph: true,
    };
    let got = grad(&y, &[&x, &w], &cot, keep).unwrap();
    // each batch index agrees with one unbatched call
    for (i, row) in basis.chunks(8).enumerate() {
        let one = grad(
            &y,
            &[&x, &w],
            &y.f32_like(row.to_vec()).unwrap(),
            GradOptions {
                retain_graph: true,
                ..GradOptions::default()
            },
        )
        .unwrap();
        for (g, single) in got.iter().zip(&one) {
            let (g, single) = (vals(g.as_ref().unwrap()), vals(single.as_ref().unwrap()));
            let n = single.len();
            assert_eq!(&g[i * n..(i + 1) * n], &single[..], "batch index {i}");
        }
    }
    assert_eq!(
        got[0].as_ref().unwrap().shape(),
        &autograd_core::batch::batched_shape(x.shape(), k).unwrap()
    );
    // matmul with a nested right operand
    let b = Tensor::from_vec(
        vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
        autograd_core::shape![[3, 1], 2],
    )
    .unwrap();
    let a = t(&[1.0, 0.0, -1.0, 2.0, 1.0, 0.5], &[2, 3]);
    let z = matmul(&a, &b).unwrap();
    let cot = Tensor::from_vec(
        vec![1.0f32; 8],
        autograd_core::batch::batched_shape(z.shape(), 2).unwrap(),
    )
    .unwrap();
    let g = grad(&z, &[&b], &cot, keep).unwrap();
    assert_eq!(
        g[0].as_ref().unwrap().shape(),
        &autograd_core::batch::batched_shape(b.shape(), 2).unwrap()
    );
}

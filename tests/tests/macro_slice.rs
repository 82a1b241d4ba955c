//! `#[differentiable]` ops with a variable number of tensor inputs (`&[Tensor]`, `&[&Tensor]`):
//! every element is a saved input, in order, and the VJP returns one gradient per element.

use autograd_core::{differentiable, ErrorKind, Result, Tensor};
use autograd_tests::{grad_vals, t, vals};

fn values(x: &Tensor) -> Result<Vec<f32>> {
    x.values::<f32>()
}

/// Concatenates 1-D tensors.
#[differentiable]
fn concat(xs: &[Tensor]) -> Result<Tensor> {
    // the cotangent splits back into the pieces
    fn vjp(g: &Tensor, xs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let g = values(g)?;
        let mut at = 0;
        let mut out = Vec::with_capacity(xs.len());
        for x in xs {
            let n = x.size();
            out.push(Some(Tensor::from_vec(g[at..at + n].to_vec(), vec![n])?));
            at += n;
        }
        Ok(out)
    }
    let mut v = Vec::new();
    for x in xs {
        v.extend(values(x)?);
    }
    let n = v.len();
    Tensor::from_vec(v, vec![n])
}

/// `scale * (w0 x0 + w1 x1 + ...)` over same-shape tensors, with a fixed input before and
/// after the slice and weights captured by value.
#[differentiable]
fn mix(scale: &Tensor, xs: &[&Tensor], bias: &Tensor, w: Vec<f32>) -> Result<Tensor> {
    // d/dscale = sum_i w_i x_i . g ; d/dx_i = scale w_i g ; d/dbias = g
    fn vjp(
        g: &Tensor,
        scale: &Tensor,
        xs: &[&Tensor],
        w: &[f32],
    ) -> Result<(Option<Tensor>, Vec<Option<Tensor>>, Option<Tensor>)> {
        let s = values(scale)?[0];
        let gv = values(g)?;
        let mut ds = 0.0;
        let mut dxs = Vec::new();
        for (x, wi) in xs.iter().zip(w) {
            let xv = values(x)?;
            ds += xv.iter().zip(&gv).map(|(x, g)| wi * x * g).sum::<f32>();
            let d = gv.iter().map(|g| s * wi * g).collect();
            dxs.push(Some(Tensor::from_vec(d, g.shape().clone())?));
        }
        Ok((
            Some(Tensor::from_vec(vec![ds], vec![1usize])?),
            dxs,
            Some(g.clone()),
        ))
    }
    let s = values(scale)?[0];
    let mut acc = values(bias)?;
    for (x, wi) in xs.iter().zip(&w) {
        for (a, x) in acc.iter_mut().zip(values(x)?) {
            *a += s * wi * x;
        }
    }
    Tensor::from_vec(acc, bias.shape().clone())
}

/// Returns one gradient too few for its slice.
#[differentiable]
fn short(xs: &[Tensor]) -> Result<Tensor> {
    fn vjp(g: &Tensor, xs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(xs.iter().skip(1).map(|_| Some(g.clone())).collect())
    }
    let mut acc = values(&xs[0])?;
    for x in &xs[1..] {
        for (a, x) in acc.iter_mut().zip(values(x)?) {
            *a += x;
        }
    }
    Tensor::from_vec(acc, xs[0].shape().clone())
}

#[test]
fn every_slice_element_is_a_saved_input_in_order() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[3.0], &[1]);
    let y = concat(&[a.clone(), b.clone(), a.clone()]).unwrap();
    assert_eq!(vals(&y), [1.0, 2.0, 3.0, 1.0, 2.0]);
    let node = y.autograd_ctx().unwrap();
    let inputs = node.inputs();
    assert_eq!(inputs.len(), 3);
    assert!(inputs[0].same_tensor(&a) && inputs[1].same_tensor(&b) && inputs[2].same_tensor(&a));
    assert_eq!(node.input_versions().len(), 3);
    assert_eq!(node.input_name(1), Some("xs[1]"));
    assert_eq!(node.input_name(3), None);

    y.backward_with(Some(&t(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5])), false)
        .unwrap();
    assert_eq!(grad_vals(&a), Some(vec![5.0, 7.0]));
    assert_eq!(grad_vals(&b), Some(vec![3.0]));
}

#[test]
fn fixed_inputs_around_a_slice_of_references() {
    let scale = t(&[2.0], &[1]);
    let x0 = t(&[1.0, 2.0], &[2]);
    let x1 = t(&[3.0, 4.0], &[2]);
    let bias = t(&[0.5, 0.5], &[2]);
    let y = mix(&scale, &[&x0, &x1], &bias, vec![1.0, 10.0]).unwrap();
    assert_eq!(vals(&y), [62.5, 84.5]);
    let node = y.autograd_ctx().unwrap();
    let inputs = node.inputs();
    assert_eq!(inputs.len(), 4);
    for (saved, given) in inputs.iter().zip([&scale, &x0, &x1, &bias]) {
        assert!(saved.same_tensor(given));
    }
    let names: Vec<_> = (0..4)
        .map(|i| node.input_name(i).unwrap().to_owned())
        .collect();
    assert_eq!(names, ["scale", "xs[0]", "xs[1]", "bias"]);

    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&scale), Some(vec![1.0 + 2.0 + 30.0 + 40.0]));
    assert_eq!(grad_vals(&x0), Some(vec![2.0, 2.0]));
    assert_eq!(grad_vals(&x1), Some(vec![20.0, 20.0]));
    assert_eq!(grad_vals(&bias), Some(vec![1.0, 1.0]));
}

#[test]
fn an_empty_slice_records_nothing() {
    let y = concat(&[]).unwrap();
    assert_eq!(y.size(), 0);
    assert!(y.autograd_ctx().is_none());
}

#[test]
fn a_wrong_count_for_a_slice_is_a_value_error() {
    let a = t(&[1.0], &[1]);
    let b = t(&[2.0], &[1]);
    let y = short(&[a.clone(), b]).unwrap();
    let e = y.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("slice `xs`"), "{e}");
    assert_eq!(grad_vals(&a), None);
}

#[test]
fn an_error_names_the_slice_element() {
    let a = t(&[1.0], &[1]);
    let b = t(&[2.0], &[1]);
    let y = concat(&[a, b.clone()]).unwrap();
    b.set(&[0], 9.0f32).unwrap();
    let e = y
        .backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap_err();
    assert!(e.message().contains("input 1 (`xs[1]`) of concat"), "{e}");
}

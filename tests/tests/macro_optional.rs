//! Optional tensor inputs (`bias: Option<&Tensor>`): saved as a positional input only when
//! present, so `inputs()` and the gradients skip an absent one; the VJP takes it as an
//! `Option` and returns an `Option<Tensor>` for it, dropped when the input is absent.

use autograd_core::{differentiable, gradcheck, GradcheckOptions, Result, Tensor};
use autograd_tests::{grad_vals, t, vals, zip};

/// `x * w + bias` elementwise, with an optional bias.
#[differentiable]
fn affine(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    // d = g w dx + g x dw + g dbias
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let db = bias.map(|_| g.clone());
        Ok((
            Some(zip(g, w, |g, w| g * w)?),
            Some(zip(g, x, |g, x| g * x)?),
            db,
        ))
    }
    let xw = zip(x, w, |x, w| x * w)?;
    match bias {
        Some(b) => zip(&xw, b, |v, b| v + b),
        None => Ok(xw),
    }
}

/// `x + bias` with an owned optional bias, whose VJP always answers for the bias (dropped when
/// it is absent).
#[differentiable]
fn shift(x: &Tensor, bias: Option<Tensor>) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> (Option<Tensor>, Option<Tensor>) {
        (Some(g.clone()), Some(g.clone()))
    }
    match bias {
        Some(b) => zip(x, &b, |x, b| x + b),
        None => x.f32_like(x.values::<f32>()?),
    }
}

/// `scale * sum(xs) + bias`: an optional input between fixed and slice inputs, so every
/// saved position after it depends on whether it is present.
#[differentiable]
fn scaled_sum(scale: &Tensor, bias: Option<&Tensor>, xs: &[Tensor]) -> Result<Tensor> {
    fn vjp(
        g: &Tensor,
        scale: &Tensor,
        xs: &[Tensor],
    ) -> Result<(Option<Tensor>, Option<Tensor>, Vec<Option<Tensor>>)> {
        let mut total = scale.f32_full_like(0.0)?;
        for x in xs {
            total = zip(&total, x, |a, b| a + b)?;
        }
        let dscale = zip(g, &total, |g, s| g * s)?;
        let dx = zip(g, scale, |g, s| g * s)?;
        Ok((
            Some(dscale),
            Some(g.clone()),
            xs.iter().map(|_| Some(dx.clone())).collect(),
        ))
    }
    let mut total = scale.f32_full_like(0.0)?;
    for x in xs {
        total = zip(&total, x, |a, b| a + b)?;
    }
    let out = zip(scale, &total, |s, v| s * v)?;
    match bias {
        Some(b) => zip(&out, b, |v, b| v + b),
        None => Ok(out),
    }
}

fn check(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    let options = GradcheckOptions {
        atol: 1e-2,
        rtol: 1e-2,
        ..GradcheckOptions::default()
    };
    gradcheck(f, inputs, options).expect("the vjp agrees with central differences");
}

#[test]
fn a_present_optional_input_is_saved_and_gets_its_gradient() {
    let (x, w, b) = (
        t(&[1.0, 2.0], &[2]),
        t(&[3.0, 4.0], &[2]),
        t(&[0.5, 0.5], &[2]),
    );
    let y = affine(&x, &w, Some(&b)).unwrap();
    assert_eq!(vals(&y), [3.5, 8.5]);
    let node = y.autograd_ctx().unwrap();
    let inputs = node.inputs();
    assert_eq!(inputs.len(), 3);
    assert!(inputs[2].same_tensor(&b));
    assert_eq!(node.input_name(2), Some("bias"));
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 4.0]));
    assert_eq!(grad_vals(&w), Some(vec![1.0, 2.0]));
    assert_eq!(grad_vals(&b), Some(vec![1.0, 1.0]));
    check(|v| affine(&v[0], &v[1], Some(&v[2])), &[x, w, b]);
}

#[test]
fn an_absent_optional_input_is_not_saved_and_gets_no_gradient() {
    let (x, w) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let y = affine(&x, &w, None).unwrap();
    let node = y.autograd_ctx().unwrap();
    assert_eq!(node.inputs().len(), 2);
    assert_eq!(node.input_versions().len(), 2);
    assert_eq!(node.input_name(2), None);
    let grads = node.backward(&t(&[1.0, 1.0], &[2])).unwrap();
    assert_eq!(grads.len(), 2, "one gradient per saved input");
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 4.0]));
    check(|v| affine(&v[0], &v[1], None), &[x, w]);
}

#[test]
fn an_owned_optional_input_is_saved_only_when_present() {
    let b = t(&[0.5, 0.5], &[2]);
    let y = shift(&t(&[1.0, 2.0], &[2]), Some(b.clone())).unwrap();
    assert!(y.autograd_ctx().unwrap().inputs()[1].same_tensor(&b));
    let z = shift(&t(&[1.0], &[1]), None).unwrap();
    let node = z.autograd_ctx().unwrap();
    assert_eq!(node.inputs().len(), 1);
    // the VJP answered for the absent bias too: that answer is dropped
    assert_eq!(node.backward(&t(&[1.0], &[1])).unwrap().len(), 1);
    check(
        |v| shift(&v[0], Some(v[1].clone())),
        &[t(&[1.0, 2.0], &[2]), b],
    );
}

#[test]
fn positions_after_an_optional_input_follow_its_presence() {
    let s = t(&[2.0], &[1]);
    let xs = [t(&[1.0], &[1]), t(&[3.0], &[1])];
    let b = t(&[0.25], &[1]);

    let with = scaled_sum(&s, Some(&b), &xs).unwrap();
    let node = with.autograd_ctx().unwrap();
    let names: Vec<_> = (0..4).map(|i| node.input_name(i)).collect();
    assert_eq!(
        names,
        [Some("scale"), Some("bias"), Some("xs[0]"), Some("xs[1]")]
    );
    with.backward().unwrap();
    assert_eq!(grad_vals(&s), Some(vec![4.0]));
    assert_eq!(grad_vals(&b), Some(vec![1.0]));
    assert_eq!(grad_vals(&xs[1]), Some(vec![2.0]));

    let without = scaled_sum(&s, None, &xs).unwrap();
    let node = without.autograd_ctx().unwrap();
    let names: Vec<_> = (0..4).map(|i| node.input_name(i)).collect();
    assert_eq!(names, [Some("scale"), Some("xs[0]"), Some("xs[1]"), None]);
    assert_eq!(node.backward(&t(&[1.0], &[1])).unwrap().len(), 3);

    check(
        |v| scaled_sum(&v[0], Some(&v[1]), &v[2..]),
        &[s.clone(), b, xs[0].clone(), xs[1].clone()],
    );
    check(
        |v| scaled_sum(&v[0], None, &v[1..]),
        &[s, xs[0].clone(), xs[1].clone()],
    );
}

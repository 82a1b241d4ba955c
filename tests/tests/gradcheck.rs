//! `gradcheck` itself: it fails what is wrong (non-finite values included), refuses checks it
//! cannot make, and leaves the caller's state as it found it (inputs restored bit for bit,
//! also after a panic; no graph released).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use autograd_core::ops::{mul, mul_scalar, sum, tanh};
use autograd_core::{custom_gradient, gradcheck, no_grad, ErrorKind, GradcheckOptions, Tensor};
use autograd_tests::{grad_vals, t, vals};

const OPTS: GradcheckOptions = GradcheckOptions {
    eps: 5e-3,
    atol: 1e-2,
    rtol: 1e-2,
    seed: 7,
};

/// `x * 2` whose VJP is `g * factor` (right for 2).
fn doubled_with_vjp(x: &Tensor, factor: f32) -> autograd_core::Result<Tensor> {
    let y = {
        let _off = no_grad();
        mul_scalar(x, 2.0)?
    };
    custom_gradient(y, &[x], move |g| Ok(vec![Some(mul_scalar(g, factor)?)]))
}

#[test]
fn a_vjp_giving_nan_fails_the_check() {
    let x = t(&[0.5, -1.0], &[2]);
    gradcheck(
        |xs| doubled_with_vjp(&xs[0], 2.0),
        std::slice::from_ref(&x),
        OPTS,
    )
    .unwrap();
    let e = gradcheck(|xs| doubled_with_vjp(&xs[0], f32::NAN), &[x], OPTS).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    assert!(e.to_string().contains("gradcheck failed"), "{e}");
}

#[test]
fn the_caller_s_graph_survives_a_check_that_reaches_it() {
    let w = t(&[0.3, 0.4], &[2]);
    let h = tanh(&w).unwrap();
    let hh = h.clone();
    gradcheck(move |xs| mul(&xs[0], &hh), &[t(&[1.0, 2.0], &[2])], OPTS).unwrap();
    sum(&h).unwrap().backward().unwrap();
    assert!(
        grad_vals(&w).is_some(),
        "h's graph was not released by the check"
    );
}

#[test]
fn a_panicking_function_leaves_the_inputs_as_they_were() {
    let x = t(&[1.0, 3.0], &[2]);
    let calls = AtomicUsize::new(0);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        gradcheck(
            |xs| {
                // the first call records the graph; the second is the first perturbed one
                assert!(
                    calls.fetch_add(1, Ordering::SeqCst) != 1,
                    "f fails mid-check"
                );
                Ok(xs[0].clone())
            },
            std::slice::from_ref(&x),
            OPTS,
        )
    }));
    assert!(outcome.is_err());
    assert_eq!(vals(&x), vec![1.0, 3.0]);
}

#[test]
fn inputs_sharing_storage_bad_options_and_no_grad_are_refused_before_perturbing() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = a.detach();
    let e = gradcheck(|xs| mul(&xs[0], &xs[1]), &[a.clone(), b], OPTS).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    assert!(e.to_string().contains("share storage"), "{e}");
    // the same tensor twice is fine (its gradient is its total either way), and so are two
    // views of one carrier that share no slot
    gradcheck(|xs| mul(&xs[0], &xs[1]), &[a.clone(), a.clone()], OPTS).unwrap();
    let whole = t(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let left = whole.narrow(0, 0, 2).unwrap().detach();
    let right = whole.narrow(0, 2, 2).unwrap().detach();
    gradcheck(|xs| mul(&xs[0], &xs[1]), &[left, right], OPTS).unwrap();
    let version = a.carrier().unwrap().version();
    for bad in [
        GradcheckOptions { eps: 0.0, ..OPTS },
        GradcheckOptions {
            eps: f64::NAN,
            ..OPTS
        },
        GradcheckOptions { atol: -1.0, ..OPTS },
        GradcheckOptions {
            rtol: f64::INFINITY,
            ..OPTS
        },
    ] {
        let e = gradcheck(|xs| Ok(xs[0].clone()), std::slice::from_ref(&a), bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    }
    let e = {
        let _off = no_grad();
        gradcheck(|xs| mul(&xs[0], &xs[0]), std::slice::from_ref(&a), OPTS).unwrap_err()
    };
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert_eq!(
        a.carrier().unwrap().version(),
        version,
        "nothing was perturbed"
    );
}

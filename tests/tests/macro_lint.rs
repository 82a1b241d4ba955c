//! The expansion is lint-clean in a user crate: this file denies every warning (and clippy's
//! pedantic group warns through the workspace lints, denied by `clippy -D warnings`) while it
//! uses the attribute's whole surface: generics with bounds and where-clauses, const generics,
//! lifetimes, `impl Trait` and `mut` parameters, `options`, residuals of both kinds, items in
//! the forward body shared with the VJP, a `-> Tensor` forward, and every visibility.
#![deny(warnings, missing_docs, unused, nonstandard_style, rust_2018_idioms)]

use autograd_core::{differentiable, Result, Tensor};
use autograd_tests::{grad_vals, t, vals};

/// Execution options a forward body may read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    /// Ignored by the kernels below.
    pub threads: usize,
}

/// `factor * x` for a generic factor, with a where-clause and an `impl Trait` parameter the
/// VJP does not read.
#[differentiable]
#[must_use = "the result holds the node"]
#[inline]
pub fn scaled<F>(x: &Tensor, factor: F, label: impl AsRef<str>, options: Opts) -> Result<Tensor>
where
    F: Into<f32> + Copy + Send + Sync + 'static,
{
    use autograd_core::Tensor as T;

    fn kernel(x: &T, c: f32) -> Result<T> {
        x.f32_like(x.values::<f32>()?.iter().map(|v| v * c).collect())
    }

    // d(c x) = c g dx
    fn vjp(g: &Tensor, factor: F) -> Result<Option<Tensor>> {
        Ok(Some(kernel(g, factor.into())?))
    }

    let _ = (label.as_ref(), options.threads);
    kernel(x, factor.into())
}

/// Sums `N` leading elements of `x`, scaled by a `mut` parameter: an infallible forward.
#[differentiable]
pub(crate) fn head_sum<const N: usize>(x: &Tensor, mut k: f32) -> Tensor {
    #[residual]
    let len: usize = x.size();
    fn vjp(g: &Tensor, len: usize, k: f32) -> Result<Option<Tensor>> {
        let g0 = g.values::<f32>()?[0];
        let v = (0..len).map(|i| if i < N { g0 * k } else { 0.0 }).collect();
        Ok(Some(Tensor::from_vec(v, vec![len])?))
    }
    k *= 1.0;
    let v = x.values::<f32>().unwrap_or_default();
    let s: f32 = v.iter().take(N).sum();
    Tensor::from_vec(vec![s * k], vec![1usize]).expect("one element")
}

/// Picks `x` or `y` by a borrowed flag with an explicit lifetime; the VJP takes the flag by value.
#[differentiable]
fn pick<'a>(x: &'a Tensor, y: &'a Tensor, first: &'a bool) -> Result<Tensor> {
    // an infallible vjp returns its gradients without `Result`
    fn vjp(g: &Tensor, first: bool) -> (Option<Tensor>, Option<Tensor>) {
        if first {
            (Some(g.clone()), None)
        } else {
            (None, Some(g.clone()))
        }
    }
    let chosen = if *first { x } else { y };
    chosen.f32_like(chosen.values::<f32>()?)
}

#[test]
fn every_feature_expands_without_warnings() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = scaled(&x, 2.0f32, "double", Opts::default()).unwrap();
    assert_eq!(vals(&y), [2.0, 4.0, 6.0]);
    y.backward_with(Some(&t(&[1.0, 1.0, 1.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 2.0, 2.0]));

    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let s = head_sum::<2>(&x, 3.0).unwrap();
    assert_eq!(vals(&s), [9.0]);
    s.backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 3.0, 0.0]));

    let (a, b) = (t(&[1.0], &[1]), t(&[2.0], &[1]));
    let p = pick(&a, &b, &false).unwrap();
    assert_eq!(vals(&p), [2.0]);
    p.backward().unwrap();
    assert_eq!((grad_vals(&a), grad_vals(&b)), (None, Some(vec![1.0])));
}

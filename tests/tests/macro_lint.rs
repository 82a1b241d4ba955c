//! The expansion is lint-clean in a user crate: this file denies every warning (and clippy's
//! pedantic group warns through the workspace lints, denied by `clippy -D warnings`) while it
//! uses the attribute's whole surface: generics with bounds and where-clauses, const generics,
//! lifetimes, `impl Trait` and `mut` parameters, `options`, residuals of both kinds, items in
//! the forward body shared with the VJP, a `-> Tensor` forward, every visibility, a tensor input
//! only the VJP reads, and seven parameters plus residuals (more arguments for the generated
//! forward than clippy's default limit). Clippy runs on this crate with `-D warnings` in CI, and
//! the crate-level `deny` below makes every pedantic lint an error here even where the
//! workspace allows it, as in a user crate that opts into the whole group.
#![deny(warnings, missing_docs, unused, nonstandard_style, rust_2018_idioms)]
#![deny(clippy::all, clippy::pedantic)]

use autograd_core::{differentiable, Result, Tensor};
use autograd_tests::{grad_vals, t, vals};

/// Execution options a forward body may read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    /// Ignored by the kernels below.
    pub threads: usize,
}

// Holds no tensor: every non-tensor parameter of a #[differentiable] function is `Captured`.
impl autograd_core::Captured for Opts {}

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

/// Sums `N` leading elements of `x`, scaled by a `mut` parameter the forward body changes (the
/// VJP reads the changed value as a residual): an infallible forward.
#[differentiable]
pub(crate) fn head_sum<const N: usize>(x: &Tensor, mut k: f32) -> Tensor {
    k *= 1.0;
    #[residual]
    let len: usize = x.size();
    #[residual]
    let scale: f32 = k;
    fn vjp(g: &Tensor, len: usize, scale: f32) -> Result<Option<Tensor>> {
        let g0 = g.values::<f32>()?[0];
        let v = (0..len)
            .map(|i| if i < N { g0 * scale } else { 0.0 })
            .collect();
        Ok(Some(Tensor::from_vec(v, vec![len])?))
    }
    let v = x.values::<f32>().unwrap_or_default();
    let s: f32 = v.iter().take(N).sum();
    Tensor::from_vec(vec![s * scale], vec![1usize]).expect("one element")
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

/// `x` unchanged; its gradient is scaled by `w`, which only the VJP reads.
#[differentiable]
pub fn grad_scale(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    // d out = g w dx; `w` is a tensor input held constant (no gradient)
    fn vjp(g: &Tensor, w: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let v = g.values::<f32>()?;
        let s = w.values::<f32>()?;
        let scaled = v.iter().zip(&s).map(|(g, w)| g * w).collect();
        Ok((Some(g.f32_like(scaled)?), None))
    }
    x.f32_like(x.values::<f32>()?)
}

/// `k (a b + c d + e f)` elementwise: seven parameters and two residuals.
#[differentiable]
#[allow(clippy::many_single_char_names)] // the user's names, as in any function
pub fn three_products(
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    d: &Tensor,
    e: Tensor,
    f: Tensor,
    k: f32,
) -> Result<Tensor> {
    fn prod(x: &Tensor, y: &Tensor) -> Result<Vec<f32>> {
        let (x, y) = (x.values::<f32>()?, y.values::<f32>()?);
        Ok(x.iter().zip(&y).map(|(x, y)| x * y).collect())
    }
    #[residual]
    let kg = a.f32_full_like(k)?;
    #[residual]
    let n: usize = a.size();
    // d = k g (b da + a db + d dc + c dd + f de + e df)
    fn vjp(
        g: &Tensor,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        d: &Tensor,
        e: &Tensor,
        f: &Tensor,
        kg: &Tensor,
        n: usize,
    ) -> Result<[Option<Tensor>; 6]> {
        let gk = g.f32_like(prod(g, kg)?)?;
        let part = |t: &Tensor| -> Result<Option<Tensor>> {
            let v = prod(&gk, t)?;
            debug_assert_eq!(v.len(), n);
            Ok(Some(g.f32_like(v)?))
        };
        Ok([part(b)?, part(a)?, part(d)?, part(c)?, part(f)?, part(e)?])
    }
    let (ab, cd, ef) = (prod(a, b)?, prod(c, d)?, prod(&e, &f)?);
    let sum = ab
        .iter()
        .zip(&cd)
        .zip(&ef)
        .map(|((x, y), z)| k * (x + y + z));
    a.f32_like(sum.collect())
}

#[test]
fn generic_op_with_options_and_shared_items() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let y = scaled(&x, 2.0f32, "double", Opts::default()).unwrap();
    assert_eq!(vals(&y), [2.0, 4.0, 6.0]);
    y.backward_with(Some(&t(&[1.0, 1.0, 1.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 2.0, 2.0]));
}

#[test]
fn infallible_forward_with_const_generic_and_mut_parameter() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let s = head_sum::<2>(&x, 3.0).unwrap();
    assert_eq!(vals(&s), [9.0]);
    s.backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 3.0, 0.0]));
}

#[test]
fn borrowed_flag_with_a_lifetime() {
    let (a, b) = (t(&[1.0], &[1]), t(&[2.0], &[1]));
    let p = pick(&a, &b, &false).unwrap();
    assert_eq!(vals(&p), [2.0]);
    p.backward().unwrap();
    assert_eq!((grad_vals(&a), grad_vals(&b)), (None, Some(vec![1.0])));
}

#[test]
fn tensor_input_only_the_vjp_reads() {
    let (input, weight) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let out = grad_scale(&input, &weight).unwrap();
    out.backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap();
    assert_eq!(
        (grad_vals(&input), grad_vals(&weight)),
        (Some(vec![3.0, 4.0]), None)
    );
}

#[test]
fn seven_parameters_and_residuals() {
    let ins: Vec<Tensor> = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .map(|&v| t(&[v], &[1]))
        .collect();
    let out = three_products(
        &ins[0],
        &ins[1],
        &ins[2],
        &ins[3],
        ins[4].clone(),
        ins[5].clone(),
        2.0,
    )
    .unwrap();
    assert_eq!(vals(&out), [2.0 * (2.0 + 12.0 + 30.0)]);
    out.backward().unwrap();
    let grads: Vec<_> = ins.iter().map(|x| grad_vals(x).unwrap()[0]).collect();
    assert_eq!(grads, [4.0, 2.0, 8.0, 6.0, 12.0, 10.0]);
}

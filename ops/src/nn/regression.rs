//! The regression losses with PyTorch's options: `l1_loss`, `mse_loss_with`,
//! `smooth_l1_loss` (beta) and `huber_loss` (delta), each elementwise over an input and a
//! target of equal extents and folded by a [`Reduction`].

use autograd_core::{differentiable, ensure, Result, Tensor};

use super::elementwise_loss::{check_pair, pair_vjp, per_element};
use super::reduction::{reduce_losses, Reduction};

/// `sign(d)` with `sign(0) = 0`, the subgradient PyTorch takes for `|d|`.
fn sign(d: f32) -> f32 {
    if d > 0.0 {
        1.0
    } else if d < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// The absolute error `|input - target|` per element, reduced by `reduction`, as PyTorch's
/// `l1_loss`. The gradient at a zero difference is 0, as PyTorch's. Both operands are
/// Float32 (`Error::Type`) of equal extents (`Error::Value`); both get gradients.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{l1_loss, Reduction};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![0.0f32, 4.0], shape![2]).unwrap();
/// assert_eq!(l1_loss(&a, &b, Reduction::Sum).unwrap().values::<f32>().unwrap(), [3.0]);
/// ```
#[differentiable]
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    // d|x - y| = sign(x - y) (dx - dy)
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        reduction: Reduction,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let want = (needs.input(0), needs.input(1));
        pair_vjp(
            g,
            (input, target),
            (reduction, input.size() as f64),
            want,
            |x, y| {
                let s = sign(x - y);
                (s, -s)
            },
        )
    }
    let dims = check_pair("l1_loss", input, target)?;
    let per = per_element(input, target, |x, y| (x - y).abs())?;
    reduce_losses(input, &dims, &per, reduction, per.len() as f64)
}

/// The squared error `(input - target)^2` per element, reduced by `reduction`, as PyTorch's
/// `mse_loss` with its `reduction=` ([`mse_loss`](crate::mse_loss) is this with the mean).
/// Errors as [`l1_loss`].
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{mse_loss_with, Reduction};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![0.0f32, 4.0], shape![2]).unwrap();
/// let none = mse_loss_with(&a, &b, Reduction::None).unwrap();
/// assert_eq!(none.values::<f32>().unwrap(), [1.0, 4.0]);
/// ```
#[differentiable]
pub fn mse_loss_with(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    // d (x - y)^2 = 2 (x - y) (dx - dy)
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        reduction: Reduction,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let want = (needs.input(0), needs.input(1));
        pair_vjp(
            g,
            (input, target),
            (reduction, input.size() as f64),
            want,
            |x, y| {
                let d = 2.0 * (x - y);
                (d, -d)
            },
        )
    }
    let dims = check_pair("mse_loss", input, target)?;
    let per = per_element(input, target, |x, y| (x - y) * (x - y))?;
    reduce_losses(input, &dims, &per, reduction, per.len() as f64)
}

/// PyTorch's `smooth_l1_loss`: per element, with `z = |input - target|`, `0.5 z^2 / beta`
/// where `z < beta` and `z - 0.5 beta` elsewhere, reduced by `reduction`; `beta = 0` is
/// [`l1_loss`]. A negative or non-finite `beta` is `Error::Value`; otherwise errors as
/// [`l1_loss`].
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{smooth_l1_loss, Reduction};
/// let a = Tensor::from_vec(vec![0.5f32, 3.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![0.0f32, 0.0], shape![2]).unwrap();
/// let l = smooth_l1_loss(&a, &b, 1.0, Reduction::None).unwrap();
/// assert_eq!(l.values::<f32>().unwrap(), [0.125, 2.5]);
/// ```
#[differentiable]
pub fn smooth_l1_loss(
    input: &Tensor,
    target: &Tensor,
    beta: f32,
    reduction: Reduction,
) -> Result<Tensor> {
    // d/dx: (x - y) / beta inside the quadratic zone, sign(x - y) outside
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        beta: f32,
        reduction: Reduction,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let want = (needs.input(0), needs.input(1));
        pair_vjp(
            g,
            (input, target),
            (reduction, input.size() as f64),
            want,
            |x, y| {
                let d = x - y;
                let s = if d.abs() < beta { d / beta } else { sign(d) };
                (s, -s)
            },
        )
    }
    ensure!(
        beta >= 0.0 && beta.is_finite(),
        Value,
        "smooth_l1_loss: beta must be finite and non-negative, got {beta}"
    );
    let dims = check_pair("smooth_l1_loss", input, target)?;
    let per = per_element(input, target, |x, y| {
        let z = (x - y).abs();
        if z < beta {
            0.5 * z * z / beta
        } else {
            z - 0.5 * beta
        }
    })?;
    reduce_losses(input, &dims, &per, reduction, per.len() as f64)
}

/// PyTorch's `huber_loss`: per element, with `z = |input - target|`, `0.5 z^2` where
/// `z < delta` and `delta (z - 0.5 delta)` elsewhere, reduced by `reduction` (it is
/// `delta` times [`smooth_l1_loss`] with `beta = delta`). A `delta` that is not positive and
/// finite is `Error::Value`; otherwise errors as [`l1_loss`].
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{huber_loss, Reduction};
/// let a = Tensor::from_vec(vec![0.5f32, 3.0], shape![2]).unwrap();
/// let b = Tensor::from_vec(vec![0.0f32, 0.0], shape![2]).unwrap();
/// let l = huber_loss(&a, &b, 2.0, Reduction::None).unwrap();
/// assert_eq!(l.values::<f32>().unwrap(), [0.125, 4.0]);
/// ```
#[differentiable]
pub fn huber_loss(
    input: &Tensor,
    target: &Tensor,
    delta: f32,
    reduction: Reduction,
) -> Result<Tensor> {
    // d/dx: x - y clamped to [-delta, delta]
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        delta: f32,
        reduction: Reduction,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let want = (needs.input(0), needs.input(1));
        pair_vjp(
            g,
            (input, target),
            (reduction, input.size() as f64),
            want,
            |x, y| {
                let d = (x - y).clamp(-delta, delta);
                (d, -d)
            },
        )
    }
    ensure!(
        delta > 0.0 && delta.is_finite(),
        Value,
        "huber_loss: delta must be positive and finite, got {delta}"
    );
    let dims = check_pair("huber_loss", input, target)?;
    let per = per_element(input, target, |x, y| {
        let z = (x - y).abs();
        if z < delta {
            0.5 * z * z
        } else {
            delta * (z - 0.5 * delta)
        }
    })?;
    reduce_losses(input, &dims, &per, reduction, per.len() as f64)
}

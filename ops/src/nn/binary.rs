//! The binary classification losses: `binary_cross_entropy` over probabilities and the
//! numerically stable `binary_cross_entropy_with_logits`, with PyTorch's optional `weight`
//! (and `pos_weight`), each broadcast to the input through the differentiable
//! [`broadcast_to`], so a broadcast weight's gradient is summed by that view's VJP.

use autograd_core::ops::{broadcast_shapes, broadcast_to};
use autograd_core::{bail, differentiable, ensure, Result, Tensor};

use super::elementwise_loss::{check_pair, ensure_f32};
use super::reduction::{reduce_losses, spread, Reduction};

/// The smallest `x (1 - x)` the BCE gradient divides by, PyTorch's `EPSILON`.
const BCE_EPSILON: f32 = 1e-12;

/// A weight checked against the input (Float32, broadcasting to the input's extents without
/// growing them) and broadcast to them.
fn broadcast_weight(
    op: &str,
    what: &str,
    w: Option<&Tensor>,
    dims: &[usize],
) -> Result<Option<Tensor>> {
    let Some(w) = w else { return Ok(None) };
    ensure_f32(op, what, w)?;
    match broadcast_shapes(&w.dims(), dims) {
        Ok(b) if b == dims => Ok(Some(broadcast_to(w, dims)?)),
        _ => bail!(
            Value,
            "{op}: {what} of shape {} does not broadcast to the input's extents {dims:?}",
            w.shape()
        ),
    }
}

/// The values of an optional tensor, or `n` ones.
fn values_or_ones(t: Option<&Tensor>, n: usize) -> Result<Vec<f32>> {
    match t {
        Some(t) => t.values::<f32>(),
        None => autograd_core::kernel::alloc::filled(n, 1.0),
    }
}

/// One gradient from its per-element values, when wanted.
fn gradient(
    want: bool,
    like: Option<&Tensor>,
    values: impl FnOnce() -> Vec<f32>,
) -> Result<Option<Tensor>> {
    match like {
        Some(t) if want => Ok(Some(t.f32_like(values())?)),
        _ => Ok(None),
    }
}

/// PyTorch's `binary_cross_entropy` between probabilities `input` and `target` (Float32, equal
/// extents): per element `-w (y max(ln x, -100) + (1 - y) max(ln(1 - x), -100))`, the logs
/// clamped at -100 as PyTorch's so that probabilities 0 and 1 give finite losses, reduced by
/// `reduction`. `weight`, when given, broadcasts to the input (numpy rules). The input's
/// gradient is `w (x - y) / max(x (1 - x), 1e-12)` as PyTorch's; the target's is
/// `-w logit(x)` (infinite at 0 and 1, as PyTorch's); the weight's the unweighted loss.
///
/// An input outside `[0, 1]` (or NaN), different extents or a weight that does not broadcast
/// are `Error::Value`; a dtype other than Float32 is `Error::Type`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{binary_cross_entropy, Reduction};
/// let p = Tensor::from_vec(vec![0.5f32, 1.0], shape![2]).unwrap();
/// let y = Tensor::from_vec(vec![1.0f32, 0.0], shape![2]).unwrap();
/// let l = binary_cross_entropy(&p, &y, None, Reduction::None).unwrap();
/// assert_eq!(l.values::<f32>().unwrap(), [std::f32::consts::LN_2, 100.0]);
/// ```
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    let op = "binary_cross_entropy";
    let dims = check_pair(op, input, target)?;
    if let Some(w) = weight {
        // checked before the input's values are read
        ensure_f32(op, "the weight", w)?;
    }
    ensure!(
        input
            .values::<f32>()?
            .iter()
            .all(|x| (0.0..=1.0).contains(x)),
        Value,
        "{op}: every element of the input must be a probability in [0, 1]"
    );
    let weight = broadcast_weight(op, "the weight", weight, &dims)?;
    bce(input, target, weight.as_ref(), reduction)
}

/// One element's unweighted binary cross-entropy, the logs clamped at -100.
fn bce_element(x: f32, y: f32) -> f32 {
    (y - 1.0) * (-x).ln_1p().max(-100.0) - y * x.ln().max(-100.0)
}

/// [`binary_cross_entropy`] on checked operands and a weight of the input's extents.
#[differentiable]
fn bce(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let n = input.size();
        let gs = spread(g, n, reduction, n as f64)?;
        let (x, y) = (input.values::<f32>()?, target.values::<f32>()?);
        let w = values_or_ones(weight, n)?;
        let at = |f: &dyn Fn(usize) -> f32| (0..n).map(f).collect::<Vec<f32>>();
        let dx = gradient(needs.input(0), Some(input), || {
            at(&|i| gs[i] * w[i] * (x[i] - y[i]) / ((1.0 - x[i]) * x[i]).max(BCE_EPSILON))
        })?;
        let dy = gradient(needs.input(1), Some(target), || {
            at(&|i| gs[i] * w[i] * ((1.0 - x[i]).ln() - x[i].ln()))
        })?;
        let dw = gradient(needs.input(2), weight, || {
            at(&|i| gs[i] * bce_element(x[i], y[i]))
        })?;
        Ok((dx, dy, dw))
    }
    let (x, y) = (input.values::<f32>()?, target.values::<f32>()?);
    let w = values_or_ones(weight, x.len())?;
    let per: Vec<f64> = (0..x.len())
        .map(|i| f64::from(w[i] * bce_element(x[i], y[i])))
        .collect();
    reduce_losses(input, &input.dims(), &per, reduction, per.len() as f64)
}

/// PyTorch's `binary_cross_entropy_with_logits`: the binary cross-entropy of
/// `sigmoid(input)` against `target`, computed stably from the logits as
/// `w ((1 - y) x + l softplus(-x))` with `l = 1 + (pos_weight - 1) y`, so large logits of
/// either sign give exact losses and gradients. `weight` and `pos_weight` (the weight of the
/// positive term, broadcast over the class axis: shape `[C]` for an input `[N, C]`) are
/// optional and broadcast to the input (numpy rules); every operand gets its gradient, as in
/// PyTorch. Reduced by `reduction`.
///
/// Different extents or weights that do not broadcast are `Error::Value`; a dtype other than
/// Float32 is `Error::Type`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{binary_cross_entropy_with_logits, Reduction};
/// let x = Tensor::from_vec(vec![0.0f32, 200.0], shape![2]).unwrap();
/// let y = Tensor::from_vec(vec![1.0f32, 0.0], shape![2]).unwrap();
/// let l = binary_cross_entropy_with_logits(&x, &y, None, None, Reduction::None).unwrap();
/// assert_eq!(l.values::<f32>().unwrap(), [std::f32::consts::LN_2, 200.0]);
/// ```
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    let op = "binary_cross_entropy_with_logits";
    let dims = check_pair(op, input, target)?;
    for (what, w) in [("the weight", weight), ("pos_weight", pos_weight)] {
        if let Some(w) = w {
            ensure_f32(op, what, w)?;
            ensure!(
                broadcast_shapes(&w.dims(), &dims).is_ok_and(|b| b == dims),
                Value,
                "{op}: {what} of shape {} does not broadcast to the input's extents {dims:?}",
                w.shape()
            );
        }
    }
    let weight = broadcast_weight(op, "the weight", weight, &dims)?;
    let pos_weight = broadcast_weight(op, "pos_weight", pos_weight, &dims)?;
    bce_with_logits(
        input,
        target,
        weight.as_ref(),
        pos_weight.as_ref(),
        reduction,
    )
}

/// `softplus(-x) = ln(1 + e^-x)`, stably: `max(-x, 0) + ln(1 + e^-|x|)`.
fn softplus_neg(x: f32) -> f32 {
    (-x).max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `1 / (1 + e^-x)`, stably for either sign.
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// [`binary_cross_entropy_with_logits`] on checked operands and weights of the input's
/// extents.
#[differentiable]
fn bce_with_logits(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    // loss = w ((1 - y) x + l sp), l = 1 + (p - 1) y, sp = softplus(-x):
    //   dx = w ((1 - y) - l sigmoid(-x)),  dy = w (-x + (p - 1) sp),
    //   dw = (1 - y) x + l sp,             dp = w y sp
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        pos_weight: Option<&Tensor>,
        reduction: Reduction,
        needs: &NeedsGrad,
    ) -> Result<(
        Option<Tensor>,
        Option<Tensor>,
        Option<Tensor>,
        Option<Tensor>,
    )> {
        let n = input.size();
        let gs = spread(g, n, reduction, n as f64)?;
        let (x, y) = (input.values::<f32>()?, target.values::<f32>()?);
        let w = values_or_ones(weight, n)?;
        let p = values_or_ones(pos_weight, n)?;
        let l = |i: usize| (p[i] - 1.0).mul_add(y[i], 1.0);
        let at = |f: &dyn Fn(usize) -> f32| (0..n).map(f).collect::<Vec<f32>>();
        let dx = gradient(needs.input(0), Some(input), || {
            at(&|i| gs[i] * w[i] * ((1.0 - y[i]) - l(i) * sigmoid(-x[i])))
        })?;
        let dy = gradient(needs.input(1), Some(target), || {
            at(&|i| gs[i] * w[i] * ((p[i] - 1.0) * softplus_neg(x[i]) - x[i]))
        })?;
        let dw = gradient(needs.input(2), weight, || {
            at(&|i| gs[i] * ((1.0 - y[i]) * x[i] + l(i) * softplus_neg(x[i])))
        })?;
        let dp = gradient(needs.input(3), pos_weight, || {
            at(&|i| gs[i] * w[i] * y[i] * softplus_neg(x[i]))
        })?;
        Ok((dx, dy, dw, dp))
    }
    let (x, y) = (input.values::<f32>()?, target.values::<f32>()?);
    let w = values_or_ones(weight, x.len())?;
    let p = values_or_ones(pos_weight, x.len())?;
    let per: Vec<f64> = (0..x.len())
        .map(|i| {
            let l = (p[i] - 1.0).mul_add(y[i], 1.0);
            f64::from(w[i] * ((1.0 - y[i]) * x[i] + l * softplus_neg(x[i])))
        })
        .collect();
    reduce_losses(input, &input.dims(), &per, reduction, per.len() as f64)
}

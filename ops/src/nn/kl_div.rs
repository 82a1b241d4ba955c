//! `kl_div`: PyTorch's Kullback-Leibler divergence loss between log-probabilities and a
//! target distribution given as probabilities or log-probabilities, with `batchmean`.

use autograd_core::{differentiable, Captured, Result, Tensor};

use super::elementwise_loss::{check_pair, pair_vjp, per_element};
use super::reduction::{reduce_losses, Reduction};

/// How [`kl_div`] folds its per-element terms: PyTorch's `reduction=` of `kl_div`, which
/// adds `BatchMean` (the sum over the first extent, the divergence per sample that the
/// mathematical definition gives) to the three of [`Reduction`]. `Mean`, the default as in
/// PyTorch, divides by every element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KlDivReduction {
    /// The mean over every element (PyTorch's default, which it warns about).
    #[default]
    Mean,
    /// The sum over every element divided by the input's first extent (the sum for a
    /// rank-0 input).
    BatchMean,
    /// The sum over every element.
    Sum,
    /// The terms themselves, shaped like the input.
    None,
}

impl Captured for KlDivReduction {}

impl From<Reduction> for KlDivReduction {
    fn from(r: Reduction) -> KlDivReduction {
        match r {
            Reduction::Mean => KlDivReduction::Mean,
            Reduction::Sum => KlDivReduction::Sum,
            Reduction::None => KlDivReduction::None,
        }
    }
}

impl KlDivReduction {
    /// The plain reduction and its divisor for a mean, for an input of extents `dims`.
    fn plain(self, dims: &[usize]) -> (Reduction, f64) {
        let n: usize = dims.iter().product();
        match self {
            KlDivReduction::Mean => (Reduction::Mean, n as f64),
            KlDivReduction::BatchMean => (Reduction::Mean, dims.first().map_or(1.0, |&b| b as f64)),
            KlDivReduction::Sum => (Reduction::Sum, 1.0),
            KlDivReduction::None => (Reduction::None, 1.0),
        }
    }
}

/// PyTorch's `kl_div(input, target)`: `input` holds log-probabilities, `target`
/// probabilities (per element `xlogy(t, t) - t x`, so a zero target adds 0) or, with
/// `log_target`, log-probabilities (`e^t (t - x)`), folded by `reduction`. Both operands get
/// gradients, PyTorch's: a zero probability target's gradient is NaN as there.
/// Float32 only (`Error::Type`); different extents are `Error::Value`.
///
/// ```
/// use autograd_core::{shape, Tensor};
/// use autograd_ops::{kl_div, KlDivReduction};
/// let lp = Tensor::from_vec(vec![0.5f32.ln(), 0.5f32.ln()], shape![1, 2]).unwrap();
/// let q = Tensor::from_vec(vec![0.5f32, 0.5], shape![1, 2]).unwrap();
/// let d = kl_div(&lp, &q, KlDivReduction::BatchMean, false).unwrap();
/// assert!(d.values::<f32>().unwrap()[0].abs() < 1e-7);
/// ```
#[differentiable]
pub fn kl_div(
    input: &Tensor,
    target: &Tensor,
    reduction: KlDivReduction,
    log_target: bool,
) -> Result<Tensor> {
    // probabilities: d/dx = -t, d/dt = xlogy(t != 0, t) + t / t - x (PyTorch's xlogy rule)
    // log-probabilities: d/dx = -e^t, d/dt = e^t (t - x + 1)
    fn vjp(
        g: &Tensor,
        input: &Tensor,
        target: &Tensor,
        reduction: KlDivReduction,
        log_target: bool,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (plain, divisor) = reduction.plain(&input.dims());
        let want = (needs.input(0), needs.input(1));
        let d = move |x: f32, t: f32| {
            if log_target {
                let e = t.exp();
                (-e, e * (t - x + 1.0))
            } else {
                // t / t is PyTorch's d xlogy / dy: NaN at t = 0, which it keeps
                let (log, one) = if t == 0.0 {
                    (0.0, f32::NAN)
                } else {
                    (t.ln(), 1.0)
                };
                (-t, log + one - x)
            }
        };
        pair_vjp(g, (input, target), (plain, divisor), want, d)
    }
    let dims = check_pair("kl_div", input, target)?;
    let (plain, divisor) = reduction.plain(&dims);
    let per = per_element(input, target, |x, t| {
        if log_target {
            t.exp() * (t - x)
        } else {
            let xlogy = if t == 0.0 { 0.0 } else { t * t.ln() };
            xlogy - t * x
        }
    })?;
    reduce_losses(input, &dims, &per, plain, divisor)
}

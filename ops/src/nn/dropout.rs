//! `dropout` with an explicit seeded generator: the keep mask is drawn from the caller's
//! [`Rng`], so a run is reproducible, and kept (one byte per element) for the VJP.

use std::sync::Arc;

use autograd_core::{differentiable, ensure, kernel, DType, Layout, Result, Rng, Tensor};

/// During training, zeroes each element of `x` (Float32) independently with probability `p`
/// and scales the kept ones by `1 / (1 - p)`, so the expected value is unchanged (PyTorch's
/// inverted dropout); `p == 1` gives zeros. The keep mask is drawn from `rng`, one uniform per
/// element in logical (row-major) order, so the same seed gives the same mask.
///
/// When `training` is false or `p == 0`, the result is **`x` itself** (a clone of the handle:
/// the same tensor, no copy, no node, and `rng` is not advanced), as PyTorch's `dropout`
/// returns its input. `p` outside `[0, 1]` (or NaN) is `Error::Value` in either mode, and a
/// dtype other than Float32 `Error::Type`; `rng` is not advanced then.
///
/// ```
/// use autograd_core::{shape, Rng, Tensor};
/// use autograd_ops::dropout;
/// let x = Tensor::ones(shape![1000], &autograd_core::DType::Float32).unwrap();
/// let y = dropout(&x, 0.25, true, &mut Rng::new(1)).unwrap().values::<f32>().unwrap();
/// assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
/// assert!(dropout(&x, 0.25, false, &mut Rng::new(1)).unwrap().same_tensor(&x));
/// ```
pub fn dropout(x: &Tensor, p: f32, training: bool, rng: &mut Rng) -> Result<Tensor> {
    ensure!(
        (0.0..=1.0).contains(&p),
        Value,
        "dropout: the drop probability p must be in [0, 1], got {p}"
    );
    ensure!(
        x.dtype() == &DType::Float32,
        Type,
        "dropout takes a Float32 tensor, got {}",
        x.dtype()
    );
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    let layout = Arc::new(Layout::compact_row_major(x.shape().clone())?);
    // keep with probability 1 - p: a uniform in [0, 1) at or above p (never, when p == 1)
    let keep = kernel::fresh::<bool>(x, layout, |out| {
        for k in out.iter_mut() {
            *k = rng.uniform_f32() >= p;
        }
        Ok(())
    })?;
    let scale = if p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
    apply_mask(x, &keep, scale)
}

/// `x * scale` where `keep` holds, 0 elsewhere (`keep` a Bool tensor of `x`'s shape).
#[differentiable]
fn apply_mask(x: &Tensor, keep: &Tensor, scale: f32) -> Result<Tensor> {
    // y = [keep] scale x:  dx = [keep] scale g; the Bool mask has no gradient
    fn vjp(g: Tensor, keep: &Tensor, scale: f32) -> Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(kernel::zip_owned(g, keep, kept(scale))?), None))
    }
    kernel::zip(x, keep, kept(scale))
}

/// `[k] scale v` for one element `v` and its mask bit `k`.
fn kept(scale: f32) -> impl Fn(f32, bool) -> f32 + Sync {
    move |v, k| if k { v * scale } else { 0.0 }
}

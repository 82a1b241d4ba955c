//! Parameter initialisation from a seeded [`Rng`], as `torch.nn.init` does it.
//!
//! Every function returns a fresh compact Float32 leaf: a parameter as it is (every Float32
//! tensor is differentiable; a leaf accumulates `.grad`). Values are drawn in logical
//! (row-major) order, so one seed gives one tensor on every platform.
//!
//! ```
//! use autograd_core::{shape, Rng};
//! use autograd_ops::init;
//! let w = init::kaiming_uniform(shape![4, 25], 5f32.sqrt(), &mut Rng::new(0)).unwrap();
//! // a = sqrt(5), fan_in = 25: bound = 1 / sqrt(25)
//! assert!(w.values::<f32>().unwrap().iter().all(|v| v.abs() <= 0.2));
//! ```

use autograd_core::{ensure, Layout, Result, Rng, Shape, Tensor};

/// `(fan_in, fan_out)` of a weight of `dims`, as PyTorch's `_calculate_fan_in_and_fan_out`:
/// `dims[1]` and `dims[0]` times the receptive field (the product of the axes after the second).
/// A weight needs at least two axes (`Error::Value`).
pub fn fan_in_and_fan_out(dims: &[usize]) -> Result<(usize, usize)> {
    ensure!(
        dims.len() >= 2,
        Value,
        "fan in and fan out need a weight of at least two axes, got dims {dims:?}"
    );
    let overflow = || {
        autograd_core::Error::Value(format!(
            "fan in and fan out of a weight of dims {dims:?} overflow"
        ))
    };
    let receptive = dims[2..]
        .iter()
        .try_fold(1usize, |p, &d| p.checked_mul(d))
        .ok_or_else(overflow)?;
    let fan = |d: usize| d.checked_mul(receptive).ok_or_else(overflow);
    Ok((fan(dims[1])?, fan(dims[0])?))
}

/// A Float32 tensor of `shape` whose values `draw` gives in logical order.
fn drawn(shape: impl Into<Shape>, mut draw: impl FnMut() -> f32) -> Result<Tensor> {
    Tensor::from_fn(shape, |_| draw())
}

/// Values uniform in `[low, high)` (PyTorch's `uniform_`). `low <= high`, both finite
/// (`Error::Value`).
pub fn uniform(shape: impl Into<Shape>, low: f32, high: f32, rng: &mut Rng) -> Result<Tensor> {
    ensure!(
        low.is_finite() && high.is_finite() && low <= high,
        Value,
        "uniform needs finite bounds with low <= high, got [{low}, {high})"
    );
    let width = f64::from(high) - f64::from(low);
    drawn(shape, || (f64::from(low) + width * rng.uniform()) as f32)
}

/// Normal values of mean `mean` and standard deviation `std` (PyTorch's `normal_`). Both
/// finite and `std >= 0` (`Error::Value`).
pub fn normal(shape: impl Into<Shape>, mean: f32, std: f32, rng: &mut Rng) -> Result<Tensor> {
    ensure!(
        mean.is_finite() && std.is_finite() && std >= 0.0,
        Value,
        "normal needs a finite mean and a finite std >= 0, got mean {mean}, std {std}"
    );
    drawn(shape, || {
        (f64::from(mean) + f64::from(std) * rng.normal()) as f32
    })
}

/// The symmetric uniform draw `U(-bound, bound)`, or the empty tensor as it is (PyTorch
/// initialises a zero-element tensor to nothing, whatever its fans).
/// (Its fans may be 0, so its bound may be infinite.)
fn symmetric(shape: Shape, bound: f64, rng: &mut Rng) -> Result<Tensor> {
    if Layout::compact_row_major(shape.clone())?.size() == 0 {
        return drawn(shape, || 0.0);
    }
    uniform(shape, -bound as f32, bound as f32, rng)
}

/// Kaiming (He) uniform in fan-in mode for a leaky ReLU of negative slope `a` (PyTorch's
/// `kaiming_uniform_(w, a)`): `U(-bound, bound)` with
/// `bound = sqrt(3) * sqrt(2 / (1 + a²)) / sqrt(fan_in)`. PyTorch's `Linear` uses
/// `a = sqrt(5)`, which gives `bound = 1 / sqrt(fan_in)`. Needs at least two axes.
pub fn kaiming_uniform(shape: impl Into<Shape>, a: f32, rng: &mut Rng) -> Result<Tensor> {
    let shape = shape.into();
    let dims = Layout::compact_row_major(shape.clone())?.dims();
    let (fan_in, _) = fan_in_and_fan_out(&dims)?;
    let gain = (2.0 / (1.0 + f64::from(a) * f64::from(a))).sqrt();
    symmetric(shape, 3f64.sqrt() * gain / (fan_in as f64).sqrt(), rng)
}

/// Xavier (Glorot) uniform (PyTorch's `xavier_uniform_(w, gain)`): `U(-bound, bound)` with
/// `bound = gain * sqrt(6 / (fan_in + fan_out))`. Needs at least two axes.
pub fn xavier_uniform(shape: impl Into<Shape>, gain: f32, rng: &mut Rng) -> Result<Tensor> {
    let shape = shape.into();
    let dims = Layout::compact_row_major(shape.clone())?.dims();
    let (fan_in, fan_out) = fan_in_and_fan_out(&dims)?;
    let bound = f64::from(gain) * (6.0 / (fan_in + fan_out) as f64).sqrt();
    symmetric(shape, bound, rng)
}

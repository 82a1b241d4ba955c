//! Finite-difference checking of vector-Jacobian products.
//!
//! Each input element is perturbed through its logical coordinate, which writes its storage
//! slot; every logical position that shares the slot (a broadcast input) must then hold the
//! same directional derivative, which is exactly what the engine's per-slot sums promise.

use crate::engine::autograd::{grad, GradOptions};
use crate::error::{bail, ensure, Result};
use crate::graph::grad_mode::no_grad;
use crate::tensor::Tensor;

/// Step and tolerances of [`gradcheck`]. An element passes when
/// `|analytical - numerical| <= atol + rtol * |numerical|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradcheckOptions {
    /// Central-difference step, relative to `max(1, |x|)`.
    pub eps: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
    /// Seed of the random cotangent.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    /// Tolerances that Float32 forward passes allow for well-scaled functions.
    fn default() -> Self {
        GradcheckOptions {
            eps: 5e-3,
            atol: 1e-2,
            rtol: 1e-2,
            seed: 0x5EED,
        }
    }
}

/// What a passing [`gradcheck`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradcheckReport {
    /// Storage slots perturbed, over all inputs.
    pub slots_checked: usize,
    /// Largest `|analytical - numerical|` seen.
    pub max_abs_error: f64,
}

/// A tiny deterministic generator (splitmix64) so checks need no extra dependency.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub(crate) fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn coord_of(dims: &[usize], mut index: usize) -> Vec<usize> {
    let mut coord = vec![0; dims.len()];
    for (c, &d) in coord.iter_mut().zip(dims).rev() {
        *c = index % d;
        index /= d;
    }
    coord
}

/// Compares the VJP of `f` at `inputs` (Float32 leaves) with central finite differences for a
/// random cotangent, perturbing every storage slot of every input. On failure returns
/// `Error::Value` naming the worst element: its input, coordinate and both values.
///
/// Perturbing writes the inputs in place (and restores them, also when `f` fails or panics), so
/// their versions change: a graph the caller built on them before the check can no longer be
/// traversed. No other graph is released. A non-finite value on either side fails the check.
/// Different inputs over the same storage slots (perturbing one would move another), invalid
/// options and a call under `no_grad` are refused before anything is perturbed.
///
/// ```
/// use autograd_core::{gradcheck, GradcheckOptions, Tensor, shape};
/// let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], shape![3]).unwrap();
/// // f(x) = x (identity, recorded by no op) has the identity Jacobian.
/// let report = gradcheck(|xs| Ok(xs[0].clone()), &[x], GradcheckOptions::default()).unwrap();
/// assert_eq!(report.slots_checked, 3);
/// ```
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    options: GradcheckOptions,
) -> Result<GradcheckReport> {
    let GradcheckOptions {
        eps, atol, rtol, ..
    } = options;
    ensure!(
        eps.is_finite() && eps > 0.0 && atol.is_finite() && atol >= 0.0,
        Value,
        "gradcheck: eps must be finite and positive and atol finite and >= 0, got eps {eps}, atol {atol}"
    );
    ensure!(
        rtol.is_finite() && rtol >= 0.0,
        Value,
        "gradcheck: rtol must be finite and >= 0, got {rtol}"
    );
    ensure!(
        crate::is_grad_enabled(),
        Runtime,
        "gradcheck: graph construction is disabled (no_grad) on this thread, so f records no graph to check"
    );
    // Two different tensors over the same storage slots cannot be told apart by perturbing
    // them (the same tensor passed twice can: its gradient is its total either way).
    let pieces = inputs
        .iter()
        .map(Tensor::single)
        .collect::<Result<Vec<_>>>()?;
    for j in 0..inputs.len() {
        for i in 0..j {
            let (a, b) = (&pieces[i], &pieces[j]);
            if inputs[i].same_tensor(&inputs[j]) || a.carrier.id() != b.carrier.id() {
                continue;
            }
            let slots: std::collections::HashSet<usize> = a
                .layout
                .try_offsets()?
                .iter()
                .map(|o| a.offset + o)
                .collect();
            ensure!(
                !b.layout.try_offsets()?.iter().any(|o| slots.contains(&(b.offset + o))),
                Value,
                "gradcheck: inputs {i} and {j} share storage, so perturbing one moves the other and the differences would measure both"
            );
        }
    }
    for (i, x) in inputs.iter().enumerate() {
        ensure!(
            x.is_differentiable(),
            Value,
            "gradcheck: input {i} is {}, not Float32",
            x.dtype()
        );
        ensure!(
            x.autograd_ctx().is_none(),
            Value,
            "gradcheck: input {i} must be a leaf (it has a node)"
        );
    }
    let output = f(inputs)?;
    ensure!(
        output.is_differentiable(),
        Value,
        "gradcheck: the function returned a {} tensor",
        output.dtype()
    );
    let mut rng = SplitMix::new(options.seed);
    let v: Vec<f32> = (0..output.size()).map(|_| rng.next_f32()).collect();
    let cotangent = output.f32_like(v.clone())?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    // retained: the graph `f` built may reach graph state of the caller's, which is not ours
    // to release
    let keep = GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    };
    let analytic = grad(&output, &refs, &cotangent, keep)?;
    drop(output);

    let _guard = no_grad();
    let project = |inputs: &[Tensor]| -> Result<f64> {
        let y = f(inputs)?.values::<f32>()?;
        Ok(y.iter()
            .zip(&v)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum())
    };
    let mut worst: Option<(f64, usize, Vec<usize>, f64, f64)> = None;
    let mut slots_checked = 0;
    let mut max_abs_error = 0.0f64;
    for (i, x) in inputs.iter().enumerate() {
        let a = match &analytic[i] {
            Some(g) => g.values::<f32>()?,
            None => crate::storage::allocation::filled(x.size(), 0.0)?,
        };
        let dims = x.dims();
        let sub = &pieces[i];
        let slots = sub.layout.try_offsets()?;
        let mut done = std::collections::HashSet::new();
        for (p, &slot) in slots.iter().enumerate() {
            if !done.insert(slot) {
                continue;
            }
            let coord = coord_of(&dims, p);
            let orig = x.get(&coord)?;
            // The step scales with the value, and the difference quotient divides by the steps
            // Float32 actually stored, not the nominal ones. The guard puts the value back on
            // every way out, an error or a panic of `f` included.
            let step = eps * orig.to_f64().abs().max(1.0);
            let restore = Restore {
                x,
                coord: &coord,
                orig,
            };
            x.set(&coord, orig.to_f64() + step)?;
            let up = x.get(&coord)?.to_f64();
            let plus = project(inputs)?;
            x.set(&coord, orig.to_f64() - step)?;
            let down = x.get(&coord)?.to_f64();
            let minus = project(inputs)?;
            drop(restore);
            let numeric = (plus - minus) / (up - down);
            slots_checked += 1;
            // every logical position sharing this slot must carry the slot's derivative; a
            // value that is not finite (NaN compares as no error) fails
            for (q, _) in slots.iter().enumerate().filter(|(_, &s)| s == slot) {
                let err = (f64::from(a[q]) - numeric).abs();
                let (err, excess) = if err.is_finite() {
                    (err, err - (atol + rtol * numeric.abs()))
                } else {
                    (f64::INFINITY, f64::INFINITY)
                };
                max_abs_error = max_abs_error.max(err);
                if excess > 0.0 && worst.as_ref().is_none_or(|w| excess > w.0) {
                    worst = Some((excess, i, coord_of(&dims, q), f64::from(a[q]), numeric));
                }
            }
        }
    }
    if let Some((_, i, coord, a, n)) = worst {
        bail!(
            Value,
            "gradcheck failed: input {i} at coordinate {coord:?}: analytical {a:.6} vs numerical {n:.6} (atol {}, rtol {})",
            options.atol,
            options.rtol
        );
    }
    Ok(GradcheckReport {
        slots_checked,
        max_abs_error,
    })
}

/// Puts one perturbed input element back when dropped.
struct Restore<'a> {
    x: &'a Tensor,
    coord: &'a [usize],
    orig: crate::Scalar,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        // the coordinate was read a moment ago, so the write succeeds
        let _ = self.x.set(self.coord, self.orig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape;

    #[test]
    fn large_inputs_do_not_fail_on_float32_rounding() {
        let x = Tensor::from_vec(vec![16384f32; 8], shape![8]).unwrap();
        let r = gradcheck(|xs| Ok(xs[0].clone()), &[x], GradcheckOptions::default()).unwrap();
        assert!(r.max_abs_error < 1e-3, "{r:?}");
    }

    #[test]
    fn a_wrong_vjp_is_reported_with_its_coordinate() {
        // y = 2x recorded with an identity VJP
        struct Wrong {
            saved: crate::SavedState,
        }
        impl crate::Operation for Wrong {
            fn name(&self) -> &'static str {
                "wrong"
            }
            fn saved(&self) -> &crate::SavedState {
                &self.saved
            }
            fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
                Ok(vec![Some(g.clone())])
            }
        }
        let f = |xs: &[Tensor]| {
            let v: Vec<f32> = xs[0].values::<f32>()?.iter().map(|x| 2.0 * x).collect();
            let out = Tensor::from_vec(v, shape![2, 2])?;
            Ok(crate::record(out, &[&xs[0]], Vec::new(), |saved| Wrong {
                saved,
            }))
        };
        let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.3, 0.4], shape![2, 2]).unwrap();
        let err = gradcheck(f, &[x], GradcheckOptions::default()).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Value);
        assert!(err.message().contains("input 0 at coordinate ["), "{err}");
        // the identity VJP reports half the true derivative 2 v
        let nums: Vec<f64> = err
            .message()
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .filter_map(|w| w.parse().ok())
            .collect();
        let (a, n) = (nums[nums.len() - 4], nums[nums.len() - 3]);
        assert!((n - 2.0 * a).abs() < 1e-3, "{err}");
    }
}

//! Broadcasting: the differentiable stride-0 view binary ops broadcast their operands with.

use crate::{differentiable, Result, Tensor};

/// A stride-0 view of `a` with top-level extents `dims` (numpy rules), sharing its storage.
#[differentiable(crate = crate)]
pub fn broadcast_to(a: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // The cotangent is per logical position of the result (the engine folds broadcast aliases
    // only into `.grad`), so each element of `a` receives the sum over its repetitions.
    fn vjp(g: &Tensor, a: &Tensor) -> Result<Option<Tensor>> {
        let dims = g.dims();
        let own = a.dims();
        let lead = dims.len() - own.len();
        let mut out = vec![0.0f32; a.size()];
        let mut coord = vec![0usize; dims.len()];
        for v in g.values::<f32>()? {
            let mut idx = 0;
            for (j, &n) in own.iter().enumerate() {
                idx = idx * n + if n == 1 { 0 } else { coord[lead + j] };
            }
            out[idx] += v;
            for k in (0..dims.len()).rev() {
                coord[k] += 1;
                if coord[k] < dims[k] {
                    break;
                }
                coord[k] = 0;
            }
        }
        Ok(Some(a.f32_like(out)?))
    }
    a.raw_broadcast_to(dims)
}

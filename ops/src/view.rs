//! Differentiable views.

use autograd_core::{record, Operation, Result, SavedState, Tensor};

struct BroadcastTo {
    saved: SavedState,
}

impl Operation for BroadcastTo {
    fn name(&self) -> &'static str {
        "broadcast_to"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // The result is a stride-0 view of `a`'s storage, so the engine has already folded its
    // cotangent: every repetition of an element holds that element's summed cotangent. Read it
    // from any one repetition (summing again would count each contribution once per repeat).
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("broadcast_to", |s| s.inputs[0].0.clone())?;
        let dims = g.dims();
        let own = a.dims();
        let lead = dims.len() - own.len();
        let gv = g.values::<f32>()?;
        let mut out = vec![0.0f32; a.size()];
        // Map each output position (row-major over dims) to the input position it repeats.
        let mut coord = vec![0usize; dims.len()];
        for v in gv {
            let mut idx = 0;
            for (j, &n) in own.iter().enumerate() {
                let c = if n == 1 { 0 } else { coord[lead + j] };
                idx = idx * n + c;
            }
            out[idx] = v;
            for k in (0..dims.len()).rev() {
                coord[k] += 1;
                if coord[k] < dims[k] {
                    break;
                }
                coord[k] = 0;
            }
        }
        Ok(vec![Some(a.f32_like(out)?)])
    }
}

/// A stride-0 view of `a` with top-level extents `dims` (numpy rules), sharing its storage.
#[track_caller]
pub fn broadcast_to(a: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let out = a.detach().broadcast_to(dims)?;
    Ok(record(out, &[a], Vec::new(), |saved| BroadcastTo { saved }))
}

//! Reductions.

use autograd_core::{record, Operation, Result, SavedState, Tensor};

use crate::kernel::map;

struct Sum {
    saved: SavedState,
}

impl Operation for Sum {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(sum a) = g[0] everywhere
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("sum", |s| s.inputs[0].0.clone())?;
        autograd_core::ensure!(
            g.size() == 1,
            Value,
            "sum backward: the cotangent must have one element, got shape {}",
            g.shape()
        );
        let v = g.values::<f32>()?[0];
        Ok(vec![Some(a.f32_full_like(v)?)])
    }
}

/// The sum of every element, as a one-element tensor of layout `(1):(1)`.
#[track_caller]
pub fn sum(a: &Tensor) -> Result<Tensor> {
    let total: f32 = map("sum", a, |x| x)?.values::<f32>()?.iter().sum();
    let out = Tensor::from_vec(vec![total], autograd_core::shape![1])?;
    Ok(record(out, &[a], Vec::new(), |saved| Sum { saved }))
}

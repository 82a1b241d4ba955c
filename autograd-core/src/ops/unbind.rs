//! `unbind`: every slice of a tensor along one mode, as views recorded on one node with a
//! result per slice. Its VJP writes the slices' cotangents into one buffer, where a `select`
//! per slice would make a full-size buffer of zeros each and leave the engine to sum them
//! (the q, k and v of an attention block come out of one projection this way).

use crate::__private::{check_cotangents, several_results_backward, OutputInfo};
use crate::error::Result;
use crate::graph::op::{Operation, Recording, SavedState};
use crate::kernel::copy_like;
use crate::layout::axis::Axis;
use crate::tensor::Tensor;

/// The sub-tensors of `a` at each index of top-level mode `dim` (negative from the back), that
/// mode removed: views
/// sharing `a`'s storage (`a.select(dim, i)` for every `i`). A differentiable input records
/// one node with a result per slice.
///
/// `Error::Value` when `dim` is out of range.
///
/// ```
/// use autograd_core::{ops, shape, Tensor};
/// let a = Tensor::from_vec((0..6).map(|i| i as f32).collect(), shape![3, 2]).unwrap();
/// let rows = ops::unbind(&a, 0).unwrap();
/// assert_eq!(rows.len(), 3);
/// assert_eq!(rows[2].values::<f32>().unwrap(), vec![4.0, 5.0]);
/// ```
#[track_caller]
pub fn unbind(a: &Tensor, dim: impl Into<Axis>) -> Result<Vec<Tensor>> {
    let dims = a.dims();
    let dim = dim.into().resolve_for("unbind", dims.len())?;
    let recording = Recording::begin(&[a]);
    let results = (0..dims[dim])
        .map(|i| a.raw_select(dim, i))
        .collect::<Result<Vec<_>>>()?;
    match recording {
        Some(recording) if !results.is_empty() => {
            let outputs = results.iter().map(OutputInfo::of).collect();
            recording.finish_several(results, Vec::new(), |saved| Unbind {
                saved,
                dim,
                outputs,
            })
        }
        _ => Ok(results),
    }
}

struct Unbind {
    saved: SavedState,
    dim: usize,
    outputs: Vec<OutputInfo>,
}

impl Operation for Unbind {
    fn name(&self) -> &'static str {
        "unbind"
    }

    fn saved(&self) -> &SavedState {
        &self.saved
    }

    fn input_name(&self, index: usize) -> Option<&str> {
        (index == 0).then_some("a")
    }

    fn outputs(&self) -> usize {
        self.outputs.len()
    }

    fn backward(&self, gradient: &Tensor) -> Result<Vec<Option<Tensor>>> {
        if self.outputs.len() == 1 {
            return self.backward_outputs(&[Some(gradient.clone())], &[true]);
        }
        Err(several_results_backward(self))
    }

    fn backward_outputs(
        &self,
        gradients: &[Option<Tensor>],
        needed: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        check_cotangents(self, gradients, &self.outputs)?;
        if !needed.first().copied().unwrap_or(true) {
            return Ok(vec![None]);
        }
        let a = self.saved.with(self.name(), |s| s.input(0).clone())?;
        // da = the cotangent of slice i at index i of `dim`, zero at a slice not reached
        let da = if gradients.iter().all(Option::is_some) {
            a.f32_overwritable_like()?
        } else {
            a.f32_zeros_like()?
        };
        for (i, g) in gradients.iter().enumerate() {
            if let Some(g) = g {
                let slice = da.raw_select(self.dim, i)?;
                if !copy_like(&slice, g)? {
                    slice.copy_from(g)?;
                }
            }
        }
        Ok(vec![Some(da)])
    }
}

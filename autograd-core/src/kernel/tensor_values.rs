//! A tensor's element readers ([`Tensor::values`], [`Tensor::scalars`]) and
//! [`Tensor::contiguous`]: they copy through this layer's run-wise element access, so they are
//! defined here, above the tensor handle, rather than in `tensor/`.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::layout::Layout;
use crate::storage::allocation::with_capacity;
use crate::storage::dtype::DType;
use crate::storage::scalar::{Buffer, Element, Scalar};
use crate::tensor::{record_width, Tensor};

impl Tensor {
    /// Every element in logical order as `T`, which must be the storage element type (a
    /// compound dtype's records are listed field by field).
    pub fn values<T: Element>(&self) -> Result<Vec<T>> {
        let w = record_width(&self.0.dtype);
        let mut out = with_capacity(self.size().saturating_mul(w))?;
        let mut failed = None;
        let parts = self.subtensors();
        for (i, s) in parts.iter().enumerate() {
            let storage = s.carrier.dtype();
            ensure!(
                storage == T::DTYPE,
                Type,
                "this tensor stores {storage} elements, not {}",
                T::DTYPE
            );
            // as_cpu: the reader under the kernel layer (kernel::read falls back to it)
            if let Some(cpu) = s.carrier.as_cpu() {
                cpu.with_slice::<T, _>(|data| {
                    // one element wide: the kernel layer's run-wise copy (storage order as
                    // logical order is one run, one copy: gradients commit this way)
                    if w == 1 {
                        if let Ok(e) = crate::kernel::Elements::new(data, s.offset, &s.layout) {
                            let at = out.len();
                            out.resize(at + e.len(), T::default());
                            e.copy_range(0, &mut out[at..]);
                            return;
                        }
                    }
                    s.layout.for_each_offset(|o| {
                        let base = (s.offset + o) * w;
                        out.extend_from_slice(&data[base..base + w]);
                    });
                })?;
            } else {
                let buffer = s.carrier.to_buffer();
                let Some(data) = T::slice(&buffer) else {
                    bail!(
                        Type,
                        "subtensor {i} stores {} elements, not {}",
                        buffer.dtype(),
                        T::DTYPE
                    )
                };
                s.layout.for_each_offset(|o| {
                    let base = (s.offset + o) * w;
                    match data.get(base..base + w) {
                        Some(v) => out.extend_from_slice(v),
                        None => failed = Some(base),
                    }
                });
            }
        }
        match failed {
            Some(o) => bail!(Runtime, "carrier shrank below offset {o}"),
            None => Ok(out),
        }
    }

    /// Every element in logical order as a `Scalar`.
    pub fn scalars(&self) -> Result<Vec<Scalar>> {
        ensure!(
            record_width(&self.0.dtype) == 1,
            NotImplemented,
            "use values for compound dtype {}",
            *self.0.dtype
        );
        let mut out = with_capacity(self.size())?;
        let mut err = None;
        self.for_each_slot(|p, o| match self.part_carrier(p).read(o) {
            Ok(v) => out.push(v),
            Err(e) => err = Some(e),
        });
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// A copy in fresh storage of this tensor's carrier class with the compact row-major
    /// layout; no autograd state.
    pub fn contiguous(&self) -> Result<Tensor> {
        if *self.0.dtype == DType::Float32 && self.subtensor_count() == 1 {
            // run by run into pooled storage: a large temporary copy faults no fresh pages in
            let layout = Arc::new(Layout::compact_row_major(self.shape().clone())?);
            return crate::kernel::read::<f32, _>(self, |e| {
                crate::kernel::fresh_overwritten::<f32>(self, layout, |out| {
                    e.copy_all(out);
                    Ok(())
                })
            })?;
        }
        let carrier = self.part_carrier(0).clone();
        let w = record_width(&self.0.dtype);
        let buffer = match carrier.dtype() {
            DType::Float32 => Buffer::F32(self.values()?),
            DType::Float64 => Buffer::F64(self.values()?),
            DType::Int32 => Buffer::I32(self.values()?),
            DType::Int64 => Buffer::I64(self.values()?),
            DType::Bool => Buffer::Bool(self.values()?),
            other => bail!(Type, "storage of dtype {other} cannot be copied"),
        };
        debug_assert_eq!(buffer.len(), self.size() * w);
        let layout = Layout::compact_row_major(self.shape().clone())?;
        let fresh = carrier.fresh(buffer)?;
        Ok(Tensor::from_carrier_unchecked(
            fresh,
            Arc::new(layout),
            self.0.dtype.clone(),
        ))
    }
}

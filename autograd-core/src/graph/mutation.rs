//! In-place mutation. Each successful call bumps the version of every carrier it writes, once;
//! a failed call writes nothing.
//!
//! On a tensor whose elements share storage slots (a broadcast view, overlapping pieces) the
//! two kinds of write differ on purpose. `set`, `set_coord` and `fill` write storage slots: a
//! shared slot is written once and every element reading it sees the value (so a broadcast
//! leaf can be perturbed per slot, as its gradient is summed per slot). `copy_from`, `add_`
//! and `scale_` give each element its own new value, which a shared slot cannot hold, so they
//! refuse such targets with `Error::Value`.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::layout::int_tuple::IntTuple;
use crate::storage::carrier::Carrier;
use crate::storage::dtype::DType;
use crate::storage::scalar::Scalar;
use crate::tensor::{record_width, Tensor};

/// Writes bound for one carrier.
type WriteGroup = (Arc<dyn Carrier>, Vec<(usize, Scalar)>);

impl Tensor {
    fn storage_dtype(&self) -> Result<DType> {
        ensure!(
            record_width(self.dtype()) == 1,
            NotImplemented,
            "mutating elements of compound dtype {} is not supported",
            self.dtype()
        );
        Ok(self.part_carrier(0).dtype())
    }

    /// Groups writes by carrier, validates all of them, then applies each group with one bump.
    fn write_slots(&self, writes: Vec<(usize, usize, Scalar)>) -> Result<()> {
        // Every carrier of the tensor gets its group, so a successful call bumps each once even
        // when it writes no element (an empty tensor).
        let mut groups: Vec<WriteGroup> = self
            .carriers()
            .into_iter()
            .map(|c| (c, Vec::new()))
            .collect();
        for (part, off, v) in writes {
            let c = self.part_carrier(part);
            match groups.iter_mut().find(|(g, _)| g.id() == c.id()) {
                Some((_, w)) => w.push((off, v)),
                None => groups.push((c.clone(), vec![(off, v)])),
            }
        }
        for (c, w) in &groups {
            for (o, v) in w {
                ensure!(
                    *o < c.len(),
                    Value,
                    "offset {o} is out of range for {}",
                    c.id()
                );
                ensure!(
                    v.dtype() == c.dtype(),
                    Type,
                    "cannot write {} into {} storage",
                    v.dtype(),
                    c.dtype()
                );
            }
        }
        // A carrier class may still refuse a validated write; the carriers written before it
        // then get their old values back, so a failed call leaves every element as it was
        // (their versions do move on: a graph that saved them refuses, which is safe).
        let old: Vec<Vec<(usize, Scalar)>> = if groups.len() > 1 {
            groups
                .iter()
                .map(|(c, w)| w.iter().map(|&(o, _)| Ok((o, c.read(o)?))).collect())
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        for (k, (c, w)) in groups.iter().enumerate() {
            let Err(e) = c.write(w) else { continue };
            if k == 0 {
                return Err(e);
            }
            // every carrier written before gets its values back, even after one refuses
            let mut undone = Ok(());
            for ((c, _), w) in groups[..k].iter().zip(&old) {
                undone = undone.and(c.write(w));
            }
            return Err(match undone {
                Ok(()) => e.context(format!(
                    "writing {} (the {k} carriers written before it were restored)",
                    c.id()
                )),
                Err(u) => e.context(format!(
                    "writing {}; restoring the carriers written before it failed too ({u})",
                    c.id()
                )),
            });
        }
        Ok(())
    }

    fn ensure_injective(&self, op: &str) -> Result<()> {
        match self.storage_clash() {
            Some(why) => bail!(Value, "{op}: {why}, so an elementwise write is ambiguous"),
            None => Ok(()),
        }
    }

    /// Assigns `value` at a coordinate with one entry per top-level mode (`t[i, j] = value`).
    /// On a broadcast view this writes the shared slot, which every element reading it sees.
    pub fn set(&self, coord: &[usize], value: impl Into<Scalar>) -> Result<()> {
        let dtype = self.storage_dtype()?;
        let (part, off) = self.locate(coord)?;
        let v = value.into().cast(&dtype)?;
        self.part_carrier(part).write(&[(off, v)])
    }

    /// Assigns `value` at a hierarchical coordinate.
    pub fn set_coord(&self, coord: &IntTuple, value: impl Into<Scalar>) -> Result<()> {
        let dtype = self.storage_dtype()?;
        let sub = self.single()?;
        let off = sub.offset + sub.layout.offset_of_coord(coord)?;
        sub.carrier.write(&[(off, value.into().cast(&dtype)?)])
    }

    /// Assigns `value` to every element (every storage slot the tensor reads).
    pub fn fill(&self, value: impl Into<Scalar>) -> Result<()> {
        let v = value.into().cast(&self.storage_dtype()?)?;
        if let (Scalar::F32(x), Some(fast)) = (v, self.f32_in_place()) {
            return fast.apply(None, |d, _| *d = x);
        }
        let mut writes = crate::storage::allocation::with_capacity(self.size())?;
        self.for_each_slot(|p, o| writes.push((p, o, v)));
        self.write_slots(writes)
    }

    /// Copies `src`'s elements (same top-level extents, same storage dtype) into this tensor,
    /// which must be injective. `src` may overlap this tensor: it is read completely first.
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        if let Some(fast) = self.f32_in_place_with("copy_from", src)? {
            return fast.apply(Some(src), |d, s| *d = s);
        }
        self.zip_assign("copy_from", src, |_, s| Ok(s))
    }

    /// Adds `other` (same top-level extents, same storage dtype) elementwise into this tensor
    /// in place.
    pub fn add_(&self, other: &Tensor) -> Result<()> {
        if let Some(fast) = self.f32_in_place_with("add_", other)? {
            return fast.apply(Some(other), |d, s| *d += s);
        }
        self.zip_assign("add_", other, |a, b| {
            Ok(match (a, b) {
                (Scalar::F32(x), Scalar::F32(y)) => Scalar::F32(x + y),
                (Scalar::F64(x), Scalar::F64(y)) => Scalar::F64(x + y),
                (Scalar::I32(x), Scalar::I32(y)) => Scalar::I32(x.wrapping_add(y)),
                (Scalar::I64(x), Scalar::I64(y)) => Scalar::I64(x.wrapping_add(y)),
                (a, _) => bail!(Type, "add_ does not add {} elements", a.dtype()),
            })
        })
    }

    /// Multiplies every element of a floating tensor by `factor` in place.
    pub fn scale_(&self, factor: f64) -> Result<()> {
        let dtype = self.storage_dtype()?;
        ensure!(
            dtype.is_floating(),
            Type,
            "scale_ needs a floating tensor, not {dtype}"
        );
        self.ensure_injective("scale_")?;
        if let Some(fast) = self.f32_in_place() {
            return fast.apply(None, |d, _| *d = (f64::from(*d) * factor) as f32);
        }
        let old = self.scalars()?;
        let mut writes = crate::storage::allocation::with_capacity(old.len())?;
        let mut i = 0;
        self.for_each_slot(|p, o| {
            let v = match old[i] {
                Scalar::F32(x) => Scalar::F32((f64::from(x) * factor) as f32),
                other => Scalar::F64(other.to_f64() * factor),
            };
            writes.push((p, o, v));
            i += 1;
        });
        self.write_slots(writes)
    }

    /// The slice path of an in-place update: a Float32 tensor of one CPU subtensor with an
    /// injective layout (what optimizers update every step).
    fn f32_in_place(&self) -> Option<InPlace<'_>> {
        if self.subtensor_count() != 1
            || self.storage_dtype().ok()? != DType::Float32
            || !self.layout().is_injective()
        {
            return None;
        }
        // as_cpu: in-place writes to existing storage, which the kernel layer (fresh results
        // only) does not do; other carrier classes take the copy path
        self.carrier().ok()?.as_cpu()?;
        Some(InPlace { target: self })
    }

    /// Equal top-level extents (shape trees may differ: both are read in logical order).
    fn ensure_same_shape(&self, op: &str, src: &Tensor) -> Result<()> {
        ensure!(
            src.dims() == self.dims(),
            Value,
            "{op}: source shape {} differs from target shape {}",
            src.shape(),
            self.shape()
        );
        Ok(())
    }

    /// [`Tensor::f32_in_place`] for an update from `src`, after the checks every path makes.
    fn f32_in_place_with(&self, op: &str, src: &Tensor) -> Result<Option<InPlace<'_>>> {
        let Some(fast) = self.f32_in_place() else {
            return Ok(None);
        };
        self.ensure_same_shape(op, src)?;
        Ok((src.storage_dtype()? == DType::Float32).then_some(fast))
    }

    fn zip_assign(
        &self,
        op: &str,
        src: &Tensor,
        f: impl Fn(Scalar, Scalar) -> Result<Scalar>,
    ) -> Result<()> {
        let dtype = self.storage_dtype()?;
        self.ensure_same_shape(op, src)?;
        ensure!(
            src.storage_dtype()? == dtype,
            Type,
            "{op}: source stores {} but target stores {dtype}",
            src.part_carrier(0).dtype()
        );
        self.ensure_injective(op)?;
        let old = self.scalars()?;
        let new = src.scalars()?;
        let mut values = crate::storage::allocation::with_capacity(new.len())?;
        for (a, b) in old.into_iter().zip(new) {
            values.push(f(a, b)?);
        }
        let mut writes = crate::storage::allocation::with_capacity(values.len())?;
        let mut it = values.into_iter();
        self.for_each_slot(|p, o| {
            if let Some(v) = it.next() {
                writes.push((p, o, v));
            }
        });
        self.write_slots(writes)
    }
}

/// A Float32 tensor of one injective CPU subtensor, updated through its slice.
struct InPlace<'t> {
    target: &'t Tensor,
}

impl InPlace<'_> {
    /// `f(element, source value)` for every element in logical order, under one exclusive
    /// access (one version bump). The source is read completely first (it may overlap the
    /// target, and holding its lock while waiting for the target's could deadlock).
    fn apply(self, src: Option<&Tensor>, f: impl Fn(&mut f32, f32)) -> Result<()> {
        let t = self.target;
        let values = src.map(Tensor::values::<f32>).transpose()?;
        let layout = t.layout();
        let (off, cosize) = (t.offset(), layout.cosize());
        let carrier = t.carrier()?;
        // as_cpu: see `f32_in_place`, which checked it
        let Some(cpu) = carrier.as_cpu() else {
            bail!(Runtime, "an in-place update lost its CPU carrier");
        };
        cpu.with_slice_mut::<f32, _>(|s| {
            let Some(s) = off.checked_add(cosize).and_then(|end| s.get_mut(off..end)) else {
                bail!(
                    Value,
                    "layout {layout} at offset {off} does not fit its carrier of {} elements",
                    s.len()
                );
            };
            // a run at a time, beside the source's values at the same logical positions
            let mut i = 0;
            let mut run = |start: usize, len: usize, stride: usize| {
                let src = values.as_ref().map(|v| &v[i..i + len]);
                match (stride, src) {
                    (1, Some(src)) => s[start..start + len]
                        .iter_mut()
                        .zip(src)
                        .for_each(|(d, &x)| f(d, x)),
                    (1, None) => s[start..start + len].iter_mut().for_each(|d| f(d, 0.0)),
                    _ => (0..len).for_each(|k| {
                        f(&mut s[start + k * stride], src.map_or(0.0, |v| v[k]));
                    }),
                }
                i += len;
            };
            if layout.is_row_major_contiguous() && layout.size() == cosize {
                run(0, cosize, 1);
            } else {
                layout.for_each_run(run);
            }
            Ok(())
        })
    }
}

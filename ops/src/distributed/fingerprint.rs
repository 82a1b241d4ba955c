//! A module's fingerprint: what ranks must agree on before they average gradients tensor by
//! tensor (names, roles, shapes, dtypes and count of its tensors, which of them are one tensor
//! held twice, and the bucket size that decides the messages), compared once, when a
//! [`super::Ddp`] is made.

use std::collections::HashMap;

use autograd_core::{DType, Result, Tensor};

use super::agreement::{agree, Fnv};
use super::World;
use crate::module::{Module, Role};

/// A fingerprint as ranks exchange it: the hash, the tensor count, the element count, the
/// bucket size.
type Record = [u64; 4];

/// The fingerprint of `tensors` (as [`Module::named_tensors`] lists them) with `bucket_bytes`.
fn record(tensors: &[(String, Tensor, Role)], bucket_bytes: usize) -> Record {
    let mut h = Fnv::new().num(tensors.len() as u64);
    let mut elements = 0u64;
    // where each tensor first appears: a tied tensor is averaged once, so ranks must tie alike
    let mut first = HashMap::new();
    for (k, (name, t, role)) in tensors.iter().enumerate() {
        let at = *first.entry(t.id()).or_insert(k);
        if at != k {
            h = h.text("tied to").num(at as u64);
        }
        h = h
            .text(name)
            .num(u64::from(*role == Role::Parameter))
            .text(&dtype_name(t.dtype()))
            // a tensor written in place must have one slot per element on every rank
            .num(u64::from(t.layout().is_injective()));
        let dims = t.dims();
        h = dims
            .iter()
            .fold(h.num(dims.len() as u64), |h, &d| h.num(d as u64));
        elements = elements.saturating_add(t.size() as u64);
    }
    [
        h.finish(),
        tensors.len() as u64,
        elements,
        bucket_bytes as u64,
    ]
}

fn dtype_name(dtype: &DType) -> String {
    dtype.to_string()
}

fn describe(r: &Record) -> String {
    format!(
        "{} tensors of {} elements, fingerprint {:016x}, bucket_bytes {}",
        r[1], r[2], r[0], r[3]
    )
}

/// `Ok` on every rank when every rank's `module` has the same tensors (by name, role, shape,
/// dtype and which are tied) and the same `bucket_bytes`; else `Error::Value` on every rank
/// naming the ranks that differ from rank 0.
pub(crate) fn check(world: &World, module: &dyn Module, bucket_bytes: usize) -> Result<()> {
    agree(
        world,
        &record(&module.named_tensors(), bucket_bytes),
        "the ranks' models differ (names, shapes, dtypes or tying of their tensors, or DdpOptions)",
        describe,
    )
}

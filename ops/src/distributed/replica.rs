//! Making every rank's module a replica of rank 0's: each tensor of rank 0's state dict is
//! broadcast and written in place on the other ranks, under `no_grad`, as a state-dict load
//! writes it (one exclusive write and one version bump per tensor, handles kept valid).

use autograd_core::{bail, kernel, no_grad, DType, Element, Error, Result, Tensor};
use mpi::datatype::Equivalence;
use mpi::traits::{Communicator, Root};

use super::agreement::all_succeeded;
use super::World;
use crate::module::Module;

/// Overwrites every tensor of `module` on ranks other than 0 with rank 0's. The ranks must
/// have agreed on the tensors' names, shapes and dtypes (the fingerprint). A rank that cannot
/// read or write a tensor still takes part in every broadcast, and every rank then gets an
/// error.
pub(crate) fn copy_rank0(world: &World, module: &dyn Module) -> Result<()> {
    let mut first: Option<Error> = None;
    for (name, t, _) in module.named_tensors() {
        let done = match t.dtype() {
            DType::Float32 => replicate::<f32>(world, &t),
            DType::Float64 => replicate::<f64>(world, &t),
            DType::Int32 => replicate::<i32>(world, &t),
            DType::Int64 => replicate::<i64>(world, &t),
            DType::Bool => replicate::<bool>(world, &t),
            // the same on every rank: the fingerprint compared the dtypes
            other => Err(Error::NotImplemented(format!(
                "a {other} tensor cannot be broadcast"
            ))),
        };
        if let Err(e) = done {
            first.get_or_insert(e.context(format!("tensor `{name}`")));
        }
    }
    all_succeeded(
        world,
        first.map_or(Ok(()), Err),
        "copying rank 0's parameters and buffers",
    )
}

/// Broadcasts rank 0's `t` and writes it into `t` on the other ranks.
fn replicate<T: Element + Equivalence>(world: &World, t: &Tensor) -> Result<()> {
    let n = t.size();
    if n > i32::MAX as usize {
        // the same on every rank: the fingerprint compared the shapes
        bail!(NotImplemented, "{n} elements do not fit one MPI message");
    }
    let root = world.rank() == 0;
    // rank 0's read is agreed on before anything is sent, so a failed read writes nothing
    let read = if root {
        t.values::<T>().and_then(|v| {
            if v.len() == n {
                Ok(v)
            } else {
                Err(Error::Runtime(
                    "a tensor read back a wrong number of values".into(),
                ))
            }
        })
    } else {
        Ok(Vec::new())
    };
    let mut buf = all_succeeded(world, read, "reading rank 0's tensor")?;
    if !root {
        buf = vec![T::default(); n];
    }
    world.comm().process_at_rank(0).broadcast_into(&mut buf[..]);
    if root {
        return Ok(());
    }
    let _guard = no_grad();
    if t.subtensor_count() != 1 {
        // as a state-dict load: a tensor of several pieces through one staged copy
        return t.copy_from(&Tensor::from_vec(buf, t.shape().clone())?);
    }
    kernel::update::<T, _>(t, |xs| {
        xs.copy_from_slice(&buf);
        Ok(())
    })
}

//! Collectives on tensors for users: all-reduce, broadcast and all-gather of Float32, Float64
//! and Int64 tensors of any layout (strided, transposed and broadcast views are read in logical
//! order first). Results are new compact tensors; the input is never written. Every call first
//! agrees on the operation, dtype and shape across ranks (see [`super::agreement`]), so a rank
//! that disagrees makes the call fail on every rank instead of hanging or mixing bytes.

use autograd_core::kernel::alloc;
use autograd_core::{bail, ensure, DType, Element, Result, Tensor};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::agreement::{agree, all_succeeded, Fnv};
use super::World;

/// How [`World::all_reduce`] combines the ranks' tensors, element by element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum over ranks.
    Sum,
    /// The sum over ranks divided by their number (floating-point dtypes only).
    Mean,
    /// The largest value over ranks.
    Max,
}

/// An element type that travels as itself in MPI messages.
trait Wire: Element + Equivalence + std::ops::Add<Output = Self> {
    /// `sum / n` (integers truncate; [`World::all_reduce`] refuses their mean first).
    fn mean(sum: Self, n: usize) -> Self;
}

impl Wire for f32 {
    fn mean(sum: f32, n: usize) -> f32 {
        sum / n as f32
    }
}

impl Wire for f64 {
    fn mean(sum: f64, n: usize) -> f64 {
        sum / n as f64
    }
}

impl Wire for i64 {
    fn mean(sum: i64, n: usize) -> i64 {
        sum / n as i64
    }
}

/// The largest element count one MPI call can carry (its counts are C `int`s).
const MAX_COUNT: usize = i32::MAX as usize;

/// The axes a record spells out; longer shapes are compared by their hash.
const AXES: usize = 6;

/// What every rank must agree on before a collective: operation, dtype, shape.
type Record = [u64; 5 + AXES];

/// Operation codes in a [`Record`].
const ALL_GATHER: u64 = 8;
const BROADCAST: u64 = 16;

fn op_code(op: ReduceOp) -> u64 {
    match op {
        ReduceOp::Sum => 1,
        ReduceOp::Mean => 2,
        ReduceOp::Max => 3,
    }
}

fn dtype_code(dtype: &DType) -> u64 {
    match dtype {
        DType::Float32 => 1,
        DType::Float64 => 2,
        DType::Int64 => 3,
        _ => 0,
    }
}

/// `t`'s record for the operation `code`.
fn record(code: u64, t: &Tensor) -> Record {
    let dims = t.dims();
    let hash = dims
        .iter()
        .fold(Fnv::new(), |h, &d| h.num(d as u64))
        .finish();
    let mut r = [0u64; 5 + AXES];
    r[..5].copy_from_slice(&[
        code,
        dtype_code(t.dtype()),
        dims.len() as u64,
        t.size() as u64,
        hash,
    ]);
    for (slot, &d) in r[5..].iter_mut().zip(&dims) {
        *slot = d as u64;
    }
    r
}

/// A record as a reader wants it: `all_reduce(sum) of a Float32 tensor of shape [2, 3]`.
fn describe(r: &Record) -> String {
    let op = match r[0] {
        1 => "all_reduce(sum)".to_string(),
        2 => "all_reduce(mean)".to_string(),
        3 => "all_reduce(max)".to_string(),
        ALL_GATHER => "all_gather".to_string(),
        c if c >= BROADCAST => format!("broadcast from rank {}", c - BROADCAST),
        c => format!("operation {c}"),
    };
    let dtype = match r[1] {
        1 => "Float32",
        2 => "Float64",
        3 => "Int64",
        _ => "an unsupported dtype",
    };
    let ndim = r[2] as usize;
    let shape = if ndim <= AXES {
        format!("{:?}", &r[5..5 + ndim])
    } else {
        format!("{ndim} axes and {} elements", r[3])
    };
    format!("{op} of a {dtype} tensor of shape {shape}")
}

/// Agrees on `code` with `t`, then checks what all ranks now know to be equal.
fn agree_on(world: &World, code: u64, t: &Tensor, what: &str) -> Result<()> {
    agree(world, &record(code, t), what, describe)?;
    ensure!(
        dtype_code(t.dtype()) != 0,
        Type,
        "{what} takes Float32, Float64 or Int64 tensors, not {}",
        t.dtype()
    );
    Ok(())
}

/// `t`'s values and a zeroed buffer of `room` elements for the result, once every rank has
/// both: a rank that runs out of memory for either makes every rank's call fail, instead of
/// leaving the others in the collective.
fn read<T: Wire>(world: &World, t: &Tensor, what: &str, room: usize) -> Result<(Vec<T>, Vec<T>)> {
    let local = t
        .values::<T>()
        .and_then(|values| Ok((values, alloc::filled(room, T::default())?)));
    all_succeeded(world, local, &format!("reading the tensor to {what}"))
}

/// Checks that a message of `n` elements fits one MPI call.
fn fits(n: Option<usize>, what: &str) -> Result<usize> {
    match n {
        Some(n) if n <= MAX_COUNT => Ok(n),
        _ => bail!(
            NotImplemented,
            "{what}: more than {MAX_COUNT} elements in one MPI message (split the tensor)"
        ),
    }
}

impl World {
    /// Combines `t` across ranks element by element with `op` and returns the result on every
    /// rank. Every rank passes a tensor of the same dtype (Float32, Float64 or Int64) and shape
    /// and the same `op`; otherwise every rank gets `Error::Value` naming the ranks that
    /// differ. [`ReduceOp::Mean`] of Int64 is `Error::Type`.
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<Tensor> {
        let what = "all_reduce";
        let _running = self.enter("World::all_reduce")?;
        agree_on(self, op_code(op), t, what)?;
        ensure!(
            !(op == ReduceOp::Mean && *t.dtype() == DType::Int64),
            Type,
            "all_reduce(mean) of an Int64 tensor is not an Int64 tensor; convert it to a float dtype first"
        );
        fits(Some(t.size()), what)?;
        match t.dtype() {
            DType::Float32 => self.all_reduce_as::<f32>(t, op),
            DType::Float64 => self.all_reduce_as::<f64>(t, op),
            _ => self.all_reduce_as::<i64>(t, op),
        }
    }

    fn all_reduce_as<T: Wire>(&self, t: &Tensor, op: ReduceOp) -> Result<Tensor> {
        let (send, mut recv) = read::<T>(self, t, "all_reduce", t.size())?;
        match op {
            ReduceOp::Sum | ReduceOp::Mean => self.all_reduce_sum_into(&send[..], &mut recv[..]),
            ReduceOp::Max => self.all_reduce_into(&send[..], &mut recv[..], SystemOperation::max()),
        }
        if op == ReduceOp::Mean {
            let n = self.size();
            for x in &mut recv {
                *x = T::mean(*x, n);
            }
        }
        Tensor::from_vec(recv, t.shape().clone())
    }

    /// Rank `root`'s `t`, returned on every rank. Every rank passes a tensor of `root`'s dtype
    /// (Float32, Float64 or Int64) and shape, whose values only `root`'s matter, and the same
    /// `root`; otherwise every rank gets `Error::Value`.
    pub fn broadcast(&self, t: &Tensor, root: usize) -> Result<Tensor> {
        let what = "broadcast";
        let _running = self.enter("World::broadcast")?;
        agree_on(self, BROADCAST.saturating_add(root as u64), t, what)?;
        ensure!(
            root < self.size(),
            Value,
            "broadcast from rank {root}, but the ranks are 0..{}",
            self.size()
        );
        fits(Some(t.size()), what)?;
        match t.dtype() {
            DType::Float32 => self.broadcast_as::<f32>(t, root),
            DType::Float64 => self.broadcast_as::<f64>(t, root),
            _ => self.broadcast_as::<i64>(t, root),
        }
    }

    fn broadcast_as<T: Wire>(&self, t: &Tensor, root: usize) -> Result<Tensor> {
        // the root's values, or room for them
        let local = if self.rank() == root {
            t.values::<T>()
        } else {
            alloc::filled(t.size(), T::default())
        };
        let mut buf = all_succeeded(self, local, "reading the tensor to broadcast")?;
        // root < size, which is a C int
        self.comm()
            .process_at_rank(root as i32)
            .broadcast_into(&mut buf[..]);
        Tensor::from_vec(buf, t.shape().clone())
    }

    /// Every rank's `t`, stacked on a new leading axis in rank order (shape `[size, ..dims]`),
    /// on every rank. Every rank passes a tensor of the same dtype (Float32, Float64 or Int64)
    /// and shape; otherwise every rank gets `Error::Value`.
    pub fn all_gather(&self, t: &Tensor) -> Result<Tensor> {
        let what = "all_gather";
        let _running = self.enter("World::all_gather")?;
        agree_on(self, ALL_GATHER, t, what)?;
        fits(t.size().checked_mul(self.size()), what)?;
        match t.dtype() {
            DType::Float32 => self.all_gather_as::<f32>(t),
            DType::Float64 => self.all_gather_as::<f64>(t),
            _ => self.all_gather_as::<i64>(t),
        }
    }

    fn all_gather_as<T: Wire>(&self, t: &Tensor) -> Result<Tensor> {
        // `all_gather` checked that the product fits
        let (send, mut recv) = read::<T>(self, t, "all_gather", t.size() * self.size())?;
        self.comm().all_gather_into(&send[..], &mut recv[..]);
        let mut dims = vec![self.size()];
        dims.extend(t.dims());
        Tensor::from_vec(recv, dims.as_slice())
    }
}

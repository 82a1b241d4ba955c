//! [`Ddp`]: a module trained on every rank on its share of each batch, with its gradients
//! averaged across ranks after every backward, so that every rank's optimizer takes the same
//! step and the replicas stay equal.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use autograd_core::{ensure, kernel, no_grad, Error, Result, Tensor};

use super::agreement::{agree, all_succeeded, Fnv};
use super::bucket::{Buckets, Plan};
use super::{fingerprint, replica, World};
use crate::module::Module;
use crate::optim::Optimizer;

/// How a [`Ddp`] communicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpOptions {
    /// The size of one gradient bucket in bytes (one non-blocking all-reduce each, started
    /// as soon as it is packed); a parameter larger than this is a bucket by itself. Must be
    /// positive and the same on every rank. Buckets are how gradients travel between
    /// machines; when every rank runs on one machine they go through shared memory as one
    /// stream instead (see [`World::use_shared_memory`]).
    pub bucket_bytes: usize,
}

impl Default for DdpOptions {
    /// 25 MiB buckets, PyTorch DDP's default.
    fn default() -> Self {
        DdpOptions {
            bucket_bytes: 25 * 1024 * 1024,
        }
    }
}

/// Distributed data parallel training of a [`Module`]: every rank holds a replica (rank 0's
/// parameters and buffers, copied in place when the `Ddp` is made), computes the loss of its
/// own share of the batch, and calls [`Ddp::backward`], which averages every parameter's
/// `.grad` across ranks; each rank's optimizer then takes the same step.
///
/// The parameters are those of the module when the `Ddp` is made (Float32 ones: only they have
/// gradients); a module whose structure changes afterwards needs a new `Ddp`.
///
/// ```no_run
/// use autograd_core::{shape, Rng, Tensor};
/// use autograd_ops::distributed::{Ddp, DdpOptions, World};
/// use autograd_ops::{mse_loss, Linear, Module, Optimizer, Sgd, SgdConfig};
///
/// let world = World::init()?;
/// let mut rng = Rng::new(0);
/// for _ in 0..world.rank() {
///     rng.jump(); // this rank's own stream
/// }
/// let model = Linear::new(4, 1, true, &mut rng)?;
/// let ddp = Ddp::new(&world, model, DdpOptions::default())?; // rank 0's parameters everywhere
/// let mut opt = Sgd::new(ddp.module().parameters(), SgdConfig::default())?;
/// // this rank's share of the batch
/// let x = Tensor::randn(shape![8, 4], &mut rng)?;
/// let y = Tensor::zeros(shape![8, 1], &autograd_core::DType::Float32)?;
/// let loss = mse_loss(&ddp.module().forward(&x)?, &y)?;
/// opt.zero_grad()?;
/// ddp.backward(&loss)?; // .grad is the mean over ranks
/// opt.step()?;
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub struct Ddp<'w, M: Module> {
    world: &'w World,
    module: M,
    /// The differentiable parameters, in declaration order.
    params: Vec<Tensor>,
    /// Their buckets' buffers, reused by every averaging (a `Ddp` stays on one thread).
    buckets: RefCell<Buckets>,
    /// How many buckets there are (readable while they are borrowed, during an averaging).
    bucket_count: usize,
    bucket_bytes: usize,
    /// Whether `backward` averages (false inside [`Ddp::no_sync`]).
    sync: bool,
}

/// PyTorch's name for [`Ddp`].
pub type DistributedDataParallel<'w, M> = Ddp<'w, M>;

impl<M: Module> fmt::Debug for Ddp<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ddp")
            .field("world", self.world)
            .field("parameters", &self.params.len())
            .field("buckets", &self.bucket_count())
            .field("bucket_bytes", &self.bucket_bytes)
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

impl<'w, M: Module> Ddp<'w, M> {
    /// Wraps `module` on every rank (every rank calls this, with the same options). The ranks'
    /// modules must have the same tensors (names, roles, shapes, dtypes, and which of them are
    /// one tensor held twice, averaged once): this is checked with one fixed-size all-gather
    /// of their fingerprints, and a difference is `Error::Value` on every rank naming the
    /// ranks that differ from rank 0. Then rank 0's parameters and buffers are copied in place
    /// into the other ranks' modules.
    pub fn new(world: &'w World, module: M, options: DdpOptions) -> Result<Self> {
        let _running = world.enter("Ddp::new")?;
        fingerprint::check(world, &module, options.bucket_bytes)?;
        // the same verdict everywhere: the ranks agreed on bucket_bytes
        ensure!(
            options.bucket_bytes > 0,
            Value,
            "DdpOptions::bucket_bytes must be positive"
        );
        replica::copy_rank0(world, &module)?;
        // a tensor the module holds twice (tied weights) is averaged once
        let mut seen = HashSet::new();
        let params: Vec<Tensor> = module
            .parameters()
            .into_iter()
            .filter(|p| p.is_differentiable() && seen.insert(p.id()))
            .collect();
        let sizes: Vec<usize> = params.iter().map(Tensor::size).collect();
        let plan = Plan::new(&sizes, options.bucket_bytes)?;
        Ok(Ddp {
            world,
            module,
            params,
            bucket_count: plan.len(),
            buckets: RefCell::new(Buckets::new(plan)),
            bucket_bytes: options.bucket_bytes,
            sync: true,
        })
    }

    /// The world the replicas live in.
    pub fn world(&self) -> &'w World {
        self.world
    }

    /// The wrapped module (its forward runs this rank's share of a batch).
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped module, mutably (to switch train/eval, say).
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// The wrapped module, unwrapped.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// How many gradient buckets one averaging sends.
    pub fn bucket_count(&self) -> usize {
        self.bucket_count
    }

    /// Runs `loss.backward()`, then (outside [`Ddp::no_sync`]) averages every parameter's
    /// `.grad` across ranks, in place (each gradient's version moves on; a parameter whose
    /// gradient was missing here or cannot be written in place gets a fresh one): every rank
    /// calls it once per step. A parameter that has no gradient on some ranks counts as zeros
    /// there; one that has none on any rank keeps none. When the backward fails on some rank,
    /// every rank gets an error (the failing rank its own) and the gradients stay local.
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        let local = loss.backward();
        if !self.sync {
            return local;
        }
        self.average_with(local.err(), |_| Ok(()), || Ok(()))
    }

    /// [`Ddp::backward`] and then `opt`'s step, overlapped, with the same result: each
    /// parameter is stepped as soon as its mean is written (on one machine, as the averaging
    /// reaches it; across machines, bucket by bucket while later buckets still travel) when
    /// `opt` [steps each parameter apart](Optimizer::steps_each_parameter_apart), as every
    /// optimizer of this crate does; another optimizer takes one step after the averaging.
    /// Every rank calls it once per step; it averages inside [`Ddp::no_sync`] too, ending the
    /// accumulation.
    ///
    /// `opt` may update a subset of the `Ddp`'s parameters, but no other tensor: one is
    /// `Error::Value` on this rank before its backward runs, and an error on every other rank,
    /// with no gradient averaged and no parameter stepped. A failed backward is as in
    /// [`Ddp::backward`], with nothing stepped. Clipping by the global norm needs every mean
    /// before any step: use `backward`, `clip_grad_norm` and `opt.step()` for it. A step that
    /// fails after the optimizer's checks (a carrier class refusing a write) is an error on
    /// every rank, and leaves the parameters stepped before it stepped; so is a collective
    /// that `opt`'s step calls, which is refused (`Error::Runtime` on that rank).
    pub fn backward_step<O: Optimizer + ?Sized>(&self, loss: &Tensor, opt: &mut O) -> Result<()> {
        let slots = match self.optimizer_slots(opt.params()) {
            Ok(slots) => slots,
            Err(e) => return self.average_with(Some(e), |_| Ok(()), || Ok(())),
        };
        let local = loss.backward().err();
        let apart = opt.steps_each_parameter_apart() && !self.storage_shared();
        let count = opt.params().len();
        let stepped = RefCell::new(vec![false; count]);
        let opt = RefCell::new(opt);
        let mut one: Vec<Option<Tensor>> = vec![None; count];
        self.average_with(
            local,
            |i| {
                let Some(j) = slots[i].filter(|_| apart) else {
                    return Ok(());
                };
                one[j] = self.params[i].grad()?;
                let result = opt.borrow_mut().step_with(&one);
                one[j] = None;
                stepped.borrow_mut()[j] = true;
                result
            },
            || {
                let mut opt = opt.borrow_mut();
                if !apart {
                    return opt.step();
                }
                // any parameter whose mean had no element to write: step() steps it too
                let stepped = stepped.borrow();
                let rest = opt
                    .params()
                    .iter()
                    .zip(stepped.iter())
                    .map(|(p, &done)| if done { Ok(None) } else { p.grad() })
                    .collect::<Result<Vec<_>>>()?;
                if rest.iter().any(Option::is_some) {
                    opt.step_with(&rest)?;
                }
                Ok(())
            },
        )
    }

    /// For each of the `Ddp`'s parameters, its index among `updated` (an optimizer's), or
    /// `Error::Value` for a tensor of `updated` that is not one of them.
    fn optimizer_slots(&self, updated: &[Tensor]) -> Result<Vec<Option<usize>>> {
        let ours: HashMap<u64, usize> = self
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id(), i))
            .collect();
        let mut slots = vec![None; self.params.len()];
        for (j, p) in updated.iter().enumerate() {
            let Some(&i) = ours.get(&p.id()) else {
                return Err(Error::Value(format!(
                    "backward_step: the optimizer's parameter {j} (shape {}) is not one of the Ddp's",
                    p.shape()
                )));
            };
            slots[i] = Some(j);
        }
        Ok(slots)
    }

    /// Whether parameters and their `.grad`s do not all lie in storage of their own (views of
    /// one buffer, gradients set by hand): stepping parameters one at a time, in the order
    /// their means arrive, might then differ from one step. (A `.grad` that cannot be read
    /// fails the averaging, which steps nothing.)
    fn storage_shared(&self) -> bool {
        let mut seen = HashSet::new();
        let grads = self.params.iter().filter_map(|p| p.grad().ok().flatten());
        self.params
            .iter()
            .flat_map(Tensor::carriers)
            .chain(grads.flat_map(|g| g.carriers()))
            .any(|c| !seen.insert(Arc::as_ptr(&c).cast::<()>()))
    }

    /// Averages every parameter's `.grad` across ranks now, for gradients computed some other
    /// way than [`Ddp::backward`] (`backward_with`, several losses). Every rank calls it.
    pub fn sync_grads(&self) -> Result<()> {
        self.average_with(None, |_| Ok(()), || Ok(()))
    }

    /// Averages the gradients, calling `averaged(i)` as soon as parameter `i`'s mean is
    /// written (never for one no rank has a gradient of; on one machine, not for one without
    /// elements either) and `finish()` after the last; `failed` is this rank's failure. A
    /// failure of either is an error on every rank.
    fn average_with(
        &self,
        failed: Option<Error>,
        mut averaged: impl FnMut(usize) -> Result<()>,
        finish: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        // held while the optimizer steps, so that a collective it calls is refused
        let _running = self.world.enter("Ddp's gradient averaging")?;
        let mut failed = failed;
        let grads: Vec<Option<Tensor>> = self
            .params
            .iter()
            .map(|p| {
                p.grad().unwrap_or_else(|e| {
                    failed.get_or_insert(e);
                    None
                })
            })
            .collect();
        if self.world.size() == 1 {
            // the mean over one rank is its own gradient
            if let Some(e) = failed {
                return Err(e);
            }
            (0..grads.len())
                .filter(|&i| grads[i].as_ref().is_some_and(|g| g.size() > 0))
                .try_for_each(&mut averaged)?;
            return finish();
        }
        let mut buckets = self.buckets.try_borrow_mut().map_err(|_| {
            Error::Runtime("a Ddp averaged its gradients while already averaging them".into())
        })?;
        let mut means = Means::new(&self.params, &grads, self.world.size());
        buckets.all_reduce(
            self.world,
            &grads,
            failed,
            |i, at, sums| {
                if means.write(i, at, sums, |g| self.params[i].set_grad(Some(g)))? {
                    averaged(i)?;
                }
                Ok(())
            },
            finish,
        )
    }

    /// Runs `f` with gradient averaging off: backward calls inside only accumulate into the
    /// local `.grad`, and the first synchronised [`Ddp::backward`] afterwards averages what
    /// accumulated (gradient accumulation over micro-batches with one communication).
    pub fn no_sync<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let was = std::mem::replace(&mut self.sync, false);
        let r = f(self);
        self.sync = was;
        r
    }

    /// Averages `grads` across ranks in place, for the functional `grad` path: every rank
    /// passes Float32 tensors of the same shapes in the same order (checked once per call:
    /// otherwise `Error::Value` on every rank). Each tensor's values become the mean over
    /// ranks: written in place where it is one CPU subtensor with a slot per element, else the
    /// tensor is replaced by a fresh one laid out like it.
    pub fn average_grads(&self, grads: &mut [Tensor]) -> Result<()> {
        let _running = self.world.enter("Ddp::average_grads")?;
        let hash = grads
            .iter()
            .fold(Fnv::new(), |h, g| {
                let dims = g.dims();
                dims.iter().fold(
                    h.text(&g.dtype().to_string()).num(dims.len() as u64),
                    |h, &d| h.num(d as u64),
                )
            })
            .finish();
        agree(
            self.world,
            &[grads.len() as u64, hash],
            "average_grads: the ranks' gradient lists differ",
            |r| format!("{} tensors, shapes and dtypes {:016x}", r[0], r[1]),
        )?;
        for g in grads.iter() {
            ensure!(
                g.is_differentiable(),
                Type,
                "average_grads takes Float32 gradients, not {}",
                g.dtype()
            );
        }
        let sizes: Vec<usize> = grads.iter().map(Tensor::size).collect();
        let mut buckets = Buckets::new(Plan::new(&sizes, self.bucket_bytes)?);
        let held: Vec<Option<Tensor>> = grads.iter().cloned().map(Some).collect();
        let targets: &[Tensor] = grads;
        let mut fresh: Vec<Option<Tensor>> = vec![None; grads.len()];
        let mut means = Means::new(targets, &held, self.world.size());
        buckets.all_reduce(
            self.world,
            &held,
            None,
            |i, at, sums| {
                means
                    .write(i, at, sums, |g| {
                        fresh[i] = Some(g);
                        Ok(())
                    })
                    .map(drop)
            },
            || Ok(()),
        )?;
        for (g, f) in grads.iter_mut().zip(fresh) {
            if let Some(f) = f {
                *g = f;
            }
        }
        Ok(())
    }

    /// Saves the module's state dict (as [`Module::save`]) on rank 0 only, then waits for it on
    /// every rank: every rank calls it, and returns once the file is complete. A failed save is
    /// an error on every rank.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let _running = self.world.enter("Ddp::save")?;
        let saved = if self.world.rank() == 0 {
            self.module.save(path)
        } else {
            Ok(())
        };
        all_succeeded(self.world, saved, "saving on rank 0")
    }

    /// Loads a state dict (as [`Module::load`], strict) on every rank, each from `path` on its
    /// own machine. Every rank checks its file first; when any rank's check fails, every rank
    /// gets an error and no module changes. A read failing after the checks (a disk error) is
    /// an error on every rank too, and leaves that rank's module partly loaded.
    pub fn load(&mut self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let _running = self.world.enter("Ddp::load")?;
        let checked = crate::persist::check_load(
            &self.module,
            path.as_ref(),
            crate::persist::LoadOptions::default(),
        );
        let checked = all_succeeded(self.world, checked, "checking the checkpoint")?;
        all_succeeded(self.world, checked.commit(), "loading the checkpoint").map(drop)
    }
}

/// Writes averaged gradients as their sums arrive, part by part and in any order: `sum / n`
/// goes into the gradient a rank had, in place under `no_grad` (no allocation), where it is
/// one CPU subtensor stored in logical order; else the parts are gathered, and once the last
/// has arrived the whole mean is written in place where the gradient has a slot per element
/// on one CPU subtensor, or handed over as a fresh tensor laid out for the target.
struct Means<'a> {
    targets: &'a [Tensor],
    locals: &'a [Option<Tensor>],
    n: f32,
    /// How many elements of each gradient have arrived.
    arrived: Vec<usize>,
    /// The means gathered so far of gradients that are not written part by part.
    gathered: HashMap<usize, Vec<f32>>,
}

impl<'a> Means<'a> {
    fn new(targets: &'a [Tensor], locals: &'a [Option<Tensor>], ranks: usize) -> Means<'a> {
        Means {
            targets,
            locals,
            n: ranks as f32,
            arrived: vec![0; targets.len()],
            gathered: HashMap::new(),
        }
    }

    /// Takes the sums of elements `at..at + sums.len()` of gradient `i`; `replace` gets the
    /// whole mean where it cannot be written in place. True once gradient `i`'s whole mean is
    /// written.
    fn write(
        &mut self,
        i: usize,
        at: usize,
        sums: &[f32],
        replace: impl FnOnce(Tensor) -> Result<()>,
    ) -> Result<bool> {
        let n = self.n;
        // dividing by a power of two is multiplying by its inverse, exactly
        let mean = |xs: &mut [f32], sums: &[f32]| {
            if (n as usize).is_power_of_two() {
                let inverse = n.recip();
                for (x, s) in xs.iter_mut().zip(sums) {
                    *x = s * inverse;
                }
            } else {
                for (x, s) in xs.iter_mut().zip(sums) {
                    *x = s / n;
                }
            }
        };
        let target = &self.targets[i];
        self.arrived[i] += sums.len();
        let whole = self.arrived[i] == target.size();
        let local = self.locals[i].as_ref().filter(|g| kernel::is_cpu(g));
        if let Some(g) = local.filter(|g| g.layout().is_row_major_contiguous()) {
            let _guard = no_grad();
            kernel::update::<f32, _>(g, |xs| {
                mean(&mut xs[at..at + sums.len()], sums);
                Ok(())
            })?;
            return Ok(whole);
        }
        let values = self
            .gathered
            .entry(i)
            .or_insert_with(|| vec![0.0; target.size()]);
        mean(&mut values[at..at + sums.len()], sums);
        if !whole {
            return Ok(false);
        }
        let Some(values) = self.gathered.remove(&i) else {
            return Ok(false);
        };
        match local.filter(|g| g.layout().is_injective()) {
            Some(g) => {
                let _guard = no_grad();
                kernel::update::<f32, _>(g, |xs| {
                    xs.copy_from_slice(&values);
                    Ok(())
                })?;
            }
            None => replace(target.f32_like(values)?)?,
        }
        Ok(true)
    }
}

//! Optimizers that update parameters in place: [`Sgd`], [`Adam`], [`AdamW`], [`RmsProp`] and
//! [`Adagrad`] behind one small [`Optimizer`] trait, each built from a flat parameter list or
//! from [`ParamGroup`]s with their own rate and weight decay; learning-rate [`schedule`]s that
//! set those rates; and clipping by global norm. The updates are PyTorch's single-tensor ones.
//!
//! A step writes each parameter's storage through one exclusive typed access with graph
//! construction disabled, so it bumps the parameter's version once: a graph built before the
//! step is refused by a later traversal (`Error::Runtime`, "in-place modification"), as the
//! spec's scenario "complete a traversal before mutating parameters" orders. A step validates
//! every gradient before it changes anything.
//!
//! ```
//! use autograd_core::{ops::{mean, mul}, shape, Rng, Tensor};
//! use autograd_ops::{Linear, Optimizer, Sgd, SgdConfig};
//! let layer = Linear::new(2, 1, true, &mut Rng::new(0)).unwrap();
//! let mut opt = Sgd::new(layer.parameters(), SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
//! let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![1, 2]).unwrap();
//! let y = layer.forward(&x).unwrap();
//! mean(&mul(&y, &y).unwrap()).unwrap().backward().unwrap();
//! opt.step().unwrap();
//! opt.zero_grad().unwrap();
//! assert!(layer.weight().grad().unwrap().is_none());
//! ```

mod adagrad;
mod adam;
mod adamw;
mod clip;
mod group;
mod moments;
mod parameter;
mod rmsprop;
pub mod schedule;
mod sgd;
mod update;

pub use adagrad::{Adagrad, AdagradConfig};
pub use adam::{Adam, AdamConfig};
pub use adamw::{AdamW, AdamWConfig};
pub use clip::{clip_grad_norm, clip_grad_norm_of};
pub use group::ParamGroup;
pub use rmsprop::{RmsProp, RmsPropConfig};
pub use sgd::{Sgd, SgdConfig};

use autograd_core::{Result, Tensor};

/// What a training loop asks of an optimizer.
pub trait Optimizer {
    /// The parameters it updates, in the order [`Optimizer::step_with`] takes gradients.
    fn params(&self) -> &[Tensor];

    /// One update from `grads`, one entry per parameter in order (what the functional
    /// `autograd_core::grad` returns for the parameters): `None` leaves that parameter (and
    /// its state) untouched, as PyTorch skips a parameter without a gradient. A wrong count
    /// or shape is `Error::Value`, a gradient that is not Float32 `Error::Type`; on such an
    /// error no parameter and no state changes. A carrier class that refuses a write (which
    /// these checks rule out for CPU storage) fails the step with every parameter and its
    /// state restored; the restored parameters' versions move on.
    fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<()>;

    /// One update from the parameters' `.grad`, as [`Optimizer::step_with`].
    fn step(&mut self) -> Result<()> {
        let grads = self
            .params()
            .iter()
            .map(Tensor::grad)
            .collect::<Result<Vec<_>>>()?;
        self.step_with(&grads)
    }

    /// Clears every parameter's `.grad` (sets it to `None`, PyTorch's default).
    fn zero_grad(&self) -> Result<()> {
        for p in self.params() {
            p.set_grad(None)?;
        }
        Ok(())
    }

    /// The learning rate.
    fn lr(&self) -> f32;

    /// Sets the learning rate for later steps (of every parameter group); a negative or
    /// non-finite rate is `Error::Value`.
    fn set_lr(&mut self, lr: f32) -> Result<()>;

    /// Each parameter group's learning rate (PyTorch's `[g["lr"] for g in param_groups]`);
    /// an optimizer without groups has one.
    fn group_lrs(&self) -> Vec<f32> {
        vec![self.lr()]
    }

    /// Sets each parameter group's learning rate for later steps, what a schedule calls: one
    /// finite rate `>= 0` per group, else `Error::Value` and nothing changes.
    fn set_group_lrs(&mut self, lrs: &[f32]) -> Result<()> {
        autograd_core::ensure!(
            lrs.len() == 1,
            Value,
            "got {} learning rates for an optimizer of one parameter group",
            lrs.len()
        );
        self.set_lr(lrs[0])
    }

    /// Whether its update of each parameter depends only on that parameter, its gradient and
    /// state of its own, so that a step of some parameters (`None` for the others) followed by
    /// a step of the rest is one step of all: true for every optimizer of this crate. An
    /// optimizer that says so is stepped a parameter at a time by `Ddp::backward_step`
    /// (feature `mpi`), each as soon as its mean is in; one that does not (the default, for
    /// state shared across parameters such as a global step count) is stepped once, after the
    /// whole averaging.
    fn steps_each_parameter_apart(&self) -> bool {
        false
    }
}

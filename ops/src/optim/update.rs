//! The in-place update kernel the optimizers share. A parameter's elements are updated through
//! one exclusive typed access to its storage ([`kernel::update`]: one version bump), walked in
//! logical order beside its gradient's and the optimizer's per-element state, and split across
//! threads above a size.

use autograd_core::kernel::alloc;
use autograd_core::{kernel, no_grad, Result, Tensor};

/// Matching stretches of a parameter, its gradient and `K` state buffers, in logical order.
struct Slots<'a, const K: usize> {
    param: &'a mut [f32],
    grad: &'a [f32],
    state: [&'a mut [f32]; K],
}

impl<'a, const K: usize> Slots<'a, K> {
    fn split_at(self, mid: usize) -> (Slots<'a, K>, Slots<'a, K>) {
        let (p0, p1) = self.param.split_at_mut(mid);
        let (g0, g1) = self.grad.split_at(mid);
        let mut s0: [&'a mut [f32]; K] = std::array::from_fn(|_| <&mut [f32]>::default());
        let mut s1: [&'a mut [f32]; K] = std::array::from_fn(|_| <&mut [f32]>::default());
        for (k, s) in self.state.into_iter().enumerate() {
            (s0[k], s1[k]) = s.split_at_mut(mid);
        }
        (
            Slots {
                param: p0,
                grad: g0,
                state: s0,
            },
            Slots {
                param: p1,
                grad: g1,
                state: s1,
            },
        )
    }

    /// `f(param, grad, state)` for every element: halves on two threads while the work is
    /// large (depth log2 of the size over the threshold), else one loop.
    fn run<F>(self, f: &F, bound: Bound)
    where
        F: Fn(&mut f32, f32, [&mut f32; K]) + Sync,
    {
        let n = self.param.len();
        if n >= 2 * kernel::PARALLEL_THRESHOLD && kernel::threads() > 1 {
            let (a, b) = self.split_at(n / 2);
            kernel::join(|| a.run(f, bound), || b.run(f, bound));
            return;
        }
        let Slots { param, grad, state } = self;
        match bound {
            Bound::Memory => each_element(param, grad, state, f),
            Bound::Arithmetic => {
                autograd_core::simd!(len = n; each_element(param, grad, state, f));
            }
        }
    }
}

/// What bounds an update's loop: memory, for a few multiply-adds per element (SGD), or
/// arithmetic, for a square root and divisions per element (Adam, RMSprop, Adagrad: the
/// baseline's four lanes wait on the divider), which then runs in the CPU's widest vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Memory,
    Arithmetic,
}

/// `f(param, grad, state)` for every element, `#[inline(always)]` for `simd!`.
#[allow(clippy::inline_always)]
#[inline(always)]
fn each_element<const K: usize, F>(param: &mut [f32], grad: &[f32], state: [&mut [f32]; K], f: &F)
where
    F: Fn(&mut f32, f32, [&mut f32; K]),
{
    // Every slice cut to `n`, so the index checks below fold away.
    let n = param.len();
    let grad = &grad[..n];
    let mut state = state.map(|s| &mut s[..n]);
    for i in 0..n {
        f(&mut param[i], grad[i], state.each_mut().map(|s| &mut s[i]));
    }
}

/// Updates `param` in place: `f(element, gradient element, state elements)` for every element
/// in logical order, where `state` holds `K` buffers of the parameter's size in logical order.
/// `grad` (already checked: Float32, the parameter's extents) is read where it lies when its
/// storage order is logical order, else gathered into `scratch` ([`kernel::update_reading`]
/// copies it first when it shares the parameter's carrier). Runs with graph construction
/// disabled; bumps the parameter's version once. `bound` says how the loop is compiled.
pub(crate) fn update<const K: usize, F>(
    param: &Tensor,
    grad: &Tensor,
    bound: Bound,
    scratch: &mut Vec<f32>,
    state: [&mut [f32]; K],
    f: F,
) -> Result<()>
where
    F: Fn(&mut f32, f32, [&mut f32; K]) + Sync,
{
    let _no_grad = no_grad();
    debug_assert!(state.iter().all(|s| s.len() == param.size()));
    kernel::update_reading::<f32, f32, _>(param, grad, |values, e| {
        let grad: &[f32] = if let Some(g) = e.as_slice() {
            g
        } else {
            scratch.clear();
            alloc::resize(scratch, e.len(), 0.0)?;
            e.copy_range(0, scratch);
            scratch
        };
        Slots {
            param: values,
            grad,
            state,
        }
        .run(&f, bound);
        Ok(())
    })
}

/// `e`, the failure of `what`, after writing each tensor written before it its old values
/// (logical order) back, trying every one: its context says `restored`, or that a write-back
/// failed too.
pub(crate) fn undo_writes(
    e: autograd_core::Error,
    what: &str,
    olds: Vec<(&Tensor, Vec<f32>)>,
    restored: &str,
) -> autograd_core::Error {
    let mut back = Ok(());
    for (t, values) in olds.into_iter().rev() {
        let one = Tensor::from_vec(values, t.shape().clone()).and_then(|old| t.copy_from(&old));
        back = back.and(one);
    }
    match back {
        Ok(()) => e.context(format!("{what} ({restored})")),
        Err(r) => e.context(format!(
            "{what}; restoring what was written before it failed too ({r})"
        )),
    }
}

/// Runs `step(i, state of i)` for every parameter `i` with a gradient, in index order (a
/// gradient may share a later parameter's storage), all or nothing. Only a write to another
/// carrier class than the CPU's can fail after the step's checks (a class may refuse a write);
/// when such a parameter takes part, every parameter's values and state are kept before the
/// first write, and a failure gives the parameters stepped before it their values and state
/// back (their versions move on) and the failing one its state, then returns the error.
pub(crate) fn step_all<S: Clone>(
    params: &[Tensor],
    grads: &[Option<Tensor>],
    state: &mut [S],
    mut step: impl FnMut(usize, &mut S) -> Result<()>,
) -> Result<()> {
    let stepped: Vec<usize> = (0..params.len())
        .filter(|&i| grads.get(i).is_some_and(Option::is_some))
        .collect();
    if stepped.iter().all(|&i| kernel::is_cpu(&params[i])) {
        for &i in &stepped {
            step(i, &mut state[i])?;
        }
        return Ok(());
    }
    let mut olds = stepped
        .iter()
        .map(|&i| Ok((params[i].values::<f32>()?, state[i].clone())))
        .collect::<Result<Vec<_>>>()?;
    for (n, &i) in stepped.iter().enumerate() {
        let Err(e) = step(i, &mut state[i]) else {
            continue;
        };
        let mut written = Vec::with_capacity(n);
        for (k, (values, s)) in olds.drain(..=n).enumerate() {
            let j = stepped[k];
            state[j] = s;
            if k < n {
                written.push((&params[j], values));
            }
        }
        let restored = if n == 0 {
            "its state was restored"
        } else {
            "every parameter and its state were restored"
        };
        return Err(undo_writes(
            e,
            &format!("stepping parameter {i}"),
            written,
            restored,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Slots;

    /// Splitting at any point and running both halves is the same as one loop.
    #[test]
    fn halves_cover_every_element_once() {
        for mid in [0, 1, 5, 9] {
            let (mut p, g) = (
                vec![1.0f32; 9],
                (0..9).map(|i| i as f32).collect::<Vec<_>>(),
            );
            let (mut s0, mut s1) = (vec![0.0f32; 9], vec![0.0f32; 9]);
            let slots = Slots {
                param: &mut p,
                grad: &g,
                state: [&mut s0[..], &mut s1[..]],
            };
            let f = |p: &mut f32, g: f32, [a, b]: [&mut f32; 2]| {
                *p += g;
                *a += 1.0;
                *b = g * 2.0;
            };
            let (x, y) = slots.split_at(mid);
            x.run(&f, super::Bound::Memory);
            y.run(&f, super::Bound::Arithmetic);
            assert_eq!(p, (0..9).map(|i| 1.0 + i as f32).collect::<Vec<_>>());
            assert_eq!(s0, [1.0; 9]);
            assert_eq!(s1, (0..9).map(|i| 2.0 * i as f32).collect::<Vec<_>>());
        }
    }
}

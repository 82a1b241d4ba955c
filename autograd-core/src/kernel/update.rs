//! In-place writes to a tensor that already exists (an optimizer's parameter, a result its maker
//! still alone holds), where every other kernel writes fresh storage: one exclusive access and
//! one version bump per write, on any layout and carrier class.

use super::Elements;
use crate::error::{bail, Result};
use crate::layout::Layout;
use crate::storage::allocation::with_capacity;
use crate::storage::scalar::Element;
use crate::tensor::Tensor;

/// Whether `t` is one subtensor in a CPU carrier: kernels then borrow its elements instead of
/// copying them ([`read`](super::read)), and [`update`] writes them in place, which cannot fail
/// once `t`'s dtype and layout are known to fit.
pub fn is_cpu(t: &Tensor) -> bool {
    t.subtensor_count() == 1 && t.carrier().is_ok_and(|c| c.as_cpu().is_some())
}

/// Runs `f` on `t`'s elements (as `T`, the storage element type) in logical order as one
/// mutable slice, and makes what `f` leaves there `t`'s elements; returns what `f` returns.
///
/// On a CPU carrier this is in place, under one write lock and one version bump (also when
/// `f` fails: it may have written): the storage itself when `t` is compact row-major, else a
/// copy gathered in logical order and scattered back under the same lock. Another carrier
/// class gets `t`'s values, then one [`Tensor::copy_from`] (which that class may refuse).
/// A tensor of several subtensors is `Error::NotImplemented`.
///
/// `f` runs while `t`'s storage is locked for writing: it must not read or write `t` (or a
/// view of it) through a kernel call.
///
/// ```
/// use autograd_core::{kernel, shape, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], shape![2, 2]).unwrap();
/// // a transposed view: its elements in logical order are 1, 3, 2, 4
/// let t = a.transpose(0, 1).unwrap();
/// kernel::update::<f32, _>(&t, |xs| {
///     xs.iter_mut().enumerate().for_each(|(i, x)| *x += 10.0 * i as f32);
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(a.values::<f32>().unwrap(), [1.0, 22.0, 13.0, 34.0]);
/// ```
pub fn update<T: Element, R>(t: &Tensor, f: impl FnOnce(&mut [T]) -> Result<R>) -> Result<R> {
    let (layout, off) = (t.layout(), t.offset());
    let Some(cpu) = t.carrier()?.as_cpu() else {
        // Another carrier class: computed in logical order, then one public copy (one bump).
        let mut values = t.values::<T>()?;
        let r = f(&mut values)?;
        t.copy_from(&Tensor::from_vec(values, t.shape().clone())?)?;
        return Ok(r);
    };
    cpu.with_slice_mut::<T, _>(|data| in_logical_order(data, off, layout, f))
}

/// [`update`] of `t` with `src`'s elements (as `U`) beside it: `f(t's elements, src's)`. When
/// both are CPU tensors in different carriers, `src` is borrowed under a read lock while `t` is
/// written (the two locks taken in one fixed order, as [`read_pair`](super::read_pair) takes
/// them); otherwise (one carrier, as a parameter and a view of it, or another carrier class)
/// `src` is read through a compact copy first, so no carrier is locked twice. For an
/// optimizer's step, whose gradient is as large as its parameter.
///
/// `f` runs while `t`'s storage is locked for writing and `src`'s for reading: it must not
/// reach either through a kernel call.
///
/// ```
/// use autograd_core::{kernel, shape, Tensor};
/// let p = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3]).unwrap();
/// let g = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], shape![3]).unwrap();
/// // p -= 0.1 g, reading g where it lies
/// kernel::update_reading::<f32, f32, _>(&p, &g, |xs, e| {
///     let g = e.as_slice().unwrap_or_default();
///     xs.iter_mut().zip(g).for_each(|(x, g)| *x -= 0.1 * g);
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(p.values::<f32>().unwrap(), [0.0, 0.0, 0.0]);
/// ```
pub fn update_reading<T: Element, U: Element, R>(
    t: &Tensor,
    src: &Tensor,
    f: impl FnOnce(&mut [T], Elements<'_, U>) -> Result<R>,
) -> Result<R> {
    let (layout, off) = (t.layout(), t.offset());
    let target = t.carrier()?.as_cpu();
    let source = if src.subtensor_count() == 1 {
        src.carrier()?.as_cpu()
    } else {
        None
    };
    let (Some(target), Some(source)) = (target, source) else {
        return update_copying(t, src, f);
    };
    if target.id() == source.id() {
        return update_copying(t, src, f);
    }
    let (from, src_layout) = (src.offset(), src.layout());
    let both = |data: &mut [T], read: &[U]| -> Result<R> {
        let e = Elements::new(read, from, src_layout)?;
        in_logical_order(data, off, layout, |xs| f(xs, e))
    };
    // the lower address first, as every pair of carriers is locked
    if std::ptr::from_ref(target).cast::<u8>() < std::ptr::from_ref(source).cast::<u8>() {
        target.with_slice_mut::<T, _>(|data| source.with_slice::<U, _>(|read| both(data, read))?)
    } else {
        source.with_slice::<U, _>(|read| target.with_slice_mut::<T, _>(|data| both(data, read)))?
    }
}

/// [`update_reading`] through a compact copy of `src`'s values, taken before `t` is locked.
fn update_copying<T: Element, U: Element, R>(
    t: &Tensor,
    src: &Tensor,
    f: impl FnOnce(&mut [T], Elements<'_, U>) -> Result<R>,
) -> Result<R> {
    let values = src.values::<U>()?;
    let compact = Layout::compact_row_major(src.shape().clone())?;
    update(t, |xs| f(xs, Elements::new(&values, 0, &compact)?))
}

/// Runs `f` on the elements of the tensor at `off` with `layout` in `data` as one mutable slice
/// in logical order: the storage itself when the layout is compact row-major, else a copy
/// gathered in logical order and scattered back.
fn in_logical_order<T: Element, R>(
    data: &mut [T],
    off: usize,
    layout: &Layout,
    f: impl FnOnce(&mut [T]) -> Result<R>,
) -> Result<R> {
    let n = layout.size();
    if n == 0 {
        return f(&mut []);
    }
    let Some(storage) = off
        .checked_add(layout.cosize())
        .and_then(|end| data.get_mut(off..end))
    else {
        bail!(
            Runtime,
            "layout {layout} at offset {off} does not fit its carrier of {} elements",
            data.len()
        );
    };
    if layout.is_row_major_contiguous() {
        // storage order is logical order: the slice itself
        return f(&mut storage[..n]);
    }
    // a strided tensor: gather in logical order, update, scatter back
    let mut values = with_capacity(n)?;
    layout.for_each_offset(|o| values.push(storage[o]));
    let r = f(&mut values)?;
    let mut it = values.into_iter();
    layout.for_each_offset(|o| {
        if let Some(v) = it.next() {
            storage[o] = v;
        }
    });
    Ok(r)
}

/// Copies `src` into `dst`, a view of a buffer no one else holds, run by run when both are
/// CPU tensors of one layout (a cotangent the engine had laid out like the slice); answers
/// whether it did. Taking `dst`'s write lock while reading `src` cannot deadlock: no other
/// thread can reach `dst`.
pub(crate) fn copy_like(dst: &Tensor, src: &Tensor) -> Result<bool> {
    let (Ok(d), Ok(s)) = (dst.carrier(), src.carrier()) else {
        return Ok(false);
    };
    // slot for slot between CPU storages of one layout; other carrier classes take the
    // caller's copy
    let (Some(d), Some(_)) = (d.as_cpu(), s.as_cpu()) else {
        return Ok(false);
    };
    if src.subtensor_count() != 1 || src.layout() != dst.layout() || d.id() == s.id() {
        return Ok(false);
    }
    let layout = dst.layout();
    let (to, end) = (dst.offset(), dst.offset() + layout.cosize());
    super::read::<f32, _>(src, |e| {
        let (data, from) = e.storage();
        d.with_slice_mut::<f32, _>(|out| {
            let (Some(out), Some(data)) = (out.get_mut(to..end), data.get(from..)) else {
                bail!(Runtime, "unbind: a slice lies outside its buffer");
            };
            layout.for_each_run(|start, len, stride| {
                if stride == 1 {
                    out[start..start + len].copy_from_slice(&data[start..start + len]);
                } else {
                    (0..len).for_each(|k| out[start + k * stride] = data[start + k * stride]);
                }
            });
            Ok(true)
        })
    })?
}

//! Typed read access to a tensor's elements without copying.

use crate::error::{ensure, Result};
use crate::layout::{Layout, Leaf};
use crate::storage::carrier::{CpuCarrier, Store};
use crate::storage::scalar::Element;
use crate::tensor::{record_width, Tensor};

/// A tensor's elements as stored: a slice of its storage, the offset of its layout's origin,
/// and the layout mapping logical positions to storage. Every offset the layout addresses is
/// inside the slice (checked once, when the access is made).
#[derive(Debug, Clone, Copy)]
pub struct Elements<'a, T> {
    data: &'a [T],
    offset: usize,
    layout: &'a Layout,
}

/// One run of elements in logical order: `len` elements from `start`, `stride` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Storage index of the first element.
    pub start: usize,
    /// Number of elements.
    pub len: usize,
    /// Distance between consecutive elements (0 for a broadcast run).
    pub stride: usize,
}

impl<'a, T: Copy> Elements<'a, T> {
    /// Elements of `layout` placed at `offset` in `data`; fails unless every addressed offset
    /// lies inside `data`.
    pub fn new(data: &'a [T], offset: usize, layout: &'a Layout) -> Result<Elements<'a, T>> {
        if layout.size() > 0 {
            let end = offset.checked_add(layout.cosize());
            ensure!(
                end.is_some_and(|e| e <= data.len()),
                Runtime,
                "layout {layout} at offset {offset} reaches past storage of {} elements",
                data.len()
            );
        }
        Ok(Elements {
            data,
            offset,
            layout,
        })
    }

    /// The same storage under another layout of the same elements (a permutation of modes),
    /// checked like [`Elements::new`].
    pub fn relayout(&self, layout: &'a Layout) -> Result<Elements<'a, T>> {
        Elements::new(self.data, self.offset, layout)
    }

    /// The number of logical elements.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// The storage slice runs index into (crate kernels walk runs over it directly).
    pub(crate) fn data(&self) -> &'a [T] {
        self.data
    }

    /// The layout.
    pub fn layout(&self) -> &'a Layout {
        self.layout
    }

    /// The storage slice and the offset of the layout's origin in it, for kernels that walk
    /// the layout themselves (a GEMM taking strides).
    pub fn storage(&self) -> (&'a [T], usize) {
        (self.data, self.offset)
    }

    /// The elements as one slice in logical order, when storage order is logical order
    /// without holes.
    pub fn as_slice(&self) -> Option<&'a [T]> {
        let n = self.layout.size();
        match self.layout.runs() {
            _ if n == 0 => Some(&[]),
            [] => self.data.get(self.offset..=self.offset),
            [first] if first.stride == 1 => self.data.get(self.offset..self.offset + n),
            _ => None,
        }
    }

    /// Calls `f` with the runs that cover logical positions `start..start + len` in order.
    ///
    /// # Panics
    /// When the positions reach past [`Elements::len`] (as slice indexing does): the layout
    /// has no element there, and walking on would wrap around to its first ones.
    pub fn for_each_run_in(&self, start: usize, len: usize, mut f: impl FnMut(Run)) {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len()),
            "positions {start}..{start}+{len} reach past the {} elements of layout {}",
            self.len(),
            self.layout
        );
        if len == 0 {
            return;
        }
        let runs = self.layout.runs();
        let Some((inner, outer)) = runs.split_first() else {
            // one element at the origin
            f(Run {
                start: self.offset,
                len: 1,
                stride: 0,
            });
            return;
        };
        let mut cursor = Cursor::at(outer, start / inner.extent);
        let mut within = start % inner.extent;
        let mut left = len;
        while left > 0 {
            let n = (inner.extent - within).min(left);
            f(Run {
                start: self.offset + cursor.base + within * inner.stride,
                len: n,
                stride: inner.stride,
            });
            left -= n;
            within = 0;
            cursor.advance(outer);
        }
    }

    /// Calls `f` with every element in logical order.
    pub fn for_each(&self, f: impl FnMut(T)) {
        self.for_each_in(0, self.len(), f);
    }

    /// Calls `f` with the elements at logical positions `start..start + len`, in order.
    /// Panics as [`Elements::for_each_run_in`] does.
    pub fn for_each_in(&self, start: usize, len: usize, mut f: impl FnMut(T)) {
        let data = self.data;
        self.for_each_run_in(start, len, |r| {
            if r.stride == 1 {
                data[r.start..r.start + r.len].iter().for_each(|&x| f(x));
            } else {
                (0..r.len).for_each(|i| f(data[r.start + i * r.stride]));
            }
        });
    }

    /// Copies every element into `out` (of [`Elements::len`] values) in logical order, in
    /// chunks across the kernel threads when there are many.
    pub fn copy_all(&self, out: &mut [T])
    where
        T: Send + Sync,
    {
        let chunk = super::PARALLEL_THRESHOLD;
        if out.len() >= 2 * chunk {
            super::for_each_chunk_mut(out, chunk, |k, o| self.copy_range(k * chunk, o));
        } else {
            self.copy_range(0, out);
        }
    }

    /// Copies the elements at logical positions `start..start + out.len()` into `out`.
    /// Panics as [`Elements::for_each_run_in`] does.
    pub fn copy_range(&self, start: usize, out: &mut [T]) {
        let data = self.data;
        let mut i = 0;
        // a run at a time: a unit-stride run is one slice copy, a broadcast run one fill
        self.for_each_run_in(start, out.len(), |r| {
            let dst = &mut out[i..i + r.len];
            match r.stride {
                1 => copy_short(dst, &data[r.start..r.start + r.len]),
                0 => dst.fill(data[r.start]),
                s => dst
                    .iter_mut()
                    .zip(data[r.start..].iter().step_by(s))
                    .for_each(|(d, &x)| *d = x),
            }
            i += r.len;
        });
    }

    /// The elements as an ndarray view with one axis per top-level mode, when the layout is
    /// flat (every mode a single leaf).
    pub fn array_view(&self) -> Option<ndarray::ArrayViewD<'a, T>> {
        use ndarray::{IxDyn, ShapeBuilder};
        let l = self.layout;
        if !l.is_flat() || !l.is_injective() {
            return None;
        }
        let dims = l.dims();
        let strides: Vec<usize> = (0..l.rank()).map(|i| l.mode_leaves(i)[0].stride).collect();
        let shape = IxDyn(&dims).strides(IxDyn(&strides));
        ndarray::ArrayView::from_shape(shape, self.data.get(self.offset..)?).ok()
    }
}

/// `dst = src`: a short copy (a row of an attention head, a few cache lines) made a vector at
/// a time in line, where a call to `memcpy` costs more than the copy; long ones are
/// `copy_from_slice`.
///
/// # Panics
/// When the lengths differ, as `copy_from_slice` does.
#[allow(clippy::inline_always)] // the point: no call for a copy of a few vectors
#[inline(always)]
pub fn copy_short<T: Copy>(dst: &mut [T], src: &[T]) {
    const LANES: usize = 8;
    assert_eq!(dst.len(), src.len(), "copy_short: lengths differ");
    if dst.len() > 16 * LANES {
        dst.copy_from_slice(src);
        return;
    }
    let (dst_blocks, dst_rest) = dst.as_chunks_mut::<LANES>();
    let (src_blocks, src_rest) = src.as_chunks::<LANES>();
    for i in 0..16 {
        match (dst_blocks.get_mut(i), src_blocks.get(i)) {
            (Some(d), Some(s)) => *d = *s,
            _ => break,
        }
    }
    for (d, s) in dst_rest.iter_mut().zip(src_rest) {
        *d = *s;
    }
}

/// An odometer over the outer coalesced leaves: `base` is the storage offset of the current
/// outer coordinate.
struct Cursor {
    counter: Vec<usize>,
    base: usize,
}

impl Cursor {
    /// The cursor at outer position `index` (counted in logical order).
    fn at(outer: &[Leaf], mut index: usize) -> Cursor {
        let mut counter = vec![0; outer.len()];
        let mut base = 0;
        for (c, l) in counter.iter_mut().zip(outer) {
            *c = index % l.extent;
            index /= l.extent;
            base += *c * l.stride;
        }
        Cursor { counter, base }
    }

    fn advance(&mut self, outer: &[Leaf]) {
        for (c, l) in self.counter.iter_mut().zip(outer) {
            *c += 1;
            self.base += l.stride;
            if *c < l.extent {
                return;
            }
            self.base -= l.stride * l.extent;
            *c = 0;
        }
    }
}

fn check_simple(t: &Tensor) -> Result<()> {
    ensure!(
        record_width(t.dtype()) == 1,
        NotImplemented,
        "kernels do not read compound dtype {}",
        t.dtype()
    );
    Ok(())
}

/// A compact copy of `t`'s elements, for carriers kernels cannot borrow from.
fn copied<T: Element>(t: &Tensor) -> Result<(Vec<T>, Layout)> {
    Ok((
        t.values::<T>()?,
        Layout::compact_row_major(t.shape().clone())?,
    ))
}

/// Runs `f` on `t`'s elements as `T` (the storage element type): borrowed from a CPU carrier
/// without copying, or a compact copy for other carriers and multi-subtensor tensors.
///
/// A CPU carrier stays read-locked while `f` runs, so `f` must not write `t`'s storage, nor
/// read it again through another kernel call: once a writer on another thread waits for the
/// lock, a second read lock on this thread waits behind it, and neither can go on.
pub fn read<T: Element, R>(t: &Tensor, f: impl FnOnce(Elements<'_, T>) -> R) -> Result<R> {
    check_simple(t)?;
    if let Some(cpu) = cpu_of(t) {
        let (offset, layout) = (t.offset(), t.layout());
        return cpu.with_slice::<T, _>(|data| Ok(f(Elements::new(data, offset, layout)?)))?;
    }
    let (data, layout) = copied::<T>(t)?;
    Ok(f(Elements::new(&data, 0, &layout)?))
}

/// Runs `f` on `t`'s elements as one slice in logical (row-major) order: borrowed when
/// storage order is logical order, else one compact copy (`Error::Value` when that copy cannot
/// be allocated). For kernels that address positions directly (gathers and scatters) rather
/// than stream them.
pub fn read_logical<T: Element, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    read::<T, _>(t, |e| Ok(f(&logical(&e)?)))?
}

/// [`read_logical`] of two tensors at once, their carriers locked as [`read_pair`] locks them
/// (so a kernel reading a tensor and a view of it never takes one lock twice).
pub fn read_logical_pair<T: Element, U: Element, R>(
    a: &Tensor,
    b: &Tensor,
    f: impl FnOnce(&[T], &[U]) -> R,
) -> Result<R> {
    read_pair::<T, U, _>(a, b, |x, y| Ok(f(&logical(&x)?, &logical(&y)?)))?
}

/// The elements in logical order: the storage itself when it is in that order, else a copy.
fn logical<'a, T: Element>(e: &Elements<'a, T>) -> Result<std::borrow::Cow<'a, [T]>> {
    if let Some(s) = e.as_slice() {
        return Ok(std::borrow::Cow::Borrowed(s));
    }
    let mut v = crate::storage::allocation::filled(e.len(), T::default())?;
    e.copy_range(0, &mut v);
    Ok(std::borrow::Cow::Owned(v))
}

fn cpu_of(t: &Tensor) -> Option<&CpuCarrier<dyn Store>> {
    if t.subtensor_count() != 1 {
        return None;
    }
    t.carrier().ok()?.as_cpu()
}

/// Runs `f` on the elements of `a` (as `T`) and `b` (as `U`) at once. Two CPU carriers are
/// locked in one fixed order (and a carrier shared by both once), so no two kernels wait for
/// each other.
pub fn read_pair<T: Element, U: Element, R>(
    a: &Tensor,
    b: &Tensor,
    f: impl FnOnce(Elements<'_, T>, Elements<'_, U>) -> R,
) -> Result<R> {
    check_simple(a)?;
    check_simple(b)?;
    match (cpu_of(a), cpu_of(b)) {
        (Some(ca), Some(cb)) if std::ptr::addr_eq(ca, cb) => {
            ca.with_slices::<T, U, _>(|x, y| {
                Ok(f(
                    Elements::new(x, a.offset(), a.layout())?,
                    Elements::new(y, b.offset(), b.layout())?,
                ))
            })?
        }
        (Some(ca), Some(cb)) => {
            let both = |x: &[T], y: &[U]| -> Result<R> {
                Ok(f(
                    Elements::new(x, a.offset(), a.layout())?,
                    Elements::new(y, b.offset(), b.layout())?,
                ))
            };
            if std::ptr::from_ref(ca).cast::<u8>() < std::ptr::from_ref(cb).cast::<u8>() {
                ca.with_slice::<T, _>(|x| cb.with_slice::<U, _>(|y| both(x, y)))??
            } else {
                cb.with_slice::<U, _>(|y| ca.with_slice::<T, _>(|x| both(x, y)))??
            }
        }
        _ => {
            let (x, lx) = copied::<T>(a)?;
            let (y, ly) = copied::<U>(b)?;
            Ok(f(Elements::new(&x, 0, &lx)?, Elements::new(&y, 0, &ly)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::copy_short;

    /// Every length around the in-line limit and the vector width copies exactly.
    #[test]
    fn short_copies_copy_every_element() {
        for n in (0..20).chain(120..140).chain([200]) {
            let src: Vec<u32> = (0..n).map(|i| i * 7 + 1).collect();
            let mut dst = vec![0u32; n as usize];
            copy_short(&mut dst, &src);
            assert_eq!(dst, src, "length {n}");
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn a_short_copy_of_unequal_lengths_panics() {
        copy_short(&mut [0.0f32; 3], &[1.0; 4]);
    }
}

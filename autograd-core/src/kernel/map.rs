//! Elementwise maps: one closure per element, generic over the element types, in parallel
//! above [`PARALLEL_THRESHOLD`](super::PARALLEL_THRESHOLD).

use super::access::{read, read_pair, Elements};
use super::output::fresh_like_overwritten;
use super::parallel::{parallel, CHUNK};
use crate::error::{ensure, Result};
use crate::storage::scalar::Element;
use crate::tensor::Tensor;

/// `f(a_i)` for every element of `a`, in a compact row-major tensor of `a`'s shape and fresh
/// storage of `a`'s carrier class. `a` may have any layout (transposed, sliced, broadcast).
pub fn map<T: Element, U: Element>(a: &Tensor, f: impl Fn(T) -> U + Sync) -> Result<Tensor> {
    read::<T, _>(a, |x| {
        fresh_like_overwritten::<U>(a, |out| {
            fill_from(out, &x, &f);
            Ok(())
        })
    })?
}

/// `f(a_i, b_i)` for every position of `a` and `b`, which must have one shape (broadcast first:
/// the ops do it through the differentiable stride-0 view, so gradients fold by the engine's
/// rule). The result is compact row-major in fresh storage of `a`'s carrier class.
pub fn zip<T: Element, U: Element, V: Element>(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, U) -> V + Sync,
) -> Result<Tensor> {
    ensure!(
        a.shape() == b.shape(),
        Value,
        "elementwise operands must have one shape, got {} and {} (broadcast them first)",
        a.shape(),
        b.shape()
    );
    read_pair::<T, U, _>(a, b, |x, y| {
        fresh_like_overwritten::<V>(a, |out| {
            zip_into(out, &x, &y, &f);
            Ok(())
        })
    })?
}

/// [`map`] for a tensor the caller hands over: when nothing else can observe `a` (its only
/// handle, no node or `.grad`, a carrier no view or copy shares) and it is a compact row-major
/// CPU tensor of `T`, `f` overwrites its elements in place and `a` itself is returned; otherwise
/// the result is [`map`]'s. A VJP that takes its cotangent by value (`fn vjp(g: Tensor, ..)`)
/// uses it so that a chain of such VJPs passes one gradient buffer down instead of allocating
/// one per node.
pub fn map_owned<T: Element>(mut a: Tensor, f: impl Fn(T) -> T + Sync) -> Result<Tensor> {
    if in_place::<T>(&mut a, |s| update_in_place(s, &f)) {
        return Ok(a);
    }
    map(&a, f)
}

/// [`zip`] for a first operand the caller hands over: in place in `a`'s storage when
/// [`map_owned`] would write there and `b` has `a`'s shape (any layout: a stride-0 broadcast of
/// a saved tensor beside a batched cotangent is walked run by run); otherwise [`zip`]'s result.
pub fn zip_owned<T: Element, U: Element>(
    mut a: Tensor,
    b: &Tensor,
    f: impl Fn(T, U) -> T + Sync,
) -> Result<Tensor> {
    if a.shape() == b.shape() {
        let done = read::<U, _>(b, |y| {
            in_place::<T>(&mut a, |s| match y.as_slice() {
                Some(ys) => zip_in_place(s, ys, &f),
                None => run_chunks(s, |start, o| zip_runs_in_place(o, &y, start, &f)),
            })
        });
        if done.unwrap_or(false) {
            return Ok(a);
        }
    }
    zip(&a, b, f)
}

/// Runs `update` on `a`'s elements in place when nothing else can observe them (see
/// [`Tensor::sole_carrier`]) and they are one compact row-major run of `T` on the CPU; false,
/// with nothing written and no version bumped, when it cannot. The write bumps the carrier's
/// version, as every write does, but takes no lock: nothing else can reach the carrier.
fn in_place<T: Element>(a: &mut Tensor, update: impl FnOnce(&mut [T])) -> bool {
    let l = a.layout();
    let n = l.size();
    if a.dtype() != &T::DTYPE || l.size() != l.cosize() || !l.is_row_major_contiguous() {
        return false;
    }
    let Some((carrier, offset)) = a.sole_carrier() else {
        return false;
    };
    let fits = offset
        .checked_add(n)
        .is_some_and(|end| end <= carrier.len());
    let Some(cpu) = carrier.as_cpu().filter(|_| fits) else {
        return false;
    };
    // a storage dtype other than `T` gives no access (and no version bump)
    // SAFETY: `sole_carrier` found `a` the only handle (held by `&mut` here) and its header
    // the only holder of the carrier, with no `Weak`: nothing else reaches it.
    unsafe {
        cpu.with_slice_mut_unshared::<T, _>(|s| {
            if let Some(s) = s.get_mut(offset..offset + n) {
                update(s);
            }
        })
    }
    .is_some()
}

/// `s[i] = f(s[i])`, in parallel above the threshold, compiled like [`map_slice`].
fn update_in_place<T: Element>(s: &mut [T], f: &(impl Fn(T) -> T + Sync)) {
    #[allow(clippy::inline_always)] // `simd!` needs the loop inlined into each copy
    #[inline(always)]
    fn body<T: Element>(s: &mut [T], f: &impl Fn(T) -> T) {
        for v in s.iter_mut() {
            *v = f(*v);
        }
    }
    run_chunks(s, |_, o| crate::simd!(len = o.len(); body(o, f)));
}

/// `s[i] = f(s[i], ys[i])`, in parallel above the threshold, compiled like [`zip_slices`].
fn zip_in_place<T: Element, U: Element>(s: &mut [T], ys: &[U], f: &(impl Fn(T, U) -> T + Sync)) {
    #[allow(clippy::inline_always)] // `simd!` needs the loop inlined into each copy
    #[inline(always)]
    fn body<T: Element, U: Element>(s: &mut [T], ys: &[U], f: &impl Fn(T, U) -> T) {
        s.iter_mut().zip(ys).for_each(|(v, &q)| *v = f(*v, q));
    }
    run_chunks(s, |start, o| {
        let ys = &ys[start..start + o.len()];
        crate::simd!(len = o.len(); body(o, ys, f));
    });
}

/// `o[i] = h(o[i], e_(start + i))` for the elements `e` of `y` at logical positions
/// `start..start + o.len()`, walked run by run: [`zip_runs`] with the output as its own dense
/// operand.
fn zip_runs_in_place<T: Element, U: Element>(
    o: &mut [T],
    y: &Elements<'_, U>,
    start: usize,
    h: impl Fn(T, U) -> T,
) {
    let data = y.data();
    let mut i = 0;
    y.for_each_run_in(start, o.len(), |r| {
        let dst = &mut o[i..i + r.len];
        match r.stride {
            0 => {
                let q = data[r.start];
                for d in dst.iter_mut() {
                    *d = h(*d, q);
                }
            }
            1 => dst
                .iter_mut()
                .zip(&data[r.start..r.start + r.len])
                .for_each(|(d, &q)| *d = h(*d, q)),
            s => dst
                .iter_mut()
                .enumerate()
                .for_each(|(k, d)| *d = h(*d, data[r.start + k * s])),
        }
        i += r.len;
    });
}

/// Sets every element of `out` to `value`, in parallel above the threshold.
pub(crate) fn fill_f32(out: &mut [f32], value: f32) {
    if parallel(out.len()) {
        super::for_each_chunk_mut(out, CHUNK, |_, o| o.fill(value));
    } else {
        out.fill(value);
    }
}

/// `f(dst[i], src[i])` over two slices of one length (the shorter bounds it), in parallel
/// above the threshold: the engine's copies and in-place sums of gradient buffers.
pub(crate) fn update_f32(dst: &mut [f32], src: &[f32], f: impl Fn(&mut f32, f32) + Sync) {
    let body = |d: &mut [f32], s: &[f32]| d.iter_mut().zip(s).for_each(|(d, &x)| f(d, x));
    if parallel(dst.len()) {
        // a chunk past the end of a shorter `src` gets nothing, as a plain zip would
        super::for_each_chunk_mut(dst, CHUNK, |k, d| {
            body(d, src.get(k * CHUNK..).unwrap_or_default());
        });
    } else {
        body(dst, src);
    }
}

fn fill_from<T: Element, U: Element>(
    out: &mut [U],
    x: &Elements<'_, T>,
    f: &(impl Fn(T) -> U + Sync),
) {
    if let Some(xs) = x.as_slice() {
        if parallel(out.len()) {
            super::for_each_chunk_mut(out, CHUNK, |k, o| {
                map_slice(o, &xs[k * CHUNK..k * CHUNK + o.len()], f);
            });
        } else {
            map_slice(out, xs, f);
        }
        return;
    }
    // a strided or broadcast input: each chunk gathered dense first, so that the map runs
    // vectorised as over a dense input
    run_chunks(out, |start, o| {
        let mut dense = vec![T::default(); o.len()];
        x.copy_range(start, &mut dense);
        map_slice(o, &dense, f);
    });
}

fn zip_into<T: Element, U: Element, V: Element>(
    out: &mut [V],
    x: &Elements<'_, T>,
    y: &Elements<'_, U>,
    f: &(impl Fn(T, U) -> V + Sync),
) {
    if let (Some(xs), Some(ys)) = (x.as_slice(), y.as_slice()) {
        if parallel(out.len()) {
            super::for_each_chunk_mut(out, CHUNK, |k, o| {
                let at = k * CHUNK..k * CHUNK + o.len();
                zip_slices(o, &xs[at.clone()], &ys[at], f);
            });
        } else {
            zip_slices(out, xs, ys, f);
        }
        return;
    }
    // One dense operand and one strided or broadcast one (a bias row): walk the other's runs,
    // each a slice, a repeated value or a strided walk, beside the matching dense slice.
    if let Some(xs) = x.as_slice() {
        run_chunks(out, |start, o| {
            zip_runs(o, &xs[start..start + o.len()], y, start, f);
        });
        return;
    }
    if let Some(ys) = y.as_slice() {
        run_chunks(out, |start, o| {
            zip_runs(o, &ys[start..start + o.len()], x, start, |q, p| f(p, q));
        });
        return;
    }
    // Strided or broadcast operands: gather each chunk of one operand, then walk the other.
    run_chunks(out, |start, o| {
        let mut left: Vec<T> = vec![T::default(); o.len()];
        x.copy_range(start, &mut left);
        let mut i = 0;
        y.for_each_in(start, o.len(), |q| {
            o[i] = f(left[i], q);
            i += 1;
        });
    });
}

/// Runs `chunk(start, out_chunk)` over `out` in [`CHUNK`]s, in parallel above the threshold.
fn run_chunks<V: Element>(out: &mut [V], chunk: impl Fn(usize, &mut [V]) + Sync) {
    if parallel(out.len()) {
        super::for_each_chunk_mut(out, CHUNK, |c, o| chunk(c * CHUNK, o));
    } else {
        for (c, o) in out.chunks_mut(CHUNK).enumerate() {
            chunk(c * CHUNK, o);
        }
    }
}

/// `o[i] = h(dense[i], e_(start + i))` for the elements `e` of `y` at logical positions
/// `start..start + o.len()`, walked run by run (`dense` is as long as `o`).
fn zip_runs<D: Element, U: Element, V: Element>(
    o: &mut [V],
    dense: &[D],
    y: &Elements<'_, U>,
    start: usize,
    h: impl Fn(D, U) -> V,
) {
    let data = y.data();
    let mut i = 0;
    y.for_each_run_in(start, o.len(), |r| {
        let dst = &mut o[i..i + r.len];
        let src = &dense[i..i + r.len];
        match r.stride {
            0 => {
                let q = data[r.start];
                dst.iter_mut().zip(src).for_each(|(d, &p)| *d = h(p, q));
            }
            1 => dst
                .iter_mut()
                .zip(src.iter().zip(&data[r.start..r.start + r.len]))
                .for_each(|(d, (&p, &q))| *d = h(p, q)),
            s => dst
                .iter_mut()
                .zip(src)
                .enumerate()
                .for_each(|(k, (d, &p))| *d = h(p, data[r.start + k * s])),
        }
        i += r.len;
    });
}

/// `out[i] = f(xs[i])`, compiled for AVX2 and FMA when the running CPU has them (see
/// [`simd!`](crate::simd)): transcendental maps such as `tanh` and GELU are compute-bound.
fn map_slice<T: Element, U: Element>(out: &mut [U], xs: &[T], f: &impl Fn(T) -> U) {
    #[allow(clippy::inline_always)] // `simd!` needs the loop inlined into each copy
    #[inline(always)]
    fn body<T: Element, U: Element>(out: &mut [U], xs: &[T], f: &impl Fn(T) -> U) {
        out.iter_mut().zip(xs).for_each(|(o, &v)| *o = f(v));
    }
    crate::simd!(len = out.len(); body(out, xs, f));
}

/// `out[i] = f(xs[i], ys[i])`, compiled like [`map_slice`].
fn zip_slices<T: Element, U: Element, V: Element>(
    out: &mut [V],
    xs: &[T],
    ys: &[U],
    f: &impl Fn(T, U) -> V,
) {
    #[allow(clippy::inline_always)] // `simd!` needs the loop inlined into each copy
    #[inline(always)]
    fn body<T: Element, U: Element, V: Element>(
        out: &mut [V],
        xs: &[T],
        ys: &[U],
        f: &impl Fn(T, U) -> V,
    ) {
        out.iter_mut()
            .zip(xs.iter().zip(ys))
            .for_each(|(o, (&p, &q))| *o = f(p, q));
    }
    crate::simd!(len = out.len(); body(out, xs, ys, f));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape;

    /// A strided or broadcast input is gathered a chunk at a time and mapped vectorised: the
    /// same bits as mapping its compact copy, across chunk boundaries, serially and in
    /// parallel (29,100 elements: four chunks, above the parallel threshold).
    #[test]
    fn map_of_a_strided_or_broadcast_input_equals_map_of_its_compact_copy() {
        let (r, c) = (300, 97);
        let values = (0..r * c).map(|v| (v as f32 * 0.37).sin() * 9.0).collect();
        let x = Tensor::from_vec(values, shape![r, c]).unwrap();
        let row = x.narrow(0, 7, 1).unwrap();
        let views = [
            x.transpose(0, 1).unwrap(),
            x.narrow(1, 3, 50).unwrap(),
            row.broadcast_to(&[r, c][..]).unwrap(),
        ];
        let f = |v: f32| crate::kernel::math::tanh_f32(v) * v;
        for v in &views {
            let want = map(&v.contiguous().unwrap(), f).unwrap();
            let got = map(v, f).unwrap();
            assert_eq!(got.dims(), v.dims());
            assert_eq!(
                got.values::<f32>().unwrap(),
                want.values::<f32>().unwrap(),
                "view of shape {}",
                v.shape()
            );
        }
    }

    #[test]
    fn update_f32_is_bounded_by_the_shorter_slice_in_parallel_too() {
        let n = 4 * super::super::PARALLEL_THRESHOLD;
        let mut dst = vec![1.0f32; n];
        let src = vec![2.0f32; n / 2 + 3];
        update_f32(&mut dst, &src, |d, x| *d += x);
        assert!(dst[..src.len()].iter().all(|&x| x == 3.0));
        assert!(dst[src.len()..].iter().all(|&x| x == 1.0));
    }
}

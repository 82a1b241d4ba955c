//! The planes of an `[N, C, H, W]` (or `[C, H, W]`) tensor: the checks the 2-D ops share, and
//! the loop that reads the input once in logical order and runs a kernel per plane, split over
//! the kernel threads when the work is large.

use std::sync::Arc;

use autograd_core::kernel::{self, PARALLEL_THRESHOLD};
use autograd_core::{ensure, DType, Layout, Result, Tensor};

/// The leading extents (the planes) and the last two of a 2-D op's input.
#[derive(Debug, Clone)]
pub(crate) struct Planes {
    lead: Vec<usize>,
    pub(crate) hw: [usize; 2],
}

impl Planes {
    /// The planes of `x`, which must be a Float32 tensor of rank 3 or 4 (`Error::Type`,
    /// `Error::Value` otherwise).
    pub(crate) fn of(op: &str, x: &Tensor) -> Result<Planes> {
        ensure!(
            x.dtype() == &DType::Float32,
            Type,
            "{op}: the input must be Float32, got {}",
            x.dtype()
        );
        let dims = x.dims();
        ensure!(
            dims.len() == 3 || dims.len() == 4,
            Value,
            "{op}: the input must be [N, C, H, W] or [C, H, W], got shape {:?}",
            x.dims()
        );
        let r = dims.len();
        Ok(Planes {
            lead: dims[..r - 2].to_vec(),
            hw: [dims[r - 2], dims[r - 1]],
        })
    }

    /// How many planes.
    pub(crate) fn count(&self) -> usize {
        self.lead.iter().product()
    }

    /// The compact row-major layout of a result with these planes of extents `[h, w]`.
    pub(crate) fn layout(&self, [h, w]: [usize; 2]) -> Result<Arc<Layout>> {
        let mut dims = self.lead.clone();
        dims.extend([h, w]);
        Ok(Arc::new(Layout::row_major(&dims)?))
    }
}

/// `f(o)` for each of the `output` coordinates of an axis, in fallibly allocated memory (an
/// output extent is the caller's choice: one too large is an error, not an abort).
pub(crate) fn per_output<T>(output: usize, f: impl FnMut(usize) -> T) -> Result<Vec<T>> {
    let mut all = kernel::alloc::with_capacity(output)?;
    all.extend((0..output).map(f));
    Ok(all)
}

/// `f(p, plane p of out)` for every plane of `out_plane` elements, on the kernel threads when
/// `work` (elements touched) is large.
pub(crate) fn each_plane<U: Send>(
    out: &mut [U],
    out_plane: usize,
    work: usize,
    f: impl Fn(usize, &mut [U]) + Sync,
) {
    if out_plane == 0 || out.is_empty() {
        return;
    }
    if work < PARALLEL_THRESHOLD || kernel::threads() <= 1 {
        for (p, o) in out.chunks_mut(out_plane).enumerate() {
            f(p, o);
        }
    } else {
        kernel::for_each_chunk_mut(out, out_plane, f);
    }
}

/// A tensor of `layout` (in fresh storage of `x`'s carrier class, zeroed first so that `f` may
/// add into it) whose planes of `out_plane` elements are `f(plane of x, plane)`, `x`
/// read once in logical order (borrowed when it is compact, else copied once).
pub(crate) fn map_planes(
    x: &Tensor,
    layout: Arc<Layout>,
    (in_plane, out_plane): (usize, usize),
    work: usize,
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) -> Result<Tensor> {
    kernel::read_logical::<f32, _>(x, |xs| {
        kernel::fresh::<f32>(x, layout, |out| {
            each_plane(out, out_plane, work, |p, o| {
                f(&xs[p * in_plane..(p + 1) * in_plane], o);
            });
            Ok(())
        })
    })?
}

//! Results: fresh storage in the first input's carrier class, written through `&mut [T]`.

use std::sync::Arc;

use crate::error::Result;
use crate::layout::layout_cache::KeptLayout;
use crate::layout::Layout;
use crate::storage::allocation::filled;
use crate::storage::carrier::SMALL_F32;
use crate::storage::scalar::Element;
use crate::tensor::Tensor;

/// A tensor of `layout` (compact: its storage order is its logical order) whose elements `f`
/// writes in logical order, in fresh storage of `like`'s carrier class.
pub fn fresh<T: Element>(
    like: &Tensor,
    layout: Arc<Layout>,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    fresh_with(like, layout.into(), Init::Zeroed, f)
}

/// What a kernel finds in the buffer it writes.
#[derive(Clone, Copy)]
pub(crate) enum Init {
    /// Zeros: the kernel may write only some elements, or add into them.
    Zeroed,
    /// Unspecified values: the kernel writes every element (maps), so a reused buffer is not
    /// zeroed first.
    Overwritten,
}

/// [`fresh`] for a kernel that writes every element (a map, a matrix product): the buffer `f`
/// gets may hold stale values (a reused one is not zeroed first), which it must overwrite.
pub fn fresh_overwritten<T: Element>(
    like: &Tensor,
    layout: Arc<Layout>,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    fresh_with(like, layout.into(), Init::Overwritten, f)
}

/// [`fresh_overwritten`] with `like`'s shape.
pub(crate) fn fresh_like_overwritten<T: Element>(
    like: &Tensor,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    fresh_like_with(like, Init::Overwritten, f)
}

fn fresh_with<T: Element>(
    like: &Tensor,
    layout: KeptLayout,
    init: Init,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    let n = layout.size();
    crate::error::ensure!(
        n == 0 || (n == layout.cosize() && layout.is_row_major_contiguous()),
        Value,
        "a kernel result needs a compact row-major layout, got {}",
        *layout
    );
    // Small Float32 results go from a stack buffer straight into inline storage.
    if n <= SMALL_F32 {
        let mut small = [0.0f32; SMALL_F32];
        if let Some(out) = T::from_f32_slice_mut(&mut small[..n]) {
            f(out)?;
            return like.f32_from_slice_kept(&small[..n], layout);
        }
    }
    // Float32 results reuse a large buffer freed earlier (the pool serves every thread), when
    // there is one.
    let reused = if T::DTYPE == crate::DType::Float32 {
        let data = match init {
            Init::Zeroed => crate::storage::pool::zeroed(n)?,
            Init::Overwritten => crate::storage::pool::overwritable(n)?,
        };
        T::from_buffer(crate::storage::scalar::Buffer::F32(data))
    } else {
        None
    };
    let mut data = match reused {
        Some(data) => data,
        None => filled(n, T::default())?,
    };
    f(&mut data)?;
    let carrier = like.part_carrier(0).fresh(T::into_buffer(data))?;
    Ok(Tensor::from_carrier_unchecked(carrier, layout, T::DTYPE))
}

/// [`fresh`] with `like`'s shape: `like`'s own layout when that is compact row-major (no
/// new layout to build), else the compact row-major layout of its shape.
pub fn fresh_like<T: Element>(
    like: &Tensor,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    fresh_like_with(like, Init::Zeroed, f)
}

/// [`fresh_like`] with the buffer's start as `init` says.
pub(crate) fn fresh_like_with<T: Element>(
    like: &Tensor,
    init: Init,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<Tensor> {
    fresh_with(like, compact_layout_of(like)?, init, f)
}

/// `t`'s layout when compact row-major, else the compact row-major layout of its shape.
pub(crate) fn compact_layout_of(t: &Tensor) -> Result<KeptLayout> {
    let l = t.layout();
    if l.size() == l.cosize() && l.is_row_major_contiguous() {
        Ok(t.kept_layout())
    } else {
        crate::layout::layout_cache::compact(t.shape().clone())
    }
}

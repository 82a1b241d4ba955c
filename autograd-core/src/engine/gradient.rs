//! Gradient buffers: validating a cotangent against its target, summing contributions per
//! logical position, and folding broadcast aliases where a gradient leaves the graph. Every buffer made here has an injective layout and fresh storage.

use std::sync::Arc;

use crate::error::{bail, ensure, Result};
use crate::layout::layout_cache::KeptLayout;
use crate::layout::{Aliasing, Layout};
use crate::storage::carrier::Carrier;
use crate::storage::dtype::DType;
use crate::storage::scalar::Buffer;
use crate::tensor::Tensor;

/// Float32 values of `layout` placed in fresh storage of `class`'s implementation class; the
/// values are given in logical order and holes stay zero.
pub(crate) fn place(
    values: Vec<f32>,
    layout: impl Into<KeptLayout>,
    class: &Arc<dyn Carrier>,
) -> Result<Tensor> {
    let layout = layout.into();
    debug_assert_eq!(values.len(), layout.size());
    let data = if is_dense(&layout) {
        values
    } else {
        laid_out_values(&values, &layout)?
    };
    wrap(data, layout, class)
}

/// `values` (logical order) written into a fresh buffer for `layout` ([`buffer_for`]).
fn laid_out_values(values: &[f32], layout: &Layout) -> Result<Vec<f32>> {
    let mut data = buffer_for(layout, true)?;
    if is_dense(layout) {
        data.copy_from_slice(values);
    } else if let Some(order) = layout.storage_order() {
        // a permuted layout (heads moved back beside the sequence, say): gathered in storage
        // order, chunk by chunk across the kernel threads
        crate::kernel::Elements::new(values, 0, &order)?.copy_all(&mut data);
    } else {
        scatter_runs(values, layout, &mut data);
    }
    Ok(data)
}

/// A pooled buffer of `layout`'s cosize: zeros, except that when the caller writes every
/// position (`written`) of a compact layout (so every slot) the pool's stale values are left
/// for it.
fn buffer_for(layout: &Layout, written: bool) -> Result<Vec<f32>> {
    let n = layout.cosize();
    if written && layout.is_compact() {
        crate::storage::pool::overwritable(n)
    } else {
        crate::storage::pool::zeroed(n)
    }
}

/// `data` as a Float32 tensor of `layout` in fresh storage of `class`'s implementation class.
fn wrap(data: Vec<f32>, layout: impl Into<KeptLayout>, class: &Arc<dyn Carrier>) -> Result<Tensor> {
    let carrier = class.fresh(Buffer::F32(data))?;
    Ok(Tensor::from_carrier_unchecked(
        carrier,
        layout,
        DType::Float32,
    ))
}

/// Writes `values` (logical order) to the offsets of `layout` in `data`, a run at a time.
/// `data` covers the layout's cosize and `values` its size.
pub(crate) fn scatter_runs(values: &[f32], layout: &Layout, data: &mut [f32]) {
    let mut i = 0;
    layout.for_each_run(|start, len, stride| {
        let src = &values[i..i + len];
        if stride == 1 {
            data[start..start + len].copy_from_slice(src);
        } else {
            for (k, &v) in src.iter().enumerate() {
                data[start + k * stride] = v;
            }
        }
        i += len;
    });
}

/// Whether values in logical order are exactly the storage of `layout` (no holes, no reorder).
fn is_dense(layout: &Layout) -> bool {
    layout.size() == layout.cosize() && layout.is_row_major_contiguous()
}

/// Fails unless `count` values fill `layout`.
fn check_fill(count: usize, layout: &Layout) -> Result<()> {
    ensure!(
        count == layout.size(),
        Value,
        "{count} values cannot fill layout {layout} of {} elements",
        layout.size()
    );
    Ok(())
}

/// Fails unless `g` is a Float32 tensor of one subtensor, the form every gradient takes.
pub(crate) fn ensure_plain_f32(g: &Tensor, what: &str) -> Result<()> {
    ensure!(
        g.dtype() == &DType::Float32,
        Type,
        "{what} must be a Float32 tensor, got {}",
        g.dtype()
    );
    ensure!(
        g.subtensor_count() == 1,
        NotImplemented,
        "{what} must have one subtensor, this one has {}",
        g.subtensor_count()
    );
    Ok(())
}

/// Checks that `g` can be a cotangent for `target` (spec: "Cotangent layouts must address the
/// target tensor exactly") and returns it unchanged: a cotangent is per logical position, so a
/// broadcast target's cotangent is only checked here (its shape, in an injective layout) and
/// folded where the gradient leaves the graph ([`fold_for`]).
pub(crate) fn check_cotangent(target: &Tensor, g: Tensor) -> Result<Tensor> {
    if addresses_exactly(target, &g) {
        return Ok(g);
    }
    ensure_plain_f32(&g, "a cotangent")?;
    let t = target.layout();
    ensure_pieces_disjoint(target)?;
    match t.aliasing() {
        Aliasing::None => {
            ensure!(
                std::ptr::eq(g.layout(), target.layout()) || g.layout() == t,
                Value,
                "the cotangent layout {} does not match the target tensor's layout {} exactly",
                g.layout(),
                t
            );
        }
        Aliasing::Broadcast => {
            ensure!(
                g.shape() == t.shape() && g.layout().is_injective(),
                Value,
                "the target layout {t} is broadcast, so its cotangent must have shape {} in an injective layout, got {}",
                t.shape(),
                g.layout()
            );
        }
        Aliasing::Other => bail!(
            Value,
            "the target layout {t} aliases storage in a way that broadcast (stride-0) modes do not explain; its gradient would be under-counted"
        ),
    }
    Ok(g)
}

/// The common case [`check_cotangent`] accepts at once: one Float32 piece in the very layout of
/// a one-piece injective target (what an elementwise VJP returns, and every gradient laid out
/// for its input).
pub(crate) fn addresses_exactly(target: &Tensor, g: &Tensor) -> bool {
    std::ptr::eq(g.layout(), target.layout())
        && target.layout().is_injective()
        && g.subtensor_count() == 1
        && target.subtensor_count() == 1
        && g.dtype() == &DType::Float32
}

/// Refuses a multi-subtensor target whose pieces share storage: its gradient would be
/// under-counted.
fn ensure_pieces_disjoint(target: &Tensor) -> Result<()> {
    if target.subtensor_count() > 1 {
        if let Some(why) = target.storage_clash() {
            bail!(Value, "the target tensor's pieces alias storage ({why}); its gradient would be under-counted");
        }
    }
    Ok(())
}

/// Checks `g`, the gradients of `k` batched products for `target`: Float32 with one
/// subtensor, a leading batch mode of extent `k` before `target`'s shape, in an injective
/// layout (its values are read per logical position). A target whose aliasing broadcast modes
/// do not explain is refused, as for one cotangent.
pub(crate) fn check_batched_cotangent(target: &Tensor, g: Tensor, k: usize) -> Result<Tensor> {
    ensure_plain_f32(&g, "a batched cotangent")?;
    ensure_pieces_disjoint(target)?;
    ensure!(
        target.layout().aliasing() != Aliasing::Other,
        Value,
        "the target layout {} aliases storage in a way that broadcast (stride-0) modes do not explain; its gradient would be under-counted",
        target.layout()
    );
    let want = crate::batch::batched_shape(target.shape(), k)?;
    ensure!(
        *g.shape() == want && g.layout().is_injective(),
        Value,
        "a batched gradient for a tensor of shape {} must have shape {want} in an injective layout, got {}",
        target.shape(),
        g.layout()
    );
    Ok(g)
}

/// `g`, a checked cotangent of `target` per logical position, as `target`'s gradient buffer:
/// unchanged when the target is injective; for a broadcast target, the canonical layout with
/// the sum of every position sharing a storage slot placed at each of those positions.
pub(crate) fn fold_for(target: &Tensor, g: Tensor) -> Result<Tensor> {
    let t = target.layout();
    if t.aliasing() == Aliasing::None {
        return Ok(g);
    }
    fold_broadcast(t, &g, target.part_carrier(0))
}

/// Sums the contributions of every logical position that shares a storage slot of `target`,
/// and writes that sum at each of those positions, in the canonical layout of the shape.
fn fold_broadcast(target: &Layout, g: &Tensor, class: &Arc<dyn Carrier>) -> Result<Tensor> {
    let values = g.values::<f32>()?;
    let slots = target.try_offsets()?;
    let mut sums = crate::storage::pool::zeroed(target.cosize())?;
    for (v, &s) in values.iter().zip(&slots) {
        sums[s] += v;
    }
    let folded: Vec<f32> = slots.iter().map(|&s| sums[s]).collect();
    place(
        folded,
        Arc::new(Layout::canonical(target.shape().clone())?),
        class,
    )
}

/// `a + b` elementwise in logical order, in `a`'s layout (the canonical layout of the shape
/// when `a`'s is not injective) and fresh storage of `class`'s implementation class.
pub(crate) fn add(a: &Tensor, b: &Tensor, class: &Arc<dyn Carrier>) -> Result<Tensor> {
    ensure!(
        a.shape() == b.shape(),
        Value,
        "cannot add gradients of shapes {} and {}",
        a.shape(),
        b.shape()
    );
    if !a.layout().is_injective() {
        // a broadcast summand: the sum needs a slot per position
        let x = a.values::<f32>()?;
        let y = b.values::<f32>()?;
        let layout = Arc::new(Layout::canonical(a.shape().clone())?);
        return place(
            x.iter().zip(&y).map(|(p, q)| p + q).collect(),
            layout,
            class,
        );
    }
    let single = a.subtensor_count() == 1 && b.subtensor_count() == 1;
    if single && a.layout() == b.layout() && a.offset() == 0 && b.offset() == 0 {
        // as_cpu: gradients summed slot by slot over their cosize (storage order, broadcast
        // slots once), which logical-order kernel access cannot express
        if let (Some(ca), Some(cb)) = (a.part_carrier(0).as_cpu(), b.part_carrier(0).as_cpu()) {
            let sum = ca.with_slice_pair::<f32, _>(cb, |x, y| add_slots(a.layout(), x, y))??;
            let carrier = class.fresh(Buffer::F32(sum))?;
            return Ok(Tensor::from_carrier_unchecked(
                carrier,
                a.kept_layout(),
                DType::Float32,
            ));
        }
    }
    let x = a.values::<f32>()?;
    let y = b.values::<f32>()?;
    place(
        x.iter().zip(&y).map(|(p, q)| p + q).collect(),
        a.kept_layout(),
        class,
    )
}

/// Storage-wise sum over the slots `layout` addresses (holes stay zero), both at offset 0.
fn add_slots(layout: &Layout, x: &[f32], y: &[f32]) -> Result<Vec<f32>> {
    let n = layout.cosize();
    ensure!(
        x.len() >= n && y.len() >= n,
        Runtime,
        "gradient storage is shorter than its layout {layout}"
    );
    if layout.size() == n {
        return Ok(x[..n].iter().zip(&y[..n]).map(|(p, q)| p + q).collect());
    }
    let mut out = crate::storage::allocation::filled(n, 0.0f32)?;
    layout.for_each_offset(|o| out[o] = x[o] + y[o]);
    Ok(out)
}

/// A detached copy of `g` in fresh storage of `class`'s implementation class, same layout.
pub(crate) fn detached_copy(g: &Tensor, class: &Arc<dyn Carrier>) -> Result<Tensor> {
    place(g.values::<f32>()?, g.kept_layout(), class)
}

/// [`detached_copy`] of a staged gradient, without the copy when nothing else can observe
/// `g`: the staging holds its only handle, no other tensor shares its storage (which holds
/// exactly its layout's slots and is of `class`'s implementation class), and it carries no
/// node or gradient of its own. Such a `g` already is a detached value in fresh storage (a
/// VJP result or a private sum made during this traversal), and a copy would be a pass over
/// every element of every large gradient for nothing.
pub(crate) fn detached(mut g: Tensor, class: &Arc<dyn Carrier>) -> Result<Tensor> {
    if is_private(&mut g, class) {
        return Ok(g);
    }
    detached_copy(&g, class)
}

fn is_private(g: &mut Tensor, class: &Arc<dyn Carrier>) -> bool {
    let cosize = g.layout().cosize();
    g.sole_carrier().is_some_and(|(carrier, offset)| {
        offset == 0 && carrier.len() == cosize && carrier.same_class(class.as_ref())
    })
}

impl Tensor {
    /// A Float32 tensor holding `values` (logical order) in a layout a gradient for `self` may
    /// have: `self`'s own layout when injective, else the canonical layout of its shape; in fresh
    /// storage of `self`'s carrier class. VJPs use this to return correctly laid-out gradients.
    pub fn f32_like(&self, values: Vec<f32>) -> Result<Tensor> {
        ensure!(
            values.len() == self.size(),
            Value,
            "{} values cannot fill shape {} of {} elements",
            values.len(),
            self.shape(),
            self.size()
        );
        place(values, self.gradient_layout()?, self.part_carrier(0))
    }

    /// Zeros laid out as [`Tensor::f32_like`] lays out values, with no pass over them.
    pub(crate) fn f32_zeros_like(&self) -> Result<Tensor> {
        let layout = self.gradient_layout()?;
        wrap(buffer_for(&layout, false)?, layout, self.part_carrier(0))
    }

    /// [`Tensor::f32_zeros_like`] for a caller that writes every logical position: the
    /// positions may hold stale values until then (holes between them stay zero).
    pub(crate) fn f32_overwritable_like(&self) -> Result<Tensor> {
        let layout = self.gradient_layout()?;
        wrap(buffer_for(&layout, true)?, layout, self.part_carrier(0))
    }

    /// The layout a gradient for `self` takes: `self`'s own when injective, else the
    /// canonical layout of its shape.
    fn gradient_layout(&self) -> Result<KeptLayout> {
        Ok(if self.layout().is_injective() {
            self.kept_layout()
        } else {
            Arc::new(Layout::canonical(self.shape().clone())?).into()
        })
    }

    /// A Float32 tensor holding `values` (logical order) in `layout`, in fresh storage of
    /// `self`'s carrier class: how kernels make results that live where their inputs live.
    pub fn f32_with_layout(&self, values: Vec<f32>, layout: Arc<Layout>) -> Result<Tensor> {
        check_fill(values.len(), &layout)?;
        place(values, layout, self.part_carrier(0))
    }

    /// [`Tensor::f32_with_layout`] from borrowed values, for kernels that compute into a
    /// stack buffer: small dense results then need no heap buffer at all.
    pub fn f32_from_slice(&self, values: &[f32], layout: Arc<Layout>) -> Result<Tensor> {
        self.f32_from_slice_kept(values, layout.into())
    }

    /// [`Tensor::f32_from_slice`] with the layout as tensors keep it.
    pub(crate) fn f32_from_slice_kept(&self, values: &[f32], layout: KeptLayout) -> Result<Tensor> {
        check_fill(values.len(), &layout)?;
        if !is_dense(&layout) {
            return wrap(
                laid_out_values(values, &layout)?,
                layout,
                self.part_carrier(0),
            );
        }
        let class = self.part_carrier(0);
        // a small CPU result keeps its header and elements in one allocation
        // as_cpu: only a class test (a CPU class keeps small results inline)
        let layout = if class.as_cpu().is_some() {
            match crate::tensor::handle::small_f32(values, layout) {
                Ok(h) => return Ok(Tensor(h)),
                Err(layout) => layout,
            }
        } else {
            layout
        };
        let carrier = class.fresh_f32(values)?;
        Ok(Tensor::from_carrier_unchecked(
            carrier,
            layout,
            DType::Float32,
        ))
    }

    /// `g`, a gradient with `self`'s shape, in a layout the engine accepts for `self`: `g`
    /// itself when it already is, else a copy laid out like [`Tensor::f32_like`]. VJPs can
    /// then return gradients in whatever layout their kernels produce.
    pub fn gradient_like(&self, g: Tensor) -> Result<Tensor> {
        // what an elementwise VJP returns: the input's own compact layout
        if addresses_exactly(self, &g) {
            return Ok(g);
        }
        ensure!(
            g.shape() == self.shape(),
            Value,
            "a gradient of shape {} cannot belong to a tensor of shape {}",
            g.shape(),
            self.shape()
        );
        let fits = if self.layout().is_injective() {
            g.layout() == self.layout()
        } else {
            g.layout().is_injective()
        };
        let plain = g.subtensor_count() == 1 && g.dtype() == &DType::Float32;
        if fits && plain {
            return Ok(g);
        }
        if plain {
            // a dense `g` (what kernels make) is written straight into the target's layout
            let layout = self.gradient_layout()?;
            let data = crate::kernel::read::<f32, _>(&g, |e| {
                e.as_slice()
                    .map(|xs| laid_out_values(xs, &layout))
                    .transpose()
            })??;
            if let Some(data) = data {
                return wrap(data, layout, self.part_carrier(0));
            }
        }
        self.f32_like(g.values::<f32>()?)
    }

    /// `f32_like` with every element `value`.
    pub fn f32_full_like(&self, value: f32) -> Result<Tensor> {
        let mut values = crate::storage::pool::overwritable(self.size())?;
        crate::kernel::fill_f32(&mut values, value);
        self.f32_like(values)
    }
}

/// [`relayout`](crate::__private::relayout) of a present gradient: the engine lays out a VJP's
/// gradient with it too, so it lives here, beside the layouts gradients may take.
pub(crate) fn laid_out(input: &Tensor, g: Tensor) -> Result<Tensor> {
    if g.dtype() != &DType::Float32 || input.subtensor_count() != 1 || !input.is_differentiable() {
        return Ok(g);
    }
    if std::ptr::eq(g.layout(), input.layout()) || g.shape() == input.shape() {
        return input.gradient_like(g);
    }
    if g.subtensor_count() == 1 && g.dims() == input.dims() {
        return input.f32_like(g.values::<f32>()?);
    }
    // the same for K batched gradients: a leading batch mode before the flattened extents
    let (gd, id) = (g.dims(), input.dims());
    if g.subtensor_count() == 1 && gd.len() == id.len() + 1 && gd[1..] == id[..] {
        let want = crate::batch::batched_shape(input.shape(), gd[0])?;
        if *g.shape() != want || !g.layout().is_injective() {
            let layout = Arc::new(Layout::compact_row_major(want)?);
            return input.f32_with_layout(g.values::<f32>()?, layout);
        }
    }
    Ok(g)
}

/// A running sum of gradient contributions to one tensor. The first contribution is kept as it
/// is (a VJP may hand the same tensor to several inputs); from the second on the sum lives in a
/// private buffer that later contributions are added into in place: the first one's own
/// storage when nothing else can see it ([`add_in_place`]), else a copy.
pub(crate) enum Sum {
    Shared(Tensor),
    Owned(OwnedSum),
}

pub(crate) struct OwnedSum {
    layout: KeptLayout,
    class: Arc<dyn Carrier>,
    data: Vec<f32>,
}

impl Sum {
    /// Adds `g` into the sum; a contribution of another shape (possible only when one node
    /// was attached to tensors of different shapes) is refused and the sum is unchanged.
    pub(crate) fn add(&mut self, g: &Tensor) -> Result<()> {
        let shape = match self {
            Sum::Owned(owned) => owned.layout.shape(),
            Sum::Shared(first) => first.shape(),
        };
        ensure!(
            shape == g.shape(),
            Value,
            "cannot add gradients of shapes {shape} and {}",
            g.shape()
        );
        match self {
            Sum::Owned(owned) => scatter_add(&mut owned.data, &owned.layout, g),
            Sum::Shared(first) => {
                if add_in_place(first, g)? {
                    return Ok(());
                }
                let layout = first.kept_layout();
                let mut data = private_copy(first)?;
                scatter_add(&mut data, &layout, g)?;
                let class = first.part_carrier(0).clone();
                *self = Sum::Owned(OwnedSum {
                    layout,
                    class,
                    data,
                });
                Ok(())
            }
        }
    }

    /// The sum as a tensor.
    pub(crate) fn into_tensor(self) -> Result<Tensor> {
        match self {
            Sum::Shared(t) => Ok(t),
            Sum::Owned(owned) => {
                let OwnedSum {
                    layout,
                    class,
                    data,
                } = owned;
                let carrier = class.fresh(Buffer::F32(data))?;
                Ok(Tensor::from_carrier_unchecked(
                    carrier,
                    layout,
                    DType::Float32,
                ))
            }
        }
    }
}

/// Elements from which [`add_in_place`] pays: below, the private copy is cheap and the owned
/// sum it starts takes each later contribution faster (W1 adds 20,000 into one [16] leaf).
const IN_PLACE_MIN: usize = 1 << 16;

/// Adds `g` into `first`'s own storage when nothing else can observe it (the sum's only
/// handle, untracked, its storage shared with no other tensor and laid out compact row-major
/// on the CPU) and it is large, saying whether it did: the second contribution then costs no
/// private copy of the first (147 MiB for GPT-2's tied token embedding).
fn add_in_place(first: &mut Tensor, g: &Tensor) -> Result<bool> {
    let cosize = first.layout().cosize();
    let private = cosize >= IN_PLACE_MIN
        && first.layout().is_row_major_contiguous()
        && first.dtype() == &DType::Float32
        && g.dtype() == &DType::Float32
        && first.sole_carrier().is_some_and(|(carrier, offset)| {
            offset == 0 && carrier.len() == cosize && carrier.as_cpu().is_some()
        });
    if !private {
        return Ok(false);
    }
    crate::kernel::read_logical::<f32, _>(g, |gs| {
        crate::kernel::update::<f32, _>(first, |s| {
            crate::kernel::update_f32(s, gs, |d, x| *d += x);
            Ok(())
        })
    })??;
    Ok(true)
}

/// The storage of `first` (the first contribution to a sum) as a private buffer of its
/// layout's cosize: copied slice-wise when dense on the CPU, else placed run by run into zeros.
fn private_copy(first: &Tensor) -> Result<Vec<f32>> {
    let layout = first.layout();
    let n = layout.cosize();
    if first.offset() == 0 && first.subtensor_count() == 1 && is_dense(layout) {
        // as_cpu: a copy of storage slots (cosize), not of logical positions
        if let Some(cpu) = first.part_carrier(0).as_cpu() {
            let mut data = crate::storage::pool::overwritable(n)?;
            let copied = cpu.with_slice::<f32, _>(|s| {
                s.get(..n)
                    .map(|src| crate::kernel::update_f32(&mut data, src, |d, x| *d = x))
                    .is_some()
            })?;
            if copied {
                return Ok(data);
            }
        }
    }
    let mut data = crate::storage::pool::zeroed(n)?;
    scatter_add(&mut data, first.layout(), first)?;
    Ok(data)
}

/// `data[offset] += g` at every offset of `layout`, `g` read in logical order.
fn scatter_add(data: &mut [f32], layout: &Layout, g: &Tensor) -> Result<()> {
    let same = std::ptr::eq(layout, g.layout()) || *layout == *g.layout();
    if same && g.offset() == 0 {
        // as_cpu: g's storage slots, scattered by offset
        if let Some(cpu) = g.carrier()?.as_cpu() {
            return cpu.with_slice::<f32, _>(|s| {
                if layout.size() == layout.cosize() {
                    crate::kernel::update_f32(data, s, |d, x| *d += x);
                } else {
                    layout.for_each_offset(|o| data[o] += s[o]);
                }
            });
        }
    }
    let values = g.values::<f32>()?;
    let mut it = values.into_iter();
    layout.for_each_offset(|o| data[o] += it.next().unwrap_or(0.0));
    Ok(())
}

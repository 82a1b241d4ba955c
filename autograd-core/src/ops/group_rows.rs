//! Reductions over several axes seen as rows: the reduced axes of a tensor moved last (a view,
//! no copy), so that each group of a reduction is one row of the kernel layer's `Rows` and its
//! result is the group's row-major position among the kept axes. The reductions that need a
//! whole group at once (`logsumexp`, `norm`, `std_axes`) and their gradients read through it.

use std::sync::Arc;

use crate::error::Result;
use crate::kernel::{self, per_row, read_rows, row, write_rows, Rows};
use crate::layout::Layout;
use crate::storage::scalar::Element;
use crate::Tensor;

/// A tensor seen with its reduced axes last: `view` is the input permuted (kept axes first, in
/// order, then the reduced ones in order), `rows` splits it into one row per group, and
/// `inverse` permutes a result of `view`'s shape back to the input's axes.
pub(crate) struct Groups {
    /// The input with the reduced axes moved last (shares its storage).
    pub(crate) view: Tensor,
    /// One row per group: `rows.n` elements, `rows.count()` groups.
    pub(crate) rows: Rows,
    /// The permutation back to the input's axes (`None`: already in order).
    inverse: Option<Vec<usize>>,
}

impl Groups {
    /// The groups of `a` over the resolved, distinct top-level `axes`.
    pub(crate) fn of(a: &Tensor, axes: &[usize]) -> Result<Groups> {
        let rank = a.layout().rank();
        let mut reduced = axes.to_vec();
        reduced.sort_unstable();
        let order: Vec<usize> = (0..rank)
            .filter(|i| !reduced.contains(i))
            .chain(reduced.iter().copied())
            .collect();
        let in_order = order.iter().enumerate().all(|(i, &o)| i == o);
        let view = if in_order {
            a.clone()
        } else {
            a.raw_permute(&order)?
        };
        let rows = Rows::trailing(&view.dims(), reduced.len());
        let inverse = (!in_order).then(|| {
            let mut inverse = vec![0; order.len()];
            for (i, &o) in order.iter().enumerate() {
                inverse[o] = i;
            }
            inverse
        });
        Ok(Groups {
            view,
            rows,
            inverse,
        })
    }

    /// `f(k, row)` for every group `k`, in parallel above the kernel threshold: one value per
    /// group, in the row-major order of the kept axes.
    pub(crate) fn per_group<T: Element, R: Send>(
        &self,
        f: impl Fn(usize, &[T]) -> R + Sync,
    ) -> Result<Vec<R>> {
        let n = self.rows.n;
        read_rows::<T, _>(&self.view, self.rows, |e| {
            per_row(self.rows, |k, buf: &mut Vec<T>| f(k, row(&e, k, n, buf)))
        })
    }

    /// A tensor of the input's shape whose group `k` `f(k, row, out_row)` writes from the
    /// input's group `k` (a compact result of the permuted shape, viewed back in the input's
    /// axes).
    pub(crate) fn map_groups<T: Element, U: Element>(
        &self,
        f: impl Fn(usize, &[T], &mut [U]) + Sync,
    ) -> Result<Tensor> {
        let (rows, n) = (self.rows, self.rows.n);
        let out = read_rows::<T, _>(&self.view, rows, |e| {
            write_rows::<U, Vec<T>>(&self.view, rows, |k, buf, out| {
                f(k, row(&e, k, n, buf), out);
            })
        })?;
        match &self.inverse {
            Some(inverse) => out.raw_permute(inverse),
            None => Ok(out),
        }
    }
}

/// `values` as a compact row-major tensor of extents `dims` in fresh storage of `like`'s
/// carrier class.
pub(crate) fn emit<T: Element>(like: &Tensor, dims: &[usize], values: &[T]) -> Result<Tensor> {
    kernel::fresh(
        like,
        Arc::new(Layout::row_major(dims)?),
        |out: &mut [T]| {
            out.copy_from_slice(values);
            Ok(())
        },
    )
}

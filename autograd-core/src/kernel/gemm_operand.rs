//! The operands of [`gemm_f32`](super::gemm_f32): strided matrix views of slices, and the
//! geometry each is checked to (every element inside its slice, a written matrix without
//! aliasing slots) before the kernel, which works on raw pointers, is called.

use crate::error::{bail, Result};

/// A read-only matrix: `rows x cols` elements of `data` at `offset + i*row_stride + j*col_stride`.
///
/// Strides may be zero (a broadcast row or column) and may make elements overlap.
#[derive(Debug, Clone, Copy)]
pub struct MatRef<'a> {
    /// The storage the elements live in.
    pub data: &'a [f32],
    /// The slot of element (0, 0).
    pub offset: usize,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Slots between consecutive rows.
    pub row_stride: usize,
    /// Slots between consecutive columns.
    pub col_stride: usize,
}

/// A writable matrix, addressed like [`MatRef`]. Distinct elements must be distinct slots:
/// [`gemm_f32`](super::gemm_f32) rejects strides that make two elements of a non-empty matrix
/// alias.
#[derive(Debug)]
pub struct MatMut<'a> {
    /// The storage the elements live in.
    pub data: &'a mut [f32],
    /// The slot of element (0, 0).
    pub offset: usize,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Slots between consecutive rows.
    pub row_stride: usize,
    /// Slots between consecutive columns.
    pub col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A dense row-major `rows x cols` matrix at the start of `data`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            offset: 0,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }
}

impl MatRef<'_> {
    pub(super) fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub(super) fn strides(&self) -> (usize, usize) {
        (self.row_stride, self.col_stride)
    }

    /// The transpose: the same elements with rows and columns (and their strides) swapped.
    pub fn t(self) -> Self {
        MatRef {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }
}

impl<'a> MatMut<'a> {
    /// A dense row-major `rows x cols` matrix at the start of `data`.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        MatMut {
            data,
            offset: 0,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }
}

/// The geometry of one operand, checked against its slice.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    pub(super) offset: usize,
    pub(super) rows: usize,
    pub(super) cols: usize,
    /// Strides as the kernel takes them; 0 for a dimension of extent <= 1, where the stride
    /// addresses nothing (so an arbitrary unused stride never enters pointer arithmetic).
    pub(super) row_stride: isize,
    pub(super) col_stride: isize,
}

impl Geometry {
    /// Checks that every element of a `rows x cols` view lies inside a slice of `len` elements.
    pub(super) fn checked(
        name: &str,
        len: usize,
        offset: usize,
        (rows, cols): (usize, usize),
        (row_stride, col_stride): (usize, usize),
    ) -> Result<Self> {
        let row_stride = if rows > 1 { row_stride } else { 0 };
        let col_stride = if cols > 1 { col_stride } else { 0 };
        if rows > 0 && cols > 0 {
            let last = (rows - 1)
                .checked_mul(row_stride)
                .zip((cols - 1).checked_mul(col_stride))
                .and_then(|(r, c)| r.checked_add(c))
                .and_then(|rc| rc.checked_add(offset));
            match last {
                Some(last) if last < len => {}
                _ => bail!(
                    Value,
                    "gemm: {name} ({rows}x{cols}, offset {offset}, strides ({row_stride}, \
                     {col_stride})) addresses elements past its slice of {len}"
                ),
            }
        }
        // Both strides are now at most the index of an element of a slice of `f32`, which is
        // below isize::MAX.
        Ok(Geometry {
            offset,
            rows,
            cols,
            row_stride: row_stride as isize,
            col_stride: col_stride as isize,
        })
    }

    /// Whether two distinct elements share a slot. Conservative: strides are accepted when one
    /// dimension steps over the whole extent of the other, which covers every layout a tensor
    /// view produces (row-major, column-major, padded, sliced).
    pub(super) fn aliases(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return false;
        }
        // Strides are non-negative (they came from `usize`); unit dimensions have stride 0.
        let mut dims = [
            (self.row_stride as usize, self.rows),
            (self.col_stride as usize, self.cols),
        ];
        dims.sort_unstable();
        let [(small_stride, small_extent), (big_stride, big_extent)] = dims;
        (small_extent > 1 && small_stride == 0)
            || (big_extent > 1
                && (big_stride == 0 || small_stride.saturating_mul(small_extent) > big_stride))
    }
}

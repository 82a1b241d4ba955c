//! Matrix views of tensors for GEMM: the last two modes of a layout as a strided matrix, so
//! a transposed or sliced operand reaches [`gemm_f32`](super::gemm_f32) without a copy.

use super::gemm_operand::MatRef;
use super::Elements;
use crate::error::Result;

impl<'a> Elements<'a, f32> {
    /// The matrix at batch coordinate `batch` of these elements, whose layout's last two
    /// top-level modes are the rows and columns (any strides, zero included), transposed when
    /// `transpose`. `None` when either of those modes is nested (hierarchical): copy to a
    /// compact layout first. `batch` has one entry per leading mode.
    ///
    /// ```
    /// use autograd_core::{kernel, shape, Tensor};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
    /// let at = a.transpose(0, 1).unwrap();
    /// let mut c = vec![0.0f32; 4];
    /// kernel::read_pair::<f32, f32, _>(&a, &at, |ea, et| -> autograd_core::Result<()> {
    ///     let (Some(ma), Some(mt)) = (ea.matrix(&[], false)?, et.matrix(&[], false)?) else {
    ///         unreachable!("flat layouts")
    ///     };
    ///     kernel::gemm_f32(ma, mt, kernel::MatMut::row_major(&mut c, 2, 2), false, 1)
    /// }).unwrap().unwrap();
    /// assert_eq!(c, [14.0, 32.0, 32.0, 77.0]); // a · aᵀ
    /// ```
    pub fn matrix(&self, batch: &[usize], transpose: bool) -> Result<Option<MatRef<'a>>> {
        let l = self.layout();
        let r = l.rank();
        crate::error::ensure!(
            r >= 2 && batch.len() == r - 2,
            Value,
            "matrix: a layout of rank {r} with a batch coordinate of {} entries",
            batch.len()
        );
        if !l.mode_is_leaf(r - 2) || !l.mode_is_leaf(r - 1) {
            return Ok(None);
        }
        let mut coord = batch.to_vec();
        coord.extend([0, 0]);
        let (data, offset) = self.storage();
        let (rows, cols) = (l.mode_leaves(r - 2)[0], l.mode_leaves(r - 1)[0]);
        let m = MatRef {
            data,
            offset: offset
                + if l.size() == 0 {
                    0
                } else {
                    l.offset_of_top(&coord)?
                },
            rows: rows.extent,
            cols: cols.extent,
            row_stride: rows.stride,
            col_stride: cols.stride,
        };
        Ok(Some(if transpose { m.t() } else { m }))
    }
}

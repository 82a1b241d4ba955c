//! ndarray interop in both directions.

use std::sync::Arc;

use ndarray::{
    ArrayBase, ArrayD, ArrayView, ArrayViewD, Data, Dimension, IxDyn, OwnedRepr, ShapeBuilder,
};

use crate::error::{ensure, Result};
use crate::layout::Layout;
use crate::storage::carrier::CpuCarrier;
use crate::storage::scalar::Element;
use crate::tensor::Tensor;

impl Tensor {
    /// A tensor owning an ndarray array's elements: zero-copy (the array's strides become the
    /// layout) when its strides are non-negative, a row-major copy otherwise.
    pub fn from_array<T: Element, D: Dimension>(array: ArrayBase<OwnedRepr<T>, D>) -> Tensor {
        let dims = array.shape().to_vec();
        let strides: Option<Vec<usize>> = array
            .strides()
            .iter()
            .map(|&s| usize::try_from(s).ok())
            .collect();
        if let Some(strides) = strides {
            if let Ok(layout) = Layout::new(
                crate::Shape::from(&dims[..]),
                crate::Stride::from(&strides[..]),
            ) {
                let (data, offset) = array.into_raw_vec_and_offset();
                let offset = offset.unwrap_or(0);
                if let Ok(t) = Tensor::from_parts(CpuCarrier::from_vec(data), layout, offset) {
                    return t;
                }
                unreachable!("an ndarray array's layout fits its own storage");
            }
        }
        copy_of(&array.view())
    }

    /// A tensor holding a copy of a view's elements in row-major order.
    pub fn from_array_view<T: Element, D: Dimension>(view: &ArrayView<'_, T, D>) -> Tensor {
        copy_of(view)
    }

    /// Runs `f` on the elements as an ndarray view whose axes are the top-level modes: without
    /// copying when the tensor is one CPU subtensor with a flat layout that ndarray can express
    /// (no two coordinates on one slot), on a compact copy otherwise. `T` must be the storage
    /// element type.
    ///
    /// ```
    /// use autograd_core::{shape, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
    /// let col_sums = t.transpose(0, 1).unwrap().with_array_view(|v| v.sum_axis(ndarray::Axis(1))).unwrap();
    /// assert_eq!(col_sums.iter().copied().collect::<Vec<f32>>(), vec![5.0, 7.0, 9.0]);
    /// ```
    pub fn with_array_view<T: Element, R>(
        &self,
        f: impl FnOnce(ArrayViewD<'_, T>) -> R,
    ) -> Result<R> {
        ensure!(
            crate::tensor::record_width(self.dtype()) == 1,
            NotImplemented,
            "with_array_view does not read compound dtype {}",
            self.dtype()
        );
        let mut f = Some(f);
        let layout = self.layout();
        if self.subtensor_count() == 1 && layout.is_flat() && layout.is_injective() {
            // as_cpu: ndarray borrows the CPU memory itself, strides and all
            if let Some(cpu) = self.carrier()?.as_cpu() {
                let dims = self.dims();
                let strides: Vec<usize> = (0..layout.rank())
                    .map(|i| layout.mode_leaves(i)[0].stride)
                    .collect();
                let offset = self.offset();
                let viewed = cpu.with_slice::<T, _>(|data| {
                    let shape = IxDyn(&dims).strides(IxDyn(&strides));
                    let view = ArrayView::from_shape(shape, data.get(offset..)?).ok()?;
                    f.take().map(|f| f(view))
                })?;
                if let Some(r) = viewed {
                    return Ok(r);
                }
            }
        }
        let copy = self.to_array::<T>()?;
        f.map(|f| f(copy.view())).ok_or_else(|| {
            crate::Error::Runtime("with_array_view: the callback was already used".into())
        })
    }

    /// A copy of the elements as an ndarray array whose axes are the top-level modes, in logical
    /// order. `T` must be the storage element type.
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>> {
        ensure!(
            crate::tensor::record_width(self.dtype()) == 1,
            NotImplemented,
            "to_array does not read compound dtype {}",
            self.dtype()
        );
        let values = self.values::<T>()?;
        ArrayD::from_shape_vec(IxDyn(&self.dims()), values)
            .map_err(|e| crate::Error::Value(format!("to_array: {e}")))
    }
}

fn copy_of<T: Element, S: Data<Elem = T>, D: Dimension>(a: &ArrayBase<S, D>) -> Tensor {
    let values: Vec<T> = a.iter().copied().collect();
    let layout = Layout::row_major(a.shape())
        .unwrap_or_else(|_| unreachable!("ndarray shapes fit in memory"));
    Tensor::from_carrier_unchecked(CpuCarrier::from_vec(values), Arc::new(layout), T::DTYPE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape;

    #[test]
    fn array_views_borrow_strided_storage_and_copy_otherwise() {
        let t = Tensor::from_vec((0..6).map(|i| i as f32).collect(), shape![2, 3]).unwrap();
        let tt = t.transpose(0, 1).unwrap();
        // zero-copy: the view walks the tensor's own strides
        let strides = tt
            .with_array_view::<f32, _>(|v| v.strides().to_vec())
            .unwrap();
        assert_eq!(strides, vec![1, 3]);
        let first = tt.with_array_view::<f32, _>(|v| v[[2, 1]]).unwrap();
        assert_eq!(first, 5.0);
        // a broadcast view cannot be borrowed (two coordinates on one slot): a compact copy
        let b = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])
            .unwrap()
            .broadcast_to(&[3, 2])
            .unwrap();
        let (strides, sum) = b
            .with_array_view::<f32, _>(|v| (v.strides().to_vec(), v.sum()))
            .unwrap();
        assert_eq!((strides, sum), (vec![2, 1], 9.0));
        // a wrong element type is a type error
        assert_eq!(
            t.with_array_view::<i32, _>(|v| v.len()).unwrap_err().kind(),
            crate::ErrorKind::Type
        );
    }
}

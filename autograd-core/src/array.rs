//! ndarray interop in both directions.

use std::sync::Arc;

use ndarray::{ArrayBase, ArrayD, ArrayView, Data, Dimension, IxDyn, OwnedRepr};

use crate::carrier::CpuCarrier;
use crate::error::{ensure, Result};
use crate::layout::Layout;
use crate::scalar::Element;
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

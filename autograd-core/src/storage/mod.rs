//! Where tensors keep their elements: the element types (`dtype`: the [`DType`](crate::DType)
//! descriptors; `scalar`: single values, the [`Element`](crate::Element) types CPU storage holds
//! and their [`Buffer`](crate::Buffer)s), the [`Carrier`](crate::Carrier) trait and the CPU carrier
//! (`carrier`), the buffer pool that recycles large activation and gradient buffers between
//! training steps (`pool`), and the one fallible allocation path for buffers sized by user
//! input (`allocation`, public as `kernel::alloc`).

pub(crate) mod allocation;
pub(crate) mod carrier;
pub(crate) mod dtype;
pub(crate) mod pool;
pub(crate) mod scalar;

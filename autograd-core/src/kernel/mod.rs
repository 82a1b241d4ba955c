//! The kernel layer, the one door to storage for both crates' ops: typed access to a tensor's
//! elements in the project's terms of layouts and carriers, results in the first input's carrier
//! class, in-place writes to existing tensors ([`update`]), maps, reductions, the `map_rows`
//! family of row kernels, matrix views and the GEMM kernel, parallel above a size threshold.
//! Kernels are generic over one element trait family ([`Num`], [`Real`]), and their inner loops
//! are compiled for the running CPU's vector width by one dispatch macro
//! ([`simd!`](crate::simd)). Ops say *what* (a closure, a fold); this layer decides *how* (one
//! slice, strided runs, chunks for threads). User crates write kernels with it too.
//!
//! A closure should capture its constants by value (`move |x: f32| x * c`): one that borrows
//! them reads each through a reference the compiler cannot tell apart from the output, so it
//! reloads it every element and the loop does not vectorise.
//!
//! ```
//! use autograd_core::{kernel, shape, Tensor};
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3]).unwrap();
//! // a transposed view: no copy, read through strided runs
//! let t = a.transpose(0, 1).unwrap();
//! let doubled = kernel::map(&t, |x: f32| 2.0 * x).unwrap();
//! assert_eq!(doubled.values::<f32>().unwrap(), [2.0, 8.0, 4.0, 10.0, 6.0, 12.0]);
//! let rows = kernel::reduce(&a, &[1], false, || 0.0f64, |acc, x: f32| acc + f64::from(x), |acc, _| acc as f32).unwrap();
//! assert_eq!(rows.values::<f32>().unwrap(), [6.0, 15.0]);
//! ```

mod access;
pub mod alloc;
pub(crate) mod element;
pub(crate) mod gemm;
mod gemm_operand;
mod heap;
#[doc(hidden)]
pub mod isa;
mod map;
pub(crate) mod math;
mod matrix;
mod output;
mod parallel;
mod reduce;
mod row;
mod row_reduction;
mod scatter_rows;
mod team;
mod tensor_values;
mod transpose;
mod update;

pub use access::{copy_short, read, read_logical, read_logical_pair, read_pair, Elements, Run};
pub use element::{Num, Real};
pub use gemm::gemm_f32;
pub use gemm_operand::{MatMut, MatRef};
pub use isa::{Fused, Fused512, Madd, Split};
pub(crate) use map::{fill_f32, update_f32};
pub use map::{map, map_owned, zip, zip_owned};
pub use math::exp_f32;
pub use output::{fresh, fresh_like, fresh_overwritten};
pub use parallel::{threads, PARALLEL_THRESHOLD};
pub use reduce::{reduce, reduced_dims, sum_f32};
pub use row::{
    column_sums, map_rows, map_rows_along, overwrite_rows, overwrite_rows_summing,
    overwrite_rows_with, per_row, read_row_pair, read_rows, row, write_rows, Rows,
};
pub use row_reduction::{lane_sum, lane_sum_runs, log_sum_exp_shifted, row_max, sum_f64};
pub use scatter_rows::scatter_rows;
pub use team::{for_each_chunk_mut, for_each_task, join, map_tasks, park_idle_threads};
pub use transpose::transpose_f32;
pub(crate) use update::copy_like;
pub use update::{is_cpu, update, update_reading};

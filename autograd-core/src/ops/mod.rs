//! The tensor op library: every op written with `#[differentiable]` over the
//! [kernel layer](crate::kernel), so each forward kernel sits beside its vector-Jacobian
//! product. It lives in the crate that defines `Tensor`, so operators (`&a + &b`) and method
//! forms can call it.
//!
//! Besides the arithmetic, views, reductions and indexing: activations with PyTorch's
//! parameters (`activation`: `softplus`, `leaky_relu`, `elu`, `selu`, `hardtanh`, `hardswish`,
//! `mish`), special functions and rounding (`special`: `log1p`, `expm1`, `reciprocal`, `erf`,
//! `erfinv`, `sign`, `floor`, `ceil`, `round`, `nan_to_num`, `isnan`, `isinf`, `isfinite`) and
//! broadcasting pointwise ops of several tensors (`pointwise`: `atan2`, `pow`, `lerp`,
//! `addcmul`, `addcdiv`).
//!
//! Reductions and scans as PyTorch's (issue 38): `logsumexp`, `prod`/`prod_axis`,
//! `cumsum`/`cumprod` (`scan`), `std_axes` and `norm` with [`NormOrd`], `max_axis`/`min_axis`
//! and `topk` with Int64 indices (`selection`), `sort`/`argsort` (stable), and the truth
//! reductions `all`/`any`/`count_nonzero` (`logical_reduce`).
//!
//! Axes are written as in PyTorch wherever an op takes one: an [`Axis`](crate::Axis) (`-1` is
//! the last) or an [`IntList`](crate::IntList) of them, and shapes take one `-1` to infer
//! (`reshape`, `view`, `unflatten`) or keep (`broadcast_to`, `expand`) an extent. The public
//! functions resolve them (`view_axes`, `reduce_axes`, `index_axes`, `split`) and call the
//! nodes, which work on resolved axes (`view`, `reduce`, `index`).

mod activation;
mod broadcast;
mod cast;
mod compare;
mod construct;
mod diagonal;
mod elementwise;
mod elementwise_method;
mod group_rows;
mod index;
mod index_axes;
mod linalg;
mod log_sum_exp;
mod logical_reduce;
mod mask;
mod norm;
mod operators;
mod order;
mod pad;
mod pointwise;
mod product;
mod reduce;
mod reduce_axes;
mod repeat;
mod scan;
mod scatter;
mod selection;
mod sort;
mod special;
mod split;
mod take;
mod unary;
mod unbind;
mod view;
mod view_axes;
mod view_method;

pub use activation::{elu, hardswish, hardtanh, leaky_relu, mish, selu, softplus};
pub use broadcast::{broadcast_pair, broadcast_shapes};
pub use cast::to_dtype;
pub use compare::{
    eq, ge, gt, le, logical_and, logical_not, logical_or, lt, ne, where_cond, Operand,
};
pub use construct::one_hot;
pub use diagonal::{diag, diag_embed, diagonal};
pub use elementwise::{
    add, add_scalar, div, div_scalar, maximum, minimum, mul, mul_scalar, rdiv_scalar, rsub_scalar,
    sub, sub_scalar,
};
pub use index::embedding;
pub use index_axes::{concat, gather, index_select, scatter_add, stack};
pub use linalg::{linear, matmul};
pub use log_sum_exp::logsumexp;
pub use logical_reduce::{all, all_axes, any, any_axes, count_nonzero};
pub use mask::{masked_fill, tril, triu};
pub use norm::{norm, std_axes, NormOrd};
pub use pad::{pad, PadMode};
pub use pointwise::{addcdiv, addcmul, atan2, lerp, lerp_tensor, pow};
pub use product::{prod, prod_axis};
pub use reduce::{mean, sum};
pub use reduce_axes::{argmax, argmin, max_axes, mean_axes, min_axes, sum_axes, var_axes};
pub use repeat::{flip, repeat, repeat_interleave, roll, tile, Repeats};
pub use scan::{cumprod, cumsum};
pub use scatter::{index_add, index_put, scatter, scatter_value};
pub use selection::{max_axis, min_axis, topk};
pub use sort::{argsort, sort};
pub use special::{
    ceil, erf, erfinv, expm1, floor, isfinite, isinf, isnan, log1p, nan_to_num, reciprocal, round,
    sign,
};
pub use split::{chunk, split};
pub use take::{masked_select, take_along_dim};
pub use unary::{
    abs, clamp, cos, exp, gelu, gelu_tanh, log, neg, powf, relu, rsqrt, sigmoid, silu, sin, sqrt,
    tanh,
};
pub use unbind::unbind;
pub use view_axes::{
    broadcast_to, flatten, movedim, narrow, permute, reshape, select, squeeze, squeeze_all,
    transpose, unflatten, unsqueeze, view,
};

//! `Captured`: the promise that a plain (non-tensor) value `#[differentiable]` lets reach an op
//! holds no tensor.

use std::marker::PhantomData;

use crate::storage::dtype::DType;

/// A type that holds no [`Tensor`](crate::Tensor). `#[differentiable]` records only an op's
/// tensor parameters (and its tensor residuals), so every other value that reaches the op must
/// be of a `Captured` type: each non-tensor parameter, whether the forward, the VJP or neither
/// reads it (an `options` struct included; for `&T`, `&[T]`, `Option<T>`, `Vec<T>` and
/// `Box<T>`, the `T`), and each non-tensor `#[residual]` the node stores for the VJP.
///
/// A tensor inside such a value would reach the forward or the VJP unrecorded: it would get no
/// gradient, and an in-place change to it before backward would silently reach the VJP. The
/// macro cannot see inside a type, so it asks for this promise instead: implemented here for
/// the primitives, strings, references, function pointers, the std containers of `Captured`
/// types, tuples, arrays and the library's layout types; `Tensor` does not implement it. For a
/// type of yours that holds no tensor, implement it (`impl Captured for Opts {}`); take each
/// tensor as its own `&Tensor` parameter. A generic parameter that a non-tensor parameter's
/// type mentions gets a `Captured` bound on the generated function, so a caller cannot pass a
/// tensor through it. The checks are compile-time only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` reaches a #[differentiable] op as a plain value, but is not known to hold no tensor",
    label = "the op records only its tensor parameters: a tensor in this value would reach the op unrecorded",
    note = "such a tensor would get no gradient, and an in-place change to it before backward would reach the vjp unnoticed",
    note = "take each tensor as its own `&Tensor` parameter; for a type that holds no tensor, implement the marker: `impl Captured for {Self} {{}}`"
)]
pub trait Captured {}

macro_rules! captured {
    ($($t:ty),* $(,)?) => { $(impl Captured for $t {})* };
}

captured!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    str,
    String,
    std::time::Duration,
    std::num::NonZeroUsize,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::cmp::Ordering,
    DType,
    crate::DTypeCategory,
    crate::CompoundDType,
    crate::IntTuple,
    crate::Shape,
    crate::Stride,
    crate::Layout,
    crate::layout::Leaf,
    crate::layout::Aliasing,
    crate::Scalar,
);

impl<T: ?Sized> Captured for PhantomData<T> {}
impl<T: ?Sized + Captured> Captured for &T {}
impl<T: ?Sized + Captured> Captured for &mut T {}
impl<T: Captured> Captured for [T] {}
impl<T: Captured, const N: usize> Captured for [T; N] {}
impl<T: Captured> Captured for Vec<T> {}
impl<T: Captured> Captured for std::collections::VecDeque<T> {}
impl<T: Captured> Captured for Option<T> {}
impl<T: Captured, E: Captured> Captured for std::result::Result<T, E> {}
impl<T: ?Sized + Captured> Captured for Box<T> {}
impl<T: ?Sized + Captured> Captured for std::sync::Arc<T> {}
impl<T: ?Sized + Captured + ToOwned> Captured for std::borrow::Cow<'_, T> {}
impl<T: Captured> Captured for std::ops::Range<T> {}
impl<T: Captured> Captured for std::ops::RangeInclusive<T> {}
impl<K: Captured, V: Captured, S> Captured for std::collections::HashMap<K, V, S> {}
impl<K: Captured, V: Captured> Captured for std::collections::BTreeMap<K, V> {}
impl<T: Captured, S> Captured for std::collections::HashSet<T, S> {}
impl<T: Captured> Captured for std::collections::BTreeSet<T> {}

macro_rules! captured_tuple {
    ($($t:ident)+) => { impl<$($t: Captured),+> Captured for ($($t,)+) {} };
}

captured_tuple!(A);
captured_tuple!(A B);
captured_tuple!(A B C);
captured_tuple!(A B C D);
captured_tuple!(A B C D E);
captured_tuple!(A B C D E F);
captured_tuple!(A B C D E F G);
captured_tuple!(A B C D E F G H);

// A function pointer holds nothing: what it computes from its arguments reaches the op only
// through them.
macro_rules! captured_fn {
    ($($a:ident)*) => { impl<R, $($a),*> Captured for fn($($a),*) -> R {} };
}

captured_fn!();
captured_fn!(A);
captured_fn!(A B);
captured_fn!(A B C);
captured_fn!(A B C D);

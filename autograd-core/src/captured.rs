//! `Captured`: the promise that a value `#[differentiable]` stores in a node holds no tensor.

use std::marker::PhantomData;

use crate::dtype::DType;

/// A type that holds no [`Tensor`](crate::Tensor), so `#[differentiable]` may store a value of it in a node for
/// the VJP (a parameter the VJP reads, a non-tensor `#[residual]`).
///
/// A tensor inside a stored value would be neither a saved input nor version-checked: it would
/// get no gradient, and an in-place change between forward and backward would silently reach
/// the VJP. The macro cannot see inside a type, so it asks for this promise instead: implemented
/// here for the primitives, strings, the std containers of `Captured` types, tuples, arrays and
/// the library's layout types; `Tensor` does not implement it. For a type of yours that holds
/// no tensor, implement it (`impl Captured for Opts {}`); a generic parameter the node stores
/// gets a `Captured` bound on the generated function.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is stored in the node for the vjp, but is not known to hold no tensor",
    label = "the vjp reads this value, so the node keeps it until backward",
    note = "a tensor inside a stored value would be neither saved nor version-checked: it would get no gradient, and an in-place change before backward would reach the vjp unnoticed",
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
);

impl<T: ?Sized> Captured for PhantomData<T> {}
impl<T: Captured> Captured for [T] {}
impl<T: Captured, const N: usize> Captured for [T; N] {}
impl<T: Captured> Captured for Vec<T> {}
impl<T: Captured> Captured for std::collections::VecDeque<T> {}
impl<T: Captured> Captured for Option<T> {}
impl<T: Captured, E: Captured> Captured for std::result::Result<T, E> {}
impl<T: ?Sized + Captured> Captured for Box<T> {}
impl<T: ?Sized + Captured> Captured for std::sync::Arc<T> {}
impl<T: ?Sized + Captured + ToOwned> Captured for std::borrow::Cow<'static, T> {}
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

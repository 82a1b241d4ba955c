//! Integer trees (CuTe's IntTuple), the `Shape` and `Stride` built from them, and their macros.

use std::fmt;

/// What `IntTuple::from(usize)` makes of a value above `i64::MAX`: a leaf no layout accepts.
pub(crate) const TOO_LARGE: i64 = i64::MIN;

/// An integer or a tuple of integer trees.
///
/// ```
/// use autograd_core::IntTuple;
/// let t = IntTuple::from(vec![IntTuple::from(2), IntTuple::from(vec![4, 3])]);
/// assert_eq!(t.to_string(), "(2,(4,3))");
/// assert_eq!((t.rank(), t.depth(), t.product()), (2, 2, Some(24)));
/// ```
#[derive(Clone, Eq)]
pub enum IntTuple {
    /// A leaf.
    Int(i64),
    /// A node with ordered children.
    Tuple(Vec<IntTuple>),
}

/// Structural equality, answered at once for a tree compared with itself (tensors of one op
/// usually share their layout, so shape checks on the hot path compare a tree with itself).
impl PartialEq for IntTuple {
    fn eq(&self, other: &IntTuple) -> bool {
        std::ptr::eq(self, other)
            || match (self, other) {
                (IntTuple::Int(a), IntTuple::Int(b)) => a == b,
                (IntTuple::Tuple(a), IntTuple::Tuple(b)) => a == b,
                _ => false,
            }
    }
}

impl std::hash::Hash for IntTuple {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            IntTuple::Int(a) => {
                state.write_u8(0);
                a.hash(state);
            }
            IntTuple::Tuple(v) => {
                state.write_u8(1);
                v.hash(state);
            }
        }
    }
}

impl IntTuple {
    /// Number of top-level elements: 1 for a leaf.
    pub fn rank(&self) -> usize {
        match self {
            IntTuple::Int(_) => 1,
            IntTuple::Tuple(v) => v.len(),
        }
    }

    /// Nesting depth: 0 for a leaf, 1 for a flat tuple.
    pub fn depth(&self) -> usize {
        match self {
            IntTuple::Int(_) => 0,
            IntTuple::Tuple(v) => 1 + v.iter().map(IntTuple::depth).max().unwrap_or(0),
        }
    }

    /// The leaves in order (depth-first, left to right).
    pub fn leaves(&self) -> Vec<i64> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves(&self, out: &mut Vec<i64>) {
        match self {
            IntTuple::Int(x) => out.push(*x),
            IntTuple::Tuple(v) => v.iter().for_each(|c| c.collect_leaves(out)),
        }
    }

    /// The product of the leaves (1 for an empty tuple), or `None` when it overflows `i64`.
    pub fn product(&self) -> Option<i64> {
        self.leaves()
            .iter()
            .try_fold(1i64, |acc, &x| acc.checked_mul(x))
    }

    /// Top-level elements: the leaf itself for a leaf.
    pub fn modes(&self) -> Vec<IntTuple> {
        match self {
            IntTuple::Int(_) => vec![self.clone()],
            IntTuple::Tuple(v) => v.clone(),
        }
    }

    /// Whether two trees have the same structure (leaves may differ).
    pub fn congruent(&self, other: &IntTuple) -> bool {
        match (self, other) {
            // leaf against leaf
            (IntTuple::Int(_), IntTuple::Int(_)) => true,
            // tuple against tuple: same rank, congruent children
            (IntTuple::Tuple(a), IntTuple::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.congruent(y))
            }
            // leaf against tuple
            _ => false,
        }
    }

    /// The same structure with every leaf replaced by `f(leaf)`, leaves visited in order.
    pub fn map_leaves(&self, f: &mut impl FnMut(i64) -> i64) -> IntTuple {
        match self {
            IntTuple::Int(x) => IntTuple::Int(f(*x)),
            IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|c| c.map_leaves(f)).collect()),
        }
    }
}

impl From<i64> for IntTuple {
    fn from(x: i64) -> Self {
        IntTuple::Int(x)
    }
}
impl From<i32> for IntTuple {
    fn from(x: i32) -> Self {
        IntTuple::Int(i64::from(x))
    }
}
impl From<usize> for IntTuple {
    /// A value above `i64::MAX` becomes `i64::MIN`, a leaf that no layout accepts (extents and
    /// strides are non-negative; `Layout::new` names it as too large). Saturating to
    /// `i64::MAX` instead would turn `usize::MAX` into a layout that is valid but smaller than
    /// the one asked for.
    fn from(x: usize) -> Self {
        IntTuple::Int(i64::try_from(x).unwrap_or(TOO_LARGE))
    }
}
impl<T: Into<IntTuple>> From<Vec<T>> for IntTuple {
    fn from(v: Vec<T>) -> Self {
        IntTuple::Tuple(v.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<IntTuple> + Copy> From<&[T]> for IntTuple {
    fn from(v: &[T]) -> Self {
        IntTuple::Tuple(v.iter().map(|x| (*x).into()).collect())
    }
}

impl fmt::Display for IntTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntTuple::Int(x) => write!(f, "{x}"),
            IntTuple::Tuple(v) => {
                f.write_str("(")?;
                for (i, c) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{c}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Debug for IntTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

macro_rules! tree_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash)]
        pub struct $name(pub IntTuple);

        impl $name {
            /// Wraps an integer tree.
            pub fn new(t: impl Into<IntTuple>) -> Self {
                $name(t.into())
            }
            /// The tree.
            pub fn tree(&self) -> &IntTuple {
                &self.0
            }
        }
        impl<T: Into<IntTuple>> From<T> for $name {
            fn from(t: T) -> Self {
                $name(t.into())
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0)
            }
        }
    };
}

tree_newtype!(
    /// Extents of a layout's modes, as an integer tree.
    Shape
);
tree_newtype!(
    /// Strides of a layout's modes, an integer tree congruent to its shape.
    Stride
);

impl Shape {
    /// The number of logical elements (product of the extents), or `None` when it overflows.
    pub fn size(&self) -> Option<i64> {
        self.0.product()
    }
}

/// Builds an [`IntTuple`] list from comma-separated integers and `[...]` groups.
#[doc(hidden)]
#[macro_export]
macro_rules! __int_tuple_list {
    (@acc [$($out:expr),*]) => { ::std::vec![$($out),*] };
    (@acc [$($out:expr),*] [$($inner:tt)*] $(, $($rest:tt)*)?) => {
        $crate::__int_tuple_list!(
            @acc [$($out,)* $crate::IntTuple::Tuple($crate::__int_tuple_list!(@acc [] $($inner)*))]
            $($($rest)*)?
        )
    };
    (@acc [$($out:expr),*] $e:expr $(, $($rest:tt)*)?) => {
        $crate::__int_tuple_list!(@acc [$($out,)* $crate::IntTuple::from($e)] $($($rest)*)?)
    };
}

/// A [`Shape`] from integers and nested `[...]` groups: `shape![2, [4, 3]]` is `(2,(4,3))`.
#[macro_export]
macro_rules! shape {
    ($($t:tt)*) => { $crate::Shape($crate::IntTuple::Tuple($crate::__int_tuple_list!(@acc [] $($t)*))) };
}

/// A [`Stride`] from integers and nested `[...]` groups: `stride![1, [2, 8]]` is `(1,(2,8))`.
#[macro_export]
macro_rules! stride {
    ($($t:tt)*) => { $crate::Stride($crate::IntTuple::Tuple($crate::__int_tuple_list!(@acc [] $($t)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_build_nested_trees() {
        let s = crate::shape![2, [4, 3]];
        assert_eq!(s.to_string(), "(2,(4,3))");
        assert_eq!(s.size(), Some(24));
        assert_eq!(crate::shape![1i64 << 40, 1i64 << 40].size(), None);
        let d = crate::stride![1, [2, 8]];
        assert!(s.0.congruent(&d.0));
        let n = 5usize;
        assert_eq!(crate::shape![n, -1].0.leaves(), vec![5, -1]);
        assert_eq!(crate::shape![].0, IntTuple::Tuple(vec![]));
        assert_eq!(crate::shape![[[2]], 3,].0.depth(), 3);
    }

    #[test]
    fn congruence() {
        let a = IntTuple::from(vec![IntTuple::from(2), IntTuple::from(vec![4, 3])]);
        let b = IntTuple::from(vec![IntTuple::from(1), IntTuple::from(vec![0, 2])]);
        let c = IntTuple::from(vec![1, 0, 2]);
        assert!(a.congruent(&b));
        assert!(!a.congruent(&c));
        assert!(!IntTuple::from(1).congruent(&IntTuple::from(vec![1])));
    }
}

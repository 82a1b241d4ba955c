//! Axes and integer lists as PyTorch writes them: an [`Axis`] counts from the front when
//! non-negative and from the back when negative (`-1` is the last axis), and an [`IntList`] is
//! any way a caller writes a list of axes or sizes (`&[0, -1]`, `[2usize, 3]`, `&dims`,
//! `vec![1, 2]`, or one integer). Ops resolve them against a rank with [`Axis::resolve`] and
//! [`resolve_axes`]; the sizes of `reshape` resolve with [`crate::layout::inferred_shape`].

use std::fmt;

use crate::error::{bail, ensure, Result};

/// One axis of a tensor: `0..rank` from the front or `-rank..-1` from the back, as PyTorch's
/// `dim`. Built from `usize`, `isize`, `i64` or `i32`, so ops take `impl Into<Axis>` and an
/// integer literal, a negative literal and a `usize` variable all work.
///
/// ```
/// use autograd_core::Axis;
/// assert_eq!(Axis::from(-1).resolve(3).unwrap(), 2);
/// assert_eq!(Axis::from(1usize).resolve(3).unwrap(), 1);
/// let e = Axis::from(3).resolve(3).unwrap_err();
/// assert!(e.to_string().contains("expected to be in range of [-3, 2], but got 3"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Axis(i128);

impl Axis {
    /// The axis as written (negative counts from the back).
    pub fn value(self) -> i128 {
        self.0
    }

    /// The position `0..rank` this axis names in a tensor of `rank` axes; `Error::Value`
    /// naming the axis and the valid range otherwise (PyTorch's "Dimension out of range").
    pub fn resolve(self, rank: usize) -> Result<usize> {
        let r = rank as i128;
        let at = if self.0 < 0 { self.0 + r } else { self.0 };
        if (0..r).contains(&at) {
            return Ok(at as usize);
        }
        if rank == 0 {
            bail!(
                Value,
                "axis {} is out of range: dimension out of range (a tensor of rank 0 has no axis)",
                self.0
            );
        }
        bail!(
            Value,
            "axis {} is out of range for rank {rank}: dimension out of range (expected to be in range of [{}, {}], but got {})",
            self.0,
            -r,
            r - 1,
            self.0
        )
    }

    /// [`Axis::resolve`] with the op's name leading the error.
    pub(crate) fn resolve_for(self, op: &str, rank: usize) -> Result<usize> {
        self.resolve(rank).map_err(|e| e.context(op))
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

macro_rules! axis_from {
    ($($t:ty)*) => {$(
        impl From<$t> for Axis {
            fn from(v: $t) -> Axis {
                Axis(v as i128)
            }
        }
    )*};
}
axis_from!(usize isize i64 i32);

/// An axis or none, as PyTorch's `dim: Optional[int]`: ops that take one
/// (`take_along_dim`, `repeat_interleave`) work along the axis, or on the flattened input for
/// `None`. Built from every integer [`Axis`] is built from, an [`Axis`], or `None`.
///
/// ```
/// use autograd_core::{Axis, OptionalAxis};
/// assert_eq!(OptionalAxis::from(-1), OptionalAxis::Along(Axis::from(-1)));
/// assert_eq!(OptionalAxis::from(None), OptionalAxis::Flat);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionalAxis {
    /// Along this axis.
    Along(Axis),
    /// On the input flattened to one axis (PyTorch's `dim=None`).
    Flat,
}

impl From<Axis> for OptionalAxis {
    fn from(a: Axis) -> OptionalAxis {
        OptionalAxis::Along(a)
    }
}

impl From<Option<Axis>> for OptionalAxis {
    fn from(a: Option<Axis>) -> OptionalAxis {
        a.map_or(OptionalAxis::Flat, OptionalAxis::Along)
    }
}

macro_rules! optional_axis_from {
    ($($t:ty)*) => {$(
        impl From<$t> for OptionalAxis {
            fn from(v: $t) -> OptionalAxis {
                OptionalAxis::Along(Axis::from(v))
            }
        }
    )*};
}
optional_axis_from!(usize isize i64 i32);

/// A list of integers as a caller writes it, axes (`sum_axes(&x, &[0, -1], false)`) or sizes
/// (`reshape(&x, &[2, -1])`): a borrowed slice, array or `Vec` of `usize`, `isize`, `i64` or
/// `i32`, or one such integer (a list of one, except where an op says otherwise: `split` takes
/// one integer as a piece size). Every implementor is a cheap `Copy` borrow or integer.
///
/// Integer literals infer as `i32`; an empty `&[]` is a list of `usize`, the only element type
/// implemented for zero-length array references, so existing calls such as
/// `sum_axes(&x, &[], false)` keep compiling. Array references of `isize`, `i64` and `i32`
/// are implemented up to 16 elements; longer lists pass a slice (`&v[..]`). Since a list of
/// literals is `i32`, a literal beyond `i32` needs a suffix: `&[1usize << 40, 2]`.
pub trait IntList: Copy {
    /// The integers, in order, widened to `i128` so that every `usize` and `i64` fits.
    fn to_ints(self) -> Vec<i128>;

    /// Whether the argument is one integer rather than a list.
    fn is_single(self) -> bool {
        false
    }

    /// The integers as axes.
    fn to_axes(self) -> Vec<Axis> {
        self.to_ints().into_iter().map(Axis).collect()
    }
}

macro_rules! int_list_for {
    ($($t:ty)*) => {$(
        impl IntList for $t {
            fn to_ints(self) -> Vec<i128> {
                vec![self as i128]
            }
            fn is_single(self) -> bool {
                true
            }
        }
        impl IntList for &[$t] {
            fn to_ints(self) -> Vec<i128> {
                self.iter().map(|&v| v as i128).collect()
            }
        }
        impl IntList for &Vec<$t> {
            fn to_ints(self) -> Vec<i128> {
                self.iter().map(|&v| v as i128).collect()
            }
        }
    )*};
}
int_list_for!(usize isize i64 i32);

impl<const N: usize> IntList for &[usize; N] {
    fn to_ints(self) -> Vec<i128> {
        self.iter().map(|&v| v as i128).collect()
    }
}

// Signed array references of every length but 0, so that `&[]` has one candidate (usize).
macro_rules! signed_array_refs {
    ($t:ty; $($n:literal)*) => {$(
        impl IntList for &[$t; $n] {
            fn to_ints(self) -> Vec<i128> {
                self.iter().map(|&v| v as i128).collect()
            }
        }
    )*};
}
signed_array_refs!(i32; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
signed_array_refs!(i64; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
signed_array_refs!(isize; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

/// Every axis of `axes` resolved against `rank` (see [`Axis::resolve`]); `Error::Value`, led by
/// `op`, for an axis out of range or one named twice (`0` and `-rank` are the same axis).
pub fn resolve_axes(op: &str, axes: impl IntList, rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for axis in axes.to_axes() {
        let at = axis.resolve_for(op, rank)?;
        ensure!(
            !out.contains(&at),
            Value,
            "{op}: axis {axis} is listed twice (dimension {at} appears multiple times in the list of dims)"
        );
        out.push(at);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{resolve_axes, Axis, IntList};

    fn ints(l: impl IntList) -> Vec<i128> {
        l.to_ints()
    }

    #[test]
    fn negative_axes_count_from_the_back() {
        assert_eq!(Axis::from(-1).resolve(4).unwrap(), 3);
        assert_eq!(Axis::from(-4i64).resolve(4).unwrap(), 0);
        assert!(Axis::from(-5isize).resolve(4).is_err());
        assert!(Axis::from(4usize).resolve(4).is_err());
        assert!(Axis::from(0).resolve(0).is_err());
        assert!(Axis::from(usize::MAX).resolve(4).is_err());
    }

    #[test]
    fn lists_of_every_spelling() {
        assert_eq!(ints(&[]), Vec::<i128>::new());
        assert_eq!(ints(&[2, -1]), [2, -1]);
        assert_eq!(ints(&[1usize, 2]), [1, 2]);
        let v = vec![3usize, 4];
        assert_eq!(ints(&v), [3, 4]);
        assert_eq!(ints(&v[..]), [3, 4]);
        assert_eq!(ints(&[7usize; 20]).len(), 20);
        assert_eq!(ints(-2), [-2]);
        assert!((-2).is_single() && !(&[-2]).is_single());
        let long: Vec<i64> = (0..20).collect();
        assert_eq!(ints(&long[..]).len(), 20);
    }

    #[test]
    fn repeated_axes_are_refused() {
        assert_eq!(resolve_axes("op", &[0, -1], 3).unwrap(), [0, 2]);
        let e = resolve_axes("op", &[2, -1], 3).unwrap_err();
        assert!(e.to_string().contains("listed twice"), "{e}");
    }
}

//! Single values and the element types CPU storage holds.

use std::fmt;

use crate::error::{bail, Result};
use crate::storage::allocation::filled;
use crate::storage::dtype::DType;

/// One element value of a simple dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A Float32 value.
    F32(f32),
    /// A Float64 value.
    F64(f64),
    /// An Int32 value.
    I32(i32),
    /// An Int64 value.
    I64(i64),
    /// A Bool value.
    Bool(bool),
}

impl Scalar {
    /// The simple dtype of this value.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::Float32,
            Scalar::F64(_) => DType::Float64,
            Scalar::I32(_) => DType::Int32,
            Scalar::I64(_) => DType::Int64,
            Scalar::Bool(_) => DType::Bool,
        }
    }

    /// This value stored as `dtype`. Floats accept any number (rounding to the nearest value);
    /// integers accept integers in range; Bool accepts only Bool. Anything else is `Error::Type`.
    pub fn cast(self, dtype: &DType) -> Result<Scalar> {
        let out = match (dtype, self) {
            (DType::Float32, Scalar::F32(x)) => Scalar::F32(x),
            (DType::Float32, Scalar::F64(x)) => Scalar::F32(x as f32),
            (DType::Float32, Scalar::I32(x)) => Scalar::F32(x as f32),
            (DType::Float32, Scalar::I64(x)) => Scalar::F32(x as f32),
            (DType::Float64, Scalar::F32(x)) => Scalar::F64(f64::from(x)),
            (DType::Float64, Scalar::F64(x)) => Scalar::F64(x),
            (DType::Float64, Scalar::I32(x)) => Scalar::F64(f64::from(x)),
            (DType::Float64, Scalar::I64(x)) => Scalar::F64(x as f64),
            (DType::Int32, Scalar::I32(x)) => Scalar::I32(x),
            (DType::Int32, Scalar::I64(x)) => match i32::try_from(x) {
                Ok(v) => Scalar::I32(v),
                Err(_) => bail!(Value, "{x} does not fit in Int32"),
            },
            (DType::Int64, Scalar::I32(x)) => Scalar::I64(i64::from(x)),
            (DType::Int64, Scalar::I64(x)) => Scalar::I64(x),
            (DType::Bool, Scalar::Bool(x)) => Scalar::Bool(x),
            (d, v) => bail!(Type, "cannot store the {} value {v} as {d}", v.dtype()),
        };
        Ok(out)
    }

    /// The value as f64 (Bool as 0 or 1).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::F32(x) => f64::from(x),
            Scalar::F64(x) => x,
            Scalar::I32(x) => f64::from(x),
            Scalar::I64(x) => x as f64,
            Scalar::Bool(x) => f64::from(u8::from(x)),
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::F32(x) => write!(f, "{x}"),
            Scalar::F64(x) => write!(f, "{x}"),
            Scalar::I32(x) => write!(f, "{x}"),
            Scalar::I64(x) => write!(f, "{x}"),
            Scalar::Bool(x) => write!(f, "{x}"),
        }
    }
}

/// A contiguous run of elements of one simple dtype: what CPU storage holds.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Buffer {
    /// Float32 elements.
    F32(Vec<f32>),
    /// Float64 elements.
    F64(Vec<f64>),
    /// Int32 elements.
    I32(Vec<i32>),
    /// Int64 elements.
    I64(Vec<i64>),
    /// Bool elements.
    Bool(Vec<bool>),
}

impl Buffer {
    /// `len` zero elements of a simple dtype.
    pub fn zeros(dtype: &DType, len: usize) -> Result<Buffer> {
        Ok(match dtype {
            DType::Float32 => Buffer::F32(filled(len, 0.0)?),
            DType::Float64 => Buffer::F64(filled(len, 0.0)?),
            DType::Int32 => Buffer::I32(filled(len, 0)?),
            DType::Int64 => Buffer::I64(filled(len, 0)?),
            DType::Bool => Buffer::Bool(filled(len, false)?),
            other => bail!(Type, "storage needs a simple dtype, not {other}"),
        })
    }

    /// The element dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::F32(_) => DType::Float32,
            Buffer::F64(_) => DType::Float64,
            Buffer::I32(_) => DType::Int32,
            Buffer::I64(_) => DType::Int64,
            Buffer::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Buffer::F32(v) => v.len(),
            Buffer::F64(v) => v.len(),
            Buffer::I32(v) => v.len(),
            Buffer::I64(v) => v.len(),
            Buffer::Bool(v) => v.len(),
        }
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`, if in range.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        match self {
            Buffer::F32(v) => v.get(i).map(|x| Scalar::F32(*x)),
            Buffer::F64(v) => v.get(i).map(|x| Scalar::F64(*x)),
            Buffer::I32(v) => v.get(i).map(|x| Scalar::I32(*x)),
            Buffer::I64(v) => v.get(i).map(|x| Scalar::I64(*x)),
            Buffer::Bool(v) => v.get(i).map(|x| Scalar::Bool(*x)),
        }
    }

    /// Stores `value` (already cast to this buffer's dtype) at `i`; false when it does not fit.
    pub(crate) fn put(&mut self, i: usize, value: Scalar) -> bool {
        match (self, value) {
            (Buffer::F32(v), Scalar::F32(x)) if i < v.len() => v[i] = x,
            (Buffer::F64(v), Scalar::F64(x)) if i < v.len() => v[i] = x,
            (Buffer::I32(v), Scalar::I32(x)) if i < v.len() => v[i] = x,
            (Buffer::I64(v), Scalar::I64(x)) if i < v.len() => v[i] = x,
            (Buffer::Bool(v), Scalar::Bool(x)) if i < v.len() => v[i] = x,
            _ => return false,
        }
        true
    }
}

/// A Rust type that CPU storage holds directly.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + Default + 'static {
    /// The simple dtype of this element type.
    const DTYPE: DType;
    /// The elements of `b` if it holds this type.
    fn slice(b: &Buffer) -> Option<&[Self]>;
    /// The elements of `b` if it holds this type.
    fn slice_mut(b: &mut Buffer) -> Option<&mut [Self]>;
    /// Wraps elements in a buffer.
    fn into_buffer(v: Vec<Self>) -> Buffer;
    /// Unwraps a buffer of this type.
    fn from_buffer(b: Buffer) -> Option<Vec<Self>>;
    /// As a scalar.
    fn to_scalar(self) -> Scalar;
    /// From a scalar of exactly this type.
    fn from_scalar(s: Scalar) -> Option<Self>;
    /// Float32 elements as this type, if it is `f32` (small CPU storage holds only those).
    fn from_f32_slice(s: &[f32]) -> Option<&[Self]> {
        let _ = s;
        None
    }
    /// Float32 elements as this type, if it is `f32`.
    fn from_f32_slice_mut(s: &mut [f32]) -> Option<&mut [Self]> {
        let _ = s;
        None
    }
}

macro_rules! element {
    ($t:ty, $variant:ident, $dtype:ident, inline) => {
        element!($t, $variant, $dtype, {
            fn from_f32_slice(s: &[f32]) -> Option<&[Self]> {
                Some(s)
            }
            fn from_f32_slice_mut(s: &mut [f32]) -> Option<&mut [Self]> {
                Some(s)
            }
        });
    };
    ($t:ty, $variant:ident, $dtype:ident) => {
        element!($t, $variant, $dtype, {});
    };
    ($t:ty, $variant:ident, $dtype:ident, { $($extra:item)* }) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            fn slice(b: &Buffer) -> Option<&[Self]> {
                match b {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(b: &mut Buffer) -> Option<&mut [Self]> {
                match b {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_buffer(v: Vec<Self>) -> Buffer {
                Buffer::$variant(v)
            }
            fn from_buffer(b: Buffer) -> Option<Vec<Self>> {
                match b {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn to_scalar(self) -> Scalar {
                Scalar::$variant(self)
            }
            fn from_scalar(s: Scalar) -> Option<Self> {
                match s {
                    Scalar::$variant(v) => Some(v),
                    _ => None,
                }
            }
            $($extra)*
        }
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$variant(x)
            }
        }
    };
}

element!(f32, F32, Float32, inline);
element!(f64, F64, Float64);
element!(i32, I32, Int32);
element!(i64, I64, Int64);
element!(bool, Bool, Bool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts() {
        assert_eq!(
            Scalar::F64(1.5).cast(&DType::Float32).unwrap(),
            Scalar::F32(1.5)
        );
        assert_eq!(Scalar::I32(3).cast(&DType::Int64).unwrap(), Scalar::I64(3));
        assert_eq!(
            Scalar::F32(1.0).cast(&DType::Int32).unwrap_err().kind(),
            crate::ErrorKind::Type
        );
        assert_eq!(
            Scalar::I64(1 << 40).cast(&DType::Int32).unwrap_err().kind(),
            crate::ErrorKind::Value
        );
        assert_eq!(
            Scalar::I32(1).cast(&DType::Bool).unwrap_err().kind(),
            crate::ErrorKind::Type
        );
    }

    #[test]
    fn buffers() {
        let mut b = Buffer::zeros(&DType::Int32, 3).unwrap();
        assert!(b.put(1, Scalar::I32(7)));
        assert!(!b.put(3, Scalar::I32(7)));
        assert!(!b.put(0, Scalar::F32(7.0)));
        assert_eq!(b.get(1), Some(Scalar::I32(7)));
        assert_eq!(i32::slice(&b), Some(&[0, 7, 0][..]));
        assert!(Buffer::zeros(&DType::Category(crate::DTypeCategory::Any), 1).is_err());
    }
}

//! Data-type descriptors: simple element types, categories of them, and compound records.

use std::fmt;
use std::sync::Arc;

use crate::error::{bail, Result};

/// A logical data-type descriptor.
///
/// Simple dtypes name one storage element type. A [`DTypeCategory`] names a set of simple
/// dtypes, and a [`CompoundDType`] names a record of fields. Only the exact descriptor
/// [`DType::Float32`] is differentiable.
#[derive(Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// 32-bit IEEE float; the one differentiable dtype.
    Float32,
    /// 64-bit IEEE float.
    Float64,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// Boolean.
    Bool,
    /// A category of simple dtypes, used as a logical dtype over storage of a member.
    Category(DTypeCategory),
    /// A record with named fields.
    Compound(Arc<CompoundDType>),
}

/// A set of simple dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DTypeCategory {
    /// Float32 and Float64.
    Floating,
    /// Int32 and Int64.
    Integer,
    /// Every floating and integer dtype.
    Numeric,
    /// Every dtype.
    Any,
}

/// A record dtype: an ordered list of named fields, each of a simple or compound dtype.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompoundDType {
    fields: Vec<(String, DType)>,
}

impl CompoundDType {
    /// A record of the given fields. Names must be unique and non-empty, and no field may be a
    /// category (a record stores concrete values).
    pub fn new<S: Into<String>>(fields: impl IntoIterator<Item = (S, DType)>) -> Result<Self> {
        let fields: Vec<(String, DType)> = fields.into_iter().map(|(n, d)| (n.into(), d)).collect();
        if fields.is_empty() {
            bail!(Value, "a compound dtype needs at least one field");
        }
        for (i, (name, dtype)) in fields.iter().enumerate() {
            if name.is_empty() {
                bail!(Value, "field {i} of a compound dtype has an empty name");
            }
            if fields[..i].iter().any(|(other, _)| other == name) {
                bail!(Value, "compound dtype field name `{name}` appears twice");
            }
            if let DType::Category(c) = dtype {
                bail!(
                    Value,
                    "compound dtype field `{name}` has the category {c:?}, not a concrete dtype"
                );
            }
        }
        Ok(CompoundDType { fields })
    }

    /// The fields in order.
    pub fn fields(&self) -> &[(String, DType)] {
        &self.fields
    }

    /// The simple dtypes of the leaf fields, nested records flattened in order.
    pub fn leaf_dtypes(&self) -> Vec<DType> {
        let mut out = Vec::new();
        for (_, d) in &self.fields {
            match d {
                DType::Compound(c) => out.extend(c.leaf_dtypes()),
                other => out.push(other.clone()),
            }
        }
        out
    }
}

impl DType {
    /// A compound dtype from fields; see [`CompoundDType::new`].
    pub fn compound<S: Into<String>>(fields: impl IntoIterator<Item = (S, DType)>) -> Result<Self> {
        Ok(DType::Compound(Arc::new(CompoundDType::new(fields)?)))
    }

    /// Whether tensors of this logical dtype participate in differentiation: exactly
    /// [`DType::Float32`].
    pub fn is_differentiable(&self) -> bool {
        matches!(self, DType::Float32)
    }

    /// Whether this names one storage element type.
    pub fn is_simple(&self) -> bool {
        !matches!(self, DType::Category(_) | DType::Compound(_))
    }

    /// Whether this is Float32 or Float64.
    pub fn is_floating(&self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }

    /// Whether this is Int32 or Int64.
    pub fn is_integer(&self) -> bool {
        matches!(self, DType::Int32 | DType::Int64)
    }

    /// Bytes one element of a simple dtype occupies in CPU storage.
    pub fn size_of(&self) -> Option<usize> {
        match self {
            DType::Float32 | DType::Int32 => Some(4),
            DType::Float64 | DType::Int64 => Some(8),
            DType::Bool => Some(1),
            DType::Category(_) | DType::Compound(_) => None,
        }
    }

    /// Whether a simple dtype belongs to this category (or equals this dtype).
    pub fn admits(&self, simple: &DType) -> bool {
        match self {
            DType::Category(c) => c.contains(simple),
            other => other == simple,
        }
    }
}

impl DTypeCategory {
    /// Whether `dtype` belongs to this category.
    pub fn contains(self, dtype: &DType) -> bool {
        match self {
            DTypeCategory::Floating => dtype.is_floating(),
            DTypeCategory::Integer => dtype.is_integer(),
            DTypeCategory::Numeric => dtype.is_floating() || dtype.is_integer(),
            DTypeCategory::Any => !matches!(dtype, DType::Category(_)),
        }
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DType::Float32 => f.write_str("Float32"),
            DType::Float64 => f.write_str("Float64"),
            DType::Int32 => f.write_str("Int32"),
            DType::Int64 => f.write_str("Int64"),
            DType::Bool => f.write_str("Bool"),
            DType::Category(c) => write!(f, "{c:?}"),
            DType::Compound(c) => {
                f.write_str("{")?;
                for (i, (name, d)) in c.fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{name}: {d}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_float32_is_differentiable() {
        let compound = DType::compound([("x", DType::Float32)]).unwrap();
        for d in [
            DType::Float64,
            DType::Int32,
            DType::Int64,
            DType::Bool,
            DType::Category(DTypeCategory::Floating),
            DType::Category(DTypeCategory::Any),
            compound,
        ] {
            assert!(!d.is_differentiable(), "{d}");
        }
        assert!(DType::Float32.is_differentiable());
    }

    #[test]
    fn compound_rejects_bad_fields() {
        assert!(CompoundDType::new(Vec::<(String, DType)>::new()).is_err());
        assert!(CompoundDType::new([("a", DType::Float32), ("a", DType::Int32)]).is_err());
        assert!(CompoundDType::new([("a", DType::Category(DTypeCategory::Any))]).is_err());
        let inner = DType::compound([("re", DType::Float32), ("im", DType::Float32)]).unwrap();
        let outer = CompoundDType::new([("z", inner), ("w", DType::Float32)]).unwrap();
        assert_eq!(outer.leaf_dtypes(), vec![DType::Float32; 3]);
    }

    #[test]
    fn categories() {
        assert!(DType::Category(DTypeCategory::Floating).admits(&DType::Float64));
        assert!(!DType::Category(DTypeCategory::Integer).admits(&DType::Float64));
        assert!(DType::Category(DTypeCategory::Any).admits(&DType::Bool));
        assert_eq!(
            DType::Category(DTypeCategory::Numeric).to_string(),
            "Numeric"
        );
    }
}

/// A [`DType`] in one word, for the tensor header a million-node graph keeps a million of: a
/// simple dtype points at a static copy, a compound one at an `Arc<DType>` this value holds a
/// count of (tagged in bit 0).
pub(crate) struct PackedDType(std::ptr::NonNull<DType>);

// SAFETY: it stands for a `&'static DType` or an `Arc<DType>`, both `Send + Sync`.
unsafe impl Send for PackedDType {}
// SAFETY: as above.
unsafe impl Sync for PackedDType {}

const SHARED: usize = 1;

/// Every dtype but records: [`PackedDType::new`] points a simple dtype at its copy here.
static SIMPLE: [DType; 9] = [
    DType::Float32,
    DType::Float64,
    DType::Int32,
    DType::Int64,
    DType::Bool,
    DType::Category(DTypeCategory::Floating),
    DType::Category(DTypeCategory::Integer),
    DType::Category(DTypeCategory::Numeric),
    DType::Category(DTypeCategory::Any),
];

impl PackedDType {
    pub(crate) fn new(dtype: DType) -> PackedDType {
        // Float32 first: nearly every tensor finds its dtype at the first comparison
        if let Some(simple) = SIMPLE.iter().find(|s| **s == dtype) {
            return PackedDType(std::ptr::NonNull::from(simple));
        }
        let p = Arc::into_raw(Arc::new(dtype)).cast_mut();
        // `Arc`'s contents hold a pointer, so they are aligned to at least 4: bit 0 is free
        let tagged = p.map_addr(|a| a | SHARED);
        // SAFETY: `Arc::into_raw` never returns null, and setting bit 0 keeps it so.
        PackedDType(unsafe { std::ptr::NonNull::new_unchecked(tagged) })
    }

    fn untagged(&self) -> *const DType {
        self.0.as_ptr().map_addr(|a| a & !SHARED)
    }
}

impl From<DType> for PackedDType {
    fn from(dtype: DType) -> PackedDType {
        PackedDType::new(dtype)
    }
}

/// A clone shares a record's `Arc<DType>`, so a view of a record tensor allocates no dtype.
impl Clone for PackedDType {
    fn clone(&self) -> PackedDType {
        if self.0.as_ptr().addr() & SHARED != 0 {
            // SAFETY: a tagged pointer came from `Arc::into_raw`, and this value keeps that
            // count alive while the clone takes one of its own.
            unsafe { Arc::increment_strong_count(self.untagged()) };
        }
        PackedDType(self.0)
    }
}

impl std::ops::Deref for PackedDType {
    type Target = DType;
    fn deref(&self) -> &DType {
        // SAFETY: the pointer is to a static or to an `Arc` this value keeps alive.
        unsafe { &*self.untagged() }
    }
}

impl Drop for PackedDType {
    fn drop(&mut self) {
        if self.0.as_ptr().addr() & SHARED != 0 {
            // SAFETY: a tagged pointer came from `Arc::into_raw` in `new`, and this value
            // owns the count it took.
            drop(unsafe { Arc::from_raw(self.untagged()) });
        }
    }
}

#[cfg(test)]
mod packed_tests {
    use super::*;

    #[test]
    fn a_packed_dtype_reads_back_as_it_was_made() {
        let compound = DType::Compound(Arc::new(
            CompoundDType::new([("re", DType::Float32), ("im", DType::Float32)])
                .expect("a valid record"),
        ));
        for d in SIMPLE.iter().chain([&compound]) {
            let p = PackedDType::new(d.clone());
            assert_eq!(*p, *d);
            let static_copy = SIMPLE.iter().any(|s| std::ptr::eq(s, &raw const *p));
            assert_eq!(static_copy, !matches!(d, DType::Compound(_)));
        }
        let DType::Compound(record) = &compound else {
            unreachable!("built as a compound above")
        };
        let before = Arc::strong_count(record);
        let p = PackedDType::new(compound.clone());
        assert_eq!(Arc::strong_count(record), before + 1);
        drop(p);
        assert_eq!(
            Arc::strong_count(record),
            before,
            "dropping frees the count it took"
        );
        assert_eq!(
            std::mem::size_of::<PackedDType>(),
            std::mem::size_of::<usize>()
        );
    }
}

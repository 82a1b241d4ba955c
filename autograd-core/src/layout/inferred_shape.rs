//! Sizes as PyTorch writes them: one `-1` in a `reshape`/`view`/`unflatten` shape is inferred
//! from the element count, and a `-1` in an `expand` shape keeps the existing extent.

use crate::error::{bail, ensure, Result};
use crate::layout::axis::IntList;

/// `sizes` as written, for error messages: `[2, -1]`.
fn written(sizes: &[i128]) -> String {
    let parts: Vec<String> = sizes.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// The extents of `sizes` holding exactly `numel` elements, its one `-1` (if any) inferred.
///
/// `Error::Value`, led by `op`, for two `-1`s, a size below `-1`, a `-1` that no extent
/// fills (the others' product does not divide `numel`, or is 0), or sizes whose product is not
/// `numel`.
///
/// ```
/// use autograd_core::layout::inferred_shape::infer_sizes;
/// assert_eq!(infer_sizes("reshape", &[2, -1], 6).unwrap(), [2, 3]);
/// assert!(infer_sizes("reshape", &[4, -1], 6).is_err());
/// assert!(infer_sizes("reshape", &[-1, -1], 6).is_err());
/// ```
pub fn infer_sizes(op: &str, sizes: impl IntList, numel: usize) -> Result<Vec<usize>> {
    let sizes = sizes.to_ints();
    let mut inferred = None;
    let mut known: i128 = 1;
    for (i, &s) in sizes.iter().enumerate() {
        if s == -1 {
            ensure!(
                inferred.is_none(),
                Value,
                "{op}: only one dimension can be inferred, shape {} has two -1s",
                written(&sizes)
            );
            inferred = Some(i);
        } else {
            ensure!(
                s >= 0,
                Value,
                "{op}: invalid shape dimension {s} in {}",
                written(&sizes)
            );
            known = known.checked_mul(s).unwrap_or(i128::MAX);
        }
    }
    let numel_i = numel as i128;
    let invalid = || {
        crate::Error::Value(format!(
            "{op}: shape {} is invalid for input of size {numel}",
            written(&sizes)
        ))
    };
    let mut out: Vec<usize> = Vec::with_capacity(sizes.len());
    if let Some(at) = inferred {
        if known == 0 {
            bail!(
                Value,
                "{op}: cannot reshape a tensor of {numel} elements into shape {} because the unspecified dimension size -1 can be any value and is ambiguous",
                written(&sizes)
            );
        }
        if numel_i % known != 0 {
            return Err(invalid());
        }
        for (i, &s) in sizes.iter().enumerate() {
            let extent = if i == at { numel_i / known } else { s };
            out.push(usize::try_from(extent).map_err(|_| invalid())?);
        }
    } else {
        if known != numel_i {
            return Err(invalid());
        }
        for &s in &sizes {
            out.push(usize::try_from(s).map_err(|_| invalid())?);
        }
    }
    Ok(out)
}

/// The extents `sizes` asks an `expand` of a tensor of extents `own` for: a `-1` keeps the
/// extent it aligns with (sizes align at the end, as in broadcasting).
///
/// `Error::Value`, led by `op`, for fewer sizes than `own` has, a `-1` in a new leading axis or
/// a size below `-1`. Whether each extent can broadcast is the caller's check.
///
/// ```
/// use autograd_core::layout::inferred_shape::expand_sizes;
/// assert_eq!(expand_sizes("expand", &[4, -1, 3], &[2, 1]).unwrap(), [4, 2, 3]);
/// assert!(expand_sizes("expand", &[-1, 2, 1], &[2, 1]).is_err());
/// ```
pub fn expand_sizes(op: &str, sizes: impl IntList, own: &[usize]) -> Result<Vec<usize>> {
    let sizes = sizes.to_ints();
    ensure!(
        sizes.len() >= own.len(),
        Value,
        "{op}: the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
        sizes.len(),
        own.len()
    );
    let lead = sizes.len() - own.len();
    let mut out = Vec::with_capacity(sizes.len());
    for (i, &s) in sizes.iter().enumerate() {
        if s == -1 {
            ensure!(
                i >= lead,
                Value,
                "{op}: the expanded size -1 isn't allowed in a leading, non-existing dimension {i} of {}",
                written(&sizes)
            );
            out.push(own[i - lead]);
            continue;
        }
        let Ok(extent) = usize::try_from(s) else {
            bail!(
                Value,
                "{op}: invalid size {s} at dimension {i} of {}",
                written(&sizes)
            )
        };
        out.push(extent);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{expand_sizes, infer_sizes};

    #[test]
    fn one_minus_one_is_inferred_anywhere() {
        assert_eq!(infer_sizes("reshape", &[-1], 6).unwrap(), [6]);
        assert_eq!(infer_sizes("reshape", &[-1, 2], 6).unwrap(), [3, 2]);
        assert_eq!(infer_sizes("reshape", &[1, -1, 1], 6).unwrap(), [1, 6, 1]);
        assert_eq!(infer_sizes("reshape", &[2, 3], 6).unwrap(), [2, 3]);
        assert_eq!(infer_sizes("reshape", &[], 1).unwrap(), Vec::<usize>::new());
        assert_eq!(infer_sizes("reshape", &[-1, 3], 0).unwrap(), [0, 3]);
    }

    #[test]
    fn bad_sizes_are_value_errors() {
        for (sizes, numel) in [
            (vec![-1i64, -1], 6usize),
            (vec![4, -1], 6),
            (vec![0, -1], 0),
            (vec![-2, 3], 6),
            (vec![2, 2], 6),
        ] {
            let e = infer_sizes("reshape", &sizes, numel).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Value, "{sizes:?}: {e}");
        }
        let e = infer_sizes("reshape", &[usize::MAX, 2], 6).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Value);
    }

    #[test]
    fn expand_keeps_minus_one() {
        assert_eq!(expand_sizes("expand", &[-1, 4], &[3, 1]).unwrap(), [3, 4]);
        assert!(expand_sizes("expand", &[4], &[3, 1]).is_err());
        assert!(expand_sizes("expand", &[-2, 4], &[3, 1]).is_err());
    }
}

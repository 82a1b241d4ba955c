//! Reading the plain-text fixtures the PyTorch scripts under `tests/fixtures/` print: fields
//! of space-separated numbers (`nan`, `inf`, `-inf` as Rust's `FromStr` reads them), and
//! operands written `dims:values`.

use std::str::FromStr;

/// The space-separated numbers of `field`; a malformed one panics naming it (a broken
/// fixture is a bug of the test, not an input).
pub fn numbers<T: FromStr>(field: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    field
        .split(' ')
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse()
                .unwrap_or_else(|e| panic!("fixture value {v:?}: {e:?}"))
        })
        .collect()
}

/// The Float32 values of `field`.
pub fn floats(field: &str) -> Vec<f32> {
    numbers(field)
}

/// A fixture operand `dims:values` (no dims: a 0-dim tensor); `None` for an empty field.
pub fn operand(field: &str) -> Option<(Vec<usize>, Vec<f32>)> {
    let (dims, values) = field.split_once(':')?;
    Some((numbers(dims), floats(values)))
}

/// How close our value must be to PyTorch's: `|ours - theirs| <= abs + rel * |theirs|`.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// The absolute part.
    pub abs: f32,
    /// The part relative to PyTorch's value.
    pub rel: f32,
}

/// Whether `ours` equals PyTorch's `theirs` within `tol`: NaN matches only NaN, an infinity
/// only itself (signed zeros compare equal).
pub fn same(ours: f32, theirs: f32, tol: Tolerance) -> bool {
    if theirs.is_nan() || ours.is_nan() {
        return theirs.is_nan() && ours.is_nan();
    }
    if theirs.is_infinite() || ours.is_infinite() {
        return ours == theirs;
    }
    (ours - theirs).abs() <= tol.abs + tol.rel * theirs.abs()
}

/// Every element where `ours` and PyTorch's `theirs` differ beyond `tol` (or a length
/// mismatch), as messages naming the fixture case `label` and the value `what`.
pub fn mismatches(
    label: &str,
    what: &str,
    ours: &[f32],
    theirs: &[f32],
    tol: Tolerance,
) -> Vec<String> {
    if ours.len() != theirs.len() {
        return vec![format!(
            "{label}: {what} has {} values, PyTorch {}",
            ours.len(),
            theirs.len()
        )];
    }
    ours.iter()
        .zip(theirs)
        .enumerate()
        .filter(|(_, (o, t))| !same(**o, **t, tol))
        .map(|(i, (o, t))| format!("{label}: {what}[{i}]: ours {o}, PyTorch {t}"))
        .collect()
}

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

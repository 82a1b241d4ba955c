//! Class targets of the classification losses: Int32 (or Int64) indices, one per row of the
//! class axis (axis 1 of `[N, C, d1, ...]`), checked before anything is computed.

use autograd_core::kernel::Rows;
use autograd_core::{bail, ensure, DType, Result, Tensor};

/// The checked targets of one loss call: per row of the class axis, its class, or `None` for
/// a row whose target is `ignore_index`.
#[derive(Debug)]
pub(crate) struct Targets {
    /// Per row (in the row order of [`Rows`] along axis 1), the class.
    pub classes: Vec<Option<usize>>,
    /// The rows that are not ignored: the divisor of the mean.
    pub count: usize,
}

/// The rows of `input` (`[N, C, d1, ...]`) along its class axis, and its `targets`
/// (`[N, d1, ...]`, Int32 or Int64) checked against them: every target in `0..C` or equal to
/// `ignore_index`. Dtypes are `Error::Type`; ranks, shapes and out-of-range targets
/// `Error::Value`, naming the target's position.
pub(crate) fn class_targets(
    op: &str,
    input: &Tensor,
    targets: &Tensor,
    ignore_index: Option<i32>,
) -> Result<(Rows, Targets)> {
    ensure!(
        input.dtype() == &DType::Float32,
        Type,
        "{op}: the input must be Float32, got {}",
        input.dtype()
    );
    let dims = input.dims();
    ensure!(
        dims.len() >= 2,
        Value,
        "{op}: the input of shape {} needs a batch and a class axis ([N, C, ...])",
        input.shape()
    );
    let mut want = dims.clone();
    let classes = want.remove(1);
    ensure!(
        targets.dims() == want,
        Value,
        "{op}: targets of shape {} must have the input's shape {} without its class axis, {want:?}",
        targets.shape(),
        input.shape()
    );
    let raw: Vec<i64> = match targets.dtype() {
        DType::Int32 => targets
            .values::<i32>()?
            .into_iter()
            .map(i64::from)
            .collect(),
        DType::Int64 => targets.values::<i64>()?,
        other => bail!(
            Type,
            "{op}: targets must be Int32 class indices, got {other}"
        ),
    };
    let mut out = Vec::with_capacity(raw.len());
    for (p, &t) in raw.iter().enumerate() {
        if ignore_index.is_some_and(|i| i64::from(i) == t) {
            out.push(None);
            continue;
        }
        match usize::try_from(t) {
            Ok(c) if c < classes => out.push(Some(c)),
            _ => bail!(
                Value,
                "{op}: target {t} at position {p} is out of range for {classes} classes{}",
                ignore_index.map_or(String::new(), |i| format!(" (ignore_index is {i})"))
            ),
        }
    }
    // targets are row-major over [N, d1, ...], which is the row order of the class axis
    let rows = Rows::along(op, &dims, 1)?;
    let count = out.iter().filter(|c| c.is_some()).count();
    Ok((
        rows,
        Targets {
            classes: out,
            count,
        },
    ))
}

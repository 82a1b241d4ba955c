//! Rows of a cotangent summed into the rows of a table by index: the gradient of an
//! embedding lookup (PyTorch's dense `embedding_backward`).

use crate::error::{ensure, Result};

/// `out[ids[k]] += rows[k]` for every row `k` of `rows` (`ids.len()` rows of `d`), into a
/// zeroed `table_rows x d` table, rows whose id is `skip` left out. Each touched table row is
/// summed in f64, in row order, and rounded once; only the touched rows are summed, so a
/// 50,257-row vocabulary costs its zeroing and the lookups, not a pass over the table in f64.
///
/// Errors: an id at or beyond `table_rows`, or `rows` not `ids.len() x d` (`Error::Value`).
///
/// ```
/// use autograd_core::kernel::scatter_rows;
/// let rows = [1.0f32, 2.0, 10.0, 20.0, 100.0, 200.0];
/// let table = scatter_rows(&rows, &[2, 0, 2], 3, 2, None)?;
/// assert_eq!(table, [10.0, 20.0, 0.0, 0.0, 101.0, 202.0]);
/// let padded = scatter_rows(&rows, &[2, 0, 2], 3, 2, Some(2))?;
/// assert_eq!(padded, [10.0, 20.0, 0.0, 0.0, 0.0, 0.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn scatter_rows(
    rows: &[f32],
    ids: &[usize],
    table_rows: usize,
    d: usize,
    skip: Option<usize>,
) -> Result<Vec<f32>> {
    ensure!(
        rows.len() == ids.len() * d,
        Value,
        "scatter_rows: {} values are not {} rows of {d}",
        rows.len(),
        ids.len()
    );
    if let Some(&id) = ids.iter().find(|&&id| id >= table_rows) {
        crate::error::bail!(
            Value,
            "scatter_rows: id {id} is out of range for {table_rows} rows"
        );
    }
    let mut out = crate::storage::pool::zeroed(table_rows * d)?;
    // the rows of each id together, in their order (a stable sort)
    let mut order: Vec<usize> = (0..ids.len()).filter(|&k| Some(ids[k]) != skip).collect();
    order.sort_by_key(|&k| ids[k]);
    let mut sum = vec![0.0f64; d];
    for group in order.chunk_by(|&a, &b| ids[a] == ids[b]) {
        sum.fill(0.0);
        for &k in group {
            for (s, &x) in sum.iter_mut().zip(&rows[k * d..(k + 1) * d]) {
                *s += f64::from(x);
            }
        }
        let id = ids[group[0]];
        for (o, &s) in out[id * d..(id + 1) * d].iter_mut().zip(&sum) {
            *o = s as f32;
        }
    }
    Ok(out)
}

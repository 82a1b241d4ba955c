//! Optimizer state and a generator's state in safetensors files. Per-parameter tensors are
//! named after the parameter (`state.l1.weight.exp_avg`), found through the module's
//! `named_parameters()`; hyperparameters are `__metadata__` strings that round-trip exactly.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use autograd_core::{bail, ensure, Error, Result, Rng, Tensor};

use super::safetensors::{self, File, FileDType, Planned};
use super::state_dict::write_le;

/// What the `format` metadata key of an optimizer file holds.
const FORMAT: &str = "strideweave-optimizer-state";
/// What the `format` metadata key of a generator file holds.
const RNG_FORMAT: &str = "strideweave-rng-state";

/// A state tensor's values.
#[derive(Debug)]
pub(crate) enum Slot<'a> {
    /// Per-element state, in the parameter's logical (row-major) order.
    F32(&'a [f32]),
    /// A counter, saved as an I64 scalar.
    Count(u64),
}

/// The name of each of `params` in `names` (a module's `named_parameters()`): every parameter
/// must have exactly one.
pub(crate) fn names_of(params: &[Tensor], names: &[(String, Tensor)]) -> Result<Vec<String>> {
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut found = names.iter().filter(|(_, t)| t.same_tensor(p));
            match (found.next(), found.next()) {
                (Some((name, _)), None) => Ok(name.clone()),
                (Some((a, _)), Some((b, _))) => {
                    bail!(
                        Value,
                        "optimizer parameter {i} has two names, `{a}` and `{b}`"
                    )
                }
                (None, _) => bail!(
                    Value,
                    "optimizer parameter {i} (shape {}) is not among the named parameters given",
                    p.shape()
                ),
            }
        })
        .collect()
}

/// Saves an optimizer's state: `kind` and `hyper` as metadata, and `slots` (a state name such
/// as `state.l1.weight.exp_avg`, the parameter's extents, the values).
pub(crate) fn save(
    path: &Path,
    kind: &str,
    hyper: &[(&str, String)],
    slots: &[(String, Vec<usize>, Slot<'_>)],
) -> Result<()> {
    let mut metadata = vec![
        ("format".to_string(), FORMAT.to_string()),
        ("optimizer".to_string(), kind.to_string()),
    ];
    metadata.extend(hyper.iter().map(|(k, v)| ((*k).to_string(), v.clone())));
    let planned: Vec<Planned> = slots
        .iter()
        .map(|(name, dims, slot)| Planned {
            name: name.clone(),
            dtype: match slot {
                Slot::F32(_) => FileDType::F32,
                Slot::Count(_) => FileDType::I64,
            },
            shape: match slot {
                Slot::F32(_) => dims.clone(),
                Slot::Count(_) => Vec::new(),
            },
        })
        .collect();
    safetensors::write(path, &planned, &metadata, |i, out: &mut dyn Write| {
        let written = match &slots[i].2 {
            Slot::F32(v) => write_le(out, v, f32::to_le_bytes),
            Slot::Count(n) => {
                let n = i64::try_from(*n)
                    .map_err(|_| Error::Value(format!("step count {n} exceeds i64")))?;
                out.write_all(&n.to_le_bytes())
            }
        };
        written.map_err(|e| Error::Runtime(format!("cannot write {}: {e}", path.display())))
    })
}

/// An optimizer file, read and checked to be of `kind`; its state tensors are taken by name
/// and [`Loaded::finish`] refuses any left over.
#[derive(Debug)]
pub(crate) struct Loaded {
    file: File,
    taken: HashSet<String>,
    path: String,
}

impl Loaded {
    /// Reads the optimizer file at `path`, which must hold the state of a `kind` optimizer.
    pub(crate) fn read(path: &Path, kind: &str) -> Result<Loaded> {
        let file = File::read(path)?;
        let loaded = Loaded {
            file,
            taken: HashSet::new(),
            path: path.display().to_string(),
        };
        ensure!(
            loaded.file.metadata("format") == Some(FORMAT),
            Value,
            "{} is not an optimizer state file (its metadata has no `format: {FORMAT}`)",
            loaded.path
        );
        let found = loaded.file.metadata("optimizer").unwrap_or("none");
        ensure!(
            found == kind,
            Value,
            "{} holds the state of a {found} optimizer, not of {kind}",
            loaded.path
        );
        Ok(loaded)
    }

    /// The metadata value `key` parsed as `T` (floats round-trip through their shortest form).
    pub(crate) fn hyper<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        let text = self
            .file
            .metadata(key)
            .ok_or_else(|| Error::Value(format!("{} has no hyperparameter `{key}`", self.path)))?;
        text.parse().map_err(|_| {
            Error::Value(format!(
                "{}: hyperparameter `{key}` has the unreadable value `{text}`",
                self.path
            ))
        })
    }

    /// The F32 state tensor `name` of extents `dims`, if the file has it.
    pub(crate) fn f32s(&mut self, name: &str, dims: &[usize]) -> Result<Option<Vec<f32>>> {
        let Some(entry) = self.file.entry(name) else {
            return Ok(None);
        };
        ensure!(
            entry.dtype == FileDType::F32 && entry.shape == dims,
            Value,
            "{}: state `{name}` is {} of shape {:?}, expected F32 of shape {dims:?} (the parameter's)",
            self.path,
            entry.dtype,
            entry.shape
        );
        let values = self
            .file
            .data(entry)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        self.taken.insert(name.to_string());
        Ok(Some(values))
    }

    /// The step count `name` (an I64 scalar of at least 1), if the file has it.
    pub(crate) fn count(&mut self, name: &str) -> Result<Option<u64>> {
        let Some(entry) = self.file.entry(name) else {
            return Ok(None);
        };
        ensure!(
            entry.dtype == FileDType::I64 && entry.shape.is_empty(),
            Value,
            "{}: state `{name}` is {} of shape {:?}, expected an I64 scalar",
            self.path,
            entry.dtype,
            entry.shape
        );
        let mut b = [0u8; 8];
        b.copy_from_slice(self.file.data(entry));
        let n = i64::from_le_bytes(b);
        ensure!(
            n >= 1,
            Value,
            "{}: step count `{name}` is {n}, expected at least 1",
            self.path
        );
        self.taken.insert(name.to_string());
        Ok(Some(n as u64))
    }

    /// Refuses a file with state tensors no parameter took (state of another model).
    pub(crate) fn finish(self) -> Result<()> {
        let left: Vec<&str> = self
            .file
            .entries()
            .iter()
            .map(|e| e.name.as_str())
            .filter(|n| !self.taken.contains(*n))
            .collect();
        ensure!(
            left.is_empty(),
            Value,
            "{}: state {} belongs to no parameter of this optimizer",
            self.path,
            left.iter()
                .take(10)
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(())
    }
}

/// Saves `rng`'s whole state (stream position and cached normal), so that a resumed run draws
/// the same numbers as an uninterrupted one.
pub fn save_rng(rng: &Rng, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let state = rng.state();
    let planned = [Planned {
        name: "rng.state".into(),
        dtype: FileDType::U64,
        shape: vec![state.len()],
    }];
    let metadata = [("format".to_string(), RNG_FORMAT.to_string())];
    safetensors::write(path, &planned, &metadata, |_, out| {
        write_le(out, &state, u64::to_le_bytes)
            .map_err(|e| Error::Runtime(format!("cannot write {}: {e}", path.display())))
    })
}

/// The generator [`save_rng`] saved at `path`.
pub fn load_rng(path: impl AsRef<Path>) -> Result<Rng> {
    let path = path.as_ref();
    let file = File::read(path)?;
    ensure!(
        file.metadata("format") == Some(RNG_FORMAT),
        Value,
        "{} is not a generator state file (its metadata has no `format: {RNG_FORMAT}`)",
        path.display()
    );
    let entry = file
        .entry("rng.state")
        .filter(|e| e.dtype == FileDType::U64 && e.shape == [6] && file.entries().len() == 1)
        .ok_or_else(|| {
            Error::Value(format!(
                "{} must hold exactly one U64 tensor `rng.state` of shape [6]",
                path.display()
            ))
        })?;
    let mut state = [0u64; 6];
    for (s, c) in state.iter_mut().zip(file.data(entry).chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        *s = u64::from_le_bytes(b);
    }
    Rng::from_state(state).map_err(|e| e.context(format!("loading {}", path.display())))
}

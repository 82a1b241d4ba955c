//! A module's state dict (every tensor [`Module::visit`] reaches, by dotted name) saved to and
//! loaded from a safetensors file. Loading checks every name, shape and dtype against the
//! whole file before it writes any tensor.

use std::io::Write;
use std::path::Path;

use autograd_core::{bail, ensure, kernel, no_grad, DType, Element, Error, Result, Tensor};

use super::safetensors::{self, Entry, FileDType, Planned};
use super::stream::Stream;
use crate::module::Module;

/// How [`Module::load_with`] treats a file that does not match the module exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Refuse (`Error::Value`) a file with a tensor the module lacks or without one it has.
    /// Otherwise those tensors are reported and the rest loaded.
    pub strict: bool,
    /// Convert F64 entries into Float32 tensors and F32 entries into Float64 tensors.
    pub convert_f64: bool,
}

impl Default for LoadOptions {
    /// Strict, and no F64 ↔ F32 conversion.
    fn default() -> Self {
        LoadOptions {
            strict: true,
            convert_f64: false,
        }
    }
}

/// What a load left out: the module's tensors the file lacks, and the file's tensors the
/// module lacks (both empty after a strict load).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Names of module tensors that the file does not hold (left unchanged).
    pub missing: Vec<String>,
    /// Names of file tensors that the module does not hold (ignored).
    pub unexpected: Vec<String>,
}

/// The file dtype a tensor of `dtype` is saved as.
fn file_dtype(name: &str, dtype: &DType) -> Result<FileDType> {
    Ok(match dtype {
        DType::Float32 => FileDType::F32,
        DType::Float64 => FileDType::F64,
        DType::Int32 => FileDType::I32,
        DType::Int64 => FileDType::I64,
        DType::Bool => FileDType::Bool,
        other => bail!(
            NotImplemented,
            "tensor `{name}` has dtype {other}, which a safetensors file cannot hold"
        ),
    })
}

/// Elements per chunk when a tensor's values are encoded for writing.
const CHUNK: usize = 1 << 18;

/// Writes `values` little-endian, a chunk at a time (each chunk large enough to bypass a
/// buffered writer's copy).
pub(crate) fn write_le<T: Copy, const N: usize>(
    out: &mut dyn Write,
    values: &[T],
    bytes: impl Fn(T) -> [u8; N],
) -> std::io::Result<()> {
    let mut buf = vec![0u8; CHUNK.min(values.len()) * N];
    for chunk in values.chunks(CHUNK) {
        let buf = &mut buf[..chunk.len() * N];
        for (b, &v) in buf.chunks_exact_mut(N).zip(chunk) {
            b.copy_from_slice(&bytes(v));
        }
        out.write_all(buf)?;
    }
    Ok(())
}

/// Writes `values` as their little-endian bytes: the slice's own bytes on a little-endian
/// machine, else encoded a chunk at a time.
fn write_pod<T: bytemuck::Pod, const N: usize>(
    out: &mut dyn Write,
    values: &[T],
    bytes: impl Fn(T) -> [u8; N],
) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        out.write_all(bytemuck::cast_slice(values))
    } else {
        write_le(out, values, bytes)
    }
}

/// Writes `t`'s elements in row-major order as `dtype` (the one [`file_dtype`] gives), read
/// in place when `t` is compact.
pub(crate) fn write_tensor(t: &Tensor, dtype: FileDType, out: &mut dyn Write) -> Result<()> {
    let written = match dtype {
        FileDType::F32 => kernel::read_logical(t, |xs| write_pod(out, xs, f32::to_le_bytes)),
        FileDType::F64 => kernel::read_logical(t, |xs| write_pod(out, xs, f64::to_le_bytes)),
        FileDType::I32 => kernel::read_logical(t, |xs| write_pod(out, xs, i32::to_le_bytes)),
        FileDType::I64 => kernel::read_logical(t, |xs| write_pod(out, xs, i64::to_le_bytes)),
        FileDType::Bool => kernel::read_logical(t, |xs| write_le(out, xs, |b: bool| [u8::from(b)])),
        other => bail!(NotImplemented, "writing {other} tensors is not supported"),
    }?;
    written.map_err(|e| Error::Runtime(format!("cannot write: {e}")))
}

/// Saves every tensor of `module` (parameters and buffers) by name, each row-major compact in
/// its own dtype.
pub fn save_module(module: &dyn Module, path: &Path) -> Result<()> {
    let tensors = module.named_tensors();
    let planned = tensors
        .iter()
        .map(|(name, t, _)| {
            Ok(Planned {
                name: name.clone(),
                dtype: file_dtype(name, t.dtype())?,
                shape: t.dims(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::write(path, &planned, &[], |i, out| {
        write_tensor(&tensors[i].1, planned[i].dtype, out)
    })
}

/// Whether an entry of `from` may load into a tensor of `to`.
fn convertible(from: FileDType, to: &DType, convert_f64: bool) -> bool {
    matches!(
        (from, to),
        (
            FileDType::F32 | FileDType::F16 | FileDType::BF16,
            DType::Float32
        ) | (FileDType::F64, DType::Float64)
            | (FileDType::I32, DType::Int32)
            | (FileDType::I64, DType::Int64)
            | (FileDType::Bool, DType::Bool)
    ) || (convert_f64
        && matches!(
            (from, to),
            (FileDType::F64, DType::Float32) | (FileDType::F32, DType::Float64)
        ))
}

/// Overwrites `t`'s elements in place (one version bump, no staged copy of the tensor) with
/// `entry`'s fixed-width little-endian elements, converted by `f`; validation made the entry
/// exactly `N` bytes an element for each of `t`'s.
fn update_from<T: Element, const N: usize>(
    t: &Tensor,
    file: &Stream,
    entry: &Entry,
    f: impl Fn([u8; N]) -> T,
) -> Result<()> {
    kernel::update::<T, _>(t, |xs| {
        let mut at = 0;
        file.blocks(entry, |bytes| {
            let block = xs.get_mut(at..at + bytes.len() / N).ok_or_else(|| {
                Error::Runtime(format!(
                    "tensor `{}` has more bytes than elements",
                    entry.name
                ))
            })?;
            for (x, c) in block.iter_mut().zip(bytes.chunks_exact(N)) {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                *x = f(a);
            }
            at += block.len();
            Ok(())
        })
    })
}

/// Writes `entry`'s values (checked by [`check_entry`]) into `t`, straight from the file into
/// `t`'s storage (a tensor of several subtensors through one staged copy).
fn write_entry(file: &Stream, entry: &Entry, t: &Tensor) -> Result<()> {
    if t.subtensor_count() != 1 {
        let staged = Tensor::zeros(entry.shape.as_slice(), t.dtype())?;
        write_entry(file, entry, &staged)?;
        return t.copy_from(&staged);
    }
    match (entry.dtype, t.dtype()) {
        (FileDType::F32, DType::Float32) => update_from(t, file, entry, f32::from_le_bytes),
        (FileDType::F16, DType::Float32) => {
            update_from(t, file, entry, |a| half::f16::from_le_bytes(a).to_f32())
        }
        (FileDType::BF16, DType::Float32) => {
            update_from(t, file, entry, |a| half::bf16::from_le_bytes(a).to_f32())
        }
        (FileDType::F64, DType::Float32) => {
            update_from(t, file, entry, |a| f64::from_le_bytes(a) as f32)
        }
        (FileDType::F64, DType::Float64) => update_from(t, file, entry, f64::from_le_bytes),
        (FileDType::F32, DType::Float64) => {
            update_from(t, file, entry, |a| f64::from(f32::from_le_bytes(a)))
        }
        (FileDType::I32, DType::Int32) => update_from(t, file, entry, i32::from_le_bytes),
        (FileDType::I64, DType::Int64) => update_from(t, file, entry, i64::from_le_bytes),
        (FileDType::Bool, DType::Bool) => update_from(t, file, entry, |[b]: [u8; 1]| b != 0),
        (from, to) => bail!(Type, "cannot load a {from} entry into a {to} tensor"),
    }
}

/// Checks that `entry` can load into `t`: same shape, a dtype `t` can take, valid booleans.
fn check_entry(entry: &Entry, t: &Tensor, convert_f64: bool, file: &Stream) -> Result<()> {
    let name = &entry.name;
    ensure!(
        entry.shape == t.dims(),
        Value,
        "tensor `{name}` has shape {:?} in the file but {:?} in the module",
        entry.shape,
        t.dims()
    );
    ensure!(
        convertible(entry.dtype, t.dtype(), convert_f64),
        Type,
        "tensor `{name}` is {} in the file but {} in the module{}",
        entry.dtype,
        t.dtype(),
        if matches!(entry.dtype, FileDType::F32 | FileDType::F64) {
            " (LoadOptions { convert_f64: true, .. } converts between F32 and F64)"
        } else {
            ""
        }
    );
    if entry.dtype == FileDType::Bool {
        file.blocks(entry, |bytes| {
            ensure!(
                bytes.iter().all(|&b| b <= 1),
                Value,
                "tensor `{name}` is BOOL but holds bytes other than 0 and 1"
            );
            Ok(())
        })?;
    }
    ensure!(
        t.subtensor_count() != 1 || t.layout().is_injective(),
        Value,
        "tensor `{name}` has layout {}, which maps several elements to one slot, so it cannot be loaded in place",
        t.layout()
    );
    Ok(())
}

/// A list of names for an error message, the first few of them.
fn listed(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let s = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{s} and {more} more"),
        _ => s,
    }
}

/// Loads the file at `path` into `module`'s tensors, in place under `no_grad` (each tensor
/// keeps its handle; its version moves on). The file's header and every name, shape and dtype
/// (and every BOOL entry's bytes) are checked first: on an error no tensor has changed. The
/// data is then read a block at a time straight into the tensors, so a load holds neither the
/// file nor a copy of a tensor in memory; only a read failing after that check (the file
/// changed during the load, a disk error) can leave the tensors before it loaded, and its
/// `Error::Runtime` says so.
pub fn load_module(module: &dyn Module, path: &Path, options: LoadOptions) -> Result<LoadReport> {
    check_load(module, path, options)?.commit()
}

/// A load whose file has passed every check against its module, not yet written:
/// [`CheckedLoad::commit`] writes it. Data-parallel ranks check, agree, then commit, so that a
/// file bad on one rank changes no rank's module.
pub(crate) struct CheckedLoad {
    file: Stream,
    path: std::path::PathBuf,
    plan: Vec<(Entry, Tensor)>,
    report: LoadReport,
}

/// The checks of [`load_module`], which change nothing.
pub(crate) fn check_load(
    module: &dyn Module,
    path: &Path,
    options: LoadOptions,
) -> Result<CheckedLoad> {
    let file = Stream::open(path)?;
    let context = |e: Error| e.context(format!("loading {}", path.display()));
    let tensors = module.named_tensors();
    let mut report = LoadReport::default();
    let mut plan = Vec::with_capacity(tensors.len());
    for (i, (name, t, _)) in tensors.iter().enumerate() {
        if tensors[..i].iter().any(|(n, _, _)| n == name) {
            return Err(context(Error::Value(format!(
                "the module has two tensors named `{name}`"
            ))));
        }
        match file.header().entry(name) {
            Some(entry) => plan.push((entry.clone(), t.clone())),
            None => report.missing.push(name.clone()),
        }
    }
    report.unexpected = file
        .header()
        .entries()
        .iter()
        .filter(|e| !tensors.iter().any(|(n, _, _)| *n == e.name))
        .map(|e| e.name.clone())
        .collect();
    if options.strict && (!report.missing.is_empty() || !report.unexpected.is_empty()) {
        let mut why = Vec::new();
        if !report.missing.is_empty() {
            why.push(format!(
                "missing from the file: {}",
                listed(&report.missing)
            ));
        }
        if !report.unexpected.is_empty() {
            why.push(format!(
                "unexpected in the file: {}",
                listed(&report.unexpected)
            ));
        }
        return Err(context(Error::Value(format!(
            "the file does not match the module ({}); LoadOptions {{ strict: false, .. }} loads the tensors both have",
            why.join("; ")
        ))));
    }
    for (entry, t) in &plan {
        check_entry(entry, t, options.convert_f64, &file).map_err(context)?;
    }
    Ok(CheckedLoad {
        file,
        path: path.to_path_buf(),
        plan,
        report,
    })
}

impl CheckedLoad {
    /// Writes each tensor in place, straight from the file's bytes.
    pub(crate) fn commit(self) -> Result<LoadReport> {
        let _guard = no_grad();
        for (entry, t) in &self.plan {
            write_entry(&self.file, entry, t)
                .map_err(|e| e.context(format!("loading {}", self.path.display())))?;
        }
        Ok(self.report)
    }
}

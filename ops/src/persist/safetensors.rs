//! The safetensors file format: an 8-byte little-endian header length, a JSON header giving
//! each tensor's dtype, shape and byte range (plus an optional `__metadata__` map of strings),
//! then the data. [`File::parse`] validates the whole file before anything reads a tensor.

use std::fmt;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use autograd_core::{bail, ensure, Error, Result};
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// The largest header accepted (the reference implementation's limit).
const MAX_HEADER: u64 = 100_000_000;

/// An element type a safetensors file can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileDType {
    Bool,
    U8,
    I8,
    F8E4M3,
    F8E5M2,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    I64,
    U64,
    F64,
}

impl FileDType {
    const ALL: [FileDType; 15] = [
        FileDType::Bool,
        FileDType::U8,
        FileDType::I8,
        FileDType::F8E4M3,
        FileDType::F8E5M2,
        FileDType::I16,
        FileDType::U16,
        FileDType::F16,
        FileDType::BF16,
        FileDType::I32,
        FileDType::U32,
        FileDType::F32,
        FileDType::I64,
        FileDType::U64,
        FileDType::F64,
    ];

    /// The name the header uses.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FileDType::Bool => "BOOL",
            FileDType::U8 => "U8",
            FileDType::I8 => "I8",
            FileDType::F8E4M3 => "F8_E4M3",
            FileDType::F8E5M2 => "F8_E5M2",
            FileDType::I16 => "I16",
            FileDType::U16 => "U16",
            FileDType::F16 => "F16",
            FileDType::BF16 => "BF16",
            FileDType::I32 => "I32",
            FileDType::U32 => "U32",
            FileDType::F32 => "F32",
            FileDType::I64 => "I64",
            FileDType::U64 => "U64",
            FileDType::F64 => "F64",
        }
    }

    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            FileDType::Bool
            | FileDType::U8
            | FileDType::I8
            | FileDType::F8E4M3
            | FileDType::F8E5M2 => 1,
            FileDType::I16 | FileDType::U16 | FileDType::F16 | FileDType::BF16 => 2,
            FileDType::I32 | FileDType::U32 | FileDType::F32 => 4,
            FileDType::I64 | FileDType::U64 | FileDType::F64 => 8,
        }
    }

    fn parse(name: &str) -> Option<FileDType> {
        FileDType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for FileDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One tensor of a file: where its bytes are in the data section.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) dtype: FileDType,
    pub(crate) shape: Vec<usize>,
    start: usize,
    end: usize,
}

/// A validated header: the tensors' entries (byte ranges relative to the data section) and
/// the metadata, for a file of a known length.
#[derive(Debug)]
pub(crate) struct Header {
    /// Where the data section starts: 8 + the header's length.
    pub(crate) data_start: usize,
    entries: Vec<Entry>,
    metadata: Vec<(String, String)>,
}

/// A whole safetensors file in memory, validated.
#[derive(Debug)]
pub(crate) struct File {
    bytes: Vec<u8>,
    header: Header,
}

/// What a safetensors file holds under one name, as [`contents`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The tensor's name (a dotted state-dict path).
    pub name: String,
    /// The file's dtype code (`F32`, `BF16`, `I64`, ...).
    pub dtype: &'static str,
    /// The tensor's extents.
    pub shape: Vec<usize>,
}

/// The tensors of the safetensors file at `path`, in the file's order, after the same
/// validation a load does: what a model must look like to load it (a hidden width, a
/// vocabulary size).
pub fn contents(path: impl AsRef<Path>) -> Result<Vec<EntryInfo>> {
    let file = super::stream::Stream::open(path.as_ref())?;
    Ok(file
        .header()
        .entries()
        .iter()
        .map(|e| EntryInfo {
            name: e.name.clone(),
            dtype: e.dtype.name(),
            shape: e.shape.clone(),
        })
        .collect())
}

/// `Error::Runtime` for a failed I/O call on `path`.
pub(crate) fn io_error(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::Runtime(format!("{what} {}: {e}", path.display()))
}

impl Header {
    /// The header's length from a file's first 8 bytes, checked against the file's length
    /// `file_len` and the limit.
    pub(crate) fn length(first: &[u8], file_len: u64) -> Result<usize> {
        ensure!(
            file_len >= 8 && first.len() >= 8,
            Value,
            "a safetensors file starts with an 8-byte header length; this one has {file_len} bytes"
        );
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&first[..8]);
        let header_len = u64::from_le_bytes(len8);
        let available = file_len - 8;
        ensure!(
            header_len <= available,
            Value,
            "the header length {header_len} exceeds the {available} bytes after it (truncated file or wrong header length)"
        );
        ensure!(
            header_len <= MAX_HEADER,
            Value,
            "the header length {header_len} exceeds the limit of {MAX_HEADER} bytes"
        );
        // at most MAX_HEADER, so it fits usize
        Ok(header_len as usize)
    }

    /// Validates `json`, the header of a file of `file_len` bytes: a JSON object with unique
    /// names, every entry of a known dtype with a byte range in the data section of exactly
    /// its shape's size, the ranges tiling the data section.
    pub(crate) fn parse(json: &[u8], file_len: u64) -> Result<Header> {
        let data_start = 8 + json.len();
        let header = std::str::from_utf8(json)
            .map_err(|e| Error::Value(format!("the header is not UTF-8: {e}")))?;
        ensure!(
            header.starts_with('{'),
            Value,
            "the header must be a JSON object starting with '{{'"
        );
        let mut de = serde_json::Deserializer::from_str(header);
        let raw = de
            .deserialize_map(EntriesVisitor)
            .and_then(|r| de.end().map(|()| r))
            .map_err(|e| Error::Value(format!("the header is not valid JSON: {e}")))?;
        let data_len = usize::try_from(file_len - data_start as u64)
            .map_err(|_| Error::Value(format!("a file of {file_len} bytes is too large")))?;
        let mut entries = Vec::with_capacity(raw.len());
        let mut metadata = Vec::new();
        for (name, value) in raw {
            if name == "__metadata__" {
                metadata = parse_metadata(value)?;
            } else {
                let entry = parse_entry(name, &value, data_len)?;
                entries.push(entry);
            }
        }
        check_tiling(&entries, data_len)?;
        Ok(Header {
            data_start,
            entries,
            metadata,
        })
    }

    /// The tensors, in header order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The tensor called `name`.
    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The `__metadata__` value of `key`.
    pub(crate) fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The file offsets `[start, end)` of `entry`'s bytes.
    pub(crate) fn span(&self, entry: &Entry) -> (u64, u64) {
        let at = |o: usize| (self.data_start + o) as u64;
        (at(entry.start), at(entry.end))
    }
}

impl File {
    /// Reads and validates the file at `path`; a bad file is `Error::Value` naming the path.
    pub(crate) fn read(path: &Path) -> Result<File> {
        let bytes = fs::read(path).map_err(|e| io_error("cannot read", path, &e))?;
        File::parse(bytes).map_err(|e| e.context(format!("reading {}", path.display())))
    }

    /// Validates `bytes` as a safetensors file (see [`Header::parse`]).
    pub(crate) fn parse(bytes: Vec<u8>) -> Result<File> {
        let len = bytes.len() as u64;
        let header_len = Header::length(&bytes, len)?;
        let header = Header::parse(&bytes[8..8 + header_len], len)?;
        Ok(File { bytes, header })
    }

    /// The tensors, in header order.
    pub(crate) fn entries(&self) -> &[Entry] {
        self.header.entries()
    }

    /// The tensor called `name`.
    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.header.entry(name)
    }

    /// The bytes of `entry` (validated to lie in the data section).
    pub(crate) fn data(&self, entry: &Entry) -> &[u8] {
        let start = self.header.data_start;
        &self.bytes[start + entry.start..start + entry.end]
    }

    /// The `__metadata__` value of `key`.
    pub(crate) fn metadata(&self, key: &str) -> Option<&str> {
        self.header.metadata(key)
    }
}

/// Collects the header's top-level entries in order, refusing a name that appears twice
/// (`serde_json::Map` would keep the last silently).
struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Vec<(String, serde_json::Value)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of tensor entries")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out: Vec<(String, serde_json::Value)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
            if !seen.insert(k.clone()) {
                return Err(de::Error::custom(format!("the name `{k}` appears twice")));
            }
            out.push((k, v));
        }
        Ok(out)
    }
}

fn parse_metadata(value: serde_json::Value) -> Result<Vec<(String, String)>> {
    let serde_json::Value::Object(map) = value else {
        bail!(Value, "`__metadata__` must be an object of strings");
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            other => bail!(Value, "`__metadata__.{k}` must be a string, got {other}"),
        })
        .collect()
}

fn parse_entry(name: String, value: &serde_json::Value, data_len: usize) -> Result<Entry> {
    let field = |key: &str| {
        value
            .get(key)
            .ok_or_else(|| Error::Value(format!("tensor `{name}` has no `{key}`")))
    };
    let dtype_name = field("dtype")?
        .as_str()
        .ok_or_else(|| Error::Value(format!("tensor `{name}`: `dtype` must be a string")))?;
    let dtype = FileDType::parse(dtype_name)
        .ok_or_else(|| Error::Value(format!("tensor `{name}` has unknown dtype `{dtype_name}`")))?;
    let shape = usizes(field("shape")?)
        .ok_or_else(|| Error::Value(format!("tensor `{name}`: `shape` must be a list of sizes")))?;
    let offsets = usizes(field("data_offsets")?).unwrap_or_default();
    let [start, end] = offsets[..] else {
        bail!(
            Value,
            "tensor `{name}`: `data_offsets` must be two byte offsets"
        );
    };
    ensure!(
        start <= end && end <= data_len,
        Value,
        "tensor `{name}` has data offsets [{start}, {end}] outside the {data_len}-byte data section"
    );
    let bytes = shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    ensure!(
        bytes == Some(end - start),
        Value,
        "tensor `{name}` of dtype {dtype} and shape {shape:?} needs {} bytes but its data offsets [{start}, {end}] hold {}",
        bytes.map_or_else(|| "more than usize::MAX".to_string(), |b| b.to_string()),
        end - start
    );
    Ok(Entry {
        name,
        dtype,
        shape,
        start,
        end,
    })
}

/// A JSON list of non-negative integers that fit `usize`.
fn usizes(value: &serde_json::Value) -> Option<Vec<usize>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_u64().and_then(|u| usize::try_from(u).ok()))
        .collect()
}

/// The byte ranges must cover the data section exactly, without overlap or gap.
fn check_tiling(entries: &[Entry], data_len: usize) -> Result<()> {
    let mut ranges: Vec<(usize, usize, &str)> = entries
        .iter()
        .map(|e| (e.start, e.end, e.name.as_str()))
        .collect();
    ranges.sort_unstable();
    let mut at = 0usize;
    let mut last = "the header";
    for (start, end, name) in ranges {
        ensure!(
            start >= at,
            Value,
            "tensor `{name}` (bytes [{start}, {end}]) overlaps `{last}`, which ends at {at}"
        );
        ensure!(
            start == at,
            Value,
            "bytes [{at}, {start}] of the data section belong to no tensor (after `{last}`)"
        );
        at = end;
        last = name;
    }
    ensure!(
        at == data_len,
        Value,
        "the data section has {data_len} bytes but its tensors cover {at}"
    );
    Ok(())
}

/// A tensor to write: its name, file dtype and shape; its bytes come from a callback.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    pub(crate) name: String,
    pub(crate) dtype: FileDType,
    pub(crate) shape: Vec<usize>,
}

impl Planned {
    fn byte_len(&self) -> Result<usize> {
        self.shape
            .iter()
            .try_fold(self.dtype.size(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| Error::Value(format!("tensor `{}` is too large to save", self.name)))
    }
}

/// Writes a safetensors file: the header from `planned` and `metadata`, then each tensor's
/// bytes, which `write_data(i, out)` writes for `planned[i]` (exactly its byte length). The
/// file is written beside `path` and renamed over it, so a failed save (or a process killed
/// during it) leaves `path` as it was. It is not fsync'd, as safetensors and `torch.save` do
/// not: saving runs at page-cache speed, and the OS writes it to the disk.
pub(crate) fn write(
    path: &Path,
    planned: &[Planned],
    metadata: &[(String, String)],
    mut write_data: impl FnMut(usize, &mut dyn Write) -> Result<()>,
) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        let meta = metadata
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        header.insert("__metadata__".into(), serde_json::Value::Object(meta));
    }
    let mut offset = 0usize;
    let mut lengths = Vec::with_capacity(planned.len());
    for p in planned {
        ensure!(
            p.name != "__metadata__" && names.insert(p.name.as_str()),
            Value,
            "cannot save two tensors named `{}`",
            p.name
        );
        let len = p.byte_len()?;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::Value("the tensors are too large to save".into()))?;
        header.insert(
            p.name.clone(),
            serde_json::json!({
                "dtype": p.dtype.name(),
                "shape": p.shape,
                "data_offsets": [offset, end],
            }),
        );
        lengths.push(len);
        offset = end;
    }
    let mut json = serde_json::to_vec(&serde_json::Value::Object(header))
        .map_err(|e| Error::Runtime(format!("cannot encode the header: {e}")))?;
    // pad with spaces so the data starts 8-byte aligned, as the reference writer does
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map_or_else(|| "state".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let result = (|| {
        let file = fs::File::create(&tmp).map_err(|e| io_error("cannot create", &tmp, &e))?;
        let mut out = Counting {
            inner: BufWriter::with_capacity(1 << 20, file),
            written: 0,
        };
        let io = |e: std::io::Error| io_error("cannot write", path, &e);
        out.write_all(&(json.len() as u64).to_le_bytes())
            .map_err(io)?;
        out.write_all(&json).map_err(io)?;
        for (i, &len) in lengths.iter().enumerate() {
            let before = out.written;
            write_data(i, &mut out)?;
            ensure!(
                out.written - before == len,
                Runtime,
                "tensor `{}` wrote {} bytes, expected {len}",
                planned[i].name,
                out.written - before
            );
        }
        // flushed to the page cache, not synced to the disk (as safetensors and torch.save)
        drop(out.inner.into_inner().map_err(|e| io(e.into_error()))?);
        fs::rename(&tmp, path).map_err(|e| io_error("cannot rename the saved file to", path, &e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A writer that counts the bytes through it.
struct Counting<W> {
    inner: W,
    written: usize,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn accepts_a_valid_file_and_reads_its_metadata() {
        let f = File::parse(file(
            r#"{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}"#,
            &[0; 16],
        ))
        .unwrap();
        assert_eq!(f.entries().len(), 2);
        assert_eq!(f.metadata("k"), Some("v"));
        assert_eq!(f.data(f.entry("b").unwrap()).len(), 8);
    }

    #[test]
    fn refuses_gaps_trailing_bytes_and_huge_shapes() {
        let gap = file(
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            &[0; 8],
        );
        assert!(File::parse(gap)
            .unwrap_err()
            .message()
            .contains("belong to no tensor"));
        let trailing = file(
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
            &[0; 8],
        );
        assert!(File::parse(trailing)
            .unwrap_err()
            .message()
            .contains("cover 4"));
        let huge = file(
            r#"{"a":{"dtype":"F32","shape":[18446744073709551615,4],"data_offsets":[0,4]}}"#,
            &[0; 4],
        );
        assert!(File::parse(huge).is_err());
        let unknown = file(
            r#"{"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}"#,
            &[0; 8],
        );
        assert!(File::parse(unknown)
            .unwrap_err()
            .message()
            .contains("unknown dtype"));
    }
}

//! A safetensors file read entry by entry: the header is validated when the file is opened,
//! and each tensor's bytes are read on demand a block at a time, so a load holds neither the
//! whole file nor a staged copy of a tensor in memory.

use std::cell::Cell;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use autograd_core::{Error, Result};

use super::safetensors::{io_error, Entry, Header};

/// Bytes read at a time: a multiple of every element size, small enough to stay in cache.
const BLOCK: usize = 1 << 20;

/// An open safetensors file whose header has been validated against its length.
pub(crate) struct Stream {
    file: fs::File,
    path: PathBuf,
    header: Header,
    /// The block buffer, reused from entry to entry (taken while a read uses it).
    buf: Cell<Vec<u8>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("path", &self.path)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl Stream {
    /// Opens the file at `path` and validates its header; a bad file is `Error::Value` naming
    /// the path.
    pub(crate) fn open(path: &Path) -> Result<Stream> {
        let mut file = fs::File::open(path).map_err(|e| io_error("cannot read", path, &e))?;
        let len = file
            .metadata()
            .map_err(|e| io_error("cannot read", path, &e))?
            .len();
        let header = read_header(&mut file, len)
            .map_err(|e| e.context(format!("reading {}", path.display())))?;
        Ok(Stream {
            file,
            path: path.to_path_buf(),
            header,
            buf: Cell::new(Vec::new()),
        })
    }

    /// The validated header.
    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    /// Calls `f` on `entry`'s bytes in order, a block of whole elements at a time. A read that
    /// fails now, after validation, means the file changed or the disk failed during the load:
    /// `Error::Runtime`.
    pub(crate) fn blocks(
        &self,
        entry: &Entry,
        mut f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let (start, end) = self.header.span(entry);
        let failed = |e: std::io::Error| {
            Error::Runtime(format!(
                "cannot read tensor `{}` of {} after validating the file (did it change during the load?): {e}",
                entry.name,
                self.path.display()
            ))
        };
        let mut file = &self.file;
        file.seek(SeekFrom::Start(start)).map_err(failed)?;
        let mut buf = self.buf.take();
        // at most BLOCK bytes: fits usize; zero-filled only where the buffer grows
        buf.resize(buf.len().max((end - start).min(BLOCK as u64) as usize), 0);
        let mut at = start;
        while at < end {
            let n = (end - at).min(BLOCK as u64) as usize;
            file.read_exact(&mut buf[..n]).map_err(failed)?;
            f(&buf[..n])?;
            at += n as u64;
        }
        self.buf.set(buf);
        Ok(())
    }
}

/// Reads and validates the header of a file of `len` bytes from its start.
fn read_header(file: &mut fs::File, len: u64) -> Result<Header> {
    let io = |e: std::io::Error| Error::Value(format!("cannot read the header: {e}"));
    let mut first = [0u8; 8];
    let n = usize::try_from(len.min(8)).unwrap_or(8);
    file.read_exact(&mut first[..n]).map_err(io)?;
    let header_len = Header::length(&first[..n], len)?;
    let mut json = Vec::new();
    json.try_reserve_exact(header_len)
        .map_err(|_| Error::Value(format!("cannot allocate a header of {header_len} bytes")))?;
    file.by_ref()
        .take(header_len as u64)
        .read_to_end(&mut json)
        .map_err(io)?;
    autograd_core::ensure!(
        json.len() == header_len,
        Value,
        "the file ended inside its {header_len}-byte header"
    );
    Header::parse(&json, len)
}

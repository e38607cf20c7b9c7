//! The bytes of a model file: a read-only memory map (zero-copy) or the file read into anonymous
//! memory. Either way the bytes stay put for the life of the model, so tensors can point into them.

use crate::error::{Error, Result};
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// How the file's bytes get into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// Map the file; pages come from the page cache on demand.
    Map,
    /// Read the whole file into memory owned by the model.
    Read,
}

pub enum Storage {
    Mapped(Mmap),
    Owned(MmapMut),
}

impl Storage {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(m) => m,
        }
    }

    /// The bytes of `source` in `mode`, reporting read progress (0..1) through `progress`; a
    /// `false` from it cancels.
    pub fn open(source: &FileSource, mode: LoadMode, progress: &mut dyn FnMut(f32) -> bool) -> Result<Storage> {
        let (file, start) = match source {
            FileSource::Path(path) => (
                File::open(path).map_err(|e| Error::io("cannot open model file", path, e))?,
                0,
            ),
            FileSource::Open { file, start, .. } => (
                file.try_clone()
                    .map_err(|e| Error::io("cannot use the open file of", source.name(), e))?,
                *start,
            ),
        };
        let path = source.name();
        let len = file
            .metadata()
            .map_err(|e| Error::io("cannot stat model file", path, e))?
            .len();
        let Some(size) = len.checked_sub(start).filter(|&n| n > 0) else {
            return Err(Error::gguf(
                0,
                format!("'{path}' is empty (no bytes after offset {start})"),
            ));
        };
        let size = usize::try_from(size).map_err(|_| Error::model("file too large for this platform"))?;
        match mode {
            LoadMode::Map => crate::ggml::map_file(&file, start, size)
                .map(Storage::Mapped)
                .map_err(|e| Error::io("cannot map model file", path, e)),
            LoadMode::Read => read_all(file, path, start, size, progress).map(Storage::Owned),
        }
    }

    /// Keep the bytes resident (mlock). Failure is reported, not fatal, as in llama.cpp.
    pub fn lock(&self) -> std::io::Result<()> {
        match self {
            Storage::Mapped(m) => m.lock(),
            Storage::Owned(m) => m.lock(),
        }
    }
}

/// Where a model file's bytes come from.
pub enum FileSource {
    Path(String),
    /// A file the caller opened, read from `start` on (a GGUF embedded in a larger file) without
    /// moving its offset; `name` describes it in messages.
    Open {
        file: File,
        start: u64,
        name: String,
    },
}

impl FileSource {
    pub fn name(&self) -> &str {
        match self {
            FileSource::Path(p) => p,
            FileSource::Open { name, .. } => name,
        }
    }
}

fn read_all(file: File, path: &str, start: u64, size: usize, progress: &mut dyn FnMut(f32) -> bool) -> Result<MmapMut> {
    // Anonymous memory is page aligned, which keeps tensor data aligned as ggml wants.
    let mut mem = MmapOptions::new()
        .len(size)
        .map_anon()
        .map_err(|e| Error::io("cannot allocate memory for model file", path, e))?;
    const CHUNK: usize = 16 << 20;
    let mut done = 0;
    while done < size {
        let end = (done + CHUNK).min(size);
        // Positioned reads leave the file's offset alone (it may be the caller's).
        file.read_exact_at(&mut mem[done..end], start + done as u64)
            .map_err(|e| Error::io("cannot read model file", path, e))?;
        done = end;
        if !progress(done as f32 / size as f32) {
            return Err(Error::Cancelled(
                "model loading cancelled by the progress callback".into(),
            ));
        }
    }
    Ok(mem)
}

//! Writing GGUF files safely: each output is written beside its final name and renamed into
//! place only when complete, so a failure never leaves a half-written file.

use super::{padded, MetaWriter};
use crate::error::{Error, Result};
use std::io::Write;

/// The output files, written beside their final names and renamed into place at the end.
pub struct Sink {
    files: Vec<(std::io::BufWriter<std::fs::File>, String, String)>,
    current: usize,
}

impl Sink {
    pub fn new(paths: &[String], metas: &[MetaWriter]) -> Result<Sink> {
        let mut sink = Sink {
            files: Vec::new(),
            current: 0,
        };
        for (path, meta) in paths.iter().zip(metas) {
            let part = format!("{path}.part{}", std::process::id());
            let file = std::fs::File::create(&part).map_err(|e| Error::io("cannot create", &part, e))?;
            let mut w = std::io::BufWriter::new(file);
            w.write_all(&meta.encode()?)
                .map_err(|e| Error::io("cannot write", &part, e))?;
            sink.files.push((w, part, path.clone()));
        }
        Ok(sink)
    }

    pub fn select(&mut self, split: usize) -> Result<()> {
        if split >= self.files.len() {
            return Err(Error::Internal(format!("no output split {split}")));
        }
        self.current = split;
        Ok(())
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let (w, part, _) = &mut self.files[self.current];
        w.write_all(bytes)
            .map_err(|e| Error::io("cannot write", part.as_str(), e))?;
        Ok(())
    }

    /// Zeros after a tensor of `size` bytes, up to the alignment.
    pub fn pad(&mut self, size: u64) -> Result<()> {
        let zeros = vec![0u8; (padded(size) - size) as usize];
        self.write(&zeros)
    }

    pub fn finish(mut self) -> Result<()> {
        for (w, part, _) in &mut self.files {
            w.flush().map_err(|e| Error::io("cannot write", part.as_str(), e))?;
            w.get_ref()
                .sync_all()
                .map_err(|e| Error::io("cannot write", part.as_str(), e))?;
        }
        for (_, part, path) in std::mem::take(&mut self.files) {
            std::fs::rename(&part, &path).map_err(|e| Error::io("cannot rename the output to", &path, e))?;
        }
        Ok(())
    }
}

impl Drop for Sink {
    /// An unfinished output is removed.
    fn drop(&mut self) {
        for (_, part, _) in &self.files {
            let _ = std::fs::remove_file(part);
        }
    }
}

//! A cursor over the file bytes whose every read is bounds-checked.

use std::fmt::Display;

use crate::error::Error;

/// A read wanted more bytes than the file has left. The caller names what it was reading,
/// so the message says which key or tensor the file ends in.
#[derive(Debug, Clone, Copy)]
pub(super) struct Short {
    at: u64,
    wanted: u64,
    left: u64,
}

impl Short {
    pub(super) fn reading(self, what: impl Display) -> Error {
        Error::gguf(
            self.at,
            format!(
                "{what} needs {} bytes but only {} are left in the file",
                self.wanted, self.left
            ),
        )
    }
}

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Absolute offset of the next byte to be read.
    pub(super) fn pos(&self) -> u64 {
        self.pos as u64
    }

    pub(super) fn left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub(super) fn bytes(&mut self, n: u64) -> Result<&'a [u8], Short> {
        let short = Short {
            at: self.pos(),
            wanted: n,
            left: self.left(),
        };
        let n = usize::try_from(n).map_err(|_| short)?;
        let end = self.pos.checked_add(n).ok_or(short)?;
        let slice = self.bytes.get(self.pos..end).ok_or(short)?;
        self.pos = end;
        Ok(slice)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], Short> {
        let mut out = [0u8; N];
        out.iter_mut()
            .zip(self.bytes(N as u64)?)
            .for_each(|(dst, src)| *dst = *src);
        Ok(out)
    }

    pub(super) fn u32(&mut self) -> Result<u32, Short> {
        self.array().map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self) -> Result<u64, Short> {
        self.array().map(u64::from_le_bytes)
    }

    pub(super) fn i64(&mut self) -> Result<i64, Short> {
        self.array().map(i64::from_le_bytes)
    }

    /// A GGUF string: a u64 byte length, then that many bytes (no terminator, any encoding).
    pub(super) fn string(&mut self) -> Result<&'a [u8], Short> {
        let len = self.u64()?;
        self.bytes(len)
    }

    /// Fails unless `count` items of at least `min_size` bytes each could fit in what is left,
    /// so a count can be trusted for a capacity reservation. Returns the count as a `usize`.
    pub(super) fn check_count(&self, count: u64, min_size: u64, what: impl Display) -> crate::Result<usize> {
        let fits = count.checked_mul(min_size).is_some_and(|need| need <= self.left());
        match usize::try_from(count) {
            Ok(count) if fits => Ok(count),
            _ => Err(Error::gguf(
                self.pos(),
                format!(
                    "{what} is {count}, but {count} items of at least {min_size} bytes each do not fit in the {} bytes left in the file",
                    self.left()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_stops_at_the_end() {
        let data = [1u8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut r = Reader::new(&data);
        assert_eq!(r.u32().ok(), Some(1));
        assert_eq!(r.u64().ok(), Some(2));
        assert_eq!(r.pos(), 12);
        assert!(r.u32().is_err());
        // A failed read does not move the cursor.
        assert_eq!(r.pos(), 12);
        assert_eq!(r.array().ok(), Some([9u8]));
        assert_eq!(r.left(), 0);
    }

    #[test]
    fn huge_lengths_fail_without_overflow() {
        let data = [0xffu8; 16];
        let mut r = Reader::new(&data);
        let err = r.string().err().map(|s| s.reading("the test string").to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "malformed GGUF file at byte 8: the test string needs 18446744073709551615 bytes \
                 but only 8 are left in the file"
            )
        );
        assert!(r.check_count(u64::MAX, 2, "count").is_err());
        assert!(r.check_count(4, 2, "count").is_ok());
        assert!(r.check_count(5, 2, "count").is_err());
    }
}

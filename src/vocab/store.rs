//! Compact storage for many short byte strings, and a hash index from string to id over it.

use std::hash::{BuildHasherDefault, Hasher};

/// Byte strings packed in one buffer, each followed by a NUL so that it can be handed to C as is.
#[derive(Default)]
pub(super) struct Strings {
    bytes: Vec<u8>,
    /// Start of string i; one more entry than strings.
    starts: Vec<u32>,
}

impl Strings {
    pub(super) fn with_capacity(n: usize, bytes: usize) -> Strings {
        let mut starts = Vec::with_capacity(n + 1);
        starts.push(0);
        Strings {
            bytes: Vec::with_capacity(bytes + n),
            starts,
        }
    }

    /// Appends a string; `None` once the buffer would pass 4 GiB.
    pub(super) fn push(&mut self, s: &[u8]) -> Option<()> {
        self.bytes.extend_from_slice(s);
        self.bytes.push(0);
        self.starts.push(u32::try_from(self.bytes.len()).ok()?);
        Some(())
    }

    /// Appends a string built in place by `f`.
    pub(super) fn push_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) -> Option<()> {
        f(&mut self.bytes);
        self.bytes.push(0);
        self.starts.push(u32::try_from(self.bytes.len()).ok()?);
        Some(())
    }

    /// Bytes of all strings, NULs included.
    pub(super) fn total_len(&self) -> usize {
        self.bytes.len()
    }

    pub(super) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// String `i` without its NUL. `i` must be in range.
    pub(super) fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i] as usize..self.starts[i + 1] as usize - 1]
    }

    /// String `i` with its NUL.
    pub(super) fn get_with_nul(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

/// A fast multiplicative hash with a full-avalanche finish, for short keys.
#[derive(Default, Clone, Copy)]
pub(super) struct FastHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl FastHasher {
    fn add(&mut self, word: u64) {
        let h = (self.0 ^ word).wrapping_mul(K);
        self.0 = h ^ (h >> 32);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let tail = chunks.remainder();
        let mut w = [0; 8];
        w[..tail.len()].copy_from_slice(tail);
        // The length goes in with the tail, so "a" and "a\0" differ.
        self.add(u64::from_le_bytes(w) ^ ((bytes.len() as u64) << 56));
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn finish(&self) -> u64 {
        // MurmurHash3's fmix64: every input bit affects every output bit, high and low.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

pub(super) type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

fn hash_bytes(s: &[u8]) -> u64 {
    let mut h = FastHasher::default();
    h.write(s);
    h.finish()
}

/// An open-addressing index from string to id. It does not own the strings: lookups are given the
/// function that returns the string of an id.
pub(super) struct TextIndex {
    /// Per slot: the low half of the key's hash, and id + 1 (0 when empty). The hash half spares
    /// most key comparisons.
    slots: Vec<(u32, u32)>,
    /// The home slot of a key is its hash's top bits: `hash >> shift`.
    shift: u32,
}

impl TextIndex {
    /// Indexes ids `0..n` whose key is `Some`; a key seen twice is reported as `Err((first, second))`.
    pub(super) fn build<'a>(n: usize, key: impl Fn(usize) -> Option<&'a [u8]>) -> Result<TextIndex, (u32, u32)> {
        let size = (n * 2).next_power_of_two().max(16);
        let mut index = TextIndex {
            slots: vec![(0, 0); size],
            shift: 64 - size.trailing_zeros(),
        };
        // Inserted in hash order, keys land in increasing slots: the table is written front to back
        // instead of at random, which is much kinder to caches and to first-touch page faults.
        let mut order: Vec<(u64, u32)> = (0..n)
            .filter_map(|id| Some((hash_bytes(key(id)?), id as u32)))
            .collect();
        order.sort_unstable();
        let mask = size - 1;
        for (h, id) in order {
            let k = key(id as usize);
            let mut s = (h >> index.shift) as usize;
            loop {
                match index.slots[s] {
                    (_, 0) => {
                        index.slots[s] = (h as u32, id + 1);
                        break;
                    }
                    (t, other) if t == h as u32 && key(other as usize - 1) == k => {
                        return Err((id.min(other - 1), id.max(other - 1)))
                    }
                    _ => s = (s + 1) & mask,
                }
            }
        }
        Ok(index)
    }

    pub(super) fn get<'a>(&self, k: &[u8], key: impl Fn(usize) -> Option<&'a [u8]>) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let h = hash_bytes(k);
        let mut s = (h >> self.shift) as usize;
        loop {
            match self.slots[s] {
                (_, 0) => return None,
                (t, id) if t == h as u32 && key(id as usize - 1) == Some(k) => return Some(id - 1),
                _ => s = (s + 1) & mask,
            }
        }
    }
}

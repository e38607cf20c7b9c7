//! One-field mutations of a GGUF file, for fuzzing its readers where byte flips rarely reach:
//! the file is walked as the format lays it out (header counts, each pair's key, type and value,
//! each tensor's name, dimensions, type and offset), and one of those fields is set to a value
//! chosen to break an assumption (a count past the end, a zero, an unknown type), or one pair
//! is dropped or repeated, or the file is cut at a field's end, or a data byte changes. The rest
//! of the file stays as it was, so the reader gets past what it checked before.

use super::reader::Reader;

/// A field of the file: where it is, how wide, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    at: usize,
    width: usize,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A little-endian integer (a count, a length, a type, a dimension, an offset, a value).
    Int,
    /// String bytes (a key, a tensor name, a string value).
    Text,
}

/// Where one key/value pair's bytes are.
#[derive(Debug, Clone, Copy)]
struct Pair {
    start: usize,
    end: usize,
}

/// What the walk found: the fields, the pairs, and where the tensor data starts (if it got there).
#[derive(Debug, Default)]
struct Layout {
    fields: Vec<Field>,
    pairs: Vec<Pair>,
    data: Option<usize>,
}

/// GGUF's value types by id, as widths (0: a string, `usize::MAX`: an array).
fn value_width(ty: u32) -> Option<usize> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        8 => 0,
        9 => usize::MAX,
        _ => return None,
    })
}

/// The fields of `bytes` up to where the walk stops (the end of the tensor infos, or the first
/// thing it cannot read).
fn layout(bytes: &[u8]) -> Layout {
    let mut out = Layout::default();
    let _ = walk(bytes, &mut out);
    out
}

fn walk(bytes: &[u8], out: &mut Layout) -> Option<()> {
    let mut r = Reader::new(bytes);
    let int = |r: &mut Reader, out: &mut Layout, width: usize| -> Option<u64> {
        let at = r.pos() as usize;
        let v = match width {
            1 => u64::from(r.bytes(1).ok()?[0]),
            2 => u64::from(u16::from_le_bytes(r.array().ok()?)),
            4 => u64::from(r.u32().ok()?),
            _ => r.u64().ok()?,
        };
        out.fields.push(Field {
            at,
            width,
            kind: Kind::Int,
        });
        Some(v)
    };
    let text = |r: &mut Reader, out: &mut Layout| -> Option<()> {
        let n = int(r, out, 8)?;
        let at = r.pos() as usize;
        r.bytes(n).ok()?;
        out.fields.push(Field {
            at,
            width: n as usize,
            kind: Kind::Text,
        });
        Some(())
    };
    r.bytes(4).ok()?;
    int(&mut r, out, 4)?;
    let n_tensors = int(&mut r, out, 8)?;
    let n_kv = int(&mut r, out, 8)?;
    for _ in 0..n_kv {
        let start = r.pos() as usize;
        text(&mut r, out)?;
        let ty = int(&mut r, out, 4)? as u32;
        match value_width(ty)? {
            0 => text(&mut r, out)?,
            usize::MAX => {
                let elem = int(&mut r, out, 4)? as u32;
                let n = int(&mut r, out, 8)?;
                for _ in 0..n {
                    match value_width(elem)? {
                        0 => text(&mut r, out)?,
                        usize::MAX => return None,
                        w => {
                            int(&mut r, out, w)?;
                        }
                    }
                }
            }
            w => {
                int(&mut r, out, w)?;
            }
        }
        out.pairs.push(Pair {
            start,
            end: r.pos() as usize,
        });
    }
    for _ in 0..n_tensors {
        text(&mut r, out)?;
        let n_dims = int(&mut r, out, 4)?;
        for _ in 0..n_dims.min(4) {
            int(&mut r, out, 8)?;
        }
        int(&mut r, out, 4)?;
        int(&mut r, out, 8)?;
    }
    out.data = Some(r.pos() as usize);
    Some(())
}

/// splitmix64: a small generator, enough to pick mutations reproducibly from a seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// A value for an integer field of `width` bytes that was `old`: the edges readers check, or
/// should.
fn interesting(rng: &mut Rng, width: usize, old: u64) -> u64 {
    let max = if width >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let v = match rng.below(12) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max >> 1,
        4 => (max >> 1) + 1,
        5 => old.wrapping_add(1),
        6 => old.wrapping_sub(1),
        7 => old.wrapping_mul(2),
        8 => old / 2,
        9 => old.wrapping_add(1 << 32),
        10 => 1 << rng.below(8 * width),
        _ => rng.next_u64(),
    };
    v & max
}

/// `bytes` with one field (or one pair, or the length) changed; `bytes` itself when it has no
/// field to change.
pub fn mutate(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let l = layout(bytes);
    let mut out = bytes.to_vec();
    match rng.below(10) {
        // Drop a pair: its bytes go, the count stays (a pair short), or goes down with it.
        0 if !l.pairs.is_empty() => {
            let p = l.pairs[rng.below(l.pairs.len())];
            out.drain(p.start..p.end);
            if rng.below(2) == 0 {
                adjust_kv_count(&mut out, |n| n.wrapping_sub(1));
            }
        }
        // Repeat a pair (a key twice), counted.
        1 if !l.pairs.is_empty() => {
            let p = l.pairs[rng.below(l.pairs.len())];
            let copy = out[p.start..p.end].to_vec();
            out.splice(p.end..p.end, copy);
            adjust_kv_count(&mut out, |n| n.wrapping_add(1));
        }
        // Cut the file at a field's end.
        2 if !l.fields.is_empty() => {
            let f = l.fields[rng.below(l.fields.len())];
            out.truncate(f.at + f.width);
        }
        // Change a byte of the tensor data.
        3 if l.data.is_some_and(|d| d < out.len()) => {
            let d = l.data.unwrap_or_default();
            let i = d + rng.below(out.len() - d);
            out[i] ^= 1 << rng.below(8);
        }
        _ if !l.fields.is_empty() => {
            let f = l.fields[rng.below(l.fields.len())];
            match f.kind {
                Kind::Int => {
                    let mut le = [0u8; 8];
                    le[..f.width].copy_from_slice(&out[f.at..f.at + f.width]);
                    let v = interesting(rng, f.width, u64::from_le_bytes(le));
                    out[f.at..f.at + f.width].copy_from_slice(&v.to_le_bytes()[..f.width]);
                }
                Kind::Text if f.width > 0 => {
                    // Same length, so only the text changes: a byte off, or one not UTF-8.
                    let i = f.at + rng.below(f.width);
                    out[i] = match rng.below(3) {
                        0 => 0,
                        1 => 0xff,
                        _ => out[i] ^ (1 << rng.below(8)),
                    };
                }
                Kind::Text => {}
            }
        }
        _ => {}
    }
    out
}

/// The header's pair count, changed by `f`.
fn adjust_kv_count(out: &mut [u8], f: impl Fn(u64) -> u64) {
    if let Some(b) = out.get_mut(16..24) {
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        b.copy_from_slice(&f(u64::from_le_bytes(le)).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{GgufFile, MetaWriter, TensorEntry, Value};

    fn sample() -> Vec<u8> {
        let mut w = MetaWriter::default();
        w.set("general.architecture", Value::Str(b"llama".to_vec()));
        w.set("llama.block_count", Value::U32(2));
        w.add_tensor(TensorEntry {
            name: "token_embd.weight".into(),
            ne: [4, 2, 1, 1],
            ggml_type: 0,
        })
        .expect("adds");
        let mut bytes = w.encode().expect("writes");
        bytes.extend(std::iter::repeat_n(0u8, 32));
        bytes
    }

    #[test]
    fn the_walk_finds_every_field_of_a_valid_file() {
        let bytes = sample();
        let l = layout(&bytes);
        assert_eq!(l.pairs.len(), 2);
        // version, 2 counts; per pair key length, key, type, value (the string's length and
        // bytes); the tensor's name length, name, n_dims, 2 dims, type, offset.
        assert_eq!(l.fields.len(), 3 + (4 + 1) + 4 + 7);
        assert!(l.data.is_some());
        assert!(GgufFile::parse(&bytes).is_ok());
    }

    #[test]
    fn mutations_change_one_thing_and_repeat_from_a_seed() {
        let bytes = sample();
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let mut changed = 0;
        for _ in 0..200 {
            let m = mutate(&bytes, &mut a);
            assert_eq!(m, mutate(&bytes, &mut b));
            changed += usize::from(m != bytes);
        }
        assert!(changed > 150, "{changed} of 200 mutations changed the file");
    }
}

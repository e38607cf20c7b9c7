//! PLaMo-2's tokenizer (`tokenizer.ggml.model = plamo2`) as llama.cpp runs it: the segmentation
//! of the text's code points whose tokens have the highest total score, by dynamic programming
//! from the end; a code point no token covers costs a fixed penalty and is written as its UTF-8
//! byte tokens.
//!
//! The candidates at each position come from a table over every string that ends some token (each
//! token text and each of its code-point suffixes): one block of rows per string, listing the
//! string's prefixes that are also such strings, longest first, then a sentinel row for the
//! unknown single code point. Walking the text backwards, the block of the longest such string
//! starting at a position follows from the block of the next position, the code point, and a map
//! from (code point, block of the rest) to block. llama.cpp stops scanning a block at the first
//! row scored exactly like the sentinel, which a token scored -1000 (as PLaMo's padding tokens
//! are) also is; that is kept, as the chosen tokens depend on it.

use super::store::FastMap;
use super::unicode;

/// A table score that no row can be chosen with: strings that are only suffixes, and tokens
/// whose score is not finite.
const INVALID: i32 = -20_000_000;
/// The sentinel's score: the cost of one code point without a token.
const UNKNOWN: i32 = -10_000_000;

#[derive(Clone, Copy)]
struct Row {
    /// Code points of the piece.
    len: u32,
    /// Its token, or -1.
    token: i32,
    score: i32,
    /// The piece's own block.
    block: u32,
}

const SENTINEL: Row = Row {
    len: 1,
    token: -1,
    score: UNKNOWN,
    block: 0,
};

pub(super) struct Plamo2 {
    /// The byte token of each byte value.
    bytes: [i32; 256],
    rows: Vec<Row>,
    /// (first code point, block of the rest) -> block of the string.
    blocks: FastMap<(u32, u32), u32>,
}

/// What the table needs of one token.
pub(super) struct TokenInfo<'a> {
    pub(super) text: &'a [u8],
    pub(super) score: f32,
    pub(super) is_byte: bool,
}

/// A token score as the table holds it: ten-thousandths, rounded half away from zero; a value
/// outside i32 becomes i32::MIN, as the x86 conversion llama.cpp compiles to makes it.
fn table_score(score: f32) -> i32 {
    if !score.is_finite() {
        return INVALID;
    }
    let r = (f64::from(score) * 1e4).round();
    if (-2_147_483_648.0..2_147_483_648.0).contains(&r) {
        r as i32
    } else {
        i32::MIN
    }
}

/// The byte of a byte token written `<0xXX>` (two hex digits), else `None`.
pub(super) fn byte_of(text: &[u8]) -> Option<u8> {
    match text {
        [b'<', b'0', b'x', hi, lo, b'>'] => {
            let digit = |c: &u8| char::from(*c).to_digit(16);
            Some((digit(hi)? * 16 + digit(lo)?) as u8)
        }
        _ => None,
    }
}

/// A string's code points re-encoded (malformed UTF-8 becomes U+FFFD, as llama.cpp decodes it),
/// with the byte offset of each code point boundary.
struct Encoded {
    cpts: Vec<u32>,
    bytes: Vec<u8>,
    /// `bounds[k]`: bytes of the first k code points.
    bounds: Vec<usize>,
}

impl Encoded {
    fn new(text: &[u8]) -> Result<Encoded, String> {
        let cpts = super::code_points(text);
        let mut bytes = Vec::with_capacity(text.len());
        let mut bounds = Vec::with_capacity(cpts.len() + 1);
        bounds.push(0);
        for &c in &cpts {
            if c > 0x10ffff {
                return Err(format!(
                    "token text '{}' holds the invalid code point U+{c:X}",
                    String::from_utf8_lossy(text)
                ));
            }
            unicode::encode(c, &mut bytes);
            bounds.push(bytes.len());
        }
        Ok(Encoded { cpts, bytes, bounds })
    }

    fn prefix(&self, k: usize) -> &[u8] {
        &self.bytes[..self.bounds[k]]
    }
}

impl Plamo2 {
    /// The table of `n` tokens (`token(id)`).
    pub(super) fn new<'a>(n: usize, token: impl Fn(usize) -> TokenInfo<'a>) -> Result<Plamo2, String> {
        // Every string that ends a token, with the score and id of the token it is (NaN and -1 for
        // none). Token texts are unique (the loader refuses duplicates).
        let mut strings: FastMap<Vec<u8>, (f32, i32)> = FastMap::default();
        let mut bytes = [0i32; 256];
        for id in 0..n {
            let t = token(id);
            if t.is_byte {
                if let Some(b) = byte_of(t.text) {
                    bytes[usize::from(b)] = id as i32;
                }
                continue;
            }
            strings.insert(t.text.to_vec(), (t.score, id as i32));
            let e = Encoded::new(t.text)?;
            for k in 1..e.cpts.len() {
                strings.entry(e.bytes[e.bounds[k]..].to_vec()).or_insert((f32::NAN, -1));
            }
        }
        // llama.cpp takes token 0 for "no byte token".
        if let Some(b) = bytes.iter().position(|&id| id == 0) {
            return Err(format!("Byte token for <0x{b}> is not set"));
        }

        // The strings in the order of their reversed bytes, the empty one first (sorted reversed,
        // as plain byte strings compare fastest).
        let reverse = |k: &[u8]| k.iter().rev().copied().collect::<Vec<u8>>();
        let mut sorted: Vec<(Vec<u8>, (f32, i32))> = std::iter::once((Vec::new(), (f32::NAN, -1)))
            .chain(strings.into_iter().map(|(k, v)| (reverse(&k), v)))
            .collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (keys, info): (Vec<Vec<u8>>, Vec<(f32, i32)>) = sorted.into_iter().map(|(k, v)| (reverse(&k), v)).unzip();
        let index: FastMap<&[u8], u32> = keys.iter().enumerate().map(|(i, k)| (k.as_slice(), i as u32)).collect();
        let encoded = keys.iter().map(|k| Encoded::new(k)).collect::<Result<Vec<_>, _>>()?;

        // Each string's block: its prefixes among the strings, longest first, as (code points,
        // string), then the sentinel (None).
        let mut layout = Vec::new();
        let mut starts = Vec::with_capacity(keys.len());
        for e in &encoded {
            starts.push(layout.len() as u32);
            for k in (1..=e.cpts.len()).rev() {
                if let Some(&j) = index.get(e.prefix(k)) {
                    layout.push(Some((k as u32, j)));
                }
            }
            layout.push(None);
        }
        let mut blocks = FastMap::default();
        for (e, &start) in encoded.iter().zip(&starts) {
            if let Some(&first) = e.cpts.first() {
                let rest = index.get(&e.bytes[e.bounds[1]..]).map_or(0, |&j| starts[j as usize]);
                blocks.insert((first, rest), start);
            }
        }
        let rows = layout
            .into_iter()
            .map(|entry| match entry {
                None => SENTINEL,
                Some((len, j)) => {
                    let (score, token) = info[j as usize];
                    Row {
                        len,
                        token,
                        score: table_score(score),
                        block: starts[j as usize],
                    }
                }
            })
            .collect();
        Ok(Plamo2 { bytes, rows, blocks })
    }

    /// Appends the tokens of `text` (a leading byte order mark is dropped).
    pub(super) fn tokenize(&self, text: &[u8], out: &mut Vec<i32>) {
        let mut cpts = super::code_points(text);
        if cpts.first() == Some(&0xfeff) {
            cpts.remove(0);
        }
        let n = cpts.len();
        // Best cost of the text from each position, and the first piece of that segmentation:
        // (code points, token or -1).
        let mut cost = vec![1i64 << 60; n + 1];
        cost[n] = 0;
        let mut first = vec![(0u32, -1i32); n + 1];
        let mut block = 0u32;
        for i in (0..n).rev() {
            let c = cpts[i];
            // The longest string starting here: the code point before the longest prefix of the
            // next position's string that it extends.
            for r in &self.rows[block as usize..] {
                block = self.blocks.get(&(c, r.block)).copied().unwrap_or(0);
                if block > 0 || r.score == UNKNOWN {
                    break;
                }
            }
            for r in &self.rows[block as usize..] {
                if r.score > INVALID {
                    if let Some(&after) = cost.get(i + r.len as usize) {
                        let s = after - i64::from(r.score);
                        if s < cost[i] {
                            cost[i] = s;
                            first[i] = (r.len, r.token);
                        }
                    }
                }
                if r.score == UNKNOWN {
                    break;
                }
            }
        }
        let mut at = 0;
        while at < n {
            let (len, token) = first[at];
            if token >= 0 {
                out.push(token);
            } else {
                let mut utf8 = Vec::with_capacity(4);
                unicode::encode(cpts[at], &mut utf8);
                out.extend(utf8.iter().map(|&b| self.bytes[usize::from(b)]));
            }
            // Every position has a piece (the sentinel always fits); 1 keeps a corrupt table finite.
            at += len.max(1) as usize;
        }
    }
}

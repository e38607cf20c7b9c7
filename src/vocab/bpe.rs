//! BPE: merges applied by rank inside each pre-tokenized word.
//!
//! Byte-level (GPT-2 style): llama.cpp maps each byte of a word to GPT-2's printable alphabet and
//! merges strings of that alphabet. The mapping is one-to-one, so this works on the raw bytes
//! instead: token texts and merge sides are decoded once at load time, and a symbol is a byte range
//! with the id of its string. Gemma 4's BPE merges raw UTF-8 instead, starting from characters,
//! and falls back to `<0xXX>` byte tokens.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::spans::{is_live, join, Linked, Span};
use super::store::{FastMap, Strings, TextIndex};
use super::unicode;

/// Symbol id of a string that is neither a token nor the side or result of any merge.
const NONE: u32 = u32::MAX;

pub(super) struct Bpe {
    /// Decoded text of each token whose text is all byte-level characters (others are empty).
    raw: Strings,
    raw_index: TextIndex,
    /// `(left << 32 | right)` symbol ids -> (rank, merged symbol id). Symbol ids below the token
    /// count are tokens; above are strings that only occur inside merges.
    merges: FastMap<u64, (u32, u32)>,
    /// Symbol id of each single byte.
    byte_symbol: [u32; 256],
    /// What llama.cpp emits for a byte of a word piece that is not a token: the single-byte tokens
    /// matching the bytes of that byte's character, when such tokens exist.
    fallback: [(u8, [i32; 2]); 256],
    n_tokens: u32,
    /// A word that is a token as a whole is not merged (Llama 3 and others).
    ignore_merges: bool,
    /// GPT-2's byte alphabet (false: raw UTF-8, merging from characters).
    byte_level: bool,
    /// Symbol ids of the strings that are no token but sides or results of merges.
    extra: FastMap<Vec<u8>, u32>,
}

/// Decodes a byte-level token text; `None` if a character is outside the 256-character alphabet.
fn decode_text(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut ok = true;
    unicode::decode(text, |cpt, _| match unicode::char_to_byte(cpt) {
        Some(b) if ok => out.push(b),
        _ => ok = false,
    });
    ok.then_some(())
}

impl Bpe {
    /// `texts` are the token texts; `text_to_id` finds a token by its text; `merges` in rank order;
    /// `byte_level` says whether texts are in GPT-2's byte alphabet or raw UTF-8.
    pub(super) fn new(
        texts: &Strings,
        text_to_id: impl Fn(&[u8]) -> Option<u32>,
        merges: &[Vec<u8>],
        ignore_merges: bool,
        byte_level: bool,
    ) -> Result<Bpe, String> {
        let decode = |text: &[u8], out: &mut Vec<u8>| {
            if byte_level {
                decode_text(text, out)
            } else {
                out.extend_from_slice(text);
                Some(())
            }
        };
        let n = texts.len();
        let mut raw = Strings::with_capacity(n, n * 8);
        let mut decodable = vec![false; n];
        let mut scratch = Vec::new();
        for (i, ok) in decodable.iter_mut().enumerate() {
            scratch.clear();
            *ok = decode(texts.get(i), &mut scratch).is_some();
            raw.push(if *ok { &scratch } else { &[] })
                .ok_or("token texts exceed 4 GiB")?;
        }
        let raw_index = TextIndex::build(n, |i| decodable[i].then(|| raw.get(i)))
            .map_err(|(a, b)| format!("tokens {a} and {b} stand for the same bytes"))?;
        let n_tokens = u32::try_from(n).map_err(|_| "too many tokens")?;

        let mut bpe = Bpe {
            raw,
            raw_index,
            merges: FastMap::default(),
            byte_symbol: [NONE; 256],
            fallback: [(0, [0; 2]); 256],
            n_tokens,
            ignore_merges,
            byte_level,
            extra: FastMap::default(),
        };
        let mut extra: FastMap<Vec<u8>, u32> = FastMap::default();
        bpe.merges.reserve(merges.len());
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for (rank, line) in merges.iter().enumerate() {
            // llama.cpp reads the merge as a C string and splits at the first space after the first byte.
            let line = line.split(|&b| b == 0).next().unwrap_or_default();
            let Some(space) = line.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) else {
                continue;
            };
            left.clear();
            right.clear();
            // A side outside the byte-level alphabet can never equal a piece of a word.
            if decode(&line[..space], &mut left).is_none() || decode(&line[space + 1..], &mut right).is_none() {
                continue;
            }
            let l = bpe.intern(&left, &mut extra)?;
            let r = bpe.intern(&right, &mut extra)?;
            left.extend_from_slice(&right);
            let merged = bpe.intern(&left, &mut extra)?;
            let rank = u32::try_from(rank).map_err(|_| "too many merges")?;
            bpe.merges
                .entry((u64::from(l) << 32) | u64::from(r))
                .or_insert((rank, merged));
        }
        for b in 0..=255u8 {
            bpe.byte_symbol[usize::from(b)] = bpe
                .raw_id(&[b])
                .or_else(|| extra.get(&[b][..]).copied())
                .unwrap_or(NONE);
            let fb = &mut bpe.fallback[usize::from(b)];
            if byte_level {
                let mut ch = Vec::with_capacity(2);
                unicode::encode(unicode::byte_to_char(b), &mut ch);
                for e in ch {
                    if let Some(id) = text_to_id(&[e]) {
                        fb.1[usize::from(fb.0)] = id as i32;
                        fb.0 += 1;
                    }
                }
            } else if let Some(id) = text_to_id(format!("<0x{b:02X}>").as_bytes()) {
                *fb = (1, [id as i32, 0]);
            }
        }
        if !byte_level {
            bpe.extra = extra;
        }
        Ok(bpe)
    }

    /// The symbol id of a string: a token, a merge's side or result, or `NONE`.
    fn symbol(&self, s: &[u8]) -> u32 {
        self.raw_id(s).or_else(|| self.extra.get(s).copied()).unwrap_or(NONE)
    }

    fn raw_id(&self, s: &[u8]) -> Option<u32> {
        self.raw_index.get(s, |i| Some(self.raw.get(i)))
    }

    fn intern(&self, s: &[u8], extra: &mut FastMap<Vec<u8>, u32>) -> Result<u32, String> {
        if let Some(id) = self.raw_id(s) {
            return Ok(id);
        }
        let next = u32::try_from(extra.len())
            .ok()
            .and_then(|k| self.n_tokens.checked_add(k))
            .filter(|&id| id != NONE)
            .ok_or("too many merge strings")?;
        Ok(*extra.entry(s.to_vec()).or_insert(next))
    }

    /// Appends the tokens of one pre-tokenized word (raw bytes). Words repeat a lot in real text, so
    /// the result for each distinct (short) word is remembered in `work`.
    pub(super) fn tokenize_word(&self, word: &[u8], work: &mut Work, out: &mut Vec<i32>) {
        if let Some(&(start, len)) = work.cache.get(word) {
            out.extend_from_slice(&work.cached[start as usize..(start + len) as usize]);
            return;
        }
        let first = out.len();
        self.merge_word(word, work, out);
        if word.len() <= CACHED_WORD_LEN && work.cache.len() < CACHED_WORDS {
            let start = work.cached.len() as u32;
            work.cached.extend_from_slice(&out[first..]);
            work.cache.insert(word.to_vec(), (start, (out.len() - first) as u32));
        }
    }

    fn merge_word(&self, word: &[u8], work: &mut Work, out: &mut Vec<i32>) {
        if self.ignore_merges {
            if let Some(id) = self.raw_id(word) {
                out.push(id as i32);
                return;
            }
        }
        let syms = &mut work.symbols;
        syms.clear();
        if self.byte_level {
            syms.extend(word.iter().enumerate().map(|(i, &b)| Symbol {
                span: Span::linked(i, word.len(), i, 1),
                id: self.byte_symbol[usize::from(b)],
            }));
        } else if word.iter().all(|&b| b == b'\n') && self.raw_id(word).is_some() {
            // A run of newlines that is a token stays whole (llama.cpp's Gemma 4 fix).
            out.push(self.symbol(word) as i32);
            return;
        } else {
            // Characters by their lead byte, as llama.cpp's `unicode_len_utf8` measures them.
            let mut chars = Vec::new();
            let mut i = 0;
            while i < word.len() {
                let len = match word[i] >> 4 {
                    0xf => 4,
                    0xe => 3,
                    0xc | 0xd => 2,
                    _ => 1,
                }
                .min(word.len() - i);
                chars.push((i, len));
                i += len;
            }
            syms.extend(chars.iter().enumerate().map(|(k, &(start, len))| Symbol {
                span: Span::linked(k, chars.len(), start, len),
                id: self.symbol(&word[start..start + len]),
            }));
        }
        let heap = &mut work.heap;
        heap.clear();
        for i in 1..syms.len() {
            self.push_pair(syms, i - 1, i, heap);
        }
        while let Some(Reverse((_, left, right, size, merged))) = heap.pop() {
            let (l, r) = (left as usize, right as usize);
            if !is_live(syms, l, r, size) {
                continue;
            }
            syms[l].id = merged;
            let (prev, next) = join(syms, l, r);
            if let Some(p) = prev {
                self.push_pair(syms, p, l, heap);
            }
            if let Some(n) = next {
                self.push_pair(syms, l, n, heap);
            }
        }
        for s in syms.iter().filter(|s| s.span.len > 0) {
            if s.id < self.n_tokens {
                out.push(s.id as i32);
            } else {
                let bytes = &word[s.span.start as usize..(s.span.start + s.span.len) as usize];
                for &b in bytes {
                    let (n, ids) = self.fallback[usize::from(b)];
                    out.extend_from_slice(&ids[..usize::from(n)]);
                }
            }
        }
    }

    fn push_pair(&self, syms: &[Symbol], l: usize, r: usize, heap: &mut BinaryHeap<Reverse<Pair>>) {
        let (a, b) = (syms[l].id, syms[r].id);
        if a == NONE || b == NONE {
            return;
        }
        if let Some(&(rank, merged)) = self.merges.get(&((u64::from(a) << 32) | u64::from(b))) {
            heap.push(Reverse((
                rank,
                l as u32,
                r as u32,
                syms[l].span.len + syms[r].span.len,
                merged,
            )));
        }
    }
}

/// A queued merge: (rank, left, right, combined length, merged symbol); the lowest rank, then the
/// leftmost, goes first.
type Pair = (u32, u32, u32, u32, u32);

/// A span and the symbol id its text is (`NONE` when it is no token or merge result).
#[derive(Clone, Copy)]
pub(super) struct Symbol {
    span: Span,
    id: u32,
}

impl Linked for Symbol {
    fn span(&self) -> &Span {
        &self.span
    }

    fn span_mut(&mut self) -> &mut Span {
        &mut self.span
    }
}

/// Words up to this many bytes are remembered, up to this many of them per tokenization.
const CACHED_WORD_LEN: usize = 64;
const CACHED_WORDS: usize = 1 << 16;

/// State kept from word to word within one tokenization: buffers, and the tokens of words seen.
#[derive(Default)]
pub(super) struct Work {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Reverse<Pair>>,
    /// Word -> range of `cached`.
    cache: FastMap<Vec<u8>, (u32, u32)>,
    cached: Vec<i32>,
}

//! Code points as llama.cpp's tokenizer sees them: its lenient UTF-8 decoding, its character classes
//! (from its own Unicode table, see `unicode_table.rs`) and GPT-2's byte <-> character mapping.

use super::unicode_table::{LOWERCASE, NFD, RUNS};

/// Category codes (bits 0-2 of a class), llama.cpp's `\p{..}` flags, one per code point: 0 undefined,
/// 1 number, 2 letter, 3 separator, 4 mark, 5 punctuation, 6 symbol, 7 control.
pub(super) const UNDEFINED: u8 = 0;
pub(super) const NUMBER: u8 = 1;
pub(super) const LETTER: u8 = 2;
pub(super) const MARK: u8 = 4;
pub(super) const PUNCTUATION: u8 = 5;
pub(super) const SYMBOL: u8 = 6;
pub(super) const CONTROL: u8 = 7;
const CATEGORY_MASK: u8 = 7;
const WHITESPACE: u8 = 8;

/// The class of one code point: its category and whether llama.cpp counts it as whitespace.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Class(u8);

impl Class {
    pub(super) fn category(self) -> u8 {
        self.0 & CATEGORY_MASK
    }
    pub(super) fn is_whitespace(self) -> bool {
        self.0 & WHITESPACE != 0
    }
    pub(super) fn is_letter(self) -> bool {
        self.category() == LETTER
    }
    pub(super) fn is_number(self) -> bool {
        self.category() == NUMBER
    }
    pub(super) fn is_mark(self) -> bool {
        self.category() == MARK
    }
}

const fn lookup(cpt: u32) -> u8 {
    // Binary search for the last run starting at or before `cpt`.
    let (mut lo, mut hi) = (0, RUNS.len());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if RUNS[mid].0 <= cpt {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    RUNS[lo].1
}

static ASCII: [u8; 128] = {
    let mut t = [0; 128];
    let mut c = 0;
    while c < 128 {
        t[c] = lookup(c as u32);
        c += 1;
    }
    t
};

/// The class of `cpt`; values past U+10FFFF (which llama.cpp's decoder can produce) are undefined.
pub(super) fn class(cpt: u32) -> Class {
    match cpt {
        0..=0x7f => Class(ASCII[cpt as usize]),
        0x80..=0x10ffff => Class(lookup(cpt)),
        _ => Class(UNDEFINED),
    }
}

/// The lowercase form of `cpt` by llama.cpp's table (`unicode_tolower`); itself if it has none.
pub(super) fn to_lower(cpt: u32) -> u32 {
    match LOWERCASE.binary_search_by_key(&cpt, |&(c, _)| c) {
        Ok(i) => LOWERCASE[i].1,
        Err(_) => cpt,
    }
}

/// The first code point of `cpt`'s canonical decomposition by llama.cpp's table
/// (`unicode_cpts_normalize_nfd`); itself if it has none.
pub(super) fn nfd_first(cpt: u32) -> u32 {
    let i = NFD.partition_point(|&(first, _, _)| first <= cpt);
    match i.checked_sub(1).map(|i| NFD[i]) {
        Some((first, last, decomposed)) if first <= cpt && cpt <= last => decomposed,
        _ => cpt,
    }
}

/// Decode like llama.cpp's `unicode_cpts_from_utf8`: a malformed sequence yields U+FFFD and skips one
/// byte; overlong forms, surrogates and values up to 0x1FFFFF are accepted as they decode. Calls
/// `f(code point, byte length)` for each.
pub(super) fn decode(bytes: &[u8], mut f: impl FnMut(u32, usize)) {
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let cont = |k: usize| {
            bytes
                .get(i + k)
                .filter(|&&c| c & 0xc0 == 0x80)
                .map(|&c| u32::from(c & 0x3f))
        };
        let (cpt, n) = if b < 0x80 {
            (u32::from(b), 1)
        } else if b & 0x40 == 0 {
            (0xfffd, 1)
        } else if b & 0x20 == 0 {
            match cont(1) {
                Some(c1) => ((u32::from(b & 0x1f) << 6) | c1, 2),
                None => (0xfffd, 1),
            }
        } else if b & 0x10 == 0 {
            match (cont(1), cont(2)) {
                (Some(c1), Some(c2)) => ((u32::from(b & 0x0f) << 12) | (c1 << 6) | c2, 3),
                _ => (0xfffd, 1),
            }
        } else if b & 0x08 == 0 {
            match (cont(1), cont(2), cont(3)) {
                (Some(c1), Some(c2), Some(c3)) => ((u32::from(b & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3, 4),
                _ => (0xfffd, 1),
            }
        } else {
            (0xfffd, 1)
        };
        f(cpt, n);
        i += n;
    }
}

/// Append the UTF-8 form of `cpt`. Values past U+10FFFF get the 4-byte form their bits give
/// (llama.cpp throws there; this keeps the bytes the decoder consumed).
pub(super) fn encode(cpt: u32, out: &mut Vec<u8>) {
    match cpt {
        0..=0x7f => out.push(cpt as u8),
        0x80..=0x7ff => out.extend([0xc0 | (cpt >> 6) as u8, 0x80 | (cpt & 0x3f) as u8]),
        0x800..=0xffff => out.extend([
            0xe0 | (cpt >> 12) as u8,
            0x80 | ((cpt >> 6) & 0x3f) as u8,
            0x80 | (cpt & 0x3f) as u8,
        ]),
        _ => out.extend([
            0xf0 | ((cpt >> 18) & 0x07) as u8,
            0x80 | ((cpt >> 12) & 0x3f) as u8,
            0x80 | ((cpt >> 6) & 0x3f) as u8,
            0x80 | (cpt & 0x3f) as u8,
        ]),
    }
}

/// The text as llama.cpp re-encodes it after decoding: unchanged when it is valid UTF-8.
pub(super) fn canonical(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if std::str::from_utf8(bytes).is_ok() {
        return bytes.into();
    }
    let mut out = Vec::with_capacity(bytes.len() + 8);
    decode(bytes, |cpt, _| encode(cpt, &mut out));
    out.into()
}

const fn is_printable_byte(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff)
}

/// GPT-2's byte-level alphabet: printable bytes stand for themselves, the other 68 map in order to
/// U+0100 onwards.
static BYTE_TO_CHAR: [u16; 256] = {
    let mut t = [0; 256];
    let (mut b, mut next) = (0, 256);
    while b < 256 {
        t[b] = if is_printable_byte(b as u8) {
            b as u16
        } else {
            next += 1;
            next - 1
        };
        b += 1;
    }
    t
};

/// The bytes behind U+0100..=U+0143, the inverse of the second half of [`BYTE_TO_CHAR`].
static UNPRINTABLE_BYTES: [u8; 68] = {
    let mut t = [0; 68];
    let mut b = 0;
    while b < 256 {
        if !is_printable_byte(b as u8) {
            t[BYTE_TO_CHAR[b] as usize - 256] = b as u8;
        }
        b += 1;
    }
    t
};

/// The character that stands for byte `b` in byte-level BPE token texts.
pub(super) fn byte_to_char(b: u8) -> u32 {
    u32::from(BYTE_TO_CHAR[usize::from(b)])
}

/// The byte a character of a byte-level BPE token text stands for.
pub(super) fn char_to_byte(cpt: u32) -> Option<u8> {
    match cpt {
        0..=0xff => u8::try_from(cpt).ok().filter(|&b| is_printable_byte(b)),
        0x100..=0x143 => Some(UNPRINTABLE_BYTES[(cpt - 0x100) as usize]),
        _ => None,
    }
}

//! Unigram (UGM, `tokenizer.ggml.model = t5`: T5, XLM-R and other SentencePiece unigram models)
//! as llama.cpp runs it: the text is normalized with the model's precompiled character map (a
//! XOR-compressed compact double array of byte prefixes and their replacements), spaces escaped
//! as U+2581, then the most probable segmentation into tokens is found by Viterbi over the
//! tokens' scores, an unknown code point costing the lowest score less 10; runs of unknown tokens
//! collapse into one.

/// The normalization tables of `tokenizer.ggml.precompiled_charsmap`.
pub(super) struct Charsmap {
    /// The double array's nodes: BASE in bits 10-30 (shifted left 8 if bit 9 is set), LCHECK in
    /// bits 0-7 (and bit 31), LEAF in bit 8; a leaf's child holds a replacement's offset.
    xcda: Vec<u32>,
    /// NUL-terminated replacement strings.
    replacements: Vec<u8>,
}

impl Charsmap {
    /// Parse the charsmap: a little-endian u32 byte count of the double array, the array, then
    /// the replacements.
    pub(super) fn parse(bytes: &[u8]) -> Result<Charsmap, String> {
        let head: [u8; 4] = bytes
            .get(..4)
            .and_then(|h| h.try_into().ok())
            .ok_or("precompiled_charsmap too small for its size header")?;
        let size = u32::from_le_bytes(head) as usize;
        if size.saturating_add(4) >= bytes.len() {
            return Err("index out of array bounds in precompiled charsmap".into());
        }
        let xcda = bytes[4..4 + size]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Charsmap {
            xcda,
            replacements: bytes[4 + size..].to_vec(),
        })
    }

    fn node(&self, i: u32) -> Result<u32, String> {
        self.xcda
            .get(i as usize)
            .copied()
            .ok_or_else(|| "index out of array bounds in the XCDA array".to_string())
    }

    fn base(&self, i: u32) -> Result<u32, String> {
        let n = self.node(i)?;
        Ok((n >> 10) << ((n & (1 << 9)) >> 6))
    }

    /// The longest prefix of `input` the map replaces: its length and its replacement.
    fn longest(&self, input: &[u8]) -> Result<Option<(usize, &[u8])>, String> {
        if self.xcda.is_empty() {
            return Ok(None);
        }
        let mut found = None;
        let mut node = self.base(0)?;
        for (k, &c) in input.iter().enumerate() {
            if c == 0 {
                break;
            }
            node ^= u32::from(c);
            let n = self.node(node)?;
            if n & ((1 << 31) | 0xff) != u32::from(c) {
                break;
            }
            let leaf = (n >> 8) & 1 == 1;
            node ^= self.base(node)?;
            if leaf {
                found = Some((k + 1, self.node(node)? & ((1 << 31) - 1)));
            }
        }
        let Some((len, offset)) = found else { return Ok(None) };
        let rest = self
            .replacements
            .get(offset as usize..)
            .ok_or("index out of array bounds in precompiled charsmap")?;
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("unterminated string in precompiled charsmap")?;
        Ok(Some((len, &rest[..end])))
    }
}

/// How the text is prepared before segmentation (the vocabulary's flags).
#[derive(Clone, Copy)]
pub(super) struct Spaces {
    /// Put an escaped space before the text.
    pub prefix: bool,
    /// Collapse runs of spaces into one (before each word).
    pub merge: bool,
}

/// What segmentation needs from the vocabulary.
pub(super) struct Ugm {
    pub charsmap: Option<Charsmap>,
    pub spaces: Spaces,
    /// The lowest normal token's score less 10.
    pub unknown_score: f64,
    /// The longest token text, in bytes.
    pub max_len: usize,
}

/// A candidate for a token, as the segmentation sees it.
pub(super) enum Piece {
    /// Normal or unused: scored by its log-probability.
    Scored(f32),
    /// User-defined: scored 0, and kept whole by normalization.
    UserDefined,
}

const SPACE: &[u8] = "\u{2581}".as_bytes();

impl Ugm {
    /// Append the tokens of `text` to `out`; `piece` says whether (and how) a byte string is a
    /// token the segmentation may use.
    pub(super) fn tokenize(
        &self,
        text: &[u8],
        unk: i32,
        piece: impl Fn(&[u8]) -> Option<(i32, Piece)>,
        out: &mut Vec<i32>,
    ) -> Result<(), String> {
        let norm = self.normalize(text, &piece)?;
        let n = norm.len();
        if n == 0 {
            return Ok(());
        }
        // Per byte offset: the best segmentation ending there (token, its start, total score).
        let mut best = vec![(unk, 0usize, f64::MIN); n + 1];
        best[0] = (unk, 0, 0.0);
        let mut at = 0;
        while at < n {
            let char_len = utf8_len(norm[at]).min(n - at);
            let base = best[at].2;
            let mut whole_char = false;
            for end in at + 1..=n.min(at + self.max_len) {
                let Some((id, p)) = piece(&norm[at..end]) else { continue };
                whole_char |= end - at == char_len;
                let score = base
                    + match p {
                        Piece::Scored(s) => f64::from(s),
                        Piece::UserDefined => 0.0,
                    };
                if score > best[end].2 {
                    best[end] = (id, at, score);
                }
            }
            if !whole_char {
                let score = base + self.unknown_score;
                if score > best[at + char_len].2 {
                    best[at + char_len] = (unk, at, score);
                }
            }
            at += char_len;
        }
        // Back from the end; consecutive unknown tokens become one.
        let start = out.len();
        let (mut at, mut prev_unknown) = (n, false);
        loop {
            let (id, from, _) = best[at];
            let unknown = id == unk;
            if !(prev_unknown && unknown) {
                out.push(id);
            }
            if from == 0 {
                break;
            }
            prev_unknown = unknown;
            at = from;
        }
        out[start..].reverse();
        Ok(())
    }

    fn normalize(&self, input: &[u8], piece: &impl Fn(&[u8]) -> Option<(i32, Piece)>) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(input.len() * 3);
        let (mut prepended, mut in_word) = (false, false);
        let mut at = 0;
        while at < input.len() {
            let (replacement, consumed) = self.normalize_prefix(&input[at..], piece)?;
            for &c in replacement.iter() {
                if c != b' ' {
                    if !in_word {
                        in_word = true;
                        if (self.spaces.prefix && !prepended) || self.spaces.merge {
                            out.extend_from_slice(SPACE);
                            prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    in_word = false;
                    if !self.spaces.merge {
                        out.extend_from_slice(SPACE);
                    }
                }
            }
            at += consumed;
        }
        Ok(out)
    }

    /// What the start of `input` normalizes to, and how many bytes of it that consumes: the
    /// longest user-defined token as it is, else the charsmap's longest replacement, else one
    /// character (U+FFFD for a malformed one, consuming a byte).
    fn normalize_prefix<'a>(
        &'a self,
        input: &'a [u8],
        piece: &impl Fn(&[u8]) -> Option<(i32, Piece)>,
    ) -> Result<(std::borrow::Cow<'a, [u8]>, usize), String> {
        let user = (1..=input.len().min(self.max_len))
            .rev()
            .find(|&k| matches!(piece(&input[..k]), Some((_, Piece::UserDefined))));
        if let Some(k) = user {
            return Ok((input[..k].into(), k));
        }
        if let Some(map) = &self.charsmap {
            if let Some((len, replacement)) = map.longest(input)? {
                return Ok((replacement.into(), len));
            }
        }
        let mut first = None;
        super::unicode::decode(&input[..input.len().min(4)], |cpt, len| {
            first.get_or_insert((cpt, len));
        });
        let (cpt, char_len) = first.unwrap_or((0xfffd, 1));
        if !(cpt == 0xfffd && char_len == 1) {
            Ok((input[..char_len].into(), char_len))
        } else {
            Ok(("\u{fffd}".as_bytes().into(), 1))
        }
    }
}

/// The length of a UTF-8 sequence by its lead byte, as llama.cpp's `unicode_len_utf8` reads it.
fn utf8_len(b: u8) -> usize {
    match b >> 4 {
        0xf => 4,
        0xe => 3,
        0xc | 0xd => 2,
        _ => 1,
    }
}

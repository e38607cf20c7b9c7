//! The vocabulary and its tokenizers, read from a GGUF file's `tokenizer.ggml.*` metadata and
//! behaving exactly as llama.cpp's (same token ids for the same bytes, same pieces, same attributes).
//!
//! The vocabulary types: byte-level BPE (`gpt2`, `gemma4`) with the pre-tokenizer named by
//! `tokenizer.ggml.pre`, SentencePiece (`llama`), WordPiece (`bert`), unigram (`t5`), RWKV's
//! greedy byte tokenizer (`rwkv`), PLaMo-2's (`plamo2`), and llama.cpp's dummy tokenizer for tests
//! (`test`: a hash of each 5-byte chunk picks the token, a token's piece is its id in hex), which
//! the dummy models of llama.cpp's own tests use. A `Vocab` is immutable after loading and is
//! shared by any number of threads.

mod bpe;
mod load;
mod plamo2;
mod pretok;
mod rwkv;
mod spans;
mod special;
mod spm;
mod stl_order;
mod store;
mod ugm;
mod unicode;
mod unicode_table;
mod wpm;

#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use bpe::Bpe;
use pretok::{Cpts, PreTokenizer};
use special::{Fragment, Special, Specials};
use store::{Strings, TextIndex};

/// `llama_token_attr` bits. Crate-visible only: cbindgen would copy public constants into llama.h.
pub(crate) mod attr {
    pub(crate) const UNDEFINED: u32 = 0;
    pub(crate) const UNKNOWN: u32 = 1;
    pub(crate) const UNUSED: u32 = 2;
    pub(crate) const NORMAL: u32 = 4;
    pub(crate) const CONTROL: u32 = 8;
    pub(crate) const USER_DEFINED: u32 = 16;
    pub(crate) const BYTE: u32 = 32;
    pub(crate) const LSTRIP: u32 = 128;
    pub(crate) const RSTRIP: u32 = 256;
}

/// `LLAMA_TOKEN_NULL` (crate-visible only, see [`attr`]).
pub(crate) const TOKEN_NULL: i32 = -1;

/// `enum llama_vocab_type` values of the supported types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabType {
    Spm = 1,
    Bpe = 2,
    Wpm = 3,
    Ugm = 4,
    Rwkv = 5,
    Plamo2 = 6,
    Test = 7,
}

/// Token ids with a role. `TOKEN_NULL` when the vocabulary has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: i32,
    pub eos: i32,
    pub eot: i32,
    pub eom: i32,
    pub unk: i32,
    pub sep: i32,
    pub pad: i32,
    pub mask: i32,
    /// The newline token.
    pub nl: i32,
    pub fim_pre: i32,
    pub fim_suf: i32,
    pub fim_mid: i32,
    pub fim_pad: i32,
    pub fim_rep: i32,
    pub fim_sep: i32,
}

/// The tokenizer behind a vocabulary.
enum Model {
    Spm {
        /// Token for each byte value (`<0xNN>`, else the byte itself as a token), for byte fallback.
        byte_tokens: Box<[Option<u32>; 256]>,
    },
    Bpe {
        pre: PreTokenizer,
        bpe: Box<Bpe>,
    },
    Wpm {
        norm: wpm::Normalizer,
        /// The longest token text in bytes.
        max_len: usize,
    },
    Ugm(Box<ugm::Ugm>),
    Rwkv(Box<rwkv::Rwkv>),
    Plamo2(Box<plamo2::Plamo2>),
    Test,
}

/// Bytes per token of the `test` tokenizer.
const TEST_CHUNK: usize = 5;

/// The `test` tokenizer's token for one chunk: a base-31 rolling hash of its bytes, modulo the
/// vocabulary size (wrapping as llama.cpp's 64-bit arithmetic does).
fn test_chunk_token(chunk: &[u8], n_vocab: usize) -> i32 {
    let hash = chunk
        .iter()
        .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (hash % n_vocab.max(1) as u64) as i32
}

/// What llama.cpp's model saver writes of a vocabulary besides its tokens (`model::saver`).
pub struct SavedFacts {
    /// `tokenizer.ggml.model` and `.pre` as the file names them.
    pub model: Vec<u8>,
    pub pre: Vec<u8>,
    pub n_token_types: u32,
    pub remove_extra_whitespaces: bool,
    pub has_charsmap: bool,
    /// The merges as llama.cpp lists them back (BPE only).
    pub merges: Vec<Vec<u8>>,
}

pub struct Vocab {
    saved: SavedFacts,
    model: Model,
    /// Token texts, as `llama_vocab_get_text` returns them.
    texts: Strings,
    text_index: TextIndex,
    scores: Vec<f32>,
    attrs: Vec<u32>,
    /// What `llama_token_to_piece` renders for each token when special tokens are rendered.
    pieces: Strings,
    ids: SpecialIds,
    add_bos: bool,
    add_eos: bool,
    add_sep: bool,
    add_space_prefix: bool,
    /// Tidy spaces around punctuation when detokenizing (`clean_up_tokenization_spaces`).
    clean_spaces: bool,
    /// End-of-generation tokens, sorted.
    eog: Vec<i32>,
    suppress: Vec<i32>,
    specials: Specials,
}

/// What `detokenize` produced: the text, and the length before spaces were cleaned up (llama.cpp
/// compares that one with the caller's buffer).
pub struct Detokenized {
    pub text: Vec<u8>,
    pub raw_len: usize,
}

/// The code points of `bytes` as llama.cpp's `unicode_cpts_from_utf8` decodes them (U+FFFD for
/// each byte of a malformed sequence).
pub fn code_points(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(bytes.len());
    unicode::decode(bytes, |cpt, _| out.push(cpt));
    out
}

impl Vocab {
    pub fn from_gguf(g: &crate::gguf::GgufFile) -> Result<Vocab> {
        load::load(&|key| g.get(key))
    }

    pub fn n_tokens(&self) -> usize {
        self.attrs.len()
    }

    pub fn vocab_type(&self) -> VocabType {
        match self.model {
            Model::Spm { .. } => VocabType::Spm,
            Model::Bpe { .. } => VocabType::Bpe,
            Model::Wpm { .. } => VocabType::Wpm,
            Model::Ugm(_) => VocabType::Ugm,
            Model::Rwkv(_) => VocabType::Rwkv,
            Model::Plamo2(_) => VocabType::Plamo2,
            Model::Test => VocabType::Test,
        }
    }

    pub fn special_ids(&self) -> &SpecialIds {
        &self.ids
    }

    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    pub fn saved_facts(&self) -> &SavedFacts {
        &self.saved
    }

    pub fn add_sep(&self) -> bool {
        self.add_sep
    }

    pub fn suppress_tokens(&self) -> &[i32] {
        &self.suppress
    }

    /// The index of `id`, or an error naming it and the vocabulary size.
    pub fn check(&self, id: i32) -> Result<usize> {
        usize::try_from(id)
            .ok()
            .filter(|&i| i < self.n_tokens())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "token id {id} is out of range (the vocabulary has {} tokens)",
                    self.n_tokens()
                ))
            })
    }

    /// The token's text, NUL-terminated.
    pub fn text_with_nul(&self, id: i32) -> Result<&[u8]> {
        Ok(self.texts.get_with_nul(self.check(id)?))
    }

    pub fn text(&self, id: i32) -> Result<&[u8]> {
        Ok(self.texts.get(self.check(id)?))
    }

    pub fn score(&self, id: i32) -> Result<f32> {
        Ok(self.scores[self.check(id)?])
    }

    pub fn attr(&self, id: i32) -> Result<u32> {
        Ok(self.attrs[self.check(id)?])
    }

    /// End of generation; false for any id that is not a token.
    pub fn is_eog(&self, id: i32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    pub fn is_control(&self, id: i32) -> Result<bool> {
        Ok(self.attr(id)? & attr::CONTROL != 0)
    }

    /// Whether texts have their spaces escaped as U+2581 before BPE (Gemma 4).
    fn escapes_spaces(&self) -> bool {
        matches!(&self.model, Model::Bpe { pre, .. } if *pre == PreTokenizer::Gemma4)
    }

    /// The token id of a text, if it is a token.
    pub fn token_of(&self, text: &[u8]) -> Option<i32> {
        self.text_index
            .get(text, |i| Some(self.texts.get(i)))
            .map(|id| id as i32)
    }

    /// `llama_token_to_piece`: the text of a token (unknown and control tokens render as nothing
    /// unless `special`), without up to `lstrip` leading spaces.
    pub fn piece(&self, id: i32, lstrip: i32, special: bool) -> Result<&[u8]> {
        let i = self.check(id)?;
        if !special && self.attrs[i] & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Ok(&[]);
        }
        let mut piece = self.pieces.get(i);
        for _ in 0..lstrip.max(0) {
            match piece.split_first() {
                Some((b' ', rest)) => piece = rest,
                _ => break,
            }
        }
        Ok(piece)
    }

    /// `llama_tokenize`: `parse_special` lets control and unknown tokens be recognised in the text
    /// (user-defined ones always are); `add_special` adds BOS/EOS as the vocabulary asks.
    pub fn tokenize(&self, text: &[u8], add_special: bool, parse_special: bool) -> Result<Vec<i32>> {
        let fragments = self.specials.split(
            text,
            |id| parse_special || self.attrs[id as usize] & (attr::CONTROL | attr::UNKNOWN) == 0,
            |id| {
                let a = self.attrs[id as usize];
                Special {
                    id,
                    text: self.texts.get(id as usize),
                    lstrip: a & attr::LSTRIP != 0,
                    rstrip: a & attr::RSTRIP != 0,
                }
            },
        );
        let mut out = Vec::new();
        // llama.cpp's test, RWKV and PLaMo-2 tokenizers add no special tokens, whatever the
        // vocabulary says.
        match &self.model {
            Model::Test | Model::Rwkv(_) | Model::Plamo2(_) => {
                for f in fragments {
                    match (f, &self.model) {
                        (Fragment::Token(id), _) => out.push(id as i32),
                        (Fragment::Text(a, b), Model::Rwkv(rwkv)) => rwkv
                            .tokenize(&text[a..b], self.ids.unk, &mut out)
                            .map_err(Error::Vocab)?,
                        (Fragment::Text(a, b), Model::Plamo2(plamo2)) => plamo2.tokenize(&text[a..b], &mut out),
                        (Fragment::Text(a, b), _) => out.extend(
                            text[a..b]
                                .chunks(TEST_CHUNK)
                                .map(|c| test_chunk_token(c, self.n_tokens())),
                        ),
                    }
                }
                return Ok(out);
            }
            _ => {}
        }
        if let Model::Wpm { norm, max_len } = self.model {
            // llama.cpp's WordPiece frames the text with BOS and SEP whenever special tokens are
            // added, whatever add_bos and add_sep say.
            if add_special {
                out.push(self.required(self.ids.bos, "BOS")?);
            }
            for f in fragments {
                match f {
                    Fragment::Text(a, b) => {
                        wpm::tokenize(&text[a..b], norm, max_len, self.ids.unk, |s| self.token_of(s), &mut out)
                    }
                    Fragment::Token(id) => out.push(id as i32),
                }
            }
            if add_special {
                out.push(self.required(self.ids.sep, "SEP")?);
            }
            return Ok(out);
        }
        if add_special && self.add_bos {
            out.push(self.required(self.ids.bos, "BOS")?);
        }
        match &self.model {
            Model::Spm { byte_tokens } => {
                // A space goes in front of the first text and of text after a special token.
                let mut after_special = true;
                let mut buf = Vec::new();
                for f in fragments {
                    match f {
                        Fragment::Text(a, b) => {
                            buf.clear();
                            if self.add_space_prefix && after_special {
                                buf.extend_from_slice("\u{2581}".as_bytes());
                            }
                            escape_spaces(&text[a..b], &mut buf);
                            self.spm(&buf, byte_tokens, &mut out)?;
                            after_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id as i32);
                            after_special = true;
                        }
                    }
                }
            }
            Model::Bpe { pre, bpe } => {
                let mut ends = Vec::new();
                let mut work = bpe::Work::default();
                let mut escaped = Vec::new();
                for f in fragments {
                    match f {
                        Fragment::Text(a, b) => {
                            let mut raw = &text[a..b];
                            if self.escapes_spaces() {
                                escaped.clear();
                                escape_spaces(raw, &mut escaped);
                                raw = &escaped;
                            }
                            // The words' bytes as llama.cpp sees them: malformed UTF-8 re-encoded.
                            let piece = unicode::canonical(raw);
                            let cpts = Cpts::new(&piece);
                            pre.split(&cpts, &mut ends);
                            let (mut cpt, mut byte) = (0, 0);
                            for &end in &ends {
                                let start = byte;
                                byte += cpts.byte_len(cpt..end);
                                cpt = end;
                                bpe.tokenize_word(&piece[start..byte], &mut work, &mut out);
                            }
                        }
                        Fragment::Token(id) => out.push(id as i32),
                    }
                }
            }
            Model::Ugm(ugm) => {
                // Normal and unused tokens by score; user-defined ones free (and kept whole).
                let piece = |s: &[u8]| {
                    let id = self.token_of(s)?;
                    let a = self.attrs[id as usize];
                    if a & attr::USER_DEFINED != 0 {
                        Some((id, ugm::Piece::UserDefined))
                    } else if a & (attr::NORMAL | attr::UNUSED) != 0 {
                        Some((id, ugm::Piece::Scored(self.scores[id as usize])))
                    } else {
                        None
                    }
                };
                for f in fragments {
                    match f {
                        Fragment::Text(a, b) => ugm
                            .tokenize(&text[a..b], self.ids.unk, piece, &mut out)
                            .map_err(Error::Vocab)?,
                        Fragment::Token(id) => out.push(id as i32),
                    }
                }
            }
            Model::Wpm { .. } | Model::Test | Model::Rwkv(_) | Model::Plamo2(_) => {}
        }
        if add_special {
            if self.add_bos && out.get(1) == Some(&self.ids.bos) {
                crate::log_warn!(
                    "tokenize: the text starts with a BOS token and the model adds one too, so the \
                     prompt now starts with 2 BOS tokens"
                );
            }
            if self.add_eos {
                out.push(self.required(self.ids.eos, "EOS")?);
                if matches!(self.model, Model::Bpe { .. }) && out.len() >= 2 && out[out.len() - 2] == self.ids.eos {
                    crate::log_warn!(
                        "tokenize: the text ends with an EOS token and the model adds one too, so the \
                         prompt now ends with 2 EOS tokens"
                    );
                }
            }
        }
        Ok(out)
    }

    fn required(&self, id: i32, what: &str) -> Result<i32> {
        if id == TOKEN_NULL {
            return Err(Error::Vocab(format!(
                "the model asks for a {what} token to be added but has none"
            )));
        }
        Ok(id)
    }

    fn spm(&self, text: &[u8], byte_tokens: &[Option<u32>; 256], out: &mut Vec<i32>) -> Result<()> {
        spm::tokenize(
            text,
            |s| {
                self.text_index
                    .get(s, |i| Some(self.texts.get(i)))
                    .map(|id| (id, self.scores[id as usize]))
            },
            |piece, out| {
                for &b in piece {
                    let id = byte_tokens[usize::from(b)].ok_or_else(|| {
                        Error::Vocab(format!(
                            "text needs byte 0x{b:02X} but the vocabulary has no token for it"
                        ))
                    })?;
                    out.push(id as i32);
                }
                Ok(())
            },
            out,
        )
    }

    /// `llama_detokenize`: the pieces of the tokens (special ones rendered if `unparse_special`),
    /// BOS/EOS dropped first if `remove_special` and the model adds them, spaces cleaned up as the
    /// vocabulary asks.
    pub fn detokenize(&self, mut tokens: &[i32], remove_special: bool, unparse_special: bool) -> Result<Detokenized> {
        let mut lstrip = self.add_space_prefix;
        if remove_special && self.add_bos {
            if let Some((&first, rest)) = tokens.split_first() {
                if first == self.ids.bos {
                    lstrip = false;
                    tokens = rest;
                }
            }
        }
        if remove_special && self.add_eos {
            if let Some((&last, rest)) = tokens.split_last() {
                if last == self.ids.eos {
                    tokens = rest;
                }
            }
        }
        let mut text = Vec::new();
        for &id in tokens {
            text.extend_from_slice(self.piece(id, i32::from(lstrip), unparse_special)?);
            lstrip = false;
        }
        let raw_len = text.len();
        if self.clean_spaces {
            clean_spaces(&mut text);
        }
        Ok(Detokenized { text, raw_len })
    }
}

/// SentencePiece's whitespace escape: ' ' becomes U+2581.
fn escape_spaces(text: &[u8], out: &mut Vec<u8>) {
    for &b in text {
        if b == b' ' {
            out.extend_from_slice("\u{2581}".as_bytes());
        } else {
            out.push(b);
        }
    }
}

/// llama.cpp's three in-place passes that undo tokenization spaces (" ?" -> "?", " ' " -> "'",
/// " 's" -> "'s", ...), reproduced step by step, including how each pass reads what it already wrote.
fn clean_spaces(text: &mut Vec<u8>) {
    // " ?", " !", " .", " ,"
    let n = text.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    // " ' " between spaces: the spaces go.
    let n = total;
    total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = text[i];
        if x == b'\'' && i + 1 < n && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    // " 's", " 'm", " 're", " 've": the space goes.
    let n = total;
    total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = text[i + 1];
            let drop = match x1 {
                b's' | b'm' => true,
                b't' | b'd' => false,
                _ => i + 2 < n && matches!((x1, text[i + 2]), (b'r', b'e') | (b'v', b'e')),
            };
            if drop {
                total -= 1;
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

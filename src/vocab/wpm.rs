//! WordPiece (BERT's tokenizer, `tokenizer.ggml.model = bert`) as llama.cpp runs it: the text is
//! normalized and split into words (whitespace separates; punctuation, ASCII symbols and CJK
//! ideographs stand alone; control characters go), then each word, with a leading U+2581, is
//! covered greedily by the longest tokens from the left; a word that cannot be covered becomes the
//! unknown token.

use super::unicode;

/// BertNormalizer's options (`tokenizer.ggml.normalizer.*`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Normalizer {
    pub lowercase: bool,
    pub strip_accents: bool,
}

/// Append the tokens of `text` to `out`; `token_of` looks a byte string up, `max_len` is the
/// longest token in bytes.
pub(super) fn tokenize(
    text: &[u8],
    norm: Normalizer,
    max_len: usize,
    unk: i32,
    token_of: impl Fn(&[u8]) -> Option<i32>,
    out: &mut Vec<i32>,
) {
    let mut word = Vec::new();
    for w in words(text, norm) {
        word.clear();
        word.extend_from_slice("\u{2581}".as_bytes());
        word.extend_from_slice(&w);
        let start = out.len();
        let n = word.len();
        let mut i = 0;
        while i < n {
            // The longest byte range from i that is a token (ranges may cut characters, as
            // llama.cpp's byte-wise search does).
            let found = (i + 1..=n.min(i + max_len + 1))
                .rev()
                .find_map(|j| token_of(&word[i..j]).map(|id| (id, j)));
            match found {
                Some((id, j)) => {
                    out.push(id);
                    i = j;
                }
                None => {
                    out.truncate(start);
                    break;
                }
            }
        }
        if out.len() == start {
            out.push(unk);
        }
    }
}

/// The normalized words of `text`.
fn words(text: &[u8], norm: Normalizer) -> Vec<Vec<u8>> {
    let mut words = vec![Vec::new()];
    unicode::decode(text, |cpt, _| {
        let cpt = if norm.strip_accents {
            unicode::nfd_first(cpt)
        } else {
            cpt
        };
        let class = unicode::class(cpt);
        if class.is_whitespace() {
            if words.last().is_some_and(|w| !w.is_empty()) {
                words.push(Vec::new());
            }
            return;
        }
        let category = class.category();
        if cpt == 0 || cpt == 0xfffd || category == unicode::CONTROL {
            return;
        }
        if norm.strip_accents && category == unicode::MARK {
            return;
        }
        let alone =
            category == unicode::PUNCTUATION || (cpt < 0x7f && category == unicode::SYMBOL) || is_chinese_char(cpt);
        let cpt = if norm.lowercase { unicode::to_lower(cpt) } else { cpt };
        let Some(last) = words.last_mut() else { return };
        if alone {
            if !last.is_empty() {
                words.push(Vec::new());
            }
            if let Some(w) = words.last_mut() {
                unicode::encode(cpt, w);
            }
            words.push(Vec::new());
        } else {
            unicode::encode(cpt, last);
        }
    });
    if words.last().is_some_and(|w| w.is_empty()) {
        words.pop();
    }
    words.retain(|w| !w.is_empty());
    words
}

/// The CJK ideograph blocks BERT splits into single characters (with llama.cpp's copy of the
/// Hugging Face bounds, 0x2B920 included).
fn is_chinese_char(cpt: u32) -> bool {
    matches!(cpt,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

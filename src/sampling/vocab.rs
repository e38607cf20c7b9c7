//! What the vocabulary-dependent samplers (grammar, DRY, infill) need from a vocabulary. The engine's
//! `Vocab` provides it through the FFI layer; tests use small word lists.

use super::Token;
use std::borrow::Cow;

pub trait TokenVocab: Send + Sync {
    fn n_tokens(&self) -> usize;

    /// `llama_token_to_piece(token, special)` without lstrip: with `special = false` control and
    /// unknown tokens render as nothing.
    fn piece(&self, token: Token, special: bool) -> Cow<'_, [u8]>;

    /// The text of the one-token sequence `[token]` as `llama_detokenize` renders it with special
    /// tokens unparsed (this may differ from the piece, e.g. a stripped leading space).
    fn detokenize_one(&self, token: Token) -> Vec<u8>;

    /// `llama_tokenize(text)` without BOS/EOS; `parse_special` as in llama.h.
    fn tokenize(&self, text: &[u8], parse_special: bool) -> Vec<Token>;

    fn is_eog(&self, token: Token) -> bool;

    /// The end-of-turn token, else end-of-sequence, else `TOKEN_NULL`.
    fn eot_or_eos(&self) -> Token;
}

/// The engine's vocabulary. Out-of-range ids render as nothing and are not end-of-generation.
impl TokenVocab for crate::vocab::Vocab {
    fn n_tokens(&self) -> usize {
        crate::vocab::Vocab::n_tokens(self)
    }

    fn piece(&self, token: Token, special: bool) -> Cow<'_, [u8]> {
        crate::vocab::Vocab::piece(self, token, 0, special)
            .map(Cow::Borrowed)
            .unwrap_or_default()
    }

    fn detokenize_one(&self, token: Token) -> Vec<u8> {
        self.detokenize(&[token], false, true)
            .map(|d| d.text)
            .unwrap_or_default()
    }

    fn tokenize(&self, text: &[u8], parse_special: bool) -> Vec<Token> {
        crate::vocab::Vocab::tokenize(self, text, false, parse_special).unwrap_or_default()
    }

    fn is_eog(&self, token: Token) -> bool {
        crate::vocab::Vocab::is_eog(self, token)
    }

    fn eot_or_eos(&self) -> Token {
        let ids = self.special_ids();
        if ids.eot != crate::vocab::TOKEN_NULL {
            ids.eot
        } else {
            ids.eos
        }
    }
}

#[cfg(test)]
pub(super) mod test_vocab {
    use super::*;
    use crate::sampling::TOKEN_NULL;

    /// Token i is `words[i]`; ids listed in `eog` end generation. Tokenization is greedy longest-match.
    pub struct WordVocab {
        pub words: Vec<Vec<u8>>,
        pub eog: Vec<Token>,
    }

    impl WordVocab {
        pub fn new(words: &[&str], eog: &[Token]) -> Self {
            WordVocab {
                words: words.iter().map(|w| w.as_bytes().to_vec()).collect(),
                eog: eog.to_vec(),
            }
        }
    }

    impl TokenVocab for WordVocab {
        fn n_tokens(&self) -> usize {
            self.words.len()
        }

        fn piece(&self, token: Token, special: bool) -> Cow<'_, [u8]> {
            if !special && self.eog.contains(&token) {
                return Cow::Borrowed(&[]);
            }
            usize::try_from(token)
                .ok()
                .and_then(|i| self.words.get(i))
                .map(|w| Cow::Borrowed(w.as_slice()))
                .unwrap_or_default()
        }

        fn detokenize_one(&self, token: Token) -> Vec<u8> {
            self.piece(token, true).into_owned()
        }

        fn tokenize(&self, mut text: &[u8], _parse_special: bool) -> Vec<Token> {
            let mut out = Vec::new();
            while !text.is_empty() {
                let best = (0..self.words.len())
                    .filter(|&i| !self.words[i].is_empty() && text.starts_with(&self.words[i]))
                    .max_by_key(|&i| self.words[i].len());
                match best {
                    Some(i) => {
                        out.push(i as Token);
                        text = &text[self.words[i].len()..];
                    }
                    None => text = &text[1..],
                }
            }
            out
        }

        fn is_eog(&self, token: Token) -> bool {
            self.eog.contains(&token)
        }

        fn eot_or_eos(&self) -> Token {
            self.eog.first().copied().unwrap_or(TOKEN_NULL)
        }
    }
}

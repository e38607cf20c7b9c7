//! DRY ("don't repeat yourself"): penalise the tokens that would extend a sequence already repeated
//! in the recent context, exponentially in its length. Sequence breakers (strings such as "\n")
//! stop a repetition from being counted across them.

use super::candidates::cvtt_i32;
use super::{Candidates, Empty, Sampler, Token, TokenVocab};
use crate::error::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::hint::black_box;

/// Breakers longer than this are truncated (bytes).
const MAX_CHAR_LEN: usize = 40;
/// Tokens kept of a breaker's tail (what follows its head token).
const MAX_SEQ_LEN: usize = 20;
/// Slightly below ln(f32::MAX): the largest exponent that keeps `base^exp` finite.
const FLOAT_MAX_LOG: f32 = 88.722_84;

/// For each head token, the tails (token sequences) that complete a breaker after it.
type Breakers = HashMap<Token, Vec<Vec<Token>>>;

#[derive(Clone)]
pub struct Dry {
    multiplier: f32,
    base: f32,
    allowed_length: i32,
    penalty_last_n: usize,
    breakers: Breakers,
    repeat_count: Vec<i32>,
    max_token_repeat: HashMap<Token, i32>,
    last_tokens: VecDeque<Token>,
}

impl Dry {
    /// Disabled parameters (multiplier 0, base < 1, last_n <= 0) give a no-op sampler ("?dry").
    /// Each breaker string becomes the token sequences that can spell it, starting inside a token,
    /// which needs the vocabulary.
    pub fn boxed(
        vocab: Option<&dyn TokenVocab>,
        multiplier: f32,
        base: f32,
        allowed_length: i32,
        penalty_last_n: i32,
        seq_breakers: &[&[u8]],
    ) -> Result<Box<dyn Sampler>> {
        let penalty_last_n = penalty_last_n.max(0);
        if !(multiplier != 0.0 && base >= 1.0 && penalty_last_n != 0) {
            return Ok(Box::new(Empty::new(c"?dry")));
        }
        let mut breakers = Breakers::new();
        for (i, b) in seq_breakers.iter().enumerate() {
            if b.is_empty() {
                crate::log_warn!("skipping null or empty DRY sequence breaker at index {i}");
                continue;
            }
            let b = if b.len() > MAX_CHAR_LEN {
                crate::log_warn!("truncating DRY sequence breaker to {MAX_CHAR_LEN} characters");
                &b[..MAX_CHAR_LEN]
            } else {
                b
            };
            let vocab = vocab.ok_or_else(|| Error::invalid("DRY sequence breakers need a vocabulary"))?;
            add_overlapping_sequences(vocab, b, &mut breakers);
        }
        Ok(Box::new(Dry::new(
            multiplier,
            base,
            allowed_length,
            penalty_last_n as usize,
            breakers,
        )))
    }

    /// llama.cpp's testing constructor: breakers given as token sequences (a head token and the
    /// tail that completes it), no vocabulary involved. Always an active DRY sampler.
    pub fn with_token_breakers(
        multiplier: f32,
        base: f32,
        allowed_length: i32,
        penalty_last_n: i32,
        seq_breakers: &[&[Token]],
    ) -> Box<dyn Sampler> {
        let mut breakers = Breakers::new();
        if seq_breakers.is_empty() {
            crate::log_warn!("empty DRY sequence breakers list in llama_sampler_init_dry_testing");
        }
        for b in seq_breakers {
            match b.split_first() {
                Some((&head, tail)) => breakers.entry(head).or_default().push(tail.to_vec()),
                None => crate::log_warn!("skipping DRY empty sequence breaker"),
            }
        }
        if !seq_breakers.is_empty() && breakers.is_empty() {
            crate::log_warn!("no valid DRY sequence breakers processed in llama_sampler_init_dry_testing");
        }
        let penalty_last_n = penalty_last_n.max(0) as usize;
        Box::new(Dry::new(multiplier, base, allowed_length, penalty_last_n, breakers))
    }

    fn new(multiplier: f32, base: f32, allowed_length: i32, penalty_last_n: usize, breakers: Breakers) -> Self {
        Dry {
            multiplier,
            base,
            allowed_length,
            penalty_last_n,
            breakers,
            repeat_count: Vec::new(),
            max_token_repeat: HashMap::new(),
            last_tokens: VecDeque::with_capacity(penalty_last_n.min(1 << 16)),
        }
    }

    /// The i-th most recent token (0 = the last one).
    fn rat(&self, i: usize) -> Token {
        self.last_tokens[self.last_tokens.len() - 1 - i]
    }

    /// How far back a repetition may reach: up to the most recent complete breaker, if any.
    fn repetition_limit(&self, last_n_repeat: usize) -> usize {
        for i in 0..last_n_repeat {
            let Some(tails) = self.breakers.get(&self.rat(i)) else {
                continue;
            };
            let mut longest_match: Option<usize> = None;
            for tail in tails {
                let seq_len = tail.len();
                if longest_match.is_none_or(|l| seq_len > l) && seq_len <= i {
                    // The tail follows the head, so it lies at more recent positions.
                    if (0..seq_len).all(|off| tail[off] == self.rat(i - off - 1)) {
                        longest_match = Some(seq_len);
                    }
                }
            }
            if let Some(l) = longest_match {
                return i - l;
            }
        }
        last_n_repeat
    }

    /// repeat_count[last - k]: how many tokens before position k (from the end) repeat the context's
    /// suffix, capped at `rep_limit` (the Z-algorithm, run backwards).
    fn count_repeats(&mut self, last_n_repeat: usize, rep_limit: usize) {
        let last = last_n_repeat - 1;
        let (mut lt, mut rt) = (0usize, 0usize);
        for k in 1..last_n_repeat {
            if k > rt {
                let mut n = 0;
                while n + k < last_n_repeat && self.rat(n) == self.rat(n + k) {
                    n += 1;
                }
                self.repeat_count[last - k] = n.min(rep_limit) as i32;
                if n > 0 {
                    lt = k;
                    rt = k + n - 1;
                }
            } else {
                let p = k - lt;
                let right_part_len = (rt - k + 1) as i32;
                if self.repeat_count[last - p] < right_part_len {
                    self.repeat_count[last - k] = self.repeat_count[last - p].min(rep_limit as i32);
                } else {
                    let mut i = rt + 1;
                    while i < last_n_repeat && self.rat(i) == self.rat(i - k) {
                        i += 1;
                    }
                    self.repeat_count[last - k] = (i - k).min(rep_limit) as i32;
                    lt = k;
                    rt = i - 1;
                }
            }
        }
    }
}

/// Every token whose text contains the breaker maps to an empty tail; a token whose text ends with a
/// proper prefix of the breaker maps to the tokenization of the rest of it.
fn add_overlapping_sequences(vocab: &dyn TokenVocab, s: &[u8], out: &mut Breakers) {
    for id in 0..vocab.n_tokens() {
        let token = id as Token;
        let word = vocab.detokenize_one(token);
        if word.windows(s.len()).any(|w| w == s) {
            out.entry(token).or_default().push(Vec::new());
            continue;
        }
        for pos in (0..word.len()).filter(|&p| word[p] == s[0]) {
            let overlap = (word.len() - pos).min(s.len());
            if word[pos..pos + overlap] != s[..overlap] {
                continue;
            }
            let mut tail = vocab.tokenize(&s[overlap..], false);
            tail.truncate(MAX_SEQ_LEN);
            let tails = out.entry(token).or_default();
            if !tails.contains(&tail) {
                tails.push(tail);
            }
        }
    }
}

impl Sampler for Dry {
    fn name(&self) -> &'static CStr {
        c"dry"
    }

    fn accept(&mut self, token: Token) {
        if self.last_tokens.len() >= self.penalty_last_n {
            self.last_tokens.pop_front();
        }
        self.last_tokens.push_back(token);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        let last_n_repeat = self.last_tokens.len().min(self.penalty_last_n);
        if last_n_repeat as i64 <= i64::from(self.allowed_length) {
            return;
        }
        if last_n_repeat == 0 {
            // Only reachable with a negative allowed length: nothing to penalise.
            cur.sorted = false;
            return;
        }
        self.repeat_count.clear();
        self.repeat_count.resize(last_n_repeat, 0);
        self.max_token_repeat.clear();

        let rep_limit = self.repetition_limit(last_n_repeat);
        if (rep_limit as i64) < i64::from(self.allowed_length) {
            return;
        }
        self.count_repeats(last_n_repeat, rep_limit);

        // The token after each repeated run would extend it: remember the longest run per such token.
        for i in 0..last_n_repeat - 1 {
            let repeat_len = self.repeat_count[i];
            if repeat_len >= self.allowed_length {
                let token = self.rat(last_n_repeat - 2 - i);
                let e = self.max_token_repeat.entry(token).or_insert(repeat_len);
                *e = (*e).max(repeat_len);
            }
        }

        let max_exponent = if self.base > 1.000_001 {
            cvtt_i32(FLOAT_MAX_LOG / self.base.ln())
        } else {
            0
        };
        for d in cur.data_mut() {
            let Some(&max_repeat) = self.max_token_repeat.get(&d.id) else {
                continue;
            };
            let single_token_breaker = self.breakers.get(&d.id).is_some_and(|t| t.iter().any(|t| t.is_empty()));
            if single_token_breaker {
                continue;
            }
            let mut repeat_exp = max_repeat - self.allowed_length;
            if max_exponent > 0 && repeat_exp > max_exponent {
                repeat_exp = max_exponent;
            }
            // In double as C++'s std::pow(float, int) computes it; black_box keeps the exponent from
            // being rewritten into powi, which rounds differently.
            let pow = f64::from(self.base).powf(black_box(f64::from(repeat_exp)));
            d.logit -= (f64::from(self.multiplier) * pow) as f32;
        }
        cur.sorted = false;
    }

    fn reset(&mut self) {
        self.last_tokens.clear();
        self.repeat_count.clear();
        self.max_token_repeat.clear();
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::vocab::test_vocab::WordVocab;
    use super::super::Dist;
    use super::*;

    /// Breakers given as token sequences, like llama.cpp's test constructor.
    fn with_token_breakers(m: f32, base: f32, allowed: i32, last_n: usize, seqs: &[&[Token]]) -> Dry {
        let mut b = Breakers::new();
        for s in seqs {
            b.entry(s[0]).or_default().push(s[1..].to_vec());
        }
        Dry::new(m, base, allowed, last_n, b)
    }

    fn run(probs: &[f32], last: &[Token], expected: &[f32], mut s: Dry) {
        for &t in last {
            s.accept(t);
        }
        let mut v = from_probs(probs);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn penalises_extensions_of_repeats() {
        let q = [0.25f32; 4];
        let f = [0.2f32; 5];
        run(&q, &[0, 1], &q, with_token_breakers(1.0, 1.1, 2, 4, &[]));
        run(
            &q,
            &[0, 1, 2, 0, 1],
            &[0.296923, 0.296923, 0.109232, 0.296923],
            with_token_breakers(1.0, 1.1, 2, 5, &[]),
        );
        run(
            &f,
            &[0, 1, 3, 4, 0, 1],
            &f,
            with_token_breakers(1.0, 1.1, 2, 6, &[&[3]]),
        );
        run(
            &f,
            &[0, 1, 2, 0, 1],
            &[0.241818, 0.241818, 0.032727, 0.241818, 0.241818],
            with_token_breakers(2.0, 1.1, 2, 5, &[]),
        );
        run(&f, &[0, 1, 2, 3, 4, 0, 1], &f, with_token_breakers(1.0, 1.1, 4, 7, &[]));
    }

    #[test]
    fn breaker_strings_become_token_sequences() {
        // "\n" inside a token: empty tail. "ab" ending token "xa" needs the tail tokenize("b").
        let v = WordVocab::new(&["a\nb", "xa", "b", "c"], &[]);
        let mut b = Breakers::new();
        add_overlapping_sequences(&v, b"\n", &mut b);
        add_overlapping_sequences(&v, b"ab", &mut b);
        assert_eq!(b.get(&0), Some(&vec![vec![]]));
        assert_eq!(b.get(&1), Some(&vec![vec![2]]));
        assert_eq!(b.get(&3), None);
    }

    #[test]
    fn disabled_forms() {
        let v = WordVocab::new(&["a"], &[]);
        let name = |s: Result<Box<dyn Sampler>>| s.unwrap().name();
        assert_eq!(name(Dry::boxed(None, 0.0, 1.75, 2, 64, &[b"\n"])), c"?dry");
        assert_eq!(name(Dry::boxed(None, 0.8, 0.5, 2, 64, &[])), c"?dry");
        assert_eq!(name(Dry::boxed(None, 0.8, 1.75, 2, -1, &[])), c"?dry");
        assert_eq!(name(Dry::boxed(Some(&v), 0.8, 1.75, 2, 64, &[b"", b"\n"])), c"dry");
        assert!(Dry::boxed(None, 0.8, 1.75, 2, 64, &[b"\n"]).is_err());
    }
}

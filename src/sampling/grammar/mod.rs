//! The grammar sampler: masks every candidate whose text the GBNF grammar cannot continue with.
//! Lazy grammars stay inactive until a trigger token or pattern shows up in the output, then replay
//! the output from the trigger on.

mod matcher;
mod parser;
mod regex;

use crate::error::{Error, Result};
use crate::sampling::{Candidates, Sampler, Token, TokenVocab};
use matcher::{decode_utf8, Cand, Checker, Grammar, PartialUtf8, Stack};
use regex::Regex;
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{Arc, OnceLock};

/// llama.cpp's `llama_gretype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemType {
    /// End of a rule.
    End,
    /// Start of another alternative of the rule.
    Alt,
    /// Reference to rule `value`.
    RuleRef,
    /// Character `value` (or the first of a set).
    Char,
    /// Any character but the set that follows.
    CharNot,
    /// Makes the previous character the start of a range ending at `value`.
    CharRngUpper,
    /// Another character of the same set.
    CharAlt,
    /// Any character.
    CharAny,
    /// Token `value`.
    Token,
    /// Any token but `value`.
    TokenNot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Element {
    pub ty: ElemType,
    pub value: u32,
}

impl Element {
    pub fn new(ty: ElemType, value: u32) -> Self {
        Element { ty, value }
    }
}

/// A lazy grammar's trigger: found anywhere in the output (or matching all of it, for `^...$`), the
/// grammar starts at its first non-empty group (or at the match).
struct Trigger {
    pattern: Vec<u8>,
    regex: Regex,
}

impl Trigger {
    fn find(&self, input: &[u8]) -> Option<usize> {
        let start = |caps: regex::Captures| {
            caps.iter()
                .skip(1)
                .flatten()
                .find(|(a, b)| b > a)
                .map(|&(a, _)| a)
                .or(caps.first().copied().flatten().map(|(a, _)| a))
        };
        if self.pattern.first() == Some(&b'^') && self.pattern.last() == Some(&b'$') {
            if let Some(caps) = self.regex.full_match(input) {
                return start(caps);
            }
        }
        self.regex.search(input).and_then(start)
    }
}

/// How a token's text looks to the grammar when no partial character is pending.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    EndOfGeneration,
    /// Empty text (or starting with NUL): never allowed.
    Empty,
    Text,
}

/// Every token's decoded text, computed once per vocabulary use (apply would otherwise decode the
/// whole vocabulary at every step).
struct TokenTable {
    kind: Vec<TokenKind>,
    start: Vec<usize>,
    cps: Vec<u32>,
    partial: Vec<PartialUtf8>,
}

impl TokenTable {
    fn new(vocab: &dyn TokenVocab) -> Self {
        let n = vocab.n_tokens();
        let mut t = TokenTable {
            kind: Vec::with_capacity(n),
            start: Vec::with_capacity(n + 1),
            cps: Vec::new(),
            partial: Vec::with_capacity(n),
        };
        for id in 0..n as Token {
            let piece = vocab.piece(id, true);
            let kind = if vocab.is_eog(id) {
                TokenKind::EndOfGeneration
            } else if piece.first().is_none_or(|&b| b == 0) {
                TokenKind::Empty
            } else {
                TokenKind::Text
            };
            let (cps, partial) = decode_utf8(&piece, PartialUtf8::default());
            t.kind.push(kind);
            t.start.push(t.cps.len());
            t.cps.extend_from_slice(&cps);
            t.partial.push(partial);
        }
        t.start.push(t.cps.len());
        t
    }

    fn cps(&self, id: usize) -> &[u32] {
        &self.cps[self.start[id]..self.start[id + 1]]
    }
}

#[derive(Clone)]
struct Active {
    vocab: &'static dyn TokenVocab,
    table: Arc<OnceLock<TokenTable>>,
    initial: Grammar,
    grammar: Grammar,
    lazy: bool,
    awaiting_trigger: bool,
    /// Output seen while awaiting a trigger, and each token's byte range in it.
    trigger_buffer: Vec<u8>,
    trigger_positions: Vec<(Token, usize, usize)>,
    trigger_tokens: Arc<[Token]>,
    trigger_patterns: Arc<[Trigger]>,
    masks: MaskCache,
}

/// Masks of the whole vocabulary by stack set. Inside a string or a number every character leads back
/// to the same stacks, so most steps of a generation find their mask here instead of checking every
/// token again. Only used when no partial character is pending (the mask then depends on the stacks
/// alone).
#[derive(Clone, Default)]
struct MaskCache {
    masks: HashMap<Vec<Stack>, Arc<[u64]>>,
}

/// Entries kept before the cache starts over (each holds one bit per token).
const MAX_MASKS: usize = 32;

/// `llama_sampler_init_grammar*`. An empty grammar string gives a sampler that does nothing.
#[derive(Clone)]
pub struct GrammarSampler {
    active: Option<Active>,
}

/// The pattern llama.cpp builds from the deprecated trigger words: any text, then one of the words
/// (escaped) as the first group, then anything.
pub fn trigger_words_pattern(words: &[&[u8]]) -> Vec<u8> {
    let mut p = b"[\\s\\S]*?(".to_vec();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            p.push(b'|');
        }
        for &b in *w {
            if b".^$|()*+?[]{}\\".contains(&b) {
                p.push(b'\\');
            }
            p.push(b);
        }
    }
    p.extend_from_slice(b")[\\s\\S]*");
    p
}

impl GrammarSampler {
    pub fn empty() -> Self {
        GrammarSampler { active: None }
    }

    /// Parse `source` and start at rule `root`. Lazy grammars wait for one of `trigger_tokens` or
    /// `trigger_patterns`; non-lazy ones use the trigger tokens only to let them through as text.
    /// (`vocab` is `'static` as far as Rust knows; C keeps the model alive as long as the sampler.)
    pub fn new(
        vocab: &'static dyn TokenVocab,
        source: &[u8],
        root: &[u8],
        lazy: bool,
        trigger_patterns: &[&[u8]],
        trigger_tokens: &[Token],
    ) -> Result<Self> {
        let parsed =
            parser::parse(source, Some(vocab)).map_err(|e| Error::invalid(format!("failed to parse grammar: {e}")))?;
        if parsed.rules.is_empty() {
            return Err(Error::invalid("failed to parse grammar: no rules"));
        }
        let Some(&root_id) = parsed.symbol_ids.get(root) else {
            return Err(Error::invalid(format!(
                "grammar does not contain a '{}' symbol",
                String::from_utf8_lossy(root)
            )));
        };
        let grammar = Grammar::new(&parsed.rules, root_id as usize).map_err(Error::invalid)?;
        let trigger_patterns = trigger_patterns
            .iter()
            .map(|p| {
                let regex = Regex::new(p)
                    .map_err(|e| Error::invalid(format!("trigger pattern '{}': {e}", String::from_utf8_lossy(p))))?;
                Ok(Trigger {
                    pattern: p.to_vec(),
                    regex,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(GrammarSampler {
            active: Some(Active {
                vocab,
                table: Arc::default(),
                initial: grammar.clone(),
                grammar,
                lazy,
                awaiting_trigger: lazy,
                trigger_buffer: Vec::new(),
                trigger_positions: Vec::new(),
                trigger_tokens: trigger_tokens.into(),
                trigger_patterns: trigger_patterns.into(),
                masks: MaskCache::default(),
            }),
        })
    }
}

/// Whether tokens are allowed in the grammar's current state.
struct Check<'g> {
    checker: Checker<'g>,
    roots: Vec<u32>,
    allow_eog: bool,
    table: &'g TokenTable,
}

impl<'g> Check<'g> {
    fn new(grammar: &'g Grammar, table: &'g TokenTable) -> Self {
        let mut checker = Checker::new(grammar.rules());
        let roots = grammar.stacks.iter().map(|s| checker.intern(s)).collect();
        Check {
            checker,
            roots,
            allow_eog: grammar.can_end(),
            table,
        }
    }

    /// Token `id` (in range) whose text decodes to `cps` ending in `partial`: EOG only where the
    /// grammar may end, empty text never, other text if some stack accepts it.
    fn allowed(&mut self, id: usize, cps: &[u32], partial: PartialUtf8) -> bool {
        match self.table.kind[id] {
            TokenKind::EndOfGeneration => self.allow_eog,
            TokenKind::Empty => false,
            TokenKind::Text => {
                let c = Cand {
                    cps,
                    partial,
                    id: id as Token,
                };
                let checker = &mut self.checker;
                self.roots.iter().any(|&r| checker.accepts(r, &c, 0))
            }
        }
    }
}

impl Active {
    fn accept_piece(&mut self, token: Token, piece: &[u8]) {
        if let Err(e) = self.grammar.accept_token(token, piece) {
            crate::log_error!("grammar: {e}; the token is not part of the grammar and was ignored");
        }
    }

    /// While awaiting a trigger: buffer the output and start the grammar when a trigger appears.
    fn accept_awaiting(&mut self, token: Token, piece: &[u8]) {
        if self.trigger_tokens.contains(&token) {
            self.awaiting_trigger = false;
            self.trigger_buffer.clear();
            self.accept_piece(token, piece);
            crate::log_debug!("Grammar triggered on token {token}");
            return;
        }
        let from = self.trigger_buffer.len();
        self.trigger_positions.push((token, from, from + piece.len()));
        self.trigger_buffer.extend_from_slice(piece);
        let found = self.trigger_patterns.iter().find_map(|t| t.find(&self.trigger_buffer));
        let Some(start) = found else {
            return;
        };
        self.awaiting_trigger = false;
        let buffer = std::mem::take(&mut self.trigger_buffer);
        // Replay the tokens overlapping the triggered text (the first one possibly cut).
        for (tok, tok_start, tok_end) in std::mem::take(&mut self.trigger_positions) {
            if tok_end <= start {
                continue;
            }
            let piece_start = tok_start.max(start);
            self.accept_piece(tok, &buffer[piece_start..tok_end]);
        }
        crate::log_debug!(
            "Grammar triggered on regex: '{}'",
            String::from_utf8_lossy(&buffer[start..])
        );
    }
}

impl Sampler for GrammarSampler {
    fn name(&self) -> &'static CStr {
        c"grammar"
    }

    fn accept(&mut self, token: Token) {
        let Some(a) = &mut self.active else { return };
        let piece = a.vocab.piece(token, true).into_owned();
        if a.awaiting_trigger {
            a.accept_awaiting(token, &piece);
            return;
        }
        if a.vocab.is_eog(token) {
            if !a.grammar.can_end() {
                crate::log_error!("grammar: end of generation accepted where the grammar cannot end; ignored");
            }
            return;
        }
        a.accept_piece(token, &piece);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        let Some(a) = &mut self.active else { return };
        if a.awaiting_trigger {
            return;
        }
        let table = a.table.get_or_init(|| TokenTable::new(a.vocab));
        let n_vocab = table.kind.len();
        let mut check = Check::new(&a.grammar, table);
        if a.grammar.partial.n_remain <= 0 && cur.len() >= n_vocab / 2 {
            // Most of the vocabulary is asked about: one mask for all of it, kept for the next visit.
            let mask = match a.masks.masks.get(&a.grammar.stacks) {
                Some(m) => m.clone(),
                None => {
                    let mut bits = vec![0u64; n_vocab.div_ceil(64)];
                    for id in 0..n_vocab {
                        let (cps, partial) = (table.cps(id), table.partial[id]);
                        if check.allowed(id, cps, partial) {
                            bits[id / 64] |= 1 << (id % 64);
                        }
                    }
                    let m: Arc<[u64]> = bits.into();
                    if a.masks.masks.len() >= MAX_MASKS {
                        a.masks.masks.clear();
                    }
                    a.masks.masks.insert(a.grammar.stacks.clone(), m.clone());
                    m
                }
            };
            for d in cur.data_mut() {
                let allowed = usize::try_from(d.id)
                    .ok()
                    .filter(|&id| id < n_vocab)
                    .is_some_and(|id| mask[id / 64] & (1 << (id % 64)) != 0);
                if !allowed {
                    d.logit = f32::NEG_INFINITY;
                }
            }
            return;
        }
        let partial = a.grammar.partial;
        for d in cur.data_mut() {
            let Some(id) = usize::try_from(d.id).ok().filter(|&id| id < n_vocab) else {
                d.logit = f32::NEG_INFINITY;
                continue;
            };
            // A pending partial character changes the token's decoding: decode it afresh then.
            let allowed = if partial.n_remain > 0 {
                let (cps, p) = decode_utf8(&a.vocab.piece(d.id, true), partial);
                check.allowed(id, &cps, p)
            } else {
                check.allowed(id, table.cps(id), table.partial[id])
            };
            if !allowed {
                d.logit = f32::NEG_INFINITY;
            }
        }
    }

    fn reset(&mut self) {
        if let Some(a) = &mut self.active {
            a.grammar = a.initial.clone();
            a.awaiting_trigger = a.lazy;
            a.trigger_buffer.clear();
            a.trigger_positions.clear();
        }
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::vocab::test_vocab::WordVocab;
    use super::*;
    use std::sync::LazyLock;

    /// A tiny JSON grammar (objects of string keys to strings, numbers, booleans, arrays, objects).
    const JSON: &str = r#"
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
"#;

    fn vocab() -> &'static WordVocab {
        // A static rather than a leaked box: the samplers keep `&'static` vocabularies, and Miri
        // reports leaks.
        static VOCAB: LazyLock<WordVocab> = LazyLock::new(|| {
            WordVocab::new(
                &[
                    "<eos>", "{", "}", "\"", "a", "b", ":", " ", "1", "2", ",", "[", "]", "true", "{\"", "x", "", "é",
                ],
                &[0],
            )
        });
        &VOCAB
    }

    fn allowed(s: &mut GrammarSampler, n: usize) -> Vec<Token> {
        let mut v = from_logits(&vec![0.0; n]);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        c.data().iter().filter(|d| d.logit.is_finite()).map(|d| d.id).collect()
    }

    #[test]
    fn json_masks_step_by_step() {
        let v = vocab();
        let n = v.words.len();
        let mut s = GrammarSampler::new(v, JSON.as_bytes(), b"root", false, &[], &[]).unwrap();
        assert_eq!(allowed(&mut s, n), vec![1, 14]);
        s.accept(14); // {"
                      // Inside a string every text token is allowed (`"` and `{"` close it), the empty one never.
        assert_eq!(
            allowed(&mut s, n),
            (1..n as Token).filter(|&t| t != 16).collect::<Vec<_>>()
        );
        for t in [4, 3, 6, 7, 8, 2] {
            assert!(allowed(&mut s, n).contains(&t), "token {t}");
            s.accept(t);
        }
        // {"a": 1} is complete: only whitespace or the end remain.
        assert_eq!(allowed(&mut s, n), vec![0, 7]);
    }

    #[test]
    fn a_few_candidates_and_the_whole_vocabulary_agree() {
        // Few candidates are checked one by one; most of the vocabulary goes through the cached mask.
        let v = vocab();
        let n = v.words.len();
        let mut s = GrammarSampler::new(v, JSON.as_bytes(), b"root", false, &[], &[]).unwrap();
        for t in [14, 4, 3, 6, 7] {
            let full = allowed(&mut s, n);
            let mut few = from_logits(&[0.0; 3]);
            for (k, d) in few.iter_mut().enumerate() {
                d.id = [3, 8, 17][k];
            }
            let mut c = Candidates::new(&mut few, -1, false);
            s.apply(&mut c);
            for d in c.data() {
                assert_eq!(
                    d.logit.is_finite(),
                    full.contains(&d.id),
                    "token {} after accepting up to {t}",
                    d.id
                );
            }
            assert_eq!(allowed(&mut s, n), full, "the cached mask gives the same answer");
            s.accept(t);
        }
    }

    #[test]
    fn malformed_grammars_and_roots_fail() {
        let err = |src: &str, root: &[u8]| GrammarSampler::new(vocab(), src.as_bytes(), root, false, &[], &[]).err();
        assert!(err("root ::= \"a", b"root")
            .unwrap()
            .to_string()
            .contains("failed to parse grammar"));
        assert!(err("root ::= \"a\"", b"start")
            .unwrap()
            .to_string()
            .contains("does not contain a 'start'"));
        assert!(err("root ::= root \"a\"", b"root")
            .unwrap()
            .to_string()
            .contains("left recursion"));
    }

    #[test]
    fn a_grammar_that_allows_nothing_masks_everything() {
        let v = vocab();
        let n = v.words.len();
        let mut s = GrammarSampler::new(v, "root ::= \"z\"".as_bytes(), b"root", false, &[], &[]).unwrap();
        assert!(allowed(&mut s, n).is_empty());
        let before = s.clone();
        s.accept(4); // not allowed: logged and ignored
        assert!(allowed(&mut s, n).is_empty());
        assert_eq!(allowed(&mut before.clone(), n), allowed(&mut s, n));
    }

    #[test]
    fn lazy_grammar_waits_for_its_trigger() {
        let v = vocab();
        let n = v.words.len();
        let pattern = trigger_words_pattern(&[b"x{"]);
        let mut s = GrammarSampler::new(
            v,
            "root ::= \"x{\" [ab]+ \"}\"".as_bytes(),
            b"root",
            true,
            &[&pattern],
            &[],
        )
        .unwrap();
        assert_eq!(allowed(&mut s, n).len(), n, "inactive before the trigger");
        s.accept(4);
        s.accept(15); // x
        assert_eq!(allowed(&mut s, n).len(), n);
        s.accept(1); // { completes "x{": the grammar replays "x" and "{" and is now active
        assert_eq!(allowed(&mut s, n), vec![4, 5]);
        s.reset();
        assert_eq!(allowed(&mut s, n).len(), n);
    }

    #[test]
    fn trigger_tokens_start_the_grammar() {
        let v = vocab();
        let n = v.words.len();
        let mut s = GrammarSampler::new(v, "root ::= \"{\" [ab]+ \"}\"".as_bytes(), b"root", true, &[], &[1]).unwrap();
        s.accept(4);
        s.accept(1);
        assert_eq!(allowed(&mut s, n), vec![4, 5]);
    }

    #[test]
    fn trigger_words_are_escaped() {
        assert_eq!(
            trigger_words_pattern(&[b"a.b", b"c"]),
            b"[\\s\\S]*?(a\\.b|c)[\\s\\S]*".to_vec()
        );
    }
}

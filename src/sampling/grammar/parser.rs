//! GBNF (llama.cpp's grammar format) to rules. Each rule is a list of elements: alternatives separated
//! by `Alt`, closed by `End`; repetitions and groups become generated rules, named and numbered the
//! way llama.cpp numbers them. The source is read like a C string: past its end every byte reads 0.

use super::{ElemType, Element};
use crate::sampling::TokenVocab;
use std::collections::BTreeMap;

/// llama.cpp's cap on repetition counts and on the rules a repetition may generate.
const MAX_REPETITION_THRESHOLD: u64 = 2000;
/// Parenthesis nesting deeper than this is refused (the parser recurses once per level).
const MAX_NESTING: usize = 512;

pub struct ParsedGrammar {
    pub symbol_ids: BTreeMap<Vec<u8>, u32>,
    pub rules: Vec<Vec<Element>>,
}

type ParseResult<T> = std::result::Result<T, String>;

struct Parser<'a> {
    src: &'a [u8],
    vocab: Option<&'a dyn TokenVocab>,
    symbol_ids: BTreeMap<Vec<u8>, u32>,
    rules: Vec<Vec<Element>>,
    depth: usize,
}

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'-' || is_digit(c)
}

/// Parse `src` into rules. The error is the message llama.cpp would throw.
pub fn parse(src: &[u8], vocab: Option<&dyn TokenVocab>) -> ParseResult<ParsedGrammar> {
    let mut p = Parser {
        src,
        vocab,
        symbol_ids: BTreeMap::new(),
        rules: Vec::new(),
        depth: 0,
    };
    let mut pos = p.parse_space(0, true);
    while p.at(pos) != 0 {
        pos = p.parse_rule(pos)?;
    }
    p.validate()?;
    Ok(ParsedGrammar {
        symbol_ids: p.symbol_ids,
        rules: p.rules,
    })
}

impl<'a> Parser<'a> {
    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    /// The rest of the source from `i`, for error messages (as llama.cpp appends it).
    fn rest(&self, i: usize) -> String {
        String::from_utf8_lossy(self.src.get(i..).unwrap_or_default()).into_owned()
    }

    fn parse_space(&self, mut pos: usize, newline_ok: bool) -> usize {
        loop {
            match self.at(pos) {
                b' ' | b'\t' => pos += 1,
                b'\r' | b'\n' if newline_ok => pos += 1,
                b'#' => {
                    while !matches!(self.at(pos), 0 | b'\r' | b'\n') {
                        pos += 1;
                    }
                }
                _ => return pos,
            }
        }
    }

    fn parse_name(&self, pos: usize) -> ParseResult<usize> {
        let mut end = pos;
        while is_word_char(self.at(end)) {
            end += 1;
        }
        if end == pos {
            return Err(format!("expecting name at {}", self.rest(pos)));
        }
        Ok(end)
    }

    fn parse_int(&self, pos: usize) -> ParseResult<usize> {
        let mut end = pos;
        while is_digit(self.at(end)) {
            end += 1;
        }
        if end == pos {
            return Err(format!("expecting integer at {}", self.rest(pos)));
        }
        Ok(end)
    }

    fn parse_u64(&self, start: usize, end: usize) -> ParseResult<u64> {
        std::str::from_utf8(&self.src[start..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("number out of range at {}", self.rest(start)))
    }

    fn parse_hex(&self, pos: usize, size: usize) -> ParseResult<(u32, usize)> {
        let mut value: u32 = 0;
        let mut i = pos;
        while i < pos + size {
            let digit = match self.at(i) {
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                c @ b'0'..=b'9' => c - b'0',
                _ => break,
            };
            value = (value << 4) + u32::from(digit);
            i += 1;
        }
        if i != pos + size {
            return Err(format!("expecting {size} hex chars at {}", self.rest(pos)));
        }
        Ok((value, i))
    }

    /// One UTF-8 character of the source (not validated; stops at the end).
    fn decode_utf8(&self, pos: usize) -> (u32, usize) {
        const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
        let first = self.at(pos);
        let len = LOOKUP[usize::from(first >> 4)];
        let mask = (1u32 << (8 - len)) - 1;
        let mut value = u32::from(first) & mask;
        let mut p = pos + 1;
        while p < pos + len && self.at(p) != 0 {
            value = (value << 6) + u32::from(self.at(p) & 0x3F);
            p += 1;
        }
        (value, p)
    }

    fn parse_char(&self, pos: usize) -> ParseResult<(u32, usize)> {
        if self.at(pos) == b'\\' {
            return match self.at(pos + 1) {
                b'x' => self.parse_hex(pos + 2, 2),
                b'u' => self.parse_hex(pos + 2, 4),
                b'U' => self.parse_hex(pos + 2, 8),
                b't' => Ok((u32::from(b'\t'), pos + 2)),
                b'r' => Ok((u32::from(b'\r'), pos + 2)),
                b'n' => Ok((u32::from(b'\n'), pos + 2)),
                c @ (b'\\' | b'"' | b'[' | b']' | b'-') => Ok((u32::from(c), pos + 2)),
                _ => Err(format!("unknown escape at {}", self.rest(pos))),
            };
        }
        if self.at(pos) != 0 {
            return Ok(self.decode_utf8(pos));
        }
        Err("unexpected end of input".to_string())
    }

    /// `<[id]>` or `<text>` (which must tokenize, special tokens parsed, to exactly one token).
    fn parse_token(&self, start: usize) -> ParseResult<(u32, usize)> {
        let mut pos = start;
        if self.at(pos) != b'<' {
            return Err(format!("expecting '<' at {}", self.rest(pos)));
        }
        pos += 1;
        if self.at(pos) == b'[' {
            pos += 1;
            let int_end = self.parse_int(pos)?;
            let id = self.parse_u64(pos, int_end)?;
            let id = u32::try_from(id).map_err(|_| format!("parsed token id is too big at {}", self.rest(pos)))?;
            pos = int_end;
            for expected in [b']', b'>'] {
                if self.at(pos) != expected {
                    return Err(format!("expecting '{}' at {}", expected as char, self.rest(pos)));
                }
                pos += 1;
            }
            return Ok((id, pos));
        }
        let Some(vocab) = self.vocab else {
            return Err(format!("no vocab to parse token at {}", self.rest(start)));
        };
        while !matches!(self.at(pos), 0 | b'>') {
            pos += 1;
        }
        if self.at(pos) != b'>' {
            return Err(format!("expecting '>' at {}", self.rest(pos)));
        }
        pos += 1;
        let text = &self.src[start..pos];
        match vocab.tokenize(text, true)[..] {
            [t] => Ok((t as u32, pos)),
            _ => Err(format!("invalid token '{}'", String::from_utf8_lossy(text))),
        }
    }

    fn symbol_id(&mut self, name: &[u8]) -> u32 {
        let next = self.symbol_ids.len() as u32;
        *self.symbol_ids.entry(name.to_vec()).or_insert(next)
    }

    fn generate_symbol_id(&mut self, base: &[u8]) -> u32 {
        let next = self.symbol_ids.len() as u32;
        let mut name = base.to_vec();
        name.extend_from_slice(format!("_{next}").as_bytes());
        self.symbol_ids.insert(name, next);
        next
    }

    fn add_rule(&mut self, id: u32, rule: Vec<Element>) {
        let id = id as usize;
        if self.rules.len() <= id {
            self.rules.resize(id + 1, Vec::new());
        }
        self.rules[id] = rule;
    }

    fn parse_rule(&mut self, start: usize) -> ParseResult<usize> {
        let name_end = self.parse_name(start)?;
        let mut pos = self.parse_space(name_end, false);
        let name = self.src[start..name_end].to_vec();
        let rule_id = self.symbol_id(&name);
        if !(self.at(pos) == b':' && self.at(pos + 1) == b':' && self.at(pos + 2) == b'=') {
            return Err(format!("expecting ::= at {}", self.rest(pos)));
        }
        pos = self.parse_space(pos + 3, true);
        pos = self.parse_alternates(pos, &name, rule_id, false)?;
        match self.at(pos) {
            b'\r' => pos += if self.at(pos + 1) == b'\n' { 2 } else { 1 },
            b'\n' => pos += 1,
            0 => {}
            _ => return Err(format!("expecting newline or end at {}", self.rest(pos))),
        }
        Ok(self.parse_space(pos, true))
    }

    fn parse_alternates(&mut self, pos: usize, rule_name: &[u8], rule_id: u32, nested: bool) -> ParseResult<usize> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(format!("grammar nested deeper than {MAX_NESTING} levels"));
        }
        let mut rule = Vec::new();
        let mut pos = self.parse_sequence(pos, rule_name, &mut rule, nested)?;
        while self.at(pos) == b'|' {
            rule.push(Element::new(ElemType::Alt, 0));
            pos = self.parse_space(pos + 1, true);
            pos = self.parse_sequence(pos, rule_name, &mut rule, nested)?;
        }
        rule.push(Element::new(ElemType::End, 0));
        self.add_rule(rule_id, rule);
        self.depth -= 1;
        Ok(pos)
    }

    fn parse_sequence(
        &mut self,
        mut pos: usize,
        rule_name: &[u8],
        rule: &mut Vec<Element>,
        nested: bool,
    ) -> ParseResult<usize> {
        let mut last_sym_start = rule.len();
        let mut n_prev_rules: u64 = 1;
        while self.at(pos) != 0 {
            let c = self.at(pos);
            if c == b'"' {
                pos += 1;
                last_sym_start = rule.len();
                n_prev_rules = 1;
                while self.at(pos) != b'"' {
                    if self.at(pos) == 0 {
                        return Err("unexpected end of input".to_string());
                    }
                    let (chr, next) = self.parse_char(pos)?;
                    pos = next;
                    rule.push(Element::new(ElemType::Char, chr));
                }
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'[' {
                pos += 1;
                let mut start_type = ElemType::Char;
                if self.at(pos) == b'^' {
                    pos += 1;
                    start_type = ElemType::CharNot;
                }
                last_sym_start = rule.len();
                n_prev_rules = 1;
                while self.at(pos) != b']' {
                    if self.at(pos) == 0 {
                        return Err("unexpected end of input".to_string());
                    }
                    let (chr, next) = self.parse_char(pos)?;
                    pos = next;
                    let ty = if last_sym_start < rule.len() {
                        ElemType::CharAlt
                    } else {
                        start_type
                    };
                    rule.push(Element::new(ty, chr));
                    if self.at(pos) == b'-' && self.at(pos + 1) != b']' {
                        if self.at(pos + 1) == 0 {
                            return Err("unexpected end of input".to_string());
                        }
                        let (end_chr, next) = self.parse_char(pos + 1)?;
                        pos = next;
                        rule.push(Element::new(ElemType::CharRngUpper, end_chr));
                    }
                }
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'<' || c == b'!' {
                let mut ty = ElemType::Token;
                if c == b'!' {
                    ty = ElemType::TokenNot;
                    pos += 1;
                }
                let (token, end) = self.parse_token(pos)?;
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Element::new(ty, token));
                pos = self.parse_space(end, nested);
            } else if is_word_char(c) {
                let name_end = self.parse_name(pos)?;
                let src = self.src;
                let ref_id = self.symbol_id(&src[pos..name_end]);
                pos = self.parse_space(name_end, nested);
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Element::new(ElemType::RuleRef, ref_id));
            } else if c == b'(' {
                pos = self.parse_space(pos + 1, true);
                let n_rules_before = self.symbol_ids.len() as u32;
                let sub_rule_id = self.generate_symbol_id(rule_name);
                pos = self.parse_alternates(pos, rule_name, sub_rule_id, true)?;
                n_prev_rules = u64::from((self.symbol_ids.len() as u32).wrapping_sub(n_rules_before).max(1));
                last_sym_start = rule.len();
                rule.push(Element::new(ElemType::RuleRef, sub_rule_id));
                if self.at(pos) != b')' {
                    return Err(format!("expecting ')' at {}", self.rest(pos)));
                }
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'.' {
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Element::new(ElemType::CharAny, 0));
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'*' || c == b'+' || c == b'?' {
                pos = self.parse_space(pos + 1, nested);
                let (min, max) = match c {
                    b'*' => (0, None),
                    b'+' => (1, None),
                    _ => (0, Some(1)),
                };
                let rep = Repetition {
                    min,
                    max,
                    last_sym_start,
                };
                self.handle_repetitions(rep, pos, rule_name, rule, &mut n_prev_rules)?;
            } else if c == b'{' {
                pos = self.parse_space(pos + 1, nested);
                if !is_digit(self.at(pos)) {
                    return Err(format!("expecting an int at {}", self.rest(pos)));
                }
                let int_end = self.parse_int(pos)?;
                let min = self.parse_u64(pos, int_end)?;
                pos = self.parse_space(int_end, nested);
                let mut max = None;
                if self.at(pos) == b'}' {
                    max = Some(min);
                    pos = self.parse_space(pos + 1, nested);
                } else if self.at(pos) == b',' {
                    pos = self.parse_space(pos + 1, nested);
                    if is_digit(self.at(pos)) {
                        let int_end = self.parse_int(pos)?;
                        max = Some(self.parse_u64(pos, int_end)?);
                        pos = self.parse_space(int_end, nested);
                    }
                    if self.at(pos) != b'}' {
                        return Err(format!("expecting '}}' at {}", self.rest(pos)));
                    }
                    pos = self.parse_space(pos + 1, nested);
                } else {
                    return Err(format!("expecting ',' at {}", self.rest(pos)));
                }
                if min > MAX_REPETITION_THRESHOLD {
                    return Err(
                        "number of repetitions exceeds sane defaults, please reduce the number of repetitions"
                            .to_string(),
                    );
                }
                // A maximum above the cap means "unbounded", as in llama.cpp.
                let max = max.filter(|&m| m <= MAX_REPETITION_THRESHOLD);
                if max.is_some_and(|m| m < min) {
                    return Err(format!("repetition maximum below its minimum at {}", self.rest(pos)));
                }
                let rep = Repetition {
                    min,
                    max,
                    last_sym_start,
                };
                self.handle_repetitions(rep, pos, rule_name, rule, &mut n_prev_rules)?;
            } else {
                break;
            }
        }
        Ok(pos)
    }

    /// Rewrite the last symbol S for S{min,max}: S repeated min times, then (max - min) nested optional
    /// rules S'(k) ::= S S'(k-1) | (or one recursive S' ::= S S' | when unbounded).
    fn handle_repetitions(
        &mut self,
        rep: Repetition,
        pos: usize,
        rule_name: &[u8],
        rule: &mut Vec<Element>,
        n_prev_rules: &mut u64,
    ) -> ParseResult<()> {
        let Repetition {
            min,
            max,
            last_sym_start,
        } = rep;
        if last_sym_start == rule.len() {
            return Err(format!("expecting preceding item to */+/?/{{ at {}", self.rest(pos)));
        }
        let prev_rule: Vec<Element> = rule[last_sym_start..].to_vec();
        let total_rules = match max {
            Some(m) if m > 0 => m,
            _ if min > 0 => min,
            _ => 1,
        };
        if n_prev_rules.saturating_mul(total_rules) > MAX_REPETITION_THRESHOLD {
            return Err(
                "number of rules that are going to be repeated multiplied by the new repetition exceeds \
                        sane defaults, please reduce the number of repetitions or rule complexity"
                    .to_string(),
            );
        }
        if min == 0 {
            rule.truncate(last_sym_start);
        } else {
            for _ in 1..min {
                rule.extend_from_slice(&prev_rule);
            }
        }
        let n_opt = max.map_or(1, |m| m - min);
        let mut last_rec_rule_id = 0;
        for i in 0..n_opt {
            let mut rec_rule = prev_rule.clone();
            let rec_rule_id = self.generate_symbol_id(rule_name);
            if i > 0 || max.is_none() {
                let target = if max.is_none() { rec_rule_id } else { last_rec_rule_id };
                rec_rule.push(Element::new(ElemType::RuleRef, target));
            }
            rec_rule.push(Element::new(ElemType::Alt, 0));
            rec_rule.push(Element::new(ElemType::End, 0));
            self.add_rule(rec_rule_id, rec_rule);
            last_rec_rule_id = rec_rule_id;
        }
        if n_opt > 0 {
            rule.push(Element::new(ElemType::RuleRef, last_rec_rule_id));
        }
        *n_prev_rules *= total_rules;
        Ok(())
    }

    /// Every rule defined, every reference to a defined rule.
    fn validate(&self) -> ParseResult<()> {
        for rule in &self.rules {
            if rule.is_empty() {
                return Err("Undefined rule".to_string());
            }
            for e in rule.iter().filter(|e| e.ty == ElemType::RuleRef) {
                let defined = self.rules.get(e.value as usize).is_some_and(|r| !r.is_empty());
                if !defined {
                    if let Some((name, _)) = self.symbol_ids.iter().find(|(_, &id)| id == e.value) {
                        return Err(format!("Undefined rule identifier '{}'", String::from_utf8_lossy(name)));
                    }
                }
            }
        }
        Ok(())
    }
}

struct Repetition {
    min: u64,
    /// None: unbounded.
    max: Option<u64>,
    last_sym_start: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElemType::*;

    fn el(ty: ElemType, v: u32) -> Element {
        Element::new(ty, v)
    }

    fn token_of(e: &Element) -> Option<crate::sampling::Token> {
        matches!(e.ty, Token | TokenNot).then_some(e.value as crate::sampling::Token)
    }

    #[test]
    fn simple_rules_and_ids() {
        let g = parse(b"root ::= \"ab\" | [a-c] x\nx ::= [^q]", None).unwrap();
        assert_eq!(g.symbol_ids[&b"root".to_vec()], 0);
        assert_eq!(g.symbol_ids[&b"x".to_vec()], 1);
        assert_eq!(
            g.rules[0],
            vec![
                el(Char, 97),
                el(Char, 98),
                el(Alt, 0),
                el(Char, 97),
                el(CharRngUpper, 99),
                el(RuleRef, 1),
                el(End, 0)
            ]
        );
        assert_eq!(g.rules[1], vec![el(CharNot, 113), el(End, 0)]);
    }

    #[test]
    fn repetitions_generate_rules_like_llama_cpp() {
        // a{2,3}: a a root_1 with root_1 ::= a | (llama.cpp's test-grammar-parser expectation).
        let g = parse(b"root ::= \"a\"{2,3}", None).unwrap();
        assert_eq!(g.rules[0], vec![el(Char, 97), el(Char, 97), el(RuleRef, 1), el(End, 0)]);
        assert_eq!(g.rules[1], vec![el(Char, 97), el(Alt, 0), el(End, 0)]);
        // a*: root_1 ::= a root_1 |
        let g = parse(b"root ::= \"a\"*", None).unwrap();
        assert_eq!(g.rules[0], vec![el(RuleRef, 1), el(End, 0)]);
        assert_eq!(g.rules[1], vec![el(Char, 97), el(RuleRef, 1), el(Alt, 0), el(End, 0)]);
        // a{0,2}: root_2 ::= a root_1 | ; root_1 ::= a |
        let g = parse(b"root ::= \"a\"{0,2}", None).unwrap();
        assert_eq!(g.rules[0], vec![el(RuleRef, 2), el(End, 0)]);
        assert_eq!(g.rules[2], vec![el(Char, 97), el(RuleRef, 1), el(Alt, 0), el(End, 0)]);
    }

    #[test]
    fn errors_carry_llama_cpp_messages() {
        let err = |s: &str| parse(s.as_bytes(), None).err().unwrap();
        assert_eq!(err("root ::= foo"), "Undefined rule identifier 'foo'");
        assert!(err("root ::= \"a").starts_with("unexpected end of input"));
        assert!(err("root = \"a\"").starts_with("expecting ::= at"));
        assert!(err("root ::= (\"a\"").starts_with("expecting ')' at"));
        assert!(err("root ::= \"\\q\"").starts_with("unknown escape at"));
        assert!(err("root ::= *").starts_with("expecting preceding item"));
        assert!(err("root ::= \"a\"{3,1}").starts_with("repetition maximum below"));
        assert!(err("root ::= <x>").starts_with("no vocab to parse token"));
        assert!(err("root ::= \"a\"{2001}").starts_with("number of repetitions exceeds"));
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(600), ")".repeat(600));
        assert!(err(&deep).contains("nested deeper"));
    }

    #[test]
    fn token_references() {
        let g = parse(b"root ::= <[42]> !<[7]>", None).unwrap();
        let toks: Vec<_> = g.rules[0].iter().filter_map(token_of).collect();
        assert_eq!(toks, vec![42, 7]);
        assert_eq!(g.rules[0][1].ty, TokenNot);
    }
}

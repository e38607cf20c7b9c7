//! The grammar's pushdown automaton, as llama.cpp runs it: a set of stacks of positions in the rules,
//! each stack's top a terminal (character range or token). Accepting a character or token advances
//! every stack that allows it; a candidate token is rejected when no stack can consume its text.

use super::{ElemType, Element};
use crate::sampling::Token;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A stack of positions (indices into the flattened rules), top last.
pub type Stack = Vec<u32>;

/// An incomplete UTF-8 sequence carried between tokens: the bits so far and how many bytes are
/// missing (-1: the bytes were invalid).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartialUtf8 {
    pub value: u32,
    pub n_remain: i32,
}

/// Code points of `src` (read as a C string: up to its first NUL), continuing `partial`. Invalid
/// bytes give no code points and `n_remain == -1`; an incomplete tail is returned as the new partial.
pub fn decode_utf8(src: &[u8], partial: PartialUtf8) -> (Vec<u32>, PartialUtf8) {
    const LOOKUP: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];
    let src = &src[..src.iter().position(|&b| b == 0).unwrap_or(src.len())];
    let mut cps = Vec::with_capacity(src.len());
    let mut pos = 0;
    let mut value = partial.value;
    let mut n_remain = partial.n_remain;
    while pos < src.len() && n_remain > 0 {
        let b = src[pos];
        if b >> 6 != 2 {
            return (Vec::new(), PartialUtf8 { value: 0, n_remain: -1 });
        }
        value = (value << 6) + u32::from(b & 0x3F);
        pos += 1;
        n_remain -= 1;
    }
    if partial.n_remain > 0 && n_remain == 0 {
        cps.push(value);
    }
    while pos < src.len() {
        let first = src[pos];
        n_remain = LOOKUP[usize::from(first >> 4)] - 1;
        if n_remain < 0 {
            return (Vec::new(), PartialUtf8 { value: 0, n_remain });
        }
        let mask = (1u32 << (7 - n_remain)) - 1;
        value = u32::from(first) & mask;
        pos += 1;
        while pos < src.len() && n_remain > 0 {
            value = (value << 6) + u32::from(src[pos] & 0x3F);
            pos += 1;
            n_remain -= 1;
        }
        if n_remain == 0 {
            cps.push(value);
        }
    }
    (cps, PartialUtf8 { value, n_remain })
}

/// A candidate token's text for the check: its code points and the partial sequence it ends with.
#[derive(Clone, Copy)]
pub struct Cand<'a> {
    pub cps: &'a [u32],
    pub partial: PartialUtf8,
    pub id: Token,
}

/// Rules flattened into one array; a position is an index into it. Every rule ends with `End`.
#[derive(Clone)]
pub struct Rules {
    elems: Arc<[Element]>,
    rule_start: Arc<[u32]>,
}

/// The state of a grammar: its rules (shared), the live stacks and the pending partial character.
#[derive(Clone)]
pub struct Grammar {
    rules: Rules,
    pub stacks: Vec<Stack>,
    pub partial: PartialUtf8,
}

fn is_end(e: Element) -> bool {
    matches!(e.ty, ElemType::End | ElemType::Alt)
}

impl Rules {
    fn new(rules: &[Vec<Element>]) -> Self {
        let mut elems = Vec::new();
        let mut rule_start = Vec::with_capacity(rules.len());
        for r in rules {
            rule_start.push(elems.len() as u32);
            elems.extend(r.iter().copied().take_while(|e| e.ty != ElemType::End));
            elems.push(Element::new(ElemType::End, 0));
        }
        Rules {
            elems: elems.into(),
            rule_start: rule_start.into(),
        }
    }

    fn at(&self, pos: u32) -> Element {
        self.elems
            .get(pos as usize)
            .copied()
            .unwrap_or(Element::new(ElemType::End, 0))
    }

    /// Whether `chr` satisfies the character range starting at `pos`, and the position after it.
    fn match_char(&self, mut pos: u32, chr: u32) -> (bool, u32) {
        let first = self.at(pos);
        let positive = matches!(first.ty, ElemType::Char | ElemType::CharAny);
        let mut found = false;
        loop {
            let e = self.at(pos);
            if self.at(pos + 1).ty == ElemType::CharRngUpper {
                found = found || (e.value <= chr && chr <= self.at(pos + 1).value);
                pos += 2;
            } else if e.ty == ElemType::CharAny {
                found = true;
                pos += 1;
            } else {
                found = found || e.value == chr;
                pos += 1;
            }
            if self.at(pos).ty != ElemType::CharAlt {
                break;
            }
        }
        (found == positive, pos)
    }

    /// Whether some completion of `partial` could satisfy the character range at `pos`.
    fn match_partial_char(&self, mut pos: u32, partial: PartialUtf8) -> bool {
        let positive = matches!(self.at(pos).ty, ElemType::Char | ElemType::CharAny);
        let (value, n_remain) = (partial.value, partial.n_remain);
        // Invalid, or a 7-bit character split over two bytes (overlong).
        if n_remain < 0 || (n_remain == 1 && value < 2) {
            return false;
        }
        let shift = (n_remain * 6) as u32;
        let mut low = value.checked_shl(shift).unwrap_or(0);
        let high = low | 1u32.checked_shl(shift).map_or(u32::MAX, |b| b.wrapping_sub(1));
        if low == 0 {
            if n_remain == 2 {
                low = 1 << 11;
            } else if n_remain == 3 {
                low = 1 << 16;
            }
        }
        loop {
            let e = self.at(pos);
            if self.at(pos + 1).ty == ElemType::CharRngUpper {
                if e.value <= high && low <= self.at(pos + 1).value {
                    return positive;
                }
                pos += 2;
            } else if e.ty == ElemType::CharAny {
                return true;
            } else {
                if low <= e.value && e.value <= high {
                    return positive;
                }
                pos += 1;
            }
            if self.at(pos).ty != ElemType::CharAlt {
                break;
            }
        }
        !positive
    }

    fn match_token(&self, pos: u32, token: Token) -> bool {
        let e = self.at(pos);
        match e.ty {
            ElemType::Token => e.value == token as u32,
            ElemType::TokenNot => e.value != token as u32,
            _ => false,
        }
    }

    /// Expand `stack` until every resulting stack's top is a terminal (or the stack is empty); add
    /// the results not already in `out`.
    fn advance_stack(&self, stack: Stack, out: &mut Vec<Stack>) {
        let mut todo = vec![stack];
        let mut seen: HashSet<Stack> = HashSet::new();
        while let Some(cur) = todo.pop() {
            if seen.contains(&cur) {
                continue;
            }
            seen.insert(cur.clone());
            let Some(&pos) = cur.last() else {
                if !out.contains(&cur) {
                    out.push(cur);
                }
                continue;
            };
            match self.at(pos).ty {
                ElemType::RuleRef => {
                    let rule = self.at(pos).value as usize;
                    let Some(&start) = self.rule_start.get(rule) else {
                        continue;
                    };
                    let mut sub = start;
                    loop {
                        let mut next: Stack = cur[..cur.len() - 1].to_vec();
                        if !is_end(self.at(pos + 1)) {
                            next.push(pos + 1);
                        }
                        if !is_end(self.at(sub)) {
                            next.push(sub);
                        }
                        todo.push(next);
                        while !is_end(self.at(sub)) {
                            sub += 1;
                        }
                        if self.at(sub).ty == ElemType::Alt {
                            sub += 1;
                        } else {
                            break;
                        }
                    }
                }
                ElemType::Char | ElemType::CharNot | ElemType::CharAny | ElemType::Token | ElemType::TokenNot
                    if !out.contains(&cur) =>
                {
                    out.push(cur);
                }
                // End/Alt/CharAlt/CharRngUpper never sit on top of a stack the parser built.
                _ => {}
            }
        }
    }

    /// The stacks after `chr` is consumed on `stack`, added to `out`.
    fn accept_chr(&self, stack: &Stack, chr: u32, out: &mut Vec<Stack>) {
        let Some(&pos) = stack.last() else { return };
        if matches!(self.at(pos).ty, ElemType::Token | ElemType::TokenNot) {
            return;
        }
        let (ok, after) = self.match_char(pos, chr);
        if ok {
            let mut next = stack[..stack.len() - 1].to_vec();
            if !is_end(self.at(after)) {
                next.push(after);
            }
            self.advance_stack(next, out);
        }
    }
}

/// Decides which candidate tokens a set of stacks allows. Stacks met on the way are interned once,
/// with the stacks they lead to after one character, so each candidate is a cheap depth-first walk
/// over its code points (stopping at the first stack that accepts it).
///
/// This is llama.cpp's rejection (a token is rejected when every stack rejects it; a stack accepts
/// it when it consumes its code points one by one, through the stacks each character leads to, and
/// ends where the token's text may end), evaluated per candidate instead of per stack and level.
pub struct Checker<'r> {
    rules: &'r Rules,
    ids: HashMap<Stack, u32>,
    states: Vec<State>,
}

/// What the check needs of an interned stack.
struct State {
    stack: Stack,
    top: Top,
    /// For a character range on top: which ASCII characters it accepts (the common case, by bit).
    ascii: [u64; 2],
    /// The stacks after a character was matched at the top (computed on first use).
    next: Option<Vec<u32>>,
}

#[derive(Clone, Copy)]
enum Top {
    Empty,
    Token(u32),
    Char(u32),
}

impl<'r> Checker<'r> {
    pub fn new(rules: &'r Rules) -> Self {
        Checker {
            rules,
            ids: HashMap::new(),
            states: Vec::new(),
        }
    }

    pub fn intern(&mut self, stack: &Stack) -> u32 {
        if let Some(&id) = self.ids.get(stack) {
            return id;
        }
        let top = match stack.last() {
            None => Top::Empty,
            Some(&pos) if matches!(self.rules.at(pos).ty, ElemType::Token | ElemType::TokenNot) => Top::Token(pos),
            Some(&pos) => Top::Char(pos),
        };
        let mut ascii = [0u64; 2];
        if let Top::Char(pos) = top {
            for cp in 0..128u32 {
                if self.rules.match_char(pos, cp).0 {
                    ascii[(cp >> 6) as usize] |= 1 << (cp & 63);
                }
            }
        }
        let id = self.states.len() as u32;
        self.ids.insert(stack.clone(), id);
        self.states.push(State {
            stack: stack.clone(),
            top,
            ascii,
            next: None,
        });
        id
    }

    fn next_states(&mut self, id: u32) -> usize {
        let i = id as usize;
        if self.states[i].next.is_none() {
            let stack = &self.states[i].stack;
            let mut after = Vec::new();
            if let Some(&pos) = stack.last() {
                let end = self.rules.match_char(pos, 0).1;
                let mut base = stack[..stack.len() - 1].to_vec();
                if !is_end(self.rules.at(end)) {
                    base.push(end);
                }
                self.rules.advance_stack(base, &mut after);
            }
            let ids = after.iter().map(|s| self.intern(s)).collect();
            self.states[i].next = Some(ids);
        }
        self.states[i].next.as_ref().map_or(0, Vec::len)
    }

    /// Whether the stack `id` accepts the candidate's code points from `at` on.
    pub fn accepts(&mut self, id: u32, c: &Cand<'_>, at: usize) -> bool {
        let done = at >= c.cps.len();
        let state = &self.states[id as usize];
        let pos = match state.top {
            // A finished grammar accepts only finished text.
            Top::Empty => return done && c.partial.n_remain == 0,
            Top::Token(pos) => {
                return if done {
                    c.partial.n_remain == 0
                } else {
                    self.rules.match_token(pos, c.id)
                };
            }
            Top::Char(pos) => pos,
        };
        if done {
            return c.partial.n_remain == 0 || self.rules.match_partial_char(pos, c.partial);
        }
        let cp = c.cps[at];
        let matched = if cp < 128 {
            state.ascii[(cp >> 6) as usize] & (1 << (cp & 63)) != 0
        } else {
            self.rules.match_char(pos, cp).0
        };
        if !matched {
            return false;
        }
        let n = self.next_states(id);
        (0..n).any(|k| {
            let next = self.states[id as usize].next.as_ref().map_or(0, |v| v[k]);
            self.accepts(next, c, at + 1)
        })
    }
}

impl Grammar {
    /// The automaton at the start of rule `root`. Fails on left recursion, which it cannot run.
    pub fn new(rules: &[Vec<Element>], root: usize) -> std::result::Result<Grammar, String> {
        if let Some(i) = find_left_recursion(rules) {
            return Err(format!(
                "unsupported grammar, left recursion detected for nonterminal at index {i}"
            ));
        }
        let rules = Rules::new(rules);
        let mut stacks = Vec::new();
        let mut pos = *rules.rule_start.get(root).ok_or_else(|| format!("no rule {root}"))?;
        loop {
            let mut stack = Stack::new();
            if !is_end(rules.at(pos)) {
                stack.push(pos);
            }
            rules.advance_stack(stack, &mut stacks);
            while !is_end(rules.at(pos)) {
                pos += 1;
            }
            if rules.at(pos).ty == ElemType::Alt {
                pos += 1;
            } else {
                break;
            }
        }
        Ok(Grammar {
            rules,
            stacks,
            partial: PartialUtf8::default(),
        })
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Whether the grammar may end here (some stack is empty).
    pub fn can_end(&self) -> bool {
        self.stacks.iter().any(|s| s.is_empty())
    }

    /// Advance over `token` whose text is `piece`. When nothing accepts it the state is left unchanged
    /// and the error says so (llama.cpp throws, leaving the grammar unusable).
    pub fn accept_token(&mut self, token: Token, piece: &[u8]) -> std::result::Result<(), String> {
        let (cps, partial) = decode_utf8(piece, self.partial);
        let mut stacks_new = Vec::with_capacity(self.stacks.len());
        for stack in &self.stacks {
            let Some(&pos) = stack.last() else { continue };
            if matches!(self.rules.at(pos).ty, ElemType::Token | ElemType::TokenNot) {
                if self.rules.match_token(pos, token) {
                    let mut next = stack[..stack.len() - 1].to_vec();
                    if !is_end(self.rules.at(pos + 1)) {
                        next.push(pos + 1);
                    }
                    self.rules.advance_stack(next, &mut stacks_new);
                }
                continue;
            }
            let mut current = vec![stack.clone()];
            for &chr in &cps {
                let mut next = Vec::new();
                for s in &current {
                    self.rules.accept_chr(s, chr, &mut next);
                }
                current = next;
                if current.is_empty() {
                    break;
                }
            }
            for s in current {
                if !stacks_new.contains(&s) {
                    stacks_new.push(s);
                }
            }
        }
        if stacks_new.is_empty() {
            return Err(format!(
                "Unexpected empty grammar stack after accepting piece: {} ({token})",
                String::from_utf8_lossy(piece)
            ));
        }
        self.stacks = stacks_new;
        self.partial = partial;
        Ok(())
    }
}

/// The first rule (in index order) from which a left-recursive path starts, if any. Depth-first over
/// the leftmost references (and those after possibly-empty ones), with an explicit stack.
fn find_left_recursion(rules: &[Vec<Element>]) -> Option<usize> {
    let n = rules.len();
    let mut visited = vec![false; n];
    let mut in_progress = vec![false; n];
    let mut may_be_empty = vec![false; n];
    let enter = |i: usize, in_progress: &mut Vec<bool>, may_be_empty: &mut Vec<bool>| {
        in_progress[i] = true;
        let mut at_start = true;
        for &e in &rules[i] {
            if is_end(e) {
                if at_start {
                    may_be_empty[i] = true;
                    break;
                }
                at_start = true;
            } else {
                at_start = false;
            }
        }
    };
    for root in 0..n {
        if visited[root] {
            continue;
        }
        // (rule, next element, whether references at this point are still leftmost)
        let mut frames: Vec<(usize, usize, bool)> = vec![(root, 0, true)];
        enter(root, &mut in_progress, &mut may_be_empty);
        while let Some(&mut (i, k, recurse)) = frames.last_mut() {
            let Some(&e) = rules[i].get(k) else {
                in_progress[i] = false;
                visited[i] = true;
                frames.pop();
                if let Some(parent) = frames.last_mut() {
                    parent.1 += 1;
                    parent.2 = parent.2 && may_be_empty[i];
                }
                continue;
            };
            let frame = frames.last_mut()?;
            if e.ty == ElemType::RuleRef && recurse {
                let child = e.value as usize;
                if child >= n || in_progress[child] {
                    return Some(root);
                }
                if visited[child] {
                    // Fully explored without a cycle: it cannot lead back here.
                    frame.1 += 1;
                    frame.2 = may_be_empty[child];
                } else {
                    enter(child, &mut in_progress, &mut may_be_empty);
                    frames.push((child, 0, true));
                }
            } else {
                frame.1 += 1;
                frame.2 = is_end(e);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::parser::parse;
    use super::*;

    fn grammar(src: &str) -> Grammar {
        let g = parse(src.as_bytes(), None).unwrap();
        Grammar::new(&g.rules, g.symbol_ids[&b"root".to_vec()] as usize).unwrap()
    }

    fn rejected(g: &Grammar, cands: &[Cand]) -> Vec<usize> {
        let mut checker = Checker::new(g.rules());
        let roots: Vec<u32> = g.stacks.iter().map(|s| checker.intern(s)).collect();
        (0..cands.len())
            .filter(|&i| !roots.iter().any(|&r| checker.accepts(r, &cands[i], 0)))
            .collect()
    }

    fn accepts(g: &Grammar, text: &str) -> bool {
        let mut g = g.clone();
        text.chars()
            .all(|c| g.accept_token(0, c.to_string().as_bytes()).is_ok())
            && g.can_end()
    }

    #[test]
    fn utf8_decoding_carries_partial_sequences() {
        let (cps, p) = decode_utf8("aé".as_bytes(), PartialUtf8::default());
        assert_eq!(cps, vec![97, 0xE9]);
        assert_eq!(p.n_remain, 0);
        let (cps, p) = decode_utf8(&[b'a', 0xE2, 0x82], PartialUtf8::default());
        assert_eq!(cps, vec![97]);
        assert_eq!(p.n_remain, 1);
        let (cps, p) = decode_utf8(&[0xAC], p);
        assert_eq!(cps, vec![0x20AC]);
        assert_eq!(p.n_remain, 0);
        let (cps, p) = decode_utf8(&[b'a', 0x80], PartialUtf8::default());
        assert!(cps.is_empty());
        assert_eq!(p.n_remain, -1);
        let (cps, _) = decode_utf8(b"ab\0c", PartialUtf8::default());
        assert_eq!(cps, vec![97, 98]);
    }

    #[test]
    fn arithmetic() {
        let g = grammar("root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= num | \"(\" expr \")\"\nnum ::= [0-9]+");
        assert!(accepts(&g, "1+2*(30-4)"));
        assert!(!accepts(&g, "1+"));
        assert!(!accepts(&g, "(1"));
        let mut bad = g.clone();
        assert!(bad.accept_token(0, b"x").is_err());
        assert_eq!(bad.stacks, g.stacks, "a rejected token leaves the state alone");
    }

    #[test]
    fn left_recursion_is_refused() {
        let g = parse(b"root ::= root \"a\" | \"b\"", None).unwrap();
        assert!(Grammar::new(&g.rules, 0).err().unwrap().contains("left recursion"));
        // Through a rule with an empty alternative; llama.cpp judges emptiness by syntax only, so an
        // `x ::= "a"?` (empty only through its generated sub-rule) would not count.
        let g = parse(b"root ::= x root\nx ::= \"a\" |", None).unwrap();
        assert!(Grammar::new(&g.rules, 0).is_err());
        let g = parse(b"root ::= x root | \"b\"\nx ::= \"a\"?", None).unwrap();
        assert!(Grammar::new(&g.rules, 0).is_ok());
        let g = parse(b"root ::= \"a\" root | \"b\"", None).unwrap();
        assert!(Grammar::new(&g.rules, 0).is_ok());
    }

    #[test]
    fn rejection_of_multi_char_candidates() {
        let g = grammar("root ::= \"ab\" [0-9]* | \"ac\"");
        let pieces: Vec<Vec<u32>> = ["a", "ab", "ab1", "abx", "ac", "b", "acd"]
            .iter()
            .map(|s| decode_utf8(s.as_bytes(), PartialUtf8::default()).0)
            .collect();
        let cands: Vec<Cand> = pieces
            .iter()
            .enumerate()
            .map(|(i, cps)| Cand {
                cps,
                partial: PartialUtf8::default(),
                id: i as Token,
            })
            .collect();
        assert_eq!(rejected(&g, &cands), vec![3, 5, 6]);
    }

    #[test]
    fn partial_characters_are_checked_against_ranges() {
        let g = grammar("root ::= [\\u0400-\\u04FF]");
        let (cps, partial) = decode_utf8(&[0xD0], PartialUtf8::default());
        let (cps2, partial2) = decode_utf8(&[0xE2], PartialUtf8::default());
        let cands = vec![
            Cand {
                cps: &cps,
                partial,
                id: 0,
            },
            Cand {
                cps: &cps2,
                partial: partial2,
                id: 1,
            },
        ];
        assert_eq!(rejected(&g, &cands), vec![1]);
    }

    #[test]
    fn token_elements_match_by_id() {
        let g = grammar("root ::= <[5]> \"x\" | !<[5]>");
        let x = decode_utf8(b"x", PartialUtf8::default()).0;
        let cands = vec![
            Cand {
                cps: &x,
                partial: PartialUtf8::default(),
                id: 5,
            },
            Cand {
                cps: &x,
                partial: PartialUtf8::default(),
                id: 6,
            },
        ];
        assert_eq!(rejected(&g, &cands), Vec::<usize>::new());
        let mut after = g.clone();
        after.accept_token(5, b"<five>").unwrap();
        assert_eq!(rejected(&after, &cands), Vec::<usize>::new(), "x allowed after token 5");
        let mut other = g.clone();
        other.accept_token(6, b"six").unwrap();
        assert!(other.can_end());
    }
}

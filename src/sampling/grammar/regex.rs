//! The regular expressions of lazy-grammar trigger patterns. llama.cpp uses `std::regex` (ECMAScript
//! syntax, backtracking, matching bytes); this is the subset those patterns use, matched with the same
//! leftmost, first-alternative-wins semantics:
//! literals and escapes (`\n \r \t \f \v \0 \xHH \uHHHH`, escaped punctuation), `.`, classes `[...]`
//! `[^...]` with ranges and `\d \D \w \W \s \S`, groups `(...)` and `(?:...)`, alternation `|`,
//! quantifiers `* + ? {n} {n,} {n,m}` and their lazy forms, anchors `^ $` and `\b \B`.
//! Backreferences and lookarounds are refused at compile time.
//!
//! Matching is a backtracking search that remembers which (instruction, position) pairs already
//! failed, so it runs in O(program × input) and cannot loop on empty repetitions.

type Result<T> = std::result::Result<T, String>;

/// Programs larger than this are refused (counted repetitions are expanded).
const MAX_PROGRAM: usize = 100_000;
/// Nesting deeper than this is refused (the parser recurses once per group).
const MAX_DEPTH: usize = 256;

#[derive(Clone, Copy, Debug)]
enum Inst {
    Byte(u8),
    Set(usize),
    /// Any byte but a line terminator.
    Any,
    /// Try `0` first, then `1`.
    Split(usize, usize),
    Jmp(usize),
    Save(usize),
    Start,
    End,
    WordBoundary(bool),
    Match,
}

#[derive(Clone, Debug)]
enum Node {
    Empty,
    Byte(u8),
    Set(Box<[bool; 256]>),
    Any,
    Start,
    End,
    WordBoundary(bool),
    Group(Box<Node>, Option<usize>),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: usize,
        max: Option<usize>,
        greedy: bool,
    },
}

#[derive(Clone, Debug)]
pub struct Regex {
    prog: Vec<Inst>,
    sets: Vec<[bool; 256]>,
    n_groups: usize,
}

/// A match: byte ranges of the whole match (0) and of each capturing group (None if it did not take part).
pub type Captures = Vec<Option<(usize, usize)>>;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    n_groups: usize,
    depth: usize,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn class_of(kind: u8) -> Option<Box<[bool; 256]>> {
    let test: fn(u8) -> bool = match kind.to_ascii_lowercase() {
        b'd' => |b| b.is_ascii_digit(),
        b'w' => is_word,
        b's' => |b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c),
        _ => return None,
    };
    let negate = kind.is_ascii_uppercase();
    let mut set = Box::new([false; 256]);
    for (b, slot) in set.iter_mut().enumerate() {
        *slot = test(b as u8) != negate;
    }
    Some(set)
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn err<T>(&self, msg: &str) -> Result<T> {
        Err(format!("{msg} at offset {} of the pattern", self.i))
    }

    fn disjunction(&mut self) -> Result<Node> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("pattern nested too deeply");
        }
        let mut alts = vec![self.alternative()?];
        while self.peek() == Some(b'|') {
            self.i += 1;
            alts.push(self.alternative()?);
        }
        self.depth -= 1;
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(alts)
        })
    }

    fn alternative(&mut self) -> Result<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == b'|' || c == b')' {
                break;
            }
            let atom = self.atom()?;
            let atom = self.quantified(atom)?;
            items.push(atom);
        }
        Ok(Node::Concat(items))
    }

    /// `{n}`, `{n,}` or `{n,m}` at the cursor, if one is there.
    fn braces(&mut self) -> Result<Option<(usize, Option<usize>)>> {
        let start = self.i;
        let number = |p: &mut Self| -> Option<usize> {
            let from = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            std::str::from_utf8(&p.s[from..p.i]).ok()?.parse().ok()
        };
        self.i += 1;
        let Some(min) = number(self) else {
            self.i = start;
            return Ok(None);
        };
        let max = if self.peek() == Some(b',') {
            self.i += 1;
            if self.peek() == Some(b'}') {
                None
            } else {
                match number(self) {
                    Some(m) => Some(m),
                    None => {
                        self.i = start;
                        return Ok(None);
                    }
                }
            }
        } else {
            Some(min)
        };
        if self.peek() != Some(b'}') {
            self.i = start;
            return Ok(None);
        }
        self.i += 1;
        if max.is_some_and(|m| m < min) {
            return self.err("repetition range out of order");
        }
        Ok(Some((min, max)))
    }

    fn quantified(&mut self, atom: Node) -> Result<Node> {
        let (min, max) = match self.peek() {
            Some(b'*') => {
                self.i += 1;
                (0, None)
            }
            Some(b'+') => {
                self.i += 1;
                (1, None)
            }
            Some(b'?') => {
                self.i += 1;
                (0, Some(1))
            }
            Some(b'{') => match self.braces()? {
                Some(r) => r,
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        if matches!(atom, Node::Start | Node::End | Node::WordBoundary(_)) {
            return self.err("nothing to repeat");
        }
        let greedy = if self.peek() == Some(b'?') {
            self.i += 1;
            false
        } else {
            true
        };
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    fn hex(&mut self, n: usize) -> Result<u32> {
        let digits = self
            .s
            .get(self.i..self.i + n)
            .ok_or_else(|| "truncated hex escape".to_string())?;
        let v = std::str::from_utf8(digits)
            .ok()
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| "invalid hex escape".to_string())?;
        self.i += n;
        Ok(v)
    }

    /// An escape after `\` that stands for one byte (or code point, for `\u`).
    fn char_escape(&mut self, c: u8) -> Result<u32> {
        Ok(match c {
            b'n' => u32::from(b'\n'),
            b'r' => u32::from(b'\r'),
            b't' => u32::from(b'\t'),
            b'f' => 0x0c,
            b'v' => 0x0b,
            b'0' => 0,
            b'x' => self.hex(2)?,
            b'u' => self.hex(4)?,
            b'1'..=b'9' => return self.err("backreferences are not supported"),
            c if c.is_ascii_alphanumeric() => return self.err("unknown escape"),
            c => u32::from(c),
        })
    }

    fn atom(&mut self) -> Result<Node> {
        let Some(c) = self.peek() else {
            return Ok(Node::Empty);
        };
        self.i += 1;
        Ok(match c {
            b'.' => Node::Any,
            b'^' => Node::Start,
            b'$' => Node::End,
            b'(' => {
                let index = if self.s[self.i..].starts_with(b"?:") {
                    self.i += 2;
                    None
                } else if self.peek() == Some(b'?') {
                    return self.err("lookarounds and named groups are not supported");
                } else {
                    self.n_groups += 1;
                    Some(self.n_groups)
                };
                let inner = self.disjunction()?;
                if self.peek() != Some(b')') {
                    return self.err("missing ')'");
                }
                self.i += 1;
                Node::Group(Box::new(inner), index)
            }
            b')' => return self.err("unmatched ')'"),
            b'*' | b'+' | b'?' => return self.err("nothing to repeat"),
            b'[' => self.class()?,
            b'\\' => {
                let Some(e) = self.peek() else {
                    return self.err("trailing backslash");
                };
                self.i += 1;
                match (e, class_of(e)) {
                    (b'b', _) => Node::WordBoundary(true),
                    (b'B', _) => Node::WordBoundary(false),
                    (_, Some(set)) => Node::Set(set),
                    _ => literal(self.char_escape(e)?),
                }
            }
            c => Node::Byte(c),
        })
    }

    fn class(&mut self) -> Result<Node> {
        let mut set = Box::new([false; 256]);
        let negate = self.peek() == Some(b'^');
        if negate {
            self.i += 1;
        }
        loop {
            let Some(c) = self.peek() else {
                return self.err("missing ']'");
            };
            self.i += 1;
            if c == b']' {
                break;
            }
            let lo = if c == b'\\' {
                let Some(e) = self.peek() else {
                    return self.err("trailing backslash");
                };
                self.i += 1;
                if let Some(s) = class_of(e) {
                    for (slot, &v) in set.iter_mut().zip(s.iter()) {
                        *slot |= v;
                    }
                    continue;
                }
                if e == b'b' {
                    0x08
                } else {
                    self.char_escape(e)?
                }
            } else {
                u32::from(c)
            };
            let mut hi = lo;
            if self.peek() == Some(b'-') && self.s.get(self.i + 1).is_some_and(|&n| n != b']') {
                self.i += 1;
                let Some(h) = self.peek() else {
                    return self.err("missing ']'");
                };
                self.i += 1;
                hi = if h == b'\\' {
                    let Some(e) = self.peek() else {
                        return self.err("trailing backslash");
                    };
                    self.i += 1;
                    self.char_escape(e)?
                } else {
                    u32::from(h)
                };
                if hi < lo {
                    return self.err("class range out of order");
                }
            }
            if hi > 0xFF {
                return self.err("class members above \\xFF are not supported");
            }
            for b in lo..=hi {
                set[b as usize] = true;
            }
        }
        if negate {
            for slot in set.iter_mut() {
                *slot = !*slot;
            }
        }
        Ok(Node::Set(set))
    }
}

/// A code point as the bytes that spell it (UTF-8 above 0x7F).
fn literal(cp: u32) -> Node {
    if cp < 0x80 {
        return Node::Byte(cp as u8);
    }
    let s = char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER).to_string();
    Node::Concat(s.bytes().map(Node::Byte).collect())
}

struct Compiler {
    prog: Vec<Inst>,
    sets: Vec<[bool; 256]>,
}

impl Compiler {
    fn push(&mut self, i: Inst) -> Result<usize> {
        if self.prog.len() >= MAX_PROGRAM {
            return Err("pattern too large".to_string());
        }
        self.prog.push(i);
        Ok(self.prog.len() - 1)
    }

    fn patch(&mut self, at: usize, first: usize, second: usize) {
        self.prog[at] = Inst::Split(first, second);
    }

    /// A split preferring the body (greedy) or what follows (lazy).
    fn split(&mut self, at: usize, body: usize, out: usize, greedy: bool) {
        if greedy {
            self.patch(at, body, out);
        } else {
            self.patch(at, out, body);
        }
    }

    fn emit(&mut self, n: &Node) -> Result<()> {
        match n {
            Node::Empty => {}
            Node::Byte(b) => {
                self.push(Inst::Byte(*b))?;
            }
            Node::Set(s) => {
                self.sets.push(**s);
                self.push(Inst::Set(self.sets.len() - 1))?;
            }
            Node::Any => {
                self.push(Inst::Any)?;
            }
            Node::Start => {
                self.push(Inst::Start)?;
            }
            Node::End => {
                self.push(Inst::End)?;
            }
            Node::WordBoundary(b) => {
                self.push(Inst::WordBoundary(*b))?;
            }
            Node::Group(inner, index) => {
                if let Some(g) = index {
                    self.push(Inst::Save(2 * g))?;
                }
                self.emit(inner)?;
                if let Some(g) = index {
                    self.push(Inst::Save(2 * g + 1))?;
                }
            }
            Node::Concat(items) => {
                for it in items {
                    self.emit(it)?;
                }
            }
            Node::Alt(alts) => {
                let mut jumps = Vec::new();
                for (k, alt) in alts.iter().enumerate() {
                    if k + 1 < alts.len() {
                        let split = self.push(Inst::Split(0, 0))?;
                        self.emit(alt)?;
                        jumps.push(self.push(Inst::Jmp(0))?);
                        let next = self.prog.len();
                        self.patch(split, split + 1, next);
                    } else {
                        self.emit(alt)?;
                    }
                }
                let end = self.prog.len();
                for j in jumps {
                    self.prog[j] = Inst::Jmp(end);
                }
            }
            Node::Repeat { node, min, max, greedy } => {
                for _ in 0..*min {
                    self.emit(node)?;
                }
                match max {
                    None => {
                        let split = self.push(Inst::Split(0, 0))?;
                        self.emit(node)?;
                        self.push(Inst::Jmp(split))?;
                        let out = self.prog.len();
                        self.split(split, split + 1, out, *greedy);
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(self.push(Inst::Split(0, 0))?);
                            self.emit(node)?;
                        }
                        let out = self.prog.len();
                        for s in splits {
                            self.split(s, s + 1, out, *greedy);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

enum Job {
    Step(usize, usize),
    Restore(usize, Option<usize>),
}

impl Regex {
    pub fn new(pattern: &[u8]) -> Result<Regex> {
        let mut p = Parser {
            s: pattern,
            i: 0,
            n_groups: 0,
            depth: 0,
        };
        let ast = p.disjunction()?;
        if p.i != pattern.len() {
            return p.err("unmatched ')'");
        }
        let mut c = Compiler {
            prog: Vec::new(),
            sets: Vec::new(),
        };
        c.push(Inst::Save(0))?;
        c.emit(&ast)?;
        c.push(Inst::Save(1))?;
        c.push(Inst::Match)?;
        Ok(Regex {
            prog: c.prog,
            sets: c.sets,
            n_groups: p.n_groups,
        })
    }

    /// `std::regex_search`: the leftmost match, alternatives tried in order.
    pub fn search(&self, input: &[u8]) -> Option<Captures> {
        let mut visited = vec![0u64; (self.prog.len() * (input.len() + 1)).div_ceil(64)];
        (0..=input.len()).find_map(|start| self.run(input, start, false, &mut visited))
    }

    /// `std::regex_match`: the whole input must match.
    pub fn full_match(&self, input: &[u8]) -> Option<Captures> {
        let mut visited = vec![0u64; (self.prog.len() * (input.len() + 1)).div_ceil(64)];
        self.run(input, 0, true, &mut visited)
    }

    fn run(&self, input: &[u8], start: usize, whole: bool, visited: &mut [u64]) -> Option<Captures> {
        let mut slots: Vec<Option<usize>> = vec![None; 2 * (self.n_groups + 1)];
        let mut jobs = vec![Job::Step(0, start)];
        let width = input.len() + 1;
        while let Some(job) = jobs.pop() {
            let (mut pc, mut pos) = match job {
                Job::Restore(slot, v) => {
                    slots[slot] = v;
                    continue;
                }
                Job::Step(pc, pos) => (pc, pos),
            };
            loop {
                let key = pc * width + pos;
                if visited[key / 64] & (1 << (key % 64)) != 0 {
                    break;
                }
                visited[key / 64] |= 1 << (key % 64);
                match self.prog[pc] {
                    Inst::Byte(b) => {
                        if input.get(pos) != Some(&b) {
                            break;
                        }
                        pc += 1;
                        pos += 1;
                    }
                    Inst::Set(s) => {
                        if !input.get(pos).is_some_and(|&b| self.sets[s][b as usize]) {
                            break;
                        }
                        pc += 1;
                        pos += 1;
                    }
                    Inst::Any => {
                        if !input.get(pos).is_some_and(|&b| b != b'\n' && b != b'\r') {
                            break;
                        }
                        pc += 1;
                        pos += 1;
                    }
                    Inst::Split(a, b) => {
                        jobs.push(Job::Step(b, pos));
                        pc = a;
                    }
                    Inst::Jmp(a) => pc = a,
                    Inst::Save(slot) => {
                        jobs.push(Job::Restore(slot, slots[slot]));
                        slots[slot] = Some(pos);
                        pc += 1;
                    }
                    Inst::Start => {
                        if pos != 0 {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::End => {
                        if pos != input.len() {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::WordBoundary(want) => {
                        let before = pos > 0 && is_word(input[pos - 1]);
                        let after = input.get(pos).is_some_and(|&b| is_word(b));
                        if (before != after) != want {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::Match => {
                        if whole && pos != input.len() {
                            break;
                        }
                        return Some(
                            (0..=self.n_groups)
                                .map(|g| match (slots[2 * g], slots[2 * g + 1]) {
                                    (Some(a), Some(b)) => Some((a, b)),
                                    _ => None,
                                })
                                .collect(),
                        );
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(p: &str, s: &str) -> Option<Captures> {
        Regex::new(p.as_bytes()).unwrap().search(s.as_bytes())
    }

    #[test]
    fn literals_classes_and_quantifiers() {
        assert_eq!(search("b+c", "aabbbcd").unwrap()[0], Some((2, 6)));
        assert_eq!(search("[0-9]{2,3}", "a12345").unwrap()[0], Some((1, 4)));
        assert_eq!(search("\\d+?", "x42").unwrap()[0], Some((1, 2)));
        assert_eq!(search("a|ab", "ab").unwrap()[0], Some((0, 1)));
        assert_eq!(search("[^a-c\\s]", "ab c!").unwrap()[0], Some((4, 5)));
        assert!(search("^b", "ab").is_none());
        assert_eq!(search("b$", "abb").unwrap()[0], Some((2, 3)));
        assert_eq!(search("\\bfoo\\b", "a foo.").unwrap()[0], Some((2, 5)));
        assert!(search("x{2}", "x").is_none());
    }

    #[test]
    fn groups_capture_like_ecmascript() {
        let c = search("[\\s\\S]*?(<tool_call>)[\\s\\S]*", "text <tool_call>{\"a\":1}").unwrap();
        assert_eq!(c[1], Some((5, 16)));
        assert_eq!(c[0], Some((0, 23)));
        let c = search("(a)|(b)", "b").unwrap();
        assert_eq!((c[1], c[2]), (None, Some((0, 1))));
        let c = search("(?:x(y))+", "xyxy").unwrap();
        assert_eq!(c[1], Some((3, 4)));
    }

    #[test]
    fn full_match_backtracks_to_the_end() {
        let r = Regex::new(b"^(a|ab)(c|bcd)$").unwrap();
        let c = r.full_match(b"abcd").unwrap();
        assert_eq!((c[1], c[2]), (Some((0, 1)), Some((1, 4))));
        assert!(r.full_match(b"abcde").is_none());
    }

    #[test]
    fn empty_loops_terminate_and_unsupported_syntax_is_refused() {
        assert!(search("(a*)*b", "aaaa").is_none());
        assert!(Regex::new(b"(a)\\1").is_err());
        assert!(Regex::new(b"(?=a)").is_err());
        assert!(Regex::new(b"(a").is_err());
        assert!(Regex::new(b"a)").is_err());
        assert!(Regex::new(b"*a").is_err());
        assert!(Regex::new(b"a{99999999}").is_err());
    }
}

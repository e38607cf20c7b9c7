//! BPE pre-tokenizers: how llama.cpp splits text into words before merging, one family per
//! `tokenizer.ggml.pre` group.
//!
//! llama.cpp runs a list of regexes, each splitting the pieces the previous one produced (a match and
//! the text between matches each become a piece). A few regexes have hand-written versions in
//! llama.cpp; the others go through `std::regex`, on a copy of the text where each non-ASCII code point
//! is replaced by one byte standing for its category, so `\p{L}` can only see ASCII letters and
//! "some other letter". Every regex here is written out by hand with the matching semantics of
//! whichever path llama.cpp takes for it (ECMAScript: leftmost match, first alternative that succeeds).

use super::unicode::{self, Class, LETTER, NUMBER, PUNCTUATION};

/// The pre-tokenizer families implemented (llama.cpp's `LLAMA_VOCAB_PRE_TYPE_*` groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PreTokenizer {
    Default,
    Llama3,
    Qwen2,
    Qwen35,
    DeepseekLlm,
    DeepseekCoder,
    Falcon,
    Starcoder,
    Gpt2,
    Gpt4o,
    Tekken,
    /// Gemma 4: runs of newlines and runs of anything else (spaces were escaped before).
    Gemma4,
}

/// The text of one fragment, decoded into code points.
pub(super) struct Cpts {
    cpt: Vec<u32>,
    class: Vec<Class>,
}

impl Cpts {
    pub(super) fn new(text: &[u8]) -> Cpts {
        let mut cpts = Cpts {
            cpt: Vec::with_capacity(text.len()),
            class: Vec::with_capacity(text.len()),
        };
        unicode::decode(text, |c, _| {
            cpts.cpt.push(c);
            cpts.class.push(unicode::class(c));
        });
        cpts
    }

    fn len(&self) -> usize {
        self.cpt.len()
    }

    /// Bytes of the code points `range` in canonical UTF-8 ([`unicode::encode`]).
    pub(super) fn byte_len(&self, range: std::ops::Range<usize>) -> usize {
        self.cpt[range]
            .iter()
            .map(|&c| match c {
                0..=0x7f => 1,
                0x80..=0x7ff => 2,
                0x800..=0xffff => 3,
                _ => 4,
            })
            .sum()
    }

    /// `\s` of both regex paths: ASCII whitespace, and llama.cpp's other whitespace (which it rewrites
    /// to a vertical tab before matching).
    fn re_space(&self, i: usize) -> bool {
        match self.cpt[i] {
            0x09..=0x0d | 0x20 => true,
            c => c >= 0x80 && self.class[i].is_whitespace(),
        }
    }

    /// Whether the category-collapsed text has category `cat` (or an ASCII member of it) at `i`.
    fn re_category(&self, i: usize, cat: u8, ascii: fn(u8) -> bool) -> bool {
        match u8::try_from(self.cpt[i]) {
            Ok(b) if b < 0x80 => ascii(b),
            _ => !self.class[i].is_whitespace() && self.class[i].category() == cat,
        }
    }

    /// `\p{L}` in the collapsed text.
    fn re_letter(&self, i: usize) -> bool {
        self.re_category(i, LETTER, |b| b.is_ascii_alphabetic())
    }

    /// `\p{N}` in the collapsed text.
    fn re_number(&self, i: usize) -> bool {
        self.re_category(i, NUMBER, |b| b.is_ascii_digit())
    }

    /// `\p{P}` in the collapsed text: ASCII punctuation except `$+<=>^`|~`, which are symbols.
    fn re_punct(&self, i: usize) -> bool {
        self.re_category(i, PUNCTUATION, |b| {
            b.is_ascii_punctuation() && !b"$+<=>^`|~".contains(&b)
        })
    }

    /// The value `std::wregex` sees: the code point, non-ASCII whitespace as a vertical tab.
    fn wide(&self, i: usize) -> u32 {
        if self.cpt[i] >= 0x80 && self.class[i].is_whitespace() {
            0x0b
        } else {
            self.cpt[i]
        }
    }
}

impl PreTokenizer {
    /// Splits the text into words: pushes the end of each, as a code point index.
    pub(super) fn split(self, cpts: &Cpts, ends: &mut Vec<usize>) {
        ends.clear();
        ends.push(cpts.len());
        let mut refined = Vec::new();
        let passes: &[Pass] = match self {
            PreTokenizer::Default => &[
                Pass::Regex(punct_default),
                Pass::Gpt2,
                Pass::Regex(number_run),
                Pass::Regex(ascii_digit_triple),
            ],
            PreTokenizer::Llama3 => &[Pass::Llama3 {
                digits: 3,
                marks: false,
            }],
            PreTokenizer::Qwen2 => &[Pass::Llama3 {
                digits: 1,
                marks: false,
            }],
            PreTokenizer::Qwen35 => &[Pass::Llama3 { digits: 1, marks: true }],
            PreTokenizer::DeepseekLlm => &[
                Pass::Regex(newline),
                Pass::Regex(deepseek_latin),
                Pass::Regex(deepseek_punct),
                Pass::TrailingSpace,
                Pass::Regex(cjk),
                Pass::Regex(number_run),
            ],
            PreTokenizer::DeepseekCoder => &[
                Pass::Regex(newline),
                Pass::Regex(space_letters),
                Pass::Regex(space_punct),
                Pass::Regex(cjk),
                Pass::Regex(number_one),
            ],
            PreTokenizer::Falcon => &[Pass::Regex(punct_falcon), Pass::Gpt2, Pass::Regex(ascii_digit_triple)],
            PreTokenizer::Starcoder => &[Pass::Regex(number_one), Pass::Gpt2],
            PreTokenizer::Gpt2 => &[Pass::Gpt2],
            PreTokenizer::Gpt4o => &[Pass::Regex(gpt4o)],
            PreTokenizer::Tekken => &[Pass::Regex(tekken)],
            PreTokenizer::Gemma4 => &[Pass::Regex(newline_or_not_run)],
        };
        for pass in passes {
            refined.clear();
            let mut start = 0;
            for &end in ends.iter() {
                pass.run(cpts, start, end, &mut refined);
                start = end;
            }
            std::mem::swap(ends, &mut refined);
        }
    }
}

/// A regex at a position: the end of the match starting at `p` in the piece ending at `end`.
type Matcher = fn(&Cpts, usize, usize) -> Option<usize>;

enum Pass {
    /// llama.cpp's hand-written GPT-2 regex.
    Gpt2,
    /// llama.cpp's hand-written Llama 3 regex and its Qwen2 (one digit) and Qwen3.5 (marks join
    /// letters) variants.
    Llama3 { digits: usize, marks: bool },
    /// A regex that llama.cpp runs through `std::regex`.
    Regex(Matcher),
    /// DeepSeek LLM's `\s+$`: the whitespace that ends a piece. Trying it at every position, as a
    /// regex search does, is quadratic in a long run of spaces that does not reach the end.
    TrailingSpace,
}

impl Pass {
    /// Splits the piece `[a, b)` (code point indices); pushes the end of each resulting piece.
    fn run(&self, t: &Cpts, a: usize, b: usize, ends: &mut Vec<usize>) {
        match *self {
            Pass::Gpt2 => gpt2(t, a, b, ends),
            Pass::Llama3 { digits, marks } => llama3(t, a, b, digits, marks, ends),
            Pass::Regex(m) => regex_split(t, a, b, m, ends),
            Pass::TrailingSpace => {
                let start = (a..b).rev().take_while(|&i| t.re_space(i)).last().unwrap_or(b);
                if start > a && start < b {
                    ends.push(start);
                }
                ends.push(b);
            }
        }
    }
}

/// `std::regex_iterator` over the piece: each match is a piece, and so is the text between matches.
fn regex_split(t: &Cpts, a: usize, b: usize, m: Matcher, ends: &mut Vec<usize>) {
    let (mut done, mut p) = (a, a);
    while p < b {
        match m(t, p, b) {
            Some(e) => {
                if p > done {
                    ends.push(p);
                }
                ends.push(e);
                done = e;
                p = e;
            }
            None => p += 1,
        }
    }
    if done < b {
        ends.push(b);
    }
}

/// End of the run of code points from `p` (before `b`) that satisfy `f`.
fn run_end(t: &Cpts, p: usize, b: usize, f: impl Fn(&Cpts, usize) -> bool) -> usize {
    let mut e = p;
    while e < b && f(t, e) {
        e += 1;
    }
    e
}

/// `X+`: a non-empty run.
fn run(t: &Cpts, p: usize, b: usize, f: impl Fn(&Cpts, usize) -> bool) -> Option<usize> {
    Some(run_end(t, p, b, f)).filter(|&e| e > p)
}

/// `\s?X+`: the optional whitespace is taken only when a run follows it.
fn space_then_run(t: &Cpts, p: usize, b: usize, f: impl Fn(&Cpts, usize) -> bool) -> Option<usize> {
    if t.re_space(p) && p + 1 < b && f(t, p + 1) {
        return run(t, p + 1, b, f);
    }
    run(t, p, b, f)
}

fn in_ranges(c: u32, ranges: &[(u32, u32)]) -> bool {
    ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

/// `[\p{P}\$\+<=>\^~\|]+`
fn punct_default(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    run(t, p, b, |t, i| {
        t.re_punct(i) || matches!(t.cpt[i], 0x24 | 0x2b | 0x3c..=0x3e | 0x5e | 0x7c | 0x7e)
    })
}

/// `[\p{P}\$\+<=>\^~\|`]+`: every ASCII punctuation character, and other punctuation.
fn punct_falcon(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    run(t, p, b, |t, i| {
        t.re_punct(i) || u8::try_from(t.cpt[i]).is_ok_and(|c| c.is_ascii_punctuation())
    })
}

/// `\p{N}+`
fn number_run(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    run(t, p, b, Cpts::re_number)
}

/// `\p{N}`
fn number_one(t: &Cpts, p: usize, _b: usize) -> Option<usize> {
    t.re_number(p).then_some(p + 1)
}

/// `[0-9][0-9][0-9]`
fn ascii_digit_triple(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    let digit = |i: usize| i < b && matches!(t.wide(i), 0x30..=0x39);
    (digit(p) && digit(p + 1) && digit(p + 2)).then_some(p + 3)
}

/// `[\r\n]`
fn newline(t: &Cpts, p: usize, _b: usize) -> Option<usize> {
    matches!(t.cpt[p], 0x0a | 0x0d).then_some(p + 1)
}

/// Gemma 4's `[^\n]+|[\n]+`.
fn newline_or_not_run(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    let is_nl = t.cpt[p] == 0x0a;
    run(t, p, b, |t, i| (t.cpt[i] == 0x0a) == is_nl)
}

/// DeepSeek LLM's `\s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+`: letters of cased scripts, as code point ranges.
fn deepseek_latin(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    const RANGES: [(u32, u32); 87] = [
        (0x41, 0x5a),
        (0x61, 0x7a),
        (0xb5, 0xb5),
        (0xc0, 0xd6),
        (0xd8, 0xf6),
        (0xf8, 0x1ba),
        (0x1bc, 0x1bf),
        (0x1c4, 0x293),
        (0x295, 0x2af),
        (0x370, 0x373),
        (0x376, 0x376),
        (0x377, 0x377),
        (0x37b, 0x37d),
        (0x37f, 0x37f),
        (0x386, 0x386),
        (0x388, 0x38a),
        (0x38c, 0x38c),
        (0x38e, 0x3a1),
        (0x3a3, 0x3f5),
        (0x3f7, 0x481),
        (0x48a, 0x52f),
        (0x531, 0x556),
        (0x10a0, 0x10c5),
        (0x13a0, 0x13f5),
        (0x13f8, 0x13fd),
        (0x1c90, 0x1cba),
        (0x1cbd, 0x1cbf),
        (0x1d00, 0x1d2b),
        (0x1d6b, 0x1d77),
        (0x1d79, 0x1d9a),
        (0x1e00, 0x1f15),
        (0x1f18, 0x1f1d),
        (0x1f20, 0x1f45),
        (0x1f48, 0x1f4d),
        (0x1f50, 0x1f57),
        (0x1f59, 0x1f59),
        (0x1f5b, 0x1f5b),
        (0x1f5d, 0x1f5d),
        (0x1f5f, 0x1f7d),
        (0x1f80, 0x1fb4),
        (0x1fb6, 0x1fbc),
        (0x1fbe, 0x1fbe),
        (0x1fc2, 0x1fc4),
        (0x1fc6, 0x1fcc),
        (0x1fd0, 0x1fd3),
        (0x1fd6, 0x1fdb),
        (0x1fe0, 0x1fec),
        (0x1ff2, 0x1ff4),
        (0x1ff6, 0x1ffc),
        (0x2102, 0x2102),
        (0x2107, 0x2107),
        (0x210a, 0x2113),
        (0x2115, 0x2115),
        (0x2119, 0x211d),
        (0x2124, 0x2124),
        (0x2126, 0x2126),
        (0x2128, 0x2128),
        (0x212a, 0x212d),
        (0x212f, 0x2134),
        (0x2139, 0x2139),
        (0x213c, 0x213f),
        (0x2145, 0x2149),
        (0x214e, 0x214e),
        (0x2183, 0x2183),
        (0x2184, 0x2184),
        (0x2c00, 0x2c7b),
        (0x2c7e, 0x2ce4),
        (0x2ceb, 0x2cee),
        (0x2cf2, 0x2cf2),
        (0x2cf3, 0x2cf3),
        (0xa640, 0xa66d),
        (0xa680, 0xa69b),
        (0xa722, 0xa76f),
        (0xa771, 0xa787),
        (0xa78b, 0xa78e),
        (0xab70, 0xabbf),
        (0xfb00, 0xfb06),
        (0xfb13, 0xfb17),
        (0xff21, 0xff3a),
        (0xff41, 0xff5a),
        (0x10400, 0x1044f),
        (0x104b0, 0x104d3),
        (0x104d8, 0x104fb),
        (0x10c80, 0x10cb2),
        (0x10cc0, 0x10cf2),
        (0x118a0, 0x118df),
        (0x1e900, 0x1e943),
    ];
    space_then_run(t, p, b, |t, i| in_ranges(t.wide(i), &RANGES))
}

/// DeepSeek LLM's `\s?[!-/:-~！-／：-～‘-‟　-。]+`
fn deepseek_punct(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    const RANGES: [(u32, u32); 6] = [
        (0x21, 0x2f),
        (0x3a, 0x7e),
        (0xff01, 0xff0f),
        (0xff1a, 0xff5e),
        (0x2018, 0x201f),
        (0x3000, 0x3002),
    ];
    space_then_run(t, p, b, |t, i| in_ranges(t.wide(i), &RANGES))
}

/// DeepSeek's `[一-龥ࠀ-一가-퟿]+`
fn cjk(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    const RANGES: [(u32, u32); 3] = [(0x4e00, 0x9fa5), (0x800, 0x4e00), (0xac00, 0xd7ff)];
    run(t, p, b, |t, i| in_ranges(t.wide(i), &RANGES))
}

/// `\s?\p{L}+`
fn space_letters(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    space_then_run(t, p, b, Cpts::re_letter)
}

/// `\s?\p{P}+`
fn space_punct(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    space_then_run(t, p, b, Cpts::re_punct)
}

/// GPT-4o's regex:
/// `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'s|'t|'re|'ve|'m|'ll|'d)?|`
/// `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'s|...)?|\p{N}{1,3}|`
/// ` ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+` (contractions in either case).
fn gpt4o(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    cased_split(t, p, b, 3, true)
}

/// Tekken's regex: GPT-4o's without the contractions, digits one at a time.
fn tekken(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    cased_split(t, p, b, 1, false)
}

fn cased_split(t: &Cpts, p: usize, b: usize, digits: usize, contractions: bool) -> Option<usize> {
    let cpt = |i: usize| if i < b { t.cpt[i] } else { u32::MAX };
    // Collapsed, every non-ASCII letter is one byte that is neither a-z nor A-Z, so it counts as
    // both "not lowercase" (upper) and "not uppercase" (lower).
    let upper = |i: usize| i < b && t.re_letter(i) && !(0x61..=0x7a).contains(&t.cpt[i]);
    let lower = |i: usize| i < b && t.re_letter(i) && !(0x41..=0x5a).contains(&t.cpt[i]);

    // Letters, after an optional `[^\r\n\p{L}\p{N}]`. Without the prefix character nothing could
    // match, as it is not a letter, so only the path that takes it matters.
    let prefixed = !matches!(cpt(p), 0x0a | 0x0d) && !t.re_letter(p) && !t.re_number(p);
    let s = if prefixed { p + 1 } else { p };
    let j = (s..).find(|&i| !upper(i)).unwrap_or(b);
    let word_end = if lower(j) {
        // upper* lower+: the greedy upper run, then the lower run.
        Some((j..).find(|&i| !lower(i)).unwrap_or(b))
    } else if let Some(m) = (s..j).rev().find(|&i| lower(i)) {
        // upper* gives back code points until lower+ can take one: the last non-ASCII letter.
        Some(m + 1)
    } else {
        // upper+ lower*: the run of capitals.
        (j > s).then_some(j)
    };
    if let Some(e) = word_end {
        return Some(if contractions { contraction_end(t, e, b) } else { e });
    }

    if t.re_number(p) {
        return Some(run_end(t, p, b.min(p + digits), Cpts::re_number));
    }

    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let other = |i: usize| i < b && !t.re_space(i) && !t.re_letter(i) && !t.re_number(i);
    let o = if cpt(p) == 0x20 && other(p + 1) { p + 1 } else { p };
    if other(o) {
        let e = (o..).find(|&i| !other(i)).unwrap_or(b);
        return Some(run_end(t, e, b, |t, i| matches!(t.cpt[i], 0x0a | 0x0d | 0x2f)));
    }

    whitespace_alternatives(t, p, b)
}

/// `\s*[\r\n]+|\s+(?!\S)|\s+` at `p`.
fn whitespace_alternatives(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    let e = run(t, p, b, Cpts::re_space)?;
    if let Some(last) = (p..e).rev().find(|&i| matches!(t.cpt[i], 0x0a | 0x0d)) {
        return Some(last + 1);
    }
    // `\s+(?!\S)` gives back the last space unless the run ends the piece.
    Some(if e < b && e - p > 1 { e - 1 } else { e })
}

/// `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?` after `e`.
fn contraction_end(t: &Cpts, e: usize, b: usize) -> usize {
    contraction_len(t, e, b).map_or(e, |n| e + n)
}

/// Length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case) at `p`.
/// llama.cpp lower-cases with its Unicode table, which maps no non-ASCII code point to these
/// letters, so ASCII case folding is the same.
fn contraction_len(t: &Cpts, p: usize, b: usize) -> Option<usize> {
    let lower = |i: usize| {
        (i < b)
            .then(|| t.cpt[i])
            .and_then(|c| u8::try_from(c).ok())
            .map(|c| c.to_ascii_lowercase())
    };
    if lower(p)? != b'\'' {
        return None;
    }
    match lower(p + 1)? {
        b's' | b't' | b'm' | b'd' => Some(2),
        c1 => matches!((c1, lower(p + 2)?), (b'r', b'e') | (b'v', b'e') | (b'l', b'l')).then_some(3),
    }
}

/// llama.cpp's hand-written GPT-2 regex `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
/// (with `|\s+`), on its own Unicode classes. Contractions are lowercase only.
fn gpt2(t: &Cpts, a: usize, b: usize, ends: &mut Vec<usize>) {
    let class = |i: usize| (i < b).then(|| t.class[i]);
    let is = |c: Option<Class>, f: fn(Class) -> bool| c.is_some_and(f);
    let other = |c: Option<Class>| c.is_some_and(|c| !c.is_whitespace() && !c.is_letter() && !c.is_number());
    let mut pos = a;
    while pos < b {
        let cpt = t.cpt[pos];
        if cpt == u32::from(b'\'') && pos + 1 < b {
            let n1 = t.cpt[pos + 1];
            if [b's', b't', b'm', b'd'].iter().any(|&c| n1 == u32::from(c)) {
                pos += 2;
                ends.push(pos);
                continue;
            }
            if pos + 2 < b {
                let n2 = t.cpt[pos + 2];
                let pair = |x: u8, y: u8| n1 == u32::from(x) && n2 == u32::from(y);
                if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                    pos += 3;
                    ends.push(pos);
                    continue;
                }
            }
        }
        let space = cpt == 0x20;
        let next = if space { class(pos + 1) } else { class(pos) };
        let kind: Option<fn(Option<Class>) -> bool> = if is(next, Class::is_letter) {
            Some(|c| c.is_some_and(Class::is_letter))
        } else if is(next, Class::is_number) {
            Some(|c| c.is_some_and(Class::is_number))
        } else if other(next) {
            Some(|c| c.is_some_and(|c| !c.is_whitespace() && !c.is_letter() && !c.is_number()))
        } else {
            None
        };
        if let Some(same) = kind {
            pos += usize::from(space);
            while same(class(pos)) {
                pos += 1;
            }
            ends.push(pos);
            continue;
        }
        let n = (pos..b).take_while(|&i| t.class[i].is_whitespace()).count();
        pos += match n {
            0 => 1,
            n if n > 1 && pos + n < b => n - 1,
            n => n,
        };
        ends.push(pos);
    }
}

/// llama.cpp's hand-written Llama 3 regex
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
/// with `digits` numbers per word (Qwen2: 1) and, for Qwen3.5, marks counted with letters.
fn llama3(t: &Cpts, a: usize, b: usize, digits: usize, marks: bool, ends: &mut Vec<usize>) {
    let class = |i: usize| (i < b).then(|| t.class[i]);
    let wordy = |i: usize| class(i).is_some_and(|c| c.is_letter() || (marks && c.is_mark()));
    let number = |i: usize| class(i).is_some_and(Class::is_number);
    let other = |c: Option<Class>| {
        c.is_some_and(|c| !(c.is_whitespace() || c.is_letter() || c.is_number() || (marks && c.is_mark())))
    };
    let mut pos = a;
    while pos < b {
        let cpt = t.cpt[pos];
        if let Some(n) = contraction_len(t, pos, b) {
            pos += n;
            ends.push(pos);
            continue;
        }
        let newline = cpt == 0x0a || cpt == 0x0d;
        if !newline && !number(pos) && (wordy(pos) || wordy(pos + 1)) {
            pos += 1;
            while wordy(pos) {
                pos += 1;
            }
            ends.push(pos);
            continue;
        }
        if number(pos) {
            let mut ini = pos;
            while number(pos) {
                pos += 1;
                if pos - ini >= digits {
                    ends.push(pos);
                    ini = pos;
                }
            }
            if ini < pos {
                ends.push(pos);
            }
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`; llama.cpp tests the code point itself for being in the piece,
        // so a lone trailing space is taken here.
        let space = cpt == 0x20;
        if other(if space { class(pos + 1) } else { class(pos) }) || (space && pos + 1 == b) {
            pos += usize::from(space);
            while other(class(pos)) {
                pos += 1;
            }
            while pos < b && matches!(t.cpt[pos], 0x0a | 0x0d) {
                pos += 1;
            }
            ends.push(pos);
            continue;
        }
        let n = (pos..b).take_while(|&i| t.class[i].is_whitespace()).count();
        let last_newline = (pos..pos + n).rev().find(|&i| matches!(t.cpt[i], 0x0a | 0x0d));
        pos = match (last_newline, n) {
            (Some(i), _) => i + 1,
            (None, 0) => pos + 1,
            (None, n) if n > 1 && pos + n < b => pos + n - 1,
            (None, n) => pos + n,
        };
        ends.push(pos);
    }
}

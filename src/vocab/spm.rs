//! SentencePiece-style merging (llama.cpp's `llama` vocab type): starting from single UTF-8
//! characters, repeatedly join the adjacent pair whose joined text is the token with the highest
//! score; pieces that end up not being tokens fall back to byte tokens.

use super::spans::{is_live, join, Span};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A queued join; the highest score, then the leftmost, goes first.
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    size: u32,
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Pair {}
impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        // As llama.cpp's comparator: scores compared with `<` (so -0.0 == 0.0), ties to the leftmost.
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

/// Length of the UTF-8 sequence a lead byte announces, as llama.cpp counts it (a stray continuation
/// byte counts as one).
fn utf8_len(lead: u8) -> usize {
    match lead >> 4 {
        0xc | 0xd => 2,
        0xe => 3,
        0xf => 4,
        _ => 1,
    }
}

/// Splits `text` into tokens. `token` finds the token of a text and gives its score; `bytes` appends
/// the byte tokens of a piece that is not a token (failing when the vocabulary lacks one).
pub(super) fn tokenize<E>(
    text: &[u8],
    token: impl Fn(&[u8]) -> Option<(u32, f32)>,
    mut bytes: impl FnMut(&[u8], &mut Vec<i32>) -> Result<(), E>,
    out: &mut Vec<i32>,
) -> Result<(), E> {
    // One span per UTF-8 character (a truncated one at the end keeps its bytes).
    let char_len = |at: usize| utf8_len(text[at]).min(text.len() - at);
    let mut n_chars = 0;
    let mut at = 0;
    while at < text.len() {
        at += char_len(at);
        n_chars += 1;
    }
    let mut syms = Vec::with_capacity(n_chars);
    at = 0;
    while at < text.len() {
        let len = char_len(at);
        syms.push(Span::linked(syms.len(), n_chars, at, len));
        at += len;
    }

    let mut heap = BinaryHeap::new();
    let push = |syms: &[Span], heap: &mut BinaryHeap<Pair>, l: usize, r: usize| {
        let size = syms[l].len + syms[r].len;
        let start = syms[l].start as usize;
        if let Some((_, score)) = token(&text[start..start + size as usize]) {
            heap.push(Pair {
                score,
                left: l,
                right: r,
                size,
            });
        }
    };
    for i in 1..syms.len() {
        push(&syms, &mut heap, i - 1, i);
    }
    while let Some(Pair { left, right, size, .. }) = heap.pop() {
        if !is_live(&syms, left, right, size) {
            continue;
        }
        let (prev, next) = join(&mut syms, left, right);
        if let Some(p) = prev {
            push(&syms, &mut heap, p, left);
        }
        if let Some(n) = next {
            push(&syms, &mut heap, left, n);
        }
    }

    let mut i = if syms.is_empty() { -1 } else { 0 };
    while i >= 0 {
        let s = syms[i as usize];
        let piece = &text[s.start as usize..(s.start + s.len) as usize];
        match token(piece) {
            Some((id, _)) => out.push(id as i32),
            None => bytes(piece, out)?,
        }
        i = s.next;
    }
    Ok(())
}

//! SentencePiece-style merging (llama.cpp's `llama` vocab type): starting from single UTF-8
//! characters, repeatedly join the adjacent pair whose joined text is the token with the highest
//! score; pieces that end up not being tokens fall back to byte tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

/// A queued join; the highest score, then the leftmost, goes first.
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
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
    let mut syms = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let len = utf8_len(text[at]).min(text.len() - at);
        let i = syms.len() as isize;
        syms.push(Symbol {
            start: at,
            len,
            prev: i - 1,
            next: if at + len == text.len() { -1 } else { i + 1 },
        });
        at += len;
    }

    let mut heap = BinaryHeap::new();
    let push = |syms: &[Symbol], heap: &mut BinaryHeap<Pair>, l: usize, r: usize| {
        let size = syms[l].len + syms[r].len;
        if let Some((_, score)) = token(&text[syms[l].start..syms[l].start + size]) {
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
        let (ll, rl) = (syms[left].len, syms[right].len);
        if ll == 0 || rl == 0 || ll + rl != size {
            continue;
        }
        syms[left].len += rl;
        syms[right].len = 0;
        syms[left].next = syms[right].next;
        let after = syms[right].next;
        if after >= 0 {
            syms[after as usize].prev = left as isize;
        }
        if syms[left].prev >= 0 {
            push(&syms, &mut heap, syms[left].prev as usize, left);
        }
        if syms[left].next >= 0 {
            push(&syms, &mut heap, left, syms[left].next as usize);
        }
    }

    let mut i = if syms.is_empty() { -1 } else { 0 };
    while i >= 0 {
        let s = syms[i as usize];
        let piece = &text[s.start..s.start + s.len];
        match token(piece) {
            Some((id, _)) => out.push(id as i32),
            None => bytes(piece, out)?,
        }
        i = s.next;
    }
    Ok(())
}

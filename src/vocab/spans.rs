//! The doubly linked list of text spans both merging tokenizers (BPE, SentencePiece) work on:
//! adjacent spans are joined pair by pair, and queued pairs go stale when a side changes.

/// A span of the text and its live neighbours (indices into the list; -1 at either end).
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub start: u32,
    pub len: u32,
    pub prev: i32,
    pub next: i32,
}

impl Span {
    /// Span `i` of `n`, starting at byte `start`, linked to its neighbours.
    pub fn linked(i: usize, n: usize, start: usize, len: usize) -> Span {
        Span {
            start: start as u32,
            len: len as u32,
            prev: i as i32 - 1,
            next: if i + 1 == n { -1 } else { i as i32 + 1 },
        }
    }
}

/// An element of a span list (a span alone, or with what a tokenizer keeps beside it).
pub(super) trait Linked {
    fn span(&self) -> &Span;
    fn span_mut(&mut self) -> &mut Span;
}

impl Linked for Span {
    fn span(&self) -> &Span {
        self
    }

    fn span_mut(&mut self) -> &mut Span {
        self
    }
}

/// Whether a pair queued as (`l`, `r`, combined length `size`) still joins two live spans: neither
/// side was joined away or grew since it was queued.
pub(super) fn is_live<T: Linked>(list: &[T], l: usize, r: usize, size: u32) -> bool {
    let (a, b) = (list[l].span().len, list[r].span().len);
    a != 0 && b != 0 && a + b == size
}

/// Let `l` take in its right neighbour `r`; returns `l`'s neighbours afterwards, the pairs to queue
/// anew.
pub(super) fn join<T: Linked>(list: &mut [T], l: usize, r: usize) -> (Option<usize>, Option<usize>) {
    let right = *list[r].span();
    list[r].span_mut().len = 0;
    let left = list[l].span_mut();
    left.len += right.len;
    left.next = right.next;
    let prev = left.prev;
    if right.next >= 0 {
        list[right.next as usize].span_mut().prev = l as i32;
    }
    let index = |i: i32| usize::try_from(i).ok();
    (index(prev), index(right.next))
}

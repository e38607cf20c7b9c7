//! The bookkeeping of the KV cache: for each cell, the position it holds and the sequences it
//! belongs to. Pure data, no tensors: the attention mask and the cache writes are derived from it.

use crate::model::hparams::Swa;

/// Up to 256 sequence ids (llama.h's `llama_max_parallel_sequences`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SeqSet([u64; 4]);

pub const MAX_SEQ: usize = 256;

impl SeqSet {
    pub fn single(s: usize) -> SeqSet {
        let mut set = SeqSet::default();
        set.insert(s);
        set
    }

    pub fn insert(&mut self, s: usize) {
        if let Some(w) = self.0.get_mut(s / 64) {
            *w |= 1 << (s % 64);
        }
    }

    pub fn remove(&mut self, s: usize) {
        if let Some(w) = self.0.get_mut(s / 64) {
            *w &= !(1 << (s % 64));
        }
    }

    pub fn contains(&self, s: usize) -> bool {
        self.0.get(s / 64).is_some_and(|w| w & (1 << (s % 64)) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    pub fn intersects(&self, other: &SeqSet) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| w * 64 + b)
        })
    }
}

/// A snapshot taken before placing a ubatch, to put the cells back if the step fails.
pub struct Undo {
    slots: Vec<usize>,
    used: usize,
    head: usize,
    /// All the cells, when placing emptied cells that were in use (rare: a sliding window's).
    before: Option<Box<Cells>>,
}

impl Undo {
    /// The cells the placement took.
    pub fn slots(&self) -> &[usize] {
        &self.slots
    }

    /// The cells as they were, when the placement emptied cells in use (the one case `give_back`
    /// does not undo whole).
    pub fn cells_before(&self) -> Option<&Cells> {
        self.before.as_deref()
    }
}

/// What llama.cpp keeps of a cell besides its position, for models rotating by several positions
/// per token (M-RoPE): the 2D position and the token (saved states carry them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellExt {
    pub x: i32,
    pub y: i32,
    pub tok: i32,
}

impl CellExt {
    /// Whether this cell comes after `other` in an image's grid (row, then column).
    pub fn is_2d_after(&self, other: CellExt) -> bool {
        self.y > other.y || (self.y == other.y && self.x > other.x)
    }
}

impl Default for CellExt {
    fn default() -> Self {
        CellExt { x: 0, y: 0, tok: -1 }
    }
}

#[derive(Debug, Clone)]
pub struct Cells {
    /// Position per cell; `EMPTY` when the cell holds nothing.
    pos: Vec<i32>,
    seqs: Vec<SeqSet>,
    ext: Vec<CellExt>,
    /// Pending position change per cell since its K was written (applied by a K-shift).
    shift: Vec<i32>,
    has_shift: bool,
    used: usize,
    /// Where the next search for free cells starts (llama.cpp's `head`): just after the last
    /// placed cell, or moved back to the first cell a removal freed. Which cells a token gets
    /// decides the order attention sums in, so it follows llama.cpp exactly.
    head: usize,
}

const EMPTY: i32 = -1;

/// Resolve llama.h's range convention: p0 < 0 means 0, p1 < 0 means infinity.
fn range(p0: i32, p1: i32) -> (i32, i32) {
    (p0.max(0), if p1 < 0 { i32::MAX } else { p1 })
}

impl Cells {
    pub fn new(n: usize) -> Cells {
        Cells {
            pos: vec![EMPTY; n],
            seqs: vec![SeqSet::default(); n],
            ext: vec![CellExt::default(); n],
            shift: vec![0; n],
            has_shift: false,
            used: 0,
            head: 0,
        }
    }

    pub fn size(&self) -> usize {
        self.pos.len()
    }

    pub fn used(&self) -> usize {
        self.used
    }

    pub fn ext(&self, i: usize) -> CellExt {
        self.ext.get(i).copied().unwrap_or_default()
    }

    pub fn pos(&self, i: usize) -> Option<i32> {
        self.pos.get(i).copied().filter(|&p| p != EMPTY)
    }

    pub fn seqs(&self, i: usize) -> SeqSet {
        self.seqs.get(i).copied().unwrap_or_default()
    }

    /// One past the highest occupied cell (the part of the cache attention must look at).
    pub fn used_max_p1(&self) -> usize {
        self.pos.iter().rposition(|&p| p != EMPTY).map_or(0, |i| i + 1)
    }

    fn free(&mut self, i: usize) {
        if self.pos[i] != EMPTY {
            self.pos[i] = EMPTY;
            self.seqs[i] = SeqSet::default();
            self.shift[i] = 0;
            self.used -= 1;
        }
    }

    /// After freeing cells starting at `first_freed`, searches start there if it is earlier.
    fn head_back_to(&mut self, first_freed: Option<usize>) {
        if let Some(i) = first_freed.filter(|&i| i < self.head) {
            self.head = i;
        }
    }

    /// Cells currently holding `seq`.
    pub fn n_cells_of(&self, seq: usize) -> usize {
        self.seqs.iter().filter(|s| s.contains(seq)).count()
    }

    /// Cells for `n` tokens, searched as llama.cpp searches: from the head (or from the start when
    /// enough cells before the head are free), wrapping around once. A cell is free when empty or,
    /// with a sliding `window`, when it holds one sequence whose window has passed it (its next
    /// token would not see it). None when they do not fit.
    pub fn find_slots(&self, n: usize, window: Option<Swa>) -> Option<Vec<usize>> {
        let size = self.size();
        if n > size || (window.is_none() && size - self.used < n) {
            return None;
        }
        // Per sequence, one past its highest position: looked up only for the occupied cells the
        // search meets (usually none: the cells after the head are free).
        let mut next: Vec<(usize, i32)> = Vec::new();
        let mut usable = |i: usize| {
            let p = self.pos[i];
            if p == EMPTY {
                return true;
            }
            let Some(w) = window else { return false };
            let mut seqs = self.seqs[i].iter();
            let (Some(s), None) = (seqs.next(), seqs.next()) else {
                return false;
            };
            let p1 = match next.iter().find(|e| e.0 == s) {
                Some(&(_, p1)) => p1,
                None => {
                    let p1 = self.seq_pos_max(s).map_or(0, |m| m + 1);
                    next.push((s, p1));
                    p1
                }
            };
            w.hides(p1, p)
        };
        let mut at = if self.head > self.used + 2 * n { 0 } else { self.head };
        let mut found = Vec::with_capacity(n);
        let mut tested = 0;
        while found.len() < n && tested < size {
            if at >= size {
                at = 0;
            }
            if usable(at) {
                found.push(at);
            }
            at += 1;
            tested += 1;
        }
        (found.len() == n).then_some(found)
    }

    /// Occupy `slots` with the given positions, sequence sets and extras; returns what undoes it.
    /// A slot still holding a cell its window has passed is emptied first, and so is everything
    /// of that sequence up to the position it held, as llama.cpp does: a sequence's cells stay
    /// one run of positions.
    pub fn place(&mut self, slots: &[usize], pos: &[i32], seqs: &[SeqSet], ext: &[CellExt]) -> Undo {
        let reused = slots.iter().any(|&c| self.pos[c] != EMPTY);
        let undo = Undo {
            slots: slots.to_vec(),
            used: self.used,
            head: self.head,
            before: reused.then(|| Box::new(self.clone())),
        };
        let mut passed: Vec<(usize, i32)> = Vec::new();
        for (((&c, &p), s), e) in slots.iter().zip(pos).zip(seqs).zip(ext) {
            if let Some(old) = self.pos(c) {
                passed.extend(self.seqs[c].iter().map(|q| (q, old)));
                self.free(c);
            }
            self.pos[c] = p;
            self.seqs[c] = *s;
            self.ext[c] = *e;
            self.shift[c] = 0;
            self.used += 1;
        }
        passed.sort_unstable();
        for (i, &(seq, old)) in passed.iter().enumerate() {
            let last_of_seq = passed.get(i + 1).is_none_or(|&(q, _)| q != seq);
            if last_of_seq && self.seq_pos_min(seq).is_some_and(|p0| p0 <= old) {
                self.seq_rm(Some(seq), -1, old + 1);
            }
        }
        if let Some(&last) = slots.last() {
            self.head = last + 1;
        }
        undo
    }

    /// Give `place`'s cells back their old contents and the head its old place, as llama.cpp's
    /// `prepare` does after trying a ubatch: what the placing let go of elsewhere stays gone.
    pub fn give_back(&mut self, undo: Undo) {
        let old = |c: usize| match &undo.before {
            Some(b) => (b.pos[c], b.seqs[c], b.ext[c], b.shift[c]),
            None => (EMPTY, SeqSet::default(), CellExt::default(), 0),
        };
        for &c in &undo.slots {
            let (pos, seqs, ext, shift) = old(c);
            match (self.pos[c] == EMPTY, pos == EMPTY) {
                (true, false) => self.used += 1,
                (false, true) => self.used -= 1,
                _ => {}
            }
            (self.pos[c], self.seqs[c], self.ext[c], self.shift[c]) = (pos, seqs, ext, shift);
        }
        self.head = undo.head;
    }

    /// Put the cells back as they were before `place`.
    pub fn rollback(&mut self, undo: Undo) {
        match undo.before {
            Some(before) => *self = *before,
            None => self.vacate(&undo),
        }
    }

    /// Empty the cells of a placement into free cells again, and put the count and the head back.
    pub fn vacate(&mut self, undo: &Undo) {
        for &c in &undo.slots {
            self.pos[c] = EMPTY;
            self.seqs[c] = SeqSet::default();
            self.ext[c] = CellExt::default();
            self.shift[c] = 0;
        }
        self.used = undo.used;
        self.head = undo.head;
    }

    pub fn clear(&mut self) {
        let n = self.size();
        *self = Cells::new(n);
    }

    /// Empty the cells and fill them from the first one with `pos` and `seqs` (a whole-state
    /// restore); searches start from the beginning again, as in llama.cpp.
    pub fn restore(&mut self, pos: &[i32], seqs: &[SeqSet], ext: &[CellExt]) -> Vec<usize> {
        self.clear();
        let slots: Vec<usize> = (0..pos.len().min(self.size())).collect();
        self.place(&slots, pos, seqs, ext);
        self.head = 0;
        slots
    }

    /// Remove `seq` (any sequence when `seq` is None) from cells with positions in [p0, p1).
    pub fn seq_rm(&mut self, seq: Option<usize>, p0: i32, p1: i32) {
        let (p0, p1) = range(p0, p1);
        let mut first_freed = None;
        for i in 0..self.size() {
            let p = self.pos[i];
            if p == EMPTY || p < p0 || p >= p1 {
                continue;
            }
            match seq {
                None => self.free(i),
                Some(s) if self.seqs[i].contains(s) => {
                    self.seqs[i].remove(s);
                    if !self.seqs[i].is_empty() {
                        continue;
                    }
                    self.free(i);
                }
                Some(_) => continue,
            }
            first_freed.get_or_insert(i);
        }
        self.head_back_to(first_freed);
    }

    /// Add `dst` to every cell of `src` with a position in [p0, p1).
    pub fn seq_cp(&mut self, src: usize, dst: usize, p0: i32, p1: i32) {
        let (p0, p1) = range(p0, p1);
        for i in 0..self.size() {
            let p = self.pos[i];
            if p != EMPTY && p >= p0 && p < p1 && self.seqs[i].contains(src) {
                self.seqs[i].insert(dst);
            }
        }
    }

    /// Drop every cell that does not belong to `seq`, and every other sequence from the rest.
    pub fn seq_keep(&mut self, seq: usize) {
        let mut first_freed = None;
        for i in 0..self.size() {
            if self.pos[i] == EMPTY {
                continue;
            }
            if self.seqs[i].contains(seq) {
                self.seqs[i] = SeqSet::single(seq);
            } else {
                self.free(i);
                first_freed.get_or_insert(i);
            }
        }
        self.head_back_to(first_freed);
    }

    /// Make these cells a copy of `src`'s cells of sequence `from`, now holding sequence `to`
    /// (with their pending shifts): a sequence copied to another stream.
    pub fn copy_sequence(&mut self, src: &Cells, from: usize, to: usize) {
        *self = Cells::new(self.size());
        for i in 0..self.size().min(src.size()) {
            if src.pos[i] != EMPTY && src.seqs[i].contains(from) {
                self.pos[i] = src.pos[i];
                self.seqs[i] = SeqSet::single(to);
                self.ext[i] = src.ext[i];
                self.shift[i] = src.shift[i];
                self.has_shift |= src.shift[i] != 0;
                self.used += 1;
            }
        }
        self.head = src.head;
    }

    /// Move the positions of `seq`'s cells in [p0, p1) by `delta`; cells pushed below 0 are freed.
    /// As in llama.cpp, a cell shared with other sequences moves for them too.
    pub fn seq_add(&mut self, seq: usize, p0: i32, p1: i32, delta: i32) {
        let (p0, p1) = range(p0, p1);
        if delta == 0 || p0 == p1 {
            return;
        }
        let mut first_freed = None;
        for i in 0..self.size() {
            let p = self.pos[i];
            if p == EMPTY || p < p0 || p >= p1 || !self.seqs[i].contains(seq) {
                continue;
            }
            let np = p.saturating_add(delta);
            if np < 0 {
                self.free(i);
                first_freed.get_or_insert(i);
            } else {
                self.pos[i] = np;
                self.shift[i] = self.shift[i].saturating_add(np - p);
                self.has_shift = true;
            }
        }
        // As llama.cpp: the next search starts at the first freed cell, or at the beginning.
        self.head = first_freed.unwrap_or(0);
    }

    /// Divide the positions of `seq`'s cells in [p0, p1) by `d` (d > 1).
    pub fn seq_div(&mut self, seq: usize, p0: i32, p1: i32, d: i32) {
        let (p0, p1) = range(p0, p1);
        if d <= 1 || p0 == p1 {
            return;
        }
        for i in 0..self.size() {
            let p = self.pos[i];
            if p == EMPTY || p < p0 || p >= p1 || !self.seqs[i].contains(seq) {
                continue;
            }
            let np = p / d;
            self.pos[i] = np;
            // llama.cpp 0.3.36 (llama_kv_cells::pos_div) records old - new here, the opposite
            // sign of what a position add records, and the K-shift rotates by it: kept, so the
            // keys (and every logit after a division) are llama.cpp's.
            self.shift[i] = self.shift[i].saturating_add(p - np);
            self.has_shift = true;
        }
    }

    pub fn seq_pos_min(&self, seq: usize) -> Option<i32> {
        (0..self.size())
            .filter(|&i| self.pos[i] != EMPTY && self.seqs[i].contains(seq))
            .map(|i| self.pos[i])
            .min()
    }

    pub fn seq_pos_max(&self, seq: usize) -> Option<i32> {
        (0..self.size())
            .filter(|&i| self.pos[i] != EMPTY && self.seqs[i].contains(seq))
            .map(|i| self.pos[i])
            .max()
    }

    /// Pending K-shift per cell, if positions moved since the keys were computed.
    pub fn pending_shift(&self) -> Option<&[i32]> {
        self.has_shift.then_some(&self.shift[..])
    }

    pub fn shift_applied(&mut self) {
        self.shift.iter_mut().for_each(|s| *s = 0);
        self.has_shift = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(c: &mut Cells, seq: usize, positions: std::ops::Range<i32>) {
        let n = positions.len();
        let slots = c.find_slots(n, None).expect("room");
        let pos: Vec<i32> = positions.collect();
        c.place(
            &slots,
            &pos,
            &vec![SeqSet::single(seq); n],
            &vec![CellExt::default(); n],
        );
    }

    #[test]
    fn slots_are_found_lowest_first_and_rollback_restores_everything() {
        let mut c = Cells::new(8);
        fill(&mut c, 0, 0..3);
        c.seq_rm(Some(0), 1, 2);
        assert_eq!(c.find_slots(2, None), Some(vec![1, 3]));
        let before = (c.pos.clone(), c.seqs.clone(), c.used);
        let undo = c.place(&[1, 3], &[7, 8], &[SeqSet::single(1); 2], &[CellExt::default(); 2]);
        assert_eq!(c.used(), 4);
        c.rollback(undo);
        assert_eq!((c.pos.clone(), c.seqs.clone(), c.used), before);
        assert_eq!(c.find_slots(7, None), None);
    }

    /// Cells are searched from the head, as llama.cpp searches them, not lowest first: the cells a
    /// token gets decide the order attention sums in.
    #[test]
    fn slots_are_searched_from_the_head_and_wrap_around() {
        let mut c = Cells::new(8);
        fill(&mut c, 0, 0..4);
        fill(&mut c, 1, 0..4);
        assert_eq!(c.head, 8);
        c.seq_rm(Some(0), 0, 2);
        assert_eq!(c.head, 0, "removal moves the head back to the first freed cell");
        // Shifting positions below zero frees cells 4 and 5 and puts the head on the first.
        c.seq_add(1, 0, 2, -5);
        assert_eq!((c.used(), c.head), (4, 4));
        assert_eq!(c.find_slots(3, None), Some(vec![4, 5, 0]));
        let undo = c.place(
            &[4, 5, 0],
            &[9, 10, 11],
            &[SeqSet::single(2); 3],
            &[CellExt::default(); 3],
        );
        assert_eq!(c.head, 1);
        c.rollback(undo);
        assert_eq!(c.head, 4);
        // A shift that frees nothing restarts the search from the beginning.
        c.seq_add(1, -1, -1, 1);
        assert_eq!(c.head, 0);
    }

    /// With a sliding window, a full cache takes again the cells the window has passed (a cell of
    /// one sequence whose next token would not see it), and the sequence lets go of everything up
    /// to the position it held there; `rollback` puts it all back, `give_back` only the cells.
    #[test]
    fn cells_a_window_has_passed_are_taken_again() {
        let w = Some(Swa::Window(3));
        let mut c = Cells::new(6);
        fill(&mut c, 0, 0..4);
        fill(&mut c, 1, 0..2);
        assert_eq!(c.find_slots(1, None), None, "full");
        // Sequence 0's next token is at 4: it no longer sees positions 0 and 1.
        let slots = c.find_slots(2, w).expect("passed cells");
        assert_eq!(slots, [0, 1]);
        let snapshot = c.clone();
        let undo = c.place(&slots, &[0, 1], &[SeqSet::single(1); 2], &[CellExt::default(); 2]);
        assert_eq!((c.used(), c.head), (6, 2));
        assert_eq!(c.seq_pos_min(0), Some(2));
        c.rollback(undo);
        assert_eq!(
            (c.pos.clone(), c.seqs.clone(), c.used, c.head),
            (snapshot.pos, snapshot.seqs, 6, 6)
        );
        // Taking cell 1 (position 1) also lets position 0 go, in cell 0.
        let undo = c.place(&[1], &[4], &[SeqSet::single(0)], &[CellExt::default()]);
        assert_eq!((c.seq_pos_min(0), c.used()), (Some(2), 5));
        c.give_back(undo);
        assert_eq!((c.pos(1), c.pos(0), c.used(), c.head), (Some(1), None, 5, 6));
        // Cells shared by two sequences are never taken.
        let mut shared = Cells::new(2);
        let both = [SeqSet::single(0), SeqSet::single(0)].map(|mut s| {
            s.insert(1);
            s
        });
        shared.place(&[0, 1], &[0, 5], &both, &[CellExt::default(); 2]);
        assert_eq!(shared.find_slots(1, w), None);
    }

    #[test]
    fn a_sequence_copied_to_another_stream_keeps_positions_and_pending_shifts() {
        let mut a = Cells::new(8);
        fill(&mut a, 0, 0..3);
        a.seq_add(0, 1, -1, 2);
        let mut b = Cells::new(8);
        fill(&mut b, 1, 0..5);
        b.copy_sequence(&a, 0, 1);
        assert_eq!((b.used(), b.seq_pos_min(1), b.seq_pos_max(1)), (3, Some(0), Some(4)));
        assert_eq!(b.pending_shift().map(|s| s[..3].to_vec()), Some(vec![0, 2, 2]));
        assert_eq!(b.head, a.head);
    }

    #[test]
    fn sequence_operations_follow_llama_h() {
        let mut c = Cells::new(16);
        fill(&mut c, 0, 0..5);
        c.seq_cp(0, 1, -1, -1);
        assert_eq!((c.seq_pos_min(1), c.seq_pos_max(1)), (Some(0), Some(4)));
        // Removing seq 1 leaves the shared cells to seq 0.
        c.seq_rm(Some(1), 2, -1);
        assert_eq!(c.seq_pos_max(1), Some(1));
        assert_eq!(c.used(), 5);
        c.seq_keep(1);
        assert_eq!(c.used(), 2);
        assert_eq!(c.seq_pos_max(0), None);
        c.seq_add(1, 0, -1, 10);
        assert_eq!((c.seq_pos_min(1), c.seq_pos_max(1)), (Some(10), Some(11)));
        assert!(c.pending_shift().is_some_and(|s| s.contains(&10)));
        c.seq_div(1, -1, -1, 2);
        assert_eq!((c.seq_pos_min(1), c.seq_pos_max(1)), (Some(5), Some(5)));
        // Division records old - new (llama.cpp's sign): 10 + (10 - 5) and 10 + (11 - 5).
        assert!(c.pending_shift().is_some_and(|s| s.contains(&15) && s.contains(&16)));
        c.seq_add(1, -1, -1, -100);
        assert_eq!(c.used(), 0);
        fill(&mut c, 3, 0..2);
        c.seq_rm(None, -1, -1);
        assert_eq!(c.used(), 0);
    }
}

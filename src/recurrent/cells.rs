//! The bookkeeping of recurrent state, as llama.cpp's recurrent memory keeps it: one cell per
//! state slot, each holding the position of the last token folded into it and the sequences that
//! share it. The first `n_seq_max` cells double as per-sequence records of which cell holds that
//! sequence's state (its "tail"). Before a ubatch runs, the slots of its sequences are gathered
//! into one contiguous window and each cell records which slot its state comes from (`src0`),
//! which the graph copies in. Pure data: the states themselves live in `Recurrent`'s tensors.

use crate::kv::SeqSet;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cell {
    /// Position of the last token in the state; -1 when empty.
    pos: i32,
    /// The slot whose state this cell starts from (-1: a fresh, zeroed state).
    src: i32,
    /// `src` as of the last slot search: what the graph copies from.
    src0: i32,
    /// For cell `i` as the record of sequence `i`: the cell holding its state (-1: none).
    tail: i32,
    seqs: SeqSet,
}

impl Cell {
    fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }
}

/// One sequence group of a ubatch as the slot search sees it: the sequences its tokens belong
/// to (`primary` first in the batch), how many tokens it has and the position of the last.
#[derive(Debug, Clone, Copy)]
pub struct SeqGroup {
    pub primary: usize,
    pub seqs: SeqSet,
    pub n_tokens: usize,
    pub last_pos: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsCells {
    cells: Vec<Cell>,
    head: usize,
    used: usize,
    /// Cells in the window of the last slot search (from `head`).
    n: usize,
    /// A cell of the window that no other cell copies from, zeroed for fresh states (-1: none).
    rs_z: i32,
    /// Earlier states kept per cell (rollback snapshots), and per sequence the snapshot its next
    /// step starts from after a rollback (0: its latest state).
    n_rs_seq: usize,
    rs_idx: Vec<usize>,
}

/// The window the graph of a ubatch works on: `n` cells from `head`, `zero` the one it clears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    pub head: usize,
    pub n: usize,
    pub zero: i32,
}

impl RsCells {
    pub fn new(size: usize, n_rs_seq: usize) -> RsCells {
        let empty = Cell {
            pos: -1,
            src: -1,
            src0: -1,
            tail: -1,
            seqs: SeqSet::default(),
        };
        RsCells {
            cells: vec![empty; size.max(1)],
            head: 0,
            used: 0,
            n: 0,
            rs_z: -1,
            n_rs_seq,
            rs_idx: vec![0; size.max(1)],
        }
    }

    pub fn size(&self) -> usize {
        self.cells.len()
    }

    pub fn used(&self) -> usize {
        self.used
    }

    pub fn n_rs_seq(&self) -> usize {
        self.n_rs_seq
    }

    /// The window of the last slot search.
    pub fn window(&self) -> Window {
        Window {
            head: self.head,
            n: self.n,
            zero: self.rs_z,
        }
    }

    /// Where the graph copies the states of the window's cells from (rows of the state tensors:
    /// a snapshot plane after a rollback). A pending rollback is used up here, as llama.cpp's
    /// is when it sets the graph's inputs.
    pub fn take_copy_sources(&mut self) -> Vec<i32> {
        let size = self.size();
        (self.head..self.head + self.n)
            .map(|i| {
                let c = &self.cells[i];
                let plane = match c.seqs.iter().next() {
                    Some(s) if self.n_rs_seq > 0 => std::mem::take(&mut self.rs_idx[s]),
                    _ => 0,
                };
                (plane * size) as i32 + c.src0
            })
            .collect()
    }

    pub fn clear(&mut self) {
        for c in &mut self.cells {
            c.pos = -1;
            c.seqs = SeqSet::default();
            c.src = -1;
            c.tail = -1;
        }
        self.head = 0;
        self.used = 0;
        self.rs_idx.fill(0);
    }

    /// Empty cell `i` (its record of a tail stays).
    fn free(&mut self, i: usize) {
        let c = &mut self.cells[i];
        if c.pos >= 0 {
            self.used = self.used.saturating_sub(1);
        }
        c.pos = -1;
        c.src = -1;
        c.seqs = SeqSet::default();
    }

    /// Remove `seq` (every sequence when None) from positions [p0, p1) (negative bounds: open).
    /// A state cannot lose part of its history: only removals that take a sequence's whole state
    /// (or nothing of it) succeed; false otherwise, with nothing changed.
    pub fn seq_rm(&mut self, seq: Option<usize>, p0: i32, p1: i32) -> bool {
        let p0 = p0.max(0);
        let p1 = if p1 < 0 { i32::MAX } else { p1 };
        if p0 == 0 && p1 == i32::MAX {
            self.reset_rollback(seq);
        }
        match seq {
            Some(s) if s >= self.size() => return false,
            Some(s) => {
                let tail = self.cells[s].tail;
                if tail >= 0 {
                    let pos = self.cells[tail as usize].pos;
                    // The end of the state's history without its start: only back to a kept
                    // snapshot, one rollback until the next step.
                    if 0 < p0 && p0 <= pos && p1 > pos {
                        let back = (pos - (p0 - 1)) as usize;
                        if self.rs_idx[s] == 0 && (1..=self.n_rs_seq).contains(&back) {
                            self.rs_idx[s] = back;
                            self.cells[tail as usize].pos = p0 - 1;
                            return true;
                        }
                        return false;
                    }
                    if p0 <= pos && pos < p1 {
                        self.cells[s].tail = -1;
                    }
                }
            }
            None => {
                if p0 != p1 && (p0 != 0 || p1 != i32::MAX) {
                    return false;
                }
            }
        }
        let mut new_head = self.size();
        for i in 0..self.size() {
            let c = &mut self.cells[i];
            if c.pos < p0 || c.pos >= p1 {
                continue;
            }
            match seq {
                None => c.seqs = SeqSet::default(),
                Some(s) if c.seqs.contains(s) => c.seqs.remove(s),
                Some(_) => continue,
            }
            if self.cells[i].is_empty() {
                self.free(i);
                if new_head == self.size() {
                    new_head = i;
                }
            }
        }
        if new_head != self.size() && new_head < self.head {
            self.head = new_head;
        }
        true
    }

    /// Make `dst` share the state of `src` (positions are ignored: a state is whole).
    pub fn seq_cp(&mut self, src: usize, dst: usize) {
        if src == dst || src >= self.size() || dst >= self.size() {
            return;
        }
        let old = self.cells[dst].tail;
        if old >= 0 {
            let c = &mut self.cells[old as usize];
            c.seqs.remove(dst);
            self.cells[dst].tail = -1;
            if self.cells[old as usize].is_empty() {
                let c = &mut self.cells[old as usize];
                c.pos = -1;
                c.src = -1;
                self.used = self.used.saturating_sub(1);
            }
        }
        let tail = self.cells[src].tail;
        if tail >= 0 {
            self.cells[tail as usize].seqs.insert(dst);
            self.cells[dst].tail = tail;
        }
    }

    pub fn seq_keep(&mut self, seq: usize) {
        let mut new_head = self.size();
        for i in 0..self.size() {
            if i != seq {
                self.cells[i].tail = -1;
            }
            if self.cells[i].seqs.contains(seq) {
                self.cells[i].seqs = SeqSet::single(seq);
            } else {
                self.free(i);
                if new_head == self.size() {
                    new_head = i;
                }
            }
        }
        if new_head != self.size() && new_head < self.head {
            self.head = new_head;
        }
    }

    /// The cell holding `seq`'s state when its position lies in [p0, p1).
    fn tail_in(&mut self, seq: usize, p0: i32, p1: i32) -> Option<&mut Cell> {
        let p0 = p0.max(0);
        let p1 = if p1 < 0 { i32::MAX } else { p1 };
        if p0 == p1 || seq >= self.size() {
            return None;
        }
        let tail = self.cells[seq].tail;
        let c = self.cells.get_mut(usize::try_from(tail).ok()?)?;
        (c.seqs.contains(seq) && p0 <= c.pos && c.pos < p1).then_some(c)
    }

    /// Shift `seq`'s position (a state has only its last one).
    pub fn seq_add(&mut self, seq: usize, p0: i32, p1: i32, delta: i32) {
        if delta != 0 {
            if let Some(c) = self.tail_in(seq, p0, p1) {
                c.pos += delta;
            }
        }
    }

    pub fn seq_div(&mut self, seq: usize, p0: i32, p1: i32, d: i32) {
        if d != 1 {
            if let Some(c) = self.tail_in(seq, p0, p1) {
                c.pos /= d;
            }
        }
    }

    pub fn seq_pos_min(&self, seq: usize) -> Option<i32> {
        self.cells.iter().filter(|c| c.seqs.contains(seq)).map(|c| c.pos).min()
    }

    pub fn seq_pos_max(&self, seq: usize) -> Option<i32> {
        self.cells
            .iter()
            .filter(|c| c.seqs.contains(seq))
            .map(|c| c.pos)
            .max()
            .filter(|&p| p >= 0)
    }

    /// The next empty cell at or after `from` (wrapping); None when every cell is taken.
    fn next_empty(&self, from: usize) -> Option<usize> {
        let size = self.size();
        (0..size).map(|k| (from + k) % size).find(|&i| self.cells[i].is_empty())
    }

    /// Give each group of a ubatch a cell for its state, gathered into one contiguous window
    /// (llama.cpp's slot search, step for step, so that states land in the same slots and the
    /// saved state matches). False when the groups do not fit.
    pub fn find_slot(&mut self, groups: &[SeqGroup]) -> bool {
        let size = self.size();
        let n_seqs = groups.len();
        if n_seqs == 0 || n_seqs > size {
            return false;
        }
        if self.head > self.used + 2 * n_seqs {
            self.head = 0;
        }
        for g in groups {
            if g.primary >= size || g.seqs.iter().any(|s| s >= size) {
                crate::log_error!("recurrent memory: sequence id beyond its {size} cells");
                return false;
            }
            // Sequences that now share the group's state lose their own.
            for s in g.seqs.iter().filter(|&s| s != g.primary) {
                let tail = self.cells[s].tail;
                if tail >= 0 {
                    self.cells[tail as usize].seqs.remove(s);
                    self.cells[s].tail = -1;
                    if self.cells[tail as usize].is_empty() {
                        let c = &mut self.cells[tail as usize];
                        c.pos = -1;
                        c.src = -1;
                        self.used = self.used.saturating_sub(1);
                    }
                }
            }
        }
        let mut next = self.next_empty(self.head);
        let (mut min, mut max) = (size - 1, 0);
        for (k, g) in groups.iter().enumerate() {
            let s = g.primary;
            let tail = self.cells[s].tail;
            let owned = usize::try_from(tail).is_ok_and(|t| {
                let c = &self.cells[t];
                c.seqs.contains(s) && c.seqs.iter().nth(1).is_none()
            });
            if !owned {
                let Some(e) = next else { return false };
                if tail >= 0 {
                    // A shared state: this sequence continues from a copy of it.
                    let t = tail as usize;
                    let (pos, src) = (self.cells[t].pos, self.cells[t].src);
                    self.cells[e].pos = pos;
                    self.cells[e].src = src;
                    self.cells[t].seqs.remove(s);
                    self.cells[e].seqs.insert(s);
                }
                self.cells[s].tail = e as i32;
                if k + 1 < n_seqs {
                    next = self.next_empty(e + 1);
                }
            }
            let t = self.cells[s].tail as usize;
            min = min.min(t);
            max = max.max(t);
        }
        // Gather the groups' cells into [min, min + n_seqs), in group order.
        for (k, g) in groups.iter().enumerate() {
            let dst = min + k;
            let src = self.cells[g.primary].tail as usize;
            if dst >= size {
                return false;
            }
            if dst != src {
                let (a, b) = (self.cells[dst].clone(), self.cells[src].clone());
                for (i, from) in [(dst, &b), (src, &a)] {
                    let c = &mut self.cells[i];
                    c.pos = from.pos;
                    c.src = from.src;
                    c.seqs = from.seqs;
                }
                for c in &mut self.cells {
                    if c.tail == src as i32 {
                        c.tail = dst as i32;
                    } else if c.tail == dst as i32 {
                        c.tail = src as i32;
                    }
                }
            }
        }
        for (k, g) in groups.iter().enumerate() {
            let id = min + k;
            let c = &mut self.cells[id];
            if c.pos >= 0 && g.last_pos != c.pos + g.n_tokens as i32 {
                crate::log_warn!(
                    "recurrent memory: non-consecutive position {} after {} for sequence {} with {} new tokens",
                    g.last_pos,
                    c.pos,
                    g.primary,
                    g.n_tokens
                );
            }
            c.pos = g.last_pos;
            c.seqs = g.seqs;
            for s in g.seqs.iter() {
                self.cells[s].tail = id as i32;
            }
        }
        // The cell to zero for fresh states: one of the window no other cell copies from.
        let mut refs = vec![0u32; size];
        for c in &self.cells {
            if let Ok(src) = usize::try_from(c.src) {
                refs[src] += 1;
            }
        }
        self.rs_z = (min..=max).find(|&i| refs[i] == 0).map_or(-1, |i| i as i32);
        for i in min..=max {
            let c = &mut self.cells[i];
            if c.src < 0 {
                if self.rs_z < 0 {
                    return false;
                }
                c.src0 = self.rs_z;
            } else {
                c.src0 = c.src;
            }
            c.src = i as i32;
        }
        self.head = min;
        self.n = max - min + 1;
        self.used = self.cells.iter().filter(|c| !c.is_empty()).count();
        self.n >= n_seqs
    }

    /// The cells to save for `seq` (all non-empty cells when None), in order, each with the row
    /// its state is in (in a snapshot plane while a rollback is pending). None when sequences
    /// sharing a state have different rollbacks pending.
    pub fn saved_cells(&self, seq: Option<usize>) -> Option<Vec<(usize, usize)>> {
        let size = self.size();
        self.cells
            .iter()
            .enumerate()
            .filter(|(_, c)| match seq {
                None => !c.is_empty(),
                Some(s) => c.seqs.contains(s),
            })
            .map(|(i, c)| {
                let plane = match seq {
                    _ if self.n_rs_seq == 0 => 0,
                    Some(s) => self.rs_idx[s],
                    None => {
                        let mut planes = c.seqs.iter().map(|s| self.rs_idx[s]);
                        let first = planes.next().unwrap_or(0);
                        if planes.any(|p| p != first) {
                            return None;
                        }
                        first
                    }
                };
                Some((i, plane * size + usize::try_from(c.src).unwrap_or(i)))
            })
            .collect()
    }

    /// A restored state starts from its latest step.
    pub fn reset_rollback(&mut self, seq: Option<usize>) {
        match seq {
            Some(s) => {
                if let Some(i) = self.rs_idx.get_mut(s) {
                    *i = 0;
                }
            }
            None => self.rs_idx.fill(0),
        }
    }

    pub fn pos(&self, i: usize) -> i32 {
        self.cells[i].pos
    }

    pub fn seqs(&self, i: usize) -> SeqSet {
        self.cells[i].seqs
    }

    /// Replace everything with `cells` (position and sequences each) from a saved state, in
    /// cells 0.. . None when a sequence would have two states or an id is out of range.
    pub fn restore_all(&mut self, saved: &[(i32, SeqSet)]) -> Option<()> {
        if saved.len() > self.size() {
            return None;
        }
        let mut next = RsCells::new(self.size(), self.n_rs_seq);
        for (i, (pos, seqs)) in saved.iter().enumerate() {
            let c = &mut next.cells[i];
            c.pos = *pos;
            c.seqs = *seqs;
            c.src = i as i32;
            for s in seqs.iter() {
                let t = next.cells.get_mut(s)?;
                if t.tail != -1 {
                    return None;
                }
                t.tail = i as i32;
            }
        }
        next.used = saved.len();
        *self = next;
        Some(())
    }

    /// Give `seq` a fresh cell holding a saved state at `pos`; returns the cell.
    pub fn restore_seq(&mut self, seq: usize, pos: i32) -> Option<usize> {
        self.seq_rm(Some(seq), -1, -1);
        let group = SeqGroup {
            primary: seq,
            seqs: SeqSet::single(seq),
            n_tokens: 1,
            last_pos: pos,
        };
        if !self.find_slot(&[group]) {
            return None;
        }
        let cell = self.head;
        self.cells[cell].src = cell as i32;
        Some(cell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(seq: usize, n: usize, last: i32) -> SeqGroup {
        SeqGroup {
            primary: seq,
            seqs: SeqSet::single(seq),
            n_tokens: n,
            last_pos: last,
        }
    }

    /// A first ubatch takes one cell per sequence, each starting from the zeroed one.
    #[test]
    fn first_slots_start_from_zero() {
        let mut c = RsCells::new(4, 0);
        assert!(c.find_slot(&[group(0, 3, 2), group(1, 3, 2)]));
        let w = c.window();
        assert_eq!((w.head, w.n), (0, 2));
        assert_eq!(w.zero, 0);
        assert_eq!(c.take_copy_sources(), [0, 0]);
        assert_eq!(c.seq_pos_max(0), Some(2));
        assert_eq!(c.used(), 2);
        // The next ubatch continues each state in place.
        assert!(c.find_slot(&[group(1, 1, 3)]));
        assert_eq!(c.window().head, 1);
        assert_eq!(c.take_copy_sources(), [1]);
        assert_eq!(c.seq_pos_max(1), Some(3));
    }

    /// A copied sequence shares the state until it moves on, then continues from a copy.
    #[test]
    fn shared_states_split_on_write() {
        let mut c = RsCells::new(3, 0);
        assert!(c.find_slot(&[group(0, 2, 1)]));
        c.seq_cp(0, 2);
        assert_eq!(c.seq_pos_max(2), Some(1));
        assert_eq!(c.used(), 1);
        assert!(c.find_slot(&[group(2, 1, 2)]));
        assert_eq!(c.used(), 2);
        let w = c.window();
        // Sequence 2's new cell starts from sequence 0's state.
        assert_eq!(c.take_copy_sources()[0], 0);
        assert_ne!(w.head, 0);
        assert_eq!(c.seq_pos_max(0), Some(1));
        assert_eq!(c.seq_pos_max(2), Some(2));
    }

    /// Only whole states can be removed.
    #[test]
    fn partial_removal_is_refused() {
        let mut c = RsCells::new(2, 0);
        assert!(c.find_slot(&[group(0, 5, 4)]));
        let before = c.clone();
        assert!(!c.seq_rm(Some(0), 2, -1));
        assert_eq!(c, before);
        // Positions past the state's end hold nothing to remove.
        assert!(c.seq_rm(Some(0), 5, -1));
        assert_eq!(c.seq_pos_max(0), Some(4));
        assert!(c.seq_rm(Some(0), 0, -1));
        assert_eq!(c.seq_pos_max(0), None);
        assert_eq!(c.used(), 0);
        assert!(!c.seq_rm(None, 1, 3));
        assert!(c.seq_rm(None, -1, -1));
    }

    /// With snapshots, the end of a state's history can be taken back up to that many tokens,
    /// once per step: the next step starts from the snapshot's plane, and so does a saved state.
    #[test]
    fn rollback_within_the_snapshots_once_per_step() {
        let mut c = RsCells::new(2, 3);
        assert!(c.find_slot(&[group(0, 10, 9), group(1, 10, 9)]));
        c.take_copy_sources();
        assert!(!c.seq_rm(Some(0), 5, -1), "5 tokens back, 3 kept");
        assert!(c.seq_rm(Some(0), 7, -1));
        assert_eq!(c.seq_pos_max(0), Some(6));
        assert!(!c.seq_rm(Some(0), 6, -1), "a rollback is pending");
        let cell = c.saved_cells(Some(0)).unwrap()[0];
        assert_eq!(cell.1, 3 * 2 + cell.0, "3 tokens back: plane 3 of 2 cells");
        assert!(c.find_slot(&[group(0, 1, 7)]));
        assert_eq!(c.take_copy_sources(), [(3 * 2 + cell.0) as i32]);
        // Used up: the step after starts from the latest state again.
        assert!(c.find_slot(&[group(0, 1, 8)]));
        assert_eq!(c.take_copy_sources(), [cell.0 as i32]);
        // Removing the whole sequence forgets a pending rollback.
        assert!(c.seq_rm(Some(1), 9, -1));
        assert!(c.seq_rm(Some(1), -1, -1));
        assert!(c.saved_cells(Some(1)).unwrap().is_empty());
    }

    #[test]
    fn keep_add_div_and_restore() {
        let mut c = RsCells::new(3, 0);
        assert!(c.find_slot(&[group(0, 1, 9), group(1, 1, 9)]));
        c.seq_add(0, 0, -1, 5);
        assert_eq!(c.seq_pos_max(0), Some(14));
        c.seq_div(0, 0, -1, 2);
        assert_eq!(c.seq_pos_max(0), Some(7));
        c.seq_keep(1);
        assert_eq!(c.seq_pos_max(0), None);
        assert_eq!(c.used(), 1);
        let saved: Vec<(i32, SeqSet)> = c
            .saved_cells(None)
            .unwrap()
            .iter()
            .map(|&(i, _)| (c.pos(i), c.seqs(i)))
            .collect();
        let mut d = RsCells::new(3, 0);
        d.restore_all(&saved).unwrap();
        assert_eq!(d.seq_pos_max(1), Some(9));
        let cell = d.restore_seq(2, 4).unwrap();
        assert_eq!(d.seq_pos_max(2), Some(4));
        assert_eq!(d.take_copy_sources(), [cell as i32]);
        assert!(d
            .restore_all(&[(1, SeqSet::single(0)), (2, SeqSet::single(0))])
            .is_none());
    }
}

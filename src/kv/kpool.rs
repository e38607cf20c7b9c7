//! The k-pool indexer's bookkeeping, as llama.cpp's hybrid-idx memory keeps it: each
//! sequence's cells are grouped into pools of `kpool` consecutive positions counted from its
//! first, each pool's pooled key cached in the indexer row of its last member. A ubatch re-pools
//! the pools it touches or completes, and the ones a sequence edit made stale (`Stale`); the
//! graph's inputs (`Step::inputs`) say which cells make up which pool and which pools each token
//! may pick.

use super::{Cells, TokenPlace, MAX_SEQ};

/// A sequence whose pooled keys are all valid.
const POS_CLEAN: i32 = i32::MAX;

/// Per sequence, the position from which its cached pooled keys are stale (an edit can regroup
/// the pools from there on), and whether the last layout had cells shared between sequences.
#[derive(Clone)]
pub struct Stale {
    from: Vec<i32>,
    shared: bool,
}

impl Default for Stale {
    fn default() -> Stale {
        Stale {
            from: vec![POS_CLEAN; MAX_SEQ],
            shared: false,
        }
    }
}

impl Stale {
    /// `seq`'s pools (every sequence's with None) are stale from `p0` on (0 below 0).
    pub fn mark(&mut self, seq: Option<usize>, p0: i32) {
        let p0 = p0.max(0);
        match seq {
            Some(s) if s < MAX_SEQ => self.from[s] = self.from[s].min(p0),
            Some(_) => {}
            None => self.from.iter_mut().for_each(|p| *p = (*p).min(p0)),
        }
    }

    /// After an edit that can end a sharing of cells: while the layout has shared cells, every
    /// sequence is rebuilt so that the survivor's sharing is derived again.
    pub fn mark_all_if_shared(&mut self) {
        if self.shared {
            self.mark(None, 0);
        }
    }

    /// The first ubatch of a batch went through: every pool it needed is pooled again.
    pub fn clear(&mut self) {
        self.from.fill(POS_CLEAN);
    }

    /// Where an edit of `seq` at `p0` stales it from: an edit at or below its first position
    /// moves that, which regroups the whole sequence.
    pub fn edit_pos(seq: Option<usize>, p0: i32, pos_min: Option<i32>) -> i32 {
        match seq {
            Some(_) if p0 > pos_min.unwrap_or(-1) => p0,
            _ => 0,
        }
    }
}

/// One sequence's cells in position order and its complete pools.
#[derive(Debug, Default, Clone)]
struct SeqPools {
    pos_min: i32,
    /// The stream holding the sequence's cells.
    stream: usize,
    /// (position, stream-local cell), sorted.
    cells: Vec<(i32, usize)>,
    /// Index into `cells` of each pool's first member.
    pools: Vec<usize>,
}

/// The ubatch's pool layout and which pools it re-pools.
pub struct Step {
    kpool: usize,
    seqs: Vec<SeqPools>,
    n_pool_real: usize,
    /// Whether no cell is shared between sequences: only then are pooled keys cached.
    cache_safe: bool,
    is_new: Vec<bool>,
    n_new: usize,
}

/// The shape a step gives the graph: padded pool count, pools pooled (at least one, a dummy
/// when none completes), and whether pooled keys are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KpoolShape {
    pub n_pool: usize,
    pub n_new: usize,
    pub cache_safe: bool,
}

/// The values of the graph's k-pool inputs for one ubatch.
#[derive(Debug, Default, PartialEq)]
pub struct KpoolData {
    /// Per pool, the cell holding its pooled key (global row).
    pub pool_cells: Vec<i32>,
    /// Per pool, its `kpool` member cells (stream-local, or global rows when gathering).
    pub pool_idxs: Vec<i32>,
    /// [n_pool, n_tokens]: 0 where a token may pick the pool, -inf elsewhere.
    pub pool_mask: Vec<f32>,
    /// [kpool - 1, n_tokens]: each token's incomplete pool, the sentinel where it has no cell.
    pub tail_idxs: Vec<i32>,
    /// [n_sel, n_tokens]: 0 for live selection slots, -inf for dead ones.
    pub gather_mask: Vec<f32>,
    /// [kpool, n_new]: the members (global rows) of the pools pooled now.
    pub new_pool_idxs: Vec<i32>,
    /// [n_new]: where each pooled key is written (with `cache_safe`).
    pub new_pool_rep: Vec<i64>,
}

/// The pool count the graph is built for: one spare pool always, in steps of 64.
pub fn pad_pools(n: usize) -> usize {
    (n + 1).next_multiple_of(64).max(64)
}

impl Step {
    /// The layout of `streams` (one for all sequences, or one per sequence) after the ubatch
    /// `places` was placed in them, and the pools it must pool given `stale`.
    pub fn new(kpool: usize, streams: &[Cells], stale: &mut Stale, places: &[TokenPlace]) -> Step {
        let unified = streams.len() == 1;
        let mut per_seq: Vec<Vec<(i32, usize)>> = vec![Vec::new(); MAX_SEQ];
        let mut shared = vec![false; MAX_SEQ];
        for (si, cells) in streams.iter().enumerate() {
            for j in 0..cells.size() {
                let Some(pos) = cells.pos(j) else { continue };
                let seqs = cells.seqs(j);
                let n_seqs = seqs.iter().count();
                for s in seqs.iter() {
                    // A split cache's stream s holds sequence s only.
                    if unified || s == si {
                        per_seq[s].push((pos, j));
                        shared[s] |= unified && n_seqs > 1;
                    }
                }
            }
        }
        let mut seqs = Vec::with_capacity(MAX_SEQ);
        let (mut n_pool_real, mut cache_safe) = (0, true);
        for (s, mut cells) in per_seq.into_iter().enumerate() {
            cells.sort_unstable();
            let pos_min = cells.first().map_or(0, |c| c.0);
            let mut pools = Vec::new();
            // Greedy from the first cell: a pool starts on a multiple of kpool past pos_min and
            // holds kpool consecutive positions.
            let mut j = 0;
            while j + kpool <= cells.len() {
                let p0 = cells[j].0;
                let aligned = (i64::from(p0) - i64::from(pos_min)) % kpool as i64 == 0;
                let run = (1..kpool).all(|k| i64::from(cells[j + k].0) == i64::from(p0) + k as i64);
                if aligned && run {
                    pools.push(j);
                    j += kpool;
                } else {
                    j += 1;
                }
            }
            n_pool_real += pools.len();
            cache_safe &= !shared[s];
            seqs.push(SeqPools {
                pos_min,
                stream: if unified { 0 } else { s },
                cells,
                pools,
            });
        }
        stale.shared = !cache_safe;

        let mut is_new = vec![!cache_safe; n_pool_real];
        if cache_safe {
            let mut start = 0;
            let mut starts = Vec::with_capacity(MAX_SEQ);
            for (s, sq) in seqs.iter().enumerate() {
                starts.push(start);
                let from = stale.from[s];
                if from != POS_CLEAN {
                    // An edit invalidates the pools ending after the edited position.
                    let end = |j: usize| i64::from(sq.cells[j].0) + kpool as i64;
                    let first = sq.pools.partition_point(|&j| end(j) <= i64::from(from));
                    is_new[start + first..start + sq.pools.len()].fill(true);
                }
                start += sq.pools.len();
            }
            for p in places {
                for s in p.seqs.iter() {
                    let sq = &seqs[s];
                    let after = sq.pools.partition_point(|&j| sq.cells[j].0 <= p.pos);
                    let Some(i) = after.checked_sub(1) else { continue };
                    if i64::from(p.pos) < i64::from(sq.cells[sq.pools[i]].0) + kpool as i64 {
                        is_new[starts[s] + i] = true;
                    }
                }
            }
        }
        let n_new = is_new.iter().filter(|&&n| n).count();
        Step {
            kpool,
            seqs,
            n_pool_real,
            cache_safe,
            is_new,
            n_new,
        }
    }

    pub fn shape(&self) -> KpoolShape {
        KpoolShape {
            n_pool: pad_pools(self.n_pool_real),
            n_new: self.n_new.max(1),
            cache_safe: self.cache_safe,
        }
    }

    /// The inputs' values for the ubatch `places` over `n_kv` cells of streams of `stream_size`
    /// cells (`n_stream` of them), for a selection of `n_sel` slots; `gather`: the graph gathers
    /// the selected cells instead of masking all of them.
    pub fn inputs(
        &self,
        places: &[TokenPlace],
        n_kv: usize,
        stream_size: usize,
        n_stream: usize,
        gather: bool,
        n_sel: usize,
    ) -> KpoolData {
        let kpool = self.kpool;
        let n_pool = pad_pools(self.n_pool_real);
        let global = |sq: &SeqPools, cell: usize| (sq.stream * stream_size + cell) as i32;
        let find = |sq: &SeqPools, pos: i32| {
            let i = sq.cells.partition_point(|c| c.0 < pos);
            sq.cells.get(i).filter(|c| c.0 == pos).map(|c| c.1)
        };
        let mut in_ubatch = vec![false; MAX_SEQ];
        places
            .iter()
            .for_each(|p| p.seqs.iter().for_each(|s| in_ubatch[s] = true));

        // Padding gathers the first token's cell (masked apart); the scatter path sends it to n_kv.
        let dummy = places.first().map_or(0, |p| {
            let sq = &self.seqs[p.primary_seq];
            find(sq, p.pos).map_or(0, |c| global(sq, c))
        });
        let sentinel = if gather { dummy } else { n_kv as i32 };
        let n_top = n_sel / kpool;

        let mut d = KpoolData {
            pool_cells: Vec::with_capacity(n_pool),
            pool_idxs: Vec::with_capacity(n_pool * kpool),
            ..KpoolData::default()
        };
        let mut seq_start = vec![0usize; MAX_SEQ];
        let mut pool_end: Vec<i32> = Vec::with_capacity(n_pool);
        for (s, sq) in self.seqs.iter().enumerate() {
            seq_start[s] = pool_end.len();
            let inert = !gather && n_stream > 1 && !in_ubatch[s];
            for &j in &sq.pools {
                let ip = pool_end.len();
                let rep = sq.cells[j + kpool - 1].1;
                d.pool_cells.push(global(sq, rep));
                for &(_, cell) in &sq.cells[j..j + kpool] {
                    d.pool_idxs.push(match (inert, gather) {
                        (true, _) => sentinel,
                        (false, true) => global(sq, cell),
                        (false, false) => cell as i32,
                    });
                }
                if self.is_new[ip] {
                    d.new_pool_idxs
                        .extend(sq.cells[j..j + kpool].iter().map(|&(_, c)| global(sq, c)));
                    if self.cache_safe {
                        d.new_pool_rep.push(i64::from(global(sq, rep)));
                    }
                }
                pool_end.push(sq.cells[j + kpool - 1].0);
            }
        }
        // A ubatch that completes no pool pools its first token's cell, which belongs to no
        // complete pool: the write never touches a cached key.
        if self.n_new == 0 {
            d.new_pool_idxs = vec![dummy; kpool];
            if self.cache_safe {
                d.new_pool_rep = vec![i64::from(dummy)];
            }
        }
        for _ in pool_end.len()..n_pool {
            d.pool_cells.push(dummy);
            d.pool_idxs.extend(std::iter::repeat_n(sentinel, kpool));
        }

        // A token sees its sequence's pools that end at or before it.
        let n_tokens = places.len();
        d.pool_mask = vec![f32::NEG_INFINITY; n_pool * n_tokens];
        if n_sel > 0 {
            d.gather_mask = vec![f32::NEG_INFINITY; n_sel * n_tokens];
        }
        d.tail_idxs = vec![sentinel; (kpool - 1) * n_tokens];
        for (i, p) in places.iter().enumerate() {
            let s = p.primary_seq;
            let sq = &self.seqs[s];
            let ends = &pool_end[seq_start[s]..seq_start[s] + sq.pools.len()];
            let nv = ends.partition_point(|&e| e <= p.pos);
            let row = &mut d.pool_mask[i * n_pool..(i + 1) * n_pool];
            row[seq_start[s]..seq_start[s] + nv].fill(0.0);
            if n_sel > 0 {
                let visible = nv.min(n_top) * kpool;
                d.gather_mask[i * n_sel..i * n_sel + visible].fill(0.0);
            }
            let n_tail = ((i64::from(p.pos) - i64::from(sq.pos_min) + 1).rem_euclid(kpool as i64)) as usize;
            for k in 0..n_tail.min(kpool - 1) {
                let Some(cell) = find(sq, p.pos - k as i32) else {
                    continue;
                };
                d.tail_idxs[i * (kpool - 1) + k] = if gather { global(sq, cell) } else { cell as i32 };
                if !n_sel.is_multiple_of(kpool) {
                    d.gather_mask[i * n_sel + n_top * kpool + k] = 0.0;
                }
            }
        }
        d
    }
}

/// The step of the graph reserved for the worst case: every pool of `n_stream` streams of
/// `stream_size` cells for `n_seq_max` sequences pooled at once.
pub fn worst_case(kpool: usize, stream_size: usize, n_seq_max: usize) -> KpoolShape {
    let n = stream_size / kpool.max(1) * n_seq_max;
    KpoolShape {
        n_pool: pad_pools(n),
        n_new: n.max(1),
        cache_safe: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::SeqSet;

    fn cells_of(entries: &[(usize, i32, &[usize])], size: usize) -> Cells {
        let mut c = Cells::new(size);
        let slots: Vec<usize> = entries.iter().map(|e| e.0).collect();
        let pos: Vec<i32> = entries.iter().map(|e| e.1).collect();
        let seqs: Vec<SeqSet> = entries
            .iter()
            .map(|e| {
                let mut s = SeqSet::default();
                e.2.iter().for_each(|&q| s.insert(q));
                s
            })
            .collect();
        let ext = vec![Default::default(); entries.len()];
        c.place(&slots, &pos, &seqs, &ext);
        c
    }

    /// Pools are runs of kpool consecutive positions aligned to the sequence's first; a hole
    /// breaks the run, and the next pool starts on the following aligned position.
    #[test]
    fn pools_follow_positions_from_the_first() {
        // Sequence 0 at positions 2..=12 without 7, in cells 0..10.
        let entries: Vec<(usize, i32, &[usize])> = [2, 3, 4, 5, 6, 8, 9, 10, 11, 12]
            .iter()
            .enumerate()
            .map(|(j, &p)| (j, p, &[0usize][..]))
            .collect();
        let cells = cells_of(&entries, 16);
        let mut stale = Stale::default();
        let places = [TokenPlace::at(0, 12)];
        let step = Step::new(2, std::slice::from_ref(&cells), &mut stale, &places);
        // Pools at 2-3, 4-5, then 8-9, 10-11 (6 is alone: 7 is missing).
        let starts: Vec<i32> = step.seqs[0].pools.iter().map(|&j| step.seqs[0].cells[j].0).collect();
        assert_eq!(starts, [2, 4, 8, 10]);
        assert!(step.cache_safe);
        // Position 12 touches no complete pool: nothing pooled, a dummy pool of its own cell.
        assert_eq!(
            step.shape(),
            KpoolShape {
                n_pool: 64,
                n_new: 1,
                cache_safe: true
            }
        );
        let d = step.inputs(&places, 256, 16, 1, false, 2 * 4 + 1);
        assert_eq!(d.new_pool_idxs, [9, 9]);
        assert_eq!(d.new_pool_rep, [9]);
        // All four pools end before 12; its tail (12 - 2 + 1) % 2 = 1 cell: itself.
        assert_eq!(&d.pool_mask[..5], &[0.0, 0.0, 0.0, 0.0, f32::NEG_INFINITY]);
        assert_eq!(d.tail_idxs, [9]);
        assert_eq!(&d.gather_mask[..], &[0.0; 9][..]);
        assert_eq!(&d.pool_cells[..5], &[1, 3, 6, 8, 9]);
        assert_eq!(&d.pool_idxs[..8], &[0, 1, 2, 3, 5, 6, 7, 8]);
        assert_eq!(d.pool_idxs[8], 256);
    }

    /// The pool a token completes is pooled; an edit stales the pools ending after it; shared
    /// cells stop the caching and pool everything.
    #[test]
    fn new_pools_are_the_touched_and_the_stale() {
        let entries: Vec<(usize, i32, &[usize])> = (0..8).map(|p| (p as usize, p, &[0usize][..])).collect();
        let cells = cells_of(&entries, 16);
        let mut stale = Stale::default();
        let step = Step::new(4, std::slice::from_ref(&cells), &mut stale, &[TokenPlace::at(0, 7)]);
        assert_eq!(step.is_new, [false, true]);
        stale.mark(Some(0), 2);
        let step = Step::new(4, std::slice::from_ref(&cells), &mut stale, &[TokenPlace::at(0, 7)]);
        assert_eq!(step.is_new, [true, true]);
        let d = step.inputs(&[TokenPlace::at(0, 7)], 256, 16, 1, false, 0);
        assert_eq!(d.new_pool_idxs, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(d.new_pool_rep, [3, 7]);

        let shared: Vec<(usize, i32, &[usize])> = (0..4).map(|p| (p as usize, p, &[0usize, 1][..])).collect();
        let cells = cells_of(&shared, 16);
        let mut stale = Stale::default();
        let step = Step::new(4, std::slice::from_ref(&cells), &mut stale, &[TokenPlace::at(1, 3)]);
        assert!(!step.cache_safe && stale.shared);
        assert_eq!((step.n_new, step.shape().cache_safe), (2, false));
        assert!(step
            .inputs(&[TokenPlace::at(1, 3)], 256, 16, 1, false, 0)
            .new_pool_rep
            .is_empty());
        stale.mark_all_if_shared();
        assert_eq!(stale.from[5], 0);
    }

    #[test]
    fn edits_stale_from_their_position_or_the_start() {
        assert_eq!(Stale::edit_pos(Some(0), 5, Some(2)), 5);
        assert_eq!(Stale::edit_pos(Some(0), 2, Some(2)), 0);
        assert_eq!(Stale::edit_pos(None, 5, Some(2)), 0);
        assert_eq!(Stale::edit_pos(Some(0), 5, None), 5);
        assert_eq!(Stale::edit_pos(Some(0), -1, None), 0);
    }
}

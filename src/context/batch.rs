//! A batch as the decoder consumes it: token ids, positions, sequence sets and output flags, all
//! resolved and checked against the model and the cache before anything is touched.

use crate::error::{Error, Result};
use crate::kv::{CellExt, SeqSet, TokenPlace};

/// A batch borrowed from the caller (C arrays, already turned into slices by the FFI layer).
#[derive(Default)]
pub struct BatchInput<'a> {
    /// Token ids; empty when the batch carries embeddings only.
    pub tokens: &'a [i32],
    /// Input embeddings, one row per token (llama.h's `embd`); None: the tokens' own. With token
    /// ids as well the ids decide, as in llama.cpp (such rows are for other stages' use).
    pub embd: Option<&'a [f32]>,
    /// None: continue each sequence after its last cached position. Otherwise one per token, or
    /// for embeddings on a model with multi-dimensional positions (M-RoPE) `n_pos_per_embd` per
    /// token, section by section (`pos[j * n_tokens + i]`, llama.h's layout).
    pub pos: Option<&'a [i32]>,
    /// Per token its sequence ids; None: every token in sequence 0.
    pub seq_ids: Option<Vec<&'a [i32]>>,
    /// Per token whether its logits are wanted; None: only the last token's.
    pub outputs: Option<&'a [i8]>,
}

/// What a batch is checked against: the model's and the context's sizes.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub n_vocab: usize,
    pub n_seq_max: usize,
    /// Most tokens per call (the context's n_batch).
    pub n_batch: usize,
    /// Every token's output is computed (the context makes embeddings).
    pub output_all: bool,
    /// Positions per token (four with M-RoPE, whose sequences may jump forward).
    pub n_pos_per_embd: usize,
    /// Floats in an input embedding row (what the graph's first layer takes).
    pub n_embd: usize,
    /// The token id the cache records for an embedding (n-gram embeddings read it back), or -1.
    pub embd_token: i32,
}

/// Embedding rows given in place of token ids.
#[derive(Debug, Clone, Default)]
pub struct Embeddings {
    /// `width` floats per token, in batch order.
    pub rows: Vec<f32>,
    pub width: usize,
    /// With M-RoPE, each token's four position sections (an image's rows share the first).
    pub sections: Vec<[i32; 4]>,
}

impl Embeddings {
    /// The rows of the batch tokens `idx`, in that order.
    pub fn rows_of(&self, idx: &[usize]) -> Vec<f32> {
        idx.iter()
            .flat_map(|&i| &self.rows[i * self.width..(i + 1) * self.width])
            .copied()
            .collect()
    }
}

/// The batch with every default resolved.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Token ids, one per token; -1 (LLAMA_TOKEN_NULL) for an embedding input.
    pub tokens: Vec<i32>,
    /// Set when the batch carries embeddings instead of token ids.
    pub embd: Option<Embeddings>,
    pub places: Vec<TokenPlace>,
    pub outputs: Vec<bool>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    pub fn n_outputs(&self) -> usize {
        self.outputs.iter().filter(|&&o| o).count()
    }
}

/// The number of tokens in `b`: its ids, or its embedding rows of `width` floats.
fn count_tokens(b: &BatchInput, width: usize) -> Result<usize> {
    match (b.tokens.len(), b.embd) {
        (0, Some(rows)) if width > 0 && rows.len() % width == 0 => Ok(rows.len() / width),
        (0, Some(rows)) => Err(Error::invalid(format!(
            "{} embedding floats are not whole rows of the model's input width {width}",
            rows.len()
        ))),
        (n, _) => Ok(n),
    }
}

/// Resolve and validate `b` for a context with `lim`, whose cache holds sequences up to
/// `seq_pos_max`. Messages say exactly what is wrong, as llama.cpp's do.
pub fn resolve(b: &BatchInput, lim: &Limits, seq_pos_max: &dyn Fn(usize) -> Option<i32>) -> Result<Batch> {
    let (n_seq_max, n_batch) = (lim.n_seq_max, lim.n_batch);
    let n = count_tokens(b, lim.n_embd)?;
    if n == 0 {
        return Err(Error::invalid("n_tokens == 0: the batch is empty"));
    }
    if n > n_batch {
        return Err(Error::invalid(format!(
            "n_tokens = {n} exceeds the context's n_batch = {n_batch}; split the batch or create the context with a larger n_batch"
        )));
    }
    let n_vocab = lim.n_vocab;
    for (i, &t) in b.tokens.iter().enumerate() {
        if t < 0 || t as usize >= n_vocab {
            return Err(Error::invalid(format!(
                "invalid token[{i}] = {t} (vocabulary has {n_vocab} tokens)"
            )));
        }
    }
    let embd_only = b.tokens.is_empty();
    // Embeddings on an M-RoPE model come with all their position sections.
    let n_sections = if embd_only { lim.n_pos_per_embd } else { 1 };
    if let Some(p) = b.pos.filter(|p| p.len() != n * n_sections) {
        return Err(Error::invalid(format!(
            "{} positions for {n} tokens (expected {})",
            p.len(),
            n * n_sections
        )));
    }
    let mut seqs = Vec::with_capacity(n);
    let mut primary = Vec::with_capacity(n);
    match &b.seq_ids {
        None => {
            seqs.resize(n, SeqSet::single(0));
            primary.resize(n, 0);
        }
        Some(ids) => {
            for (i, ids) in ids.iter().enumerate() {
                if ids.is_empty() {
                    return Err(Error::invalid(format!(
                        "token {i} has no sequence id (n_seq_id[{i}] = 0)"
                    )));
                }
                let mut set = SeqSet::default();
                for (s, &id) in ids.iter().enumerate() {
                    if id < 0 || id as usize >= n_seq_max {
                        return Err(Error::invalid(format!(
                            "invalid seq_id[{i}][{s}] = {id} (the context has n_seq_max = {n_seq_max})"
                        )));
                    }
                    set.insert(id as usize);
                }
                seqs.push(set);
                primary.push(first_as_llama_reads(ids) as usize);
            }
        }
    }
    let pos: Vec<i32> = match b.pos {
        Some(p) => {
            if let Some((i, &bad)) = p.iter().enumerate().find(|(_, &p)| p < 0) {
                return Err(Error::invalid(format!(
                    "invalid pos[{i}] = {bad}: positions must not be negative"
                )));
            }
            p[..n].to_vec()
        }
        None => {
            // Each sequence continues after its last cached position.
            let mut next: Vec<Option<i32>> = vec![None; n_seq_max];
            (0..n)
                .map(|i| {
                    let s = primary[i];
                    let p = next[s].unwrap_or_else(|| seq_pos_max(s).map_or(0, |m| m + 1));
                    for t in seqs[i].iter() {
                        next[t] = Some(p + 1);
                    }
                    p
                })
                .collect()
        }
    };
    let mrope = lim.n_pos_per_embd > 1;
    check_positions(&pos, &seqs, n_seq_max, (mrope, embd_only), seq_pos_max)?;
    let mut outputs: Vec<bool> = match b.outputs {
        Some(o) => o.iter().map(|&x| x != 0).collect(),
        None => (0..n).map(|i| i == n - 1).collect(),
    };
    if lim.output_all && outputs.iter().any(|&o| !o) {
        crate::log_warn!("decode: embeddings need every token's output; computing all of them");
        outputs.fill(true);
    }
    // Embeddings' position sections as given; positions made here fill only the first (as
    // llama.cpp makes them). Text tokens' are derived from their positions.
    let sections: Vec<[i32; 4]> = match (mrope && embd_only, b.pos) {
        (false, _) => Vec::new(),
        (true, Some(p)) => (0..n)
            .map(|i| std::array::from_fn(|j| if j < n_sections { p[j * n + i] } else { 0 }))
            .collect(),
        (true, None) => pos.iter().map(|&p| [p, 0, 0, 0]).collect(),
    };
    let tokens: Vec<i32> = if embd_only { vec![-1; n] } else { b.tokens.to_vec() };
    let places = (0..n)
        .map(|i| TokenPlace {
            pos: pos[i],
            seqs: seqs[i],
            primary_seq: primary[i],
            // The cell's 2D position (M-RoPE's masking; sections 2 and 1, a text token's
            // position) and token.
            ext: CellExt {
                x: sections.get(i).map_or(pos[i], |s| s[2]),
                y: sections.get(i).map_or(pos[i], |s| s[1]),
                tok: if embd_only { lim.embd_token } else { tokens[i] },
            },
        })
        .collect();
    let embd = match (embd_only, b.embd) {
        (true, Some(rows)) => Some(Embeddings {
            rows: rows.to_vec(),
            width: lim.n_embd,
            sections,
        }),
        _ => None,
    };
    Ok(Batch {
        tokens,
        embd,
        places,
        outputs,
    })
}

/// The id llama.cpp takes as a token's first (the sequence whose cells it attends to): llama.cpp
/// collects a token's ids in a `std::unordered_set<llama_seq_id>` and reads them back in
/// libstdc++'s iteration order. With an identity hash that order follows from the insertions: a
/// key whose bucket is empty goes to the front of the list, one whose bucket holds keys goes to
/// the front of their run, and a rehash (when the keys would outnumber the buckets: to 13 buckets
/// on the first insertion, then the next listed prime at or above twice as many) re-inserts the
/// list in order the same way.
fn first_as_llama_reads(ids: &[i32]) -> i32 {
    const BUCKET_COUNTS: [usize; 9] = [13, 29, 59, 127, 257, 541, 1109, 2357, 5087];
    if let [only] = ids {
        return *only;
    }
    let insert = |order: &mut Vec<i32>, id: i32, n_bkt: usize| {
        let bucket = |x: i32| x.unsigned_abs() as usize % n_bkt;
        let at = order.iter().position(|&x| bucket(x) == bucket(id)).unwrap_or(0);
        order.insert(at, id);
    };
    let mut order: Vec<i32> = Vec::with_capacity(ids.len());
    let mut n_bkt = 0;
    for &id in ids {
        if order.contains(&id) {
            continue;
        }
        if order.len() >= n_bkt {
            let want = (2 * n_bkt).max(12);
            n_bkt = BUCKET_COUNTS.into_iter().find(|&b| b >= want).unwrap_or(want | 1);
            let old = std::mem::take(&mut order);
            old.into_iter().for_each(|x| insert(&mut order, x, n_bkt));
        }
        insert(&mut order, id, n_bkt);
    }
    order.first().copied().unwrap_or(0)
}

/// llama.cpp's consistency rules: each sequence continues right after its last cached position
/// (with M-RoPE, anywhere after it; embeddings, an image's rows, also at it), its positions in the
/// batch never decrease and (without M-RoPE) are continuous.
fn check_positions(
    pos: &[i32],
    seqs: &[SeqSet],
    n_seq_max: usize,
    (mrope, embd): (bool, bool),
    seq_pos_max: &dyn Fn(usize) -> Option<i32>,
) -> Result<()> {
    for s in 0..n_seq_max {
        let mut min = i32::MAX;
        let mut max = i32::MIN;
        let mut count = 0i64;
        let mut last = i32::MIN;
        for (i, set) in seqs.iter().enumerate() {
            if !set.contains(s) {
                continue;
            }
            if pos[i] < last {
                return Err(Error::invalid(format!(
                    "sequence {s} positions are decreasing (not allowed)"
                )));
            }
            last = pos[i];
            min = min.min(pos[i]);
            max = max.max(pos[i]);
            count += 1;
        }
        if count == 0 {
            continue;
        }
        if let Some(p0) = seq_pos_max(s) {
            if mrope && embd && min < p0 {
                return Err(Error::invalid(format!(
                    "the embeddings of sequence {s} in the batch start at position Y = {min}, but the last position \
                     in the KV cache for sequence {s} is X = {p0}; with M-RoPE positions must satisfy X <= Y"
                )));
            }
            if mrope && !embd && min <= p0 {
                return Err(Error::invalid(format!(
                    "the tokens of sequence {s} in the batch start at position Y = {min}, but the last position \
                     in the KV cache for sequence {s} is X = {p0}; with M-RoPE positions must satisfy X < Y"
                )));
            }
            if !mrope && min != p0 + 1 {
                return Err(Error::invalid(format!(
                    "the tokens of sequence {s} in the batch start at position Y = {min}, but the last position \
                     in the KV cache for sequence {s} is X = {p0}; positions must remain consecutive: Y = X + 1"
                )));
            }
        }
        // M-RoPE positions may jump within a batch too (an image's rows share theirs).
        if !mrope && i64::from(max) - i64::from(min) + 1 > count {
            return Err(Error::invalid(format!("sequence {s} positions are not continuous")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token's first sequence as llama.cpp reads it back from its unordered set (the expected
    /// ids are what libstdc++ 12's `std::unordered_set<int>` iterates first).
    #[test]
    fn first_sequence_follows_the_unordered_set() {
        assert_eq!(first_as_llama_reads(&[3]), 3);
        assert_eq!(first_as_llama_reads(&[1, 2]), 2);
        assert_eq!(first_as_llama_reads(&[2, 1, 2]), 1);
        assert_eq!(first_as_llama_reads(&[4, 3, 2, 1, 0]), 0);
        // Keys sharing a bucket (13 buckets), then a rehash to 29 at the fourteenth.
        let ids = [194, 196, 81, 133, 154, 254, 128, 212, 10, 163, 157, 251, 146, 73, 244];
        assert_eq!(first_as_llama_reads(&ids), 73);
        let ids = [
            200, 100, 151, 238, 33, 155, 1, 221, 146, 241, 159, 73, 84, 244, 254, 169, 78, 217, 24, 35, 117, 136, 43,
            32, 13, 170, 219, 35, 207, 249,
        ];
        assert_eq!(first_as_llama_reads(&ids), 249);
    }

    fn input(tokens: &[i32]) -> BatchInput<'_> {
        BatchInput {
            tokens,
            ..BatchInput::default()
        }
    }

    /// A context over 10 tokens with `n_seq_max` sequences, `n_batch`, and M-RoPE or not.
    fn limits(n_seq_max: usize, n_batch: usize, mrope: bool) -> Limits {
        Limits {
            n_vocab: 10,
            n_seq_max,
            n_batch,
            output_all: false,
            n_pos_per_embd: if mrope { 4 } else { 1 },
            n_embd: 2,
            embd_token: -1,
        }
    }

    #[test]
    fn defaults_resolve_like_llama_cpp() {
        let b = resolve(&input(&[1, 2, 3]), &limits(1, 512, false), &|_| None).expect("valid");
        assert_eq!(b.places.iter().map(|p| p.pos).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(b.outputs, [false, false, true]);
    }

    #[test]
    fn bad_batches_are_rejected_with_the_reason() {
        let cells = |_| None;
        let err = |r: Result<Batch>| r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(resolve(&input(&[]), &limits(1, 512, false), &cells)).contains("empty"));
        assert!(err(resolve(&input(&[1, 10]), &limits(1, 512, false), &cells)).contains("invalid token[1] = 10"));
        assert!(err(resolve(&input(&[1, -1]), &limits(1, 512, false), &cells)).contains("invalid token[1] = -1"));
        assert!(
            err(resolve(&input(&[1; 5]), &limits(1, 4, false), &cells)).contains("exceeds the context's n_batch = 4")
        );
        let ids: [&[i32]; 1] = [&[3]];
        let b = BatchInput {
            seq_ids: Some(ids.to_vec()),
            ..input(&[1])
        };
        assert!(err(resolve(&b, &limits(2, 512, false), &cells)).contains("invalid seq_id[0][0] = 3"));
        let pos = [0, 2];
        let b = BatchInput {
            pos: Some(&pos),
            ..input(&[1, 1])
        };
        assert!(err(resolve(&b, &limits(1, 512, false), &cells)).contains("not continuous"));
        let pos = [1, 0];
        let b = BatchInput {
            pos: Some(&pos),
            ..input(&[1, 1])
        };
        assert!(err(resolve(&b, &limits(1, 512, false), &cells)).contains("decreasing"));
    }

    #[test]
    fn positions_must_continue_the_cache() {
        let cells = |s| (s == 0).then_some(1);
        let b = resolve(&input(&[4]), &limits(1, 512, false), &cells).expect("auto position");
        assert_eq!(b.places[0].pos, 2);
        let pos = [5];
        let bad = BatchInput {
            pos: Some(&pos),
            ..input(&[4])
        };
        let msg = resolve(&bad, &limits(1, 512, false), &cells)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            msg.contains("start at position Y = 5") && msg.contains("X = 1"),
            "{msg}"
        );
    }

    /// With M-RoPE a sequence may jump ahead of its cached positions, not back onto them.
    #[test]
    fn mrope_positions_may_jump_forward_only() {
        let cells = |s| (s == 0).then_some(1);
        let at = |p: i32| {
            let pos = [p];
            let b = BatchInput {
                pos: Some(&pos),
                ..input(&[4])
            };
            resolve(&b, &limits(1, 512, true), &cells).map(|b| b.places[0].ext)
        };
        let ext = at(5).expect("a jump forward");
        assert_eq!((ext.x, ext.y, ext.tok), (5, 5, 4));
        assert!(at(1).is_err() && at(0).is_err());
    }

    /// Rows of embeddings stand for tokens: counted by the model's width, recorded with the token
    /// the context says (-1 here), positions made from the cache.
    #[test]
    fn embeddings_resolve_by_rows() {
        let rows = [0.5f32; 6];
        let b = BatchInput {
            embd: Some(&rows),
            ..BatchInput::default()
        };
        let cells = |s| (s == 0).then_some(4);
        let r = resolve(&b, &limits(1, 512, false), &cells).expect("three rows of two");
        assert_eq!(r.len(), 3);
        assert_eq!(r.tokens, [-1, -1, -1]);
        assert_eq!(
            r.places.iter().map(|p| (p.pos, p.ext.tok)).collect::<Vec<_>>(),
            [(5, -1), (6, -1), (7, -1)]
        );
        assert_eq!(r.embd.as_ref().map(|e| e.rows_of(&[2, 0])), Some(vec![0.5; 4]));
        let odd = [0.5f32; 5];
        let b = BatchInput {
            embd: Some(&odd),
            ..BatchInput::default()
        };
        let msg = resolve(&b, &limits(1, 512, false), &cells).err().map(|e| e.to_string());
        assert!(msg.is_some_and(|m| m.contains("not whole rows")));
        // With token ids as well, the ids decide.
        let b = BatchInput {
            embd: Some(&rows),
            ..input(&[1, 2, 3])
        };
        let r = resolve(&b, &limits(1, 512, false), &cells).expect("ids");
        assert!(r.embd.is_none() && r.tokens == [1, 2, 3]);
    }

    /// With M-RoPE an image's rows come with their sections (section by section), may start at
    /// the cache's last position and share positions; the cell keeps sections 2 and 1 as x, y.
    #[test]
    fn mrope_embeddings_take_their_sections() {
        let rows = [0.0f32; 4];
        // Two rows at temporal position 3, (y, x) = (0, 0) and (0, 1).
        let pos = [3, 3, 0, 0, 0, 1, 0, 0];
        let b = BatchInput {
            embd: Some(&rows),
            pos: Some(&pos),
            ..BatchInput::default()
        };
        let cells = |s| (s == 0).then_some(3);
        let r = resolve(&b, &limits(1, 512, true), &cells).expect("an image at the last position");
        let e = r.embd.as_ref().map(|e| e.sections.clone()).unwrap_or_default();
        assert_eq!(e, [[3, 0, 0, 0], [3, 0, 1, 0]]);
        assert_eq!(
            r.places.iter().map(|p| (p.ext.x, p.ext.y)).collect::<Vec<_>>(),
            [(0, 0), (1, 0)]
        );
        let early = |s| (s == 0).then_some(4);
        assert!(resolve(&b, &limits(1, 512, true), &early).is_err());
        // Made positions fill the first section only, as llama.cpp's.
        let b = BatchInput {
            embd: Some(&rows),
            ..BatchInput::default()
        };
        let r = resolve(&b, &limits(1, 512, true), &cells).expect("made positions");
        assert_eq!(
            r.embd.map(|e| e.sections).unwrap_or_default(),
            [[4, 0, 0, 0], [5, 0, 0, 0]]
        );
        // Too few positions for the sections.
        let b = BatchInput {
            embd: Some(&rows),
            pos: Some(&pos[..2]),
            ..BatchInput::default()
        };
        assert!(resolve(&b, &limits(1, 512, true), &cells).is_err());
    }

    /// The extended batch: one kind of input for all entries, rows of the model's width set once,
    /// an embedding entry's positions per section.
    #[test]
    fn extended_batch_entries() {
        let mut b = BatchExt::new(4, 2, 10, 2, 4);
        assert_eq!(b.add(0, None), Ok(0));
        assert!(b.set_embd(0, &[1.0]).is_err_and(|e| e.contains("size mismatch")));
        assert!(b.set_embd(0, &[1.0, 2.0]).is_ok());
        assert!(b.set_embd(0, &[1.0, 2.0]).is_err_and(|e| e.contains("already set")));
        assert!(b.set_embd(3, &[1.0, 2.0]).is_err());
        assert_eq!(b.pos_count(0), Some(4));
        assert!(b.set_pos(0, &[7, 1, 2, 0]));
        assert_eq!(b.add(1, None), Ok(1));
        assert!(b.set_embd(1, &[3.0, 4.0]).is_ok());
        assert!(b.set_pos(1, &[7, 1, 3, 0]));
        let (rows, pos) = b
            .with_input(|i| Ok((i.embd.map(<[f32]>::to_vec), i.pos.map(<[i32]>::to_vec))))
            .expect("embeddings");
        assert_eq!(rows, Some(vec![1.0, 2.0, 3.0, 4.0]));
        assert_eq!(pos, Some(vec![7, 7, 1, 1, 2, 3, 0, 0]));
        assert_eq!(b.add(0, Some(3)), Ok(2));
        assert_eq!(b.pos_count(2), Some(1));
        assert!(b.with_input(|_| Ok(())).is_err());
        b.remove_last();
        b.remove_last();
        b.remove_last();
        assert_eq!(b.add(0, None), Ok(0));
        let msg = b.with_input(|_| Ok(())).err().map(|e| e.to_string());
        assert!(msg.is_some_and(|m| m.contains("neither token ids nor embeddings")));
    }
}

/// The extended batch of llama.h (`struct llama_batch_ext`): entries added one by one (a token
/// id, an embedding row, or both) with their sequence ids, explicit positions and output flags,
/// bounded by the context's n_batch.
#[derive(Debug, Clone)]
pub struct BatchExt {
    n_tokens_max: usize,
    n_seq_max: usize,
    n_vocab: usize,
    /// The width an embedding row must have.
    n_embd: usize,
    /// Positions an embedding entry takes (M-RoPE's four sections; else one).
    n_pos_per_embd: usize,
    /// Token ids, -1 (LLAMA_TOKEN_NULL) where none was given.
    tokens: Vec<i32>,
    embd: Vec<Option<Vec<f32>>>,
    pos: Vec<[i32; 4]>,
    seqs: Vec<Vec<i32>>,
    outputs: Vec<i8>,
}

/// Why `BatchExt::add` refused a token; llama.h's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    Full = -1,
    InvalidToken = -2,
    InvalidSeq = -3,
}

impl BatchExt {
    pub fn new(
        n_tokens_max: usize,
        n_seq_max: usize,
        n_vocab: usize,
        n_embd: usize,
        n_pos_per_embd: usize,
    ) -> BatchExt {
        BatchExt {
            n_tokens_max,
            n_seq_max,
            n_vocab,
            n_embd,
            n_pos_per_embd,
            tokens: Vec::new(),
            embd: Vec::new(),
            pos: Vec::new(),
            seqs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    pub fn clear(&mut self) {
        self.tokens.clear();
        self.embd.clear();
        self.pos.clear();
        self.seqs.clear();
        self.outputs.clear();
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    fn valid_seq(&self, seq: i32) -> bool {
        seq >= 0 && (seq as usize) < self.n_seq_max
    }

    /// Add token `id` (LLAMA_TOKEN_NULL for "set later") in sequence `seq` at position 0, no output.
    pub fn add(&mut self, seq: i32, id: Option<i32>) -> Result<usize, AddError> {
        if self.tokens.len() >= self.n_tokens_max {
            return Err(AddError::Full);
        }
        if !self.valid_seq(seq) {
            return Err(AddError::InvalidSeq);
        }
        if let Some(id) = id {
            if id < 0 || id as usize >= self.n_vocab {
                return Err(AddError::InvalidToken);
            }
        }
        self.tokens.push(id.unwrap_or(-1));
        self.embd.push(None);
        self.pos.push([0; 4]);
        self.seqs.push(vec![seq]);
        self.outputs.push(0);
        Ok(self.tokens.len() - 1)
    }

    /// Take back the entry `add` just made (an embedding refused after it).
    pub fn remove_last(&mut self) {
        self.tokens.pop();
        self.embd.pop();
        self.pos.pop();
        self.seqs.pop();
        self.outputs.pop();
    }

    /// Give entry `idx` the embedding `row` (once); the reason when refused.
    pub fn set_embd(&mut self, idx: i32, row: &[f32]) -> std::result::Result<(), String> {
        let n_embd = self.n_embd;
        let slot = usize::try_from(idx)
            .ok()
            .and_then(|i| self.embd.get_mut(i))
            .ok_or_else(|| format!("no entry {idx} in the batch"))?;
        if row.len() != n_embd {
            return Err(format!(
                "embedding size mismatch: {} floats, the model takes rows of {n_embd}",
                row.len()
            ));
        }
        if slot.is_some() {
            return Err(format!("the embedding of entry {idx} is already set"));
        }
        *slot = Some(row.to_vec());
        Ok(())
    }

    /// Also put token `idx` in sequence `seq`.
    pub fn add_seq(&mut self, idx: i32, seq: i32) -> bool {
        let valid = self.valid_seq(seq);
        match usize::try_from(idx).ok().and_then(|i| self.seqs.get_mut(i)) {
            Some(s) if valid => {
                if !s.contains(&seq) {
                    s.push(seq);
                }
                true
            }
            _ => false,
        }
    }

    /// The positions `set_pos` reads for entry `idx`: one for a token id, else (an embedding)
    /// one per M-RoPE section. None: no such entry.
    pub fn pos_count(&self, idx: i32) -> Option<usize> {
        let t = *usize::try_from(idx).ok().and_then(|i| self.tokens.get(i))?;
        Some(if t >= 0 { 1 } else { self.n_pos_per_embd })
    }

    /// Set entry `idx`'s position (sections, for an embedding on an M-RoPE model).
    pub fn set_pos(&mut self, idx: i32, pos: &[i32]) -> bool {
        match usize::try_from(idx).ok().and_then(|i| self.pos.get_mut(i)) {
            Some(p) => {
                p.iter_mut().zip(pos).for_each(|(d, &s)| *d = s);
                true
            }
            None => false,
        }
    }

    pub fn set_output(&mut self, idx: i32, value: bool) -> bool {
        match usize::try_from(idx).ok().and_then(|i| self.outputs.get_mut(i)) {
            Some(o) => {
                *o = i8::from(value);
                true
            }
            None => false,
        }
    }

    /// Run `f` on the batch as decode input (positions always explicit), once every entry is
    /// known to carry the same kinds of input, as llama.cpp requires.
    pub fn with_input<R>(&self, f: impl FnOnce(&BatchInput) -> Result<R>) -> Result<R> {
        let has_token = |i: usize| self.tokens[i] >= 0;
        let has_embd = |i: usize| self.embd[i].is_some();
        let n = self.len();
        if n == 0 {
            return Err(Error::invalid("n_tokens == 0: the batch is empty"));
        }
        let (token, embd) = (has_token(0), has_embd(0));
        if (1..n).any(|i| has_token(i) != token || has_embd(i) != embd) {
            return Err(Error::invalid(
                "all entries in the batch must carry the same kinds of input (token ids, embeddings)",
            ));
        }
        if !token && !embd {
            return Err(Error::invalid("the batch has neither token ids nor embeddings"));
        }
        let rows: Vec<f32> = self.embd.iter().flatten().flatten().copied().collect();
        let pos: Vec<i32> = match token {
            true => self.pos.iter().map(|p| p[0]).collect(),
            false => (0..self.n_pos_per_embd)
                .flat_map(|j| self.pos.iter().map(move |p| p[j]))
                .collect(),
        };
        f(&BatchInput {
            tokens: if token { &self.tokens } else { &[] },
            embd: embd.then_some(&rows[..]),
            pos: Some(&pos),
            seq_ids: Some(self.seqs.iter().map(Vec::as_slice).collect()),
            outputs: Some(&self.outputs),
        })
    }
}

/// The tokens (batch indices) of one ubatch and how attention groups them: `n_streams` groups of
/// `len / n_streams` tokens each, stored group after group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ubatch {
    pub idx: Vec<usize>,
    pub n_streams: usize,
}

/// Consecutive chunks of at most `n_ubatch` tokens, in batch order (one attention group each).
pub fn split_simple(n_tokens: usize, n_ubatch: usize) -> Vec<Ubatch> {
    (0..n_tokens)
        .step_by(n_ubatch.max(1))
        .map(|s| Ubatch {
            idx: (s..(s + n_ubatch).min(n_tokens)).collect(),
            n_streams: 1,
        })
        .collect()
}

/// llama.cpp's equal split: each ubatch takes the same number of tokens from each of several
/// sequence sets (the distinct sets of sequences tokens belong to, none overlapping another in the
/// ubatch), as many as the shortest of them has left and `n_ubatch` allows, stored set by set.
/// `sequential` (what per-sequence caches and recurrent state need) takes only sets of
/// consecutive first ids and no token shared between sequences: None when the batch has one.
/// Attention then runs per sequence, which decides the kernel path ggml takes (and so the exact
/// numbers). With `keep_tail` (> 0, below `n_ubatch`), a sequence's last `keep_tail` tokens are
/// never split across ubatches.
pub fn split_equal(b: &Batch, n_ubatch: usize, sequential: bool, keep_tail: usize) -> Option<Vec<Ubatch>> {
    if sequential && b.places.iter().any(|p| p.seqs.iter().nth(1).is_some()) {
        return None;
    }
    let n_ubatch = n_ubatch.max(1);
    // The distinct sequence sets, each with its tokens in batch order.
    let mut sets: Vec<(SeqSet, Vec<usize>)> = Vec::new();
    // Per token: its set and its place among the set's tokens.
    let mut set_of = Vec::with_capacity(b.places.len());
    for (i, p) in b.places.iter().enumerate() {
        let k = match sets.iter().position(|(s, _)| *s == p.seqs) {
            Some(k) => k,
            None => {
                sets.push((p.seqs, Vec::new()));
                sets.len() - 1
            }
        };
        set_of.push((k, sets[k].1.len()));
        sets[k].1.push(i);
    }
    let mut taken = vec![0usize; sets.len()];
    let mut out = Vec::new();
    loop {
        // The sets of this ubatch, in the order their first untaken token appears.
        let mut cur: Vec<usize> = Vec::new();
        let mut last_seq = 0;
        for (i, p) in b.places.iter().enumerate() {
            let (k, rank) = set_of[i];
            if rank < taken[k] {
                continue;
            }
            let disjoint = cur.iter().all(|&c| !sets[c].0.intersects(&sets[k].0));
            let next = !sequential || cur.is_empty() || p.primary_seq == last_seq + 1;
            if disjoint && next {
                cur.push(k);
                last_seq = p.primary_seq;
                if cur.len() > n_ubatch {
                    break;
                }
            }
        }
        if cur.is_empty() {
            return Some(out);
        }
        let mut per_set = 0;
        while cur.iter().all(|&k| taken[k] < sets[k].1.len()) {
            cur.iter().for_each(|&k| taken[k] += 1);
            per_set += 1;
            if (per_set + 1) * cur.len() > n_ubatch {
                break;
            }
        }
        // Tokens taken per set this time.
        let mut count = vec![per_set; cur.len()];
        if keep_tail > 0 {
            let left = |k: usize, taken: &[usize]| sets[k].1.len() - taken[k];
            // The sets that finish here or leave at least a whole tail for later, in order.
            let mut n_keep = cur
                .iter()
                .take_while(|&&k| left(k, &taken) == 0 || left(k, &taken) >= keep_tail)
                .count();
            if n_keep == 0 {
                // The first set alone: to its end if that fits, else leaving a whole tail.
                let k = cur[0];
                if count[0] + left(k, &taken) <= n_ubatch {
                    count[0] += left(k, &taken);
                    taken[k] = sets[k].1.len();
                } else {
                    while left(k, &taken) < keep_tail {
                        taken[k] -= 1;
                        count[0] -= 1;
                    }
                }
                n_keep = 1;
            }
            for &k in &cur[n_keep..] {
                taken[k] -= per_set;
            }
            cur.truncate(n_keep);
            count.truncate(n_keep);
        }
        let idx = cur
            .iter()
            .zip(&count)
            .flat_map(|(&k, &n)| sets[k].1[taken[k] - n..taken[k]].iter().copied())
            .collect();
        out.push(Ubatch {
            idx,
            n_streams: cur.len(),
        });
    }
}

/// llama.cpp's split for recurrent state with embeddings: each ubatch one sequence's next tokens
/// (up to `n_ubatch`), from the first token not yet taken on, each later token joining when its
/// sequences are among the last taken one's.
pub fn split_seq(b: &Batch, n_ubatch: usize) -> Option<Vec<Ubatch>> {
    let n = b.places.len();
    let mut used = vec![false; n];
    let mut out = Vec::new();
    while let Some(mut cur) = used.iter().position(|&u| !u) {
        let mut set = b.places[cur].seqs;
        let mut idx = Vec::new();
        loop {
            idx.push(cur);
            used[cur] = true;
            if idx.len() >= n_ubatch.max(1) {
                break;
            }
            let subset = |i: usize| b.places[i].seqs.iter().all(|s| set.contains(s));
            let Some(next) = (cur + 1..n).find(|&i| !used[i] && subset(i)) else {
                break;
            };
            cur = next;
            set = b.places[cur].seqs;
        }
        out.push(Ubatch { idx, n_streams: 1 });
    }
    Some(out)
}

#[cfg(test)]
mod split_tests {
    use super::*;

    fn batch_of(seq_lens: &[usize]) -> Batch {
        let mut b = Batch::default();
        for (s, &n) in seq_lens.iter().enumerate() {
            for i in 0..n {
                b.tokens.push(0);
                b.places.push(TokenPlace {
                    pos: i as i32,
                    seqs: SeqSet::single(s),
                    primary_seq: s,
                    ext: CellExt::default(),
                });
                b.outputs.push(false);
            }
        }
        b
    }

    #[test]
    fn equal_split_takes_the_same_count_from_consecutive_sequences() {
        // The reference multi-sequence batch: prompts of 5, 37, 18 and 4 tokens.
        let b = batch_of(&[5, 37, 18, 4]);
        let u = split_equal(&b, 512, true, 0).expect("no shared tokens");
        let shape: Vec<(usize, usize)> = u.iter().map(|u| (u.n_streams, u.idx.len())).collect();
        assert_eq!(shape, [(4, 16), (3, 3), (2, 26), (1, 19)]);
        assert_eq!(&u[0].idx[..5], &[0, 1, 2, 3, 5]);
        assert_eq!(u[1].idx, [4, 9, 46]);
        let mut all: Vec<usize> = u.iter().flat_map(|u| u.idx.clone()).collect();
        all.sort();
        assert_eq!(all, (0..64).collect::<Vec<_>>());
    }

    #[test]
    fn equal_split_respects_n_ubatch() {
        let u = split_equal(&batch_of(&[10, 10]), 7, true, 0).expect("no shared tokens");
        assert!(u.iter().all(|u| u.idx.len() <= 7));
        assert_eq!(u.iter().map(|u| u.idx.len()).sum::<usize>(), 20);
    }

    #[test]
    fn simple_split_is_consecutive_chunks() {
        let u = split_simple(10, 4);
        assert_eq!(
            u.iter().map(|u| u.idx.clone()).collect::<Vec<_>>(),
            [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
        );
    }
}

//! The candidate array a sampler works on (a safe view of C's `llama_token_data_array`) and the steps
//! several samplers share: softmax, temperature, top-k, and llama.cpp's bucketed partial sort.

use super::cxx_sort;
use super::Token;

/// One candidate; the same layout as `llama_token_data`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct TokenData {
    pub id: Token,
    pub logit: f32,
    pub p: f32,
}

/// The candidates of one sampling step. `data` is exactly the `size` elements C sees; samplers may
/// shrink it from the back (`truncate`) or, like XTC, from the front (`drop_front`, which moves C's
/// data pointer).
pub struct Candidates<'a> {
    data: &'a mut [TokenData],
    offset: usize,
    /// Index into `data` of the chosen candidate, -1 when none.
    pub selected: i64,
    /// Whether `data` is sorted by descending logit.
    pub sorted: bool,
}

impl<'a> Candidates<'a> {
    pub fn new(data: &'a mut [TokenData], selected: i64, sorted: bool) -> Self {
        Candidates {
            data,
            offset: 0,
            selected,
            sorted,
        }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn data(&self) -> &[TokenData] {
        self.data
    }

    pub fn data_mut(&mut self) -> &mut [TokenData] {
        self.data
    }

    /// How many elements `drop_front` removed in total (C's data pointer moves by this much).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The selected candidate, if `selected` is a valid index.
    pub fn selected_data(&self) -> Option<&TokenData> {
        usize::try_from(self.selected).ok().and_then(|i| self.data.get(i))
    }

    pub fn truncate(&mut self, n: usize) {
        if n < self.data.len() {
            let data = std::mem::take(&mut self.data);
            self.data = &mut data[..n];
        }
    }

    pub fn drop_front(&mut self, n: usize) {
        let n = n.min(self.data.len());
        let data = std::mem::take(&mut self.data);
        self.data = &mut data[n..];
        self.offset += n;
    }
}

/// llama.cpp's candidate order: descending logit.
pub(super) fn by_logit_desc(a: &TokenData, b: &TokenData) -> bool {
    a.logit > b.logit
}

/// `std::max(a, b)` for floats: `a < b ? b : a` (a NaN in `b` is ignored, a NaN in `a` sticks).
pub(super) fn cxx_max(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}

/// A C++ float-to-int conversion as x86-64 executes it (cvttss2si): truncation, and INT_MIN for NaN
/// and out-of-range values where Rust's `as` would saturate.
pub(super) fn cvtt_i32(x: f32) -> i32 {
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

const N_BUCKETS: usize = 128;
const BUCKET_LOW: f32 = -10.0;
const BUCKET_HIGH: f32 = 10.0;
const BUCKET_SCALE: f32 = N_BUCKETS as f32 / (BUCKET_HIGH - BUCKET_LOW);
const BUCKET_INTER: f32 = -BUCKET_LOW * BUCKET_SCALE;

/// llama.cpp's partial sort for large `npartial`: histogram the logits into 128 buckets over [-10, 10],
/// keep the highest buckets that hold at least `npartial` candidates, sort them bucket by bucket
/// (`std::sort`, and `std::partial_sort` for the last one). `out` receives those buckets' candidates,
/// the first `npartial` of them sorted. Requires `npartial <= data.len()`.
pub(super) fn bucket_partial_sort(data: &[TokenData], npartial: usize, out: &mut Vec<TokenData>) {
    let mut bucket_of = Vec::with_capacity(data.len());
    let mut histo = [0usize; N_BUCKETS];
    for d in data {
        let ib = cvtt_i32(BUCKET_SCALE * d.logit + BUCKET_INTER).clamp(0, N_BUCKETS as i32 - 1) as usize;
        bucket_of.push(ib);
        histo[ib] += 1;
    }
    // The lowest bucket still needed to reach npartial candidates.
    let mut nhave = 0;
    let mut low = N_BUCKETS - 1;
    loop {
        nhave += histo[low];
        if nhave >= npartial || low == 0 {
            break;
        }
        low -= 1;
    }
    out.clear();
    out.resize(nhave, TokenData::default());
    let mut next = [0usize; N_BUCKETS];
    let mut start = 0;
    for j in (low..N_BUCKETS).rev() {
        next[j] = start;
        start += histo[j];
    }
    for (d, &j) in data.iter().zip(&bucket_of) {
        if j >= low {
            out[next[j]] = *d;
            next[j] += 1;
        }
    }
    let mut at = 0;
    for j in (low + 1..N_BUCKETS).rev() {
        cxx_sort::sort(&mut out[at..at + histo[j]], &mut by_logit_desc);
        at += histo[j];
    }
    let rest = npartial.saturating_sub(at);
    cxx_sort::partial_sort(&mut out[at..at + histo[low]], rest, &mut by_logit_desc);
}

/// Keep the `npartial` highest-logit candidates, sorted (llama.cpp's in-place partial sort).
pub(super) fn sort_top(cur: &mut Candidates<'_>, npartial: usize) {
    let npartial = npartial.min(cur.len());
    if npartial <= 128 {
        cxx_sort::partial_sort(cur.data_mut(), npartial, &mut by_logit_desc);
    } else {
        let mut tmp = Vec::new();
        bucket_partial_sort(cur.data(), npartial, &mut tmp);
        cur.data_mut()[..npartial].copy_from_slice(&tmp[..npartial]);
    }
    cur.truncate(npartial);
    cur.sorted = true;
}

/// The highest logit of non-empty candidates: the first when sorted, else `std::max` over them in order
/// (so a NaN behaves as in llama.cpp).
pub(super) fn max_logit(cur: &Candidates<'_>) -> f32 {
    let data = cur.data();
    if cur.sorted {
        return data[0].logit;
    }
    data[1..].iter().fold(data[0].logit, |m, d| cxx_max(m, d.logit))
}

/// Probabilities from logits (llama.cpp's softmax, float accumulation), sorting first if asked.
pub(super) fn softmax(cur: &mut Candidates<'_>, do_sort: bool) {
    if cur.is_empty() {
        return;
    }
    if do_sort && !cur.sorted {
        let n = cur.len();
        sort_top(cur, n);
    }
    let max_l = max_logit(cur);
    let data = cur.data_mut();
    let mut cum_sum = 0.0f32;
    for d in data.iter_mut() {
        d.p = (d.logit - max_l).exp();
        cum_sum += d.p;
    }
    for d in data.iter_mut() {
        d.p /= cum_sum;
    }
}

/// Divide the logits by `t`; `t <= 0` keeps only the first maximum and sets the others to -inf.
pub(super) fn apply_temp(cur: &mut Candidates<'_>, t: f32) {
    let data = cur.data_mut();
    if data.is_empty() {
        return;
    }
    if t <= 0.0 {
        let mut max_i = 0;
        let mut max_l = data[0].logit;
        for i in 1..data.len() {
            if data[i].logit > max_l {
                data[max_i].logit = f32::NEG_INFINITY;
                max_i = i;
                max_l = data[i].logit;
            } else {
                data[i].logit = f32::NEG_INFINITY;
            }
        }
        return;
    }
    for d in data {
        d.logit /= t;
    }
}

/// Keep the `k` highest logits (`k <= 0`: no-op).
pub(super) fn apply_top_k(cur: &mut Candidates<'_>, k: i32) {
    if k <= 0 {
        return;
    }
    let k = (k as usize).min(cur.len());
    if !cur.sorted {
        sort_top(cur, k);
    }
    cur.truncate(k);
}

#[cfg(test)]
pub(super) mod test_util {
    use super::*;

    /// Candidates 0..n with logit ln(p_i) and p_i set, as llama.cpp's sampler tests build them.
    pub fn from_probs(probs: &[f32]) -> Vec<TokenData> {
        probs
            .iter()
            .enumerate()
            .map(|(i, &p)| TokenData {
                id: i as Token,
                logit: p.ln(),
                p,
            })
            .collect()
    }

    pub fn from_logits(logits: &[f32]) -> Vec<TokenData> {
        logits
            .iter()
            .enumerate()
            .map(|(i, &l)| TokenData {
                id: i as Token,
                logit: l,
                p: 0.0,
            })
            .collect()
    }

    pub fn assert_probs(cur: &Candidates<'_>, expected: &[f32]) {
        let got: Vec<f32> = cur.data().iter().map(|d| d.p).collect();
        assert_eq!(
            got.len(),
            expected.len(),
            "sizes differ: got {got:?}, expected {expected:?}"
        );
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-5, "got {got:?}, expected {expected:?}");
        }
    }

    pub fn ids(cur: &Candidates<'_>) -> Vec<Token> {
        cur.data().iter().map(|d| d.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;

    #[test]
    fn softmax_normalises_and_sorts_on_request() {
        let mut v = from_logits(&[0.0, 2.0_f32.ln(), 3.0_f32.ln()]);
        let mut c = Candidates::new(&mut v, -1, false);
        softmax(&mut c, true);
        assert!(c.sorted);
        assert_eq!(ids(&c), vec![2, 1, 0]);
        assert_probs(&c, &[0.5, 1.0 / 3.0, 1.0 / 6.0]);
    }

    #[test]
    fn temp_zero_keeps_the_first_maximum() {
        let mut v = from_logits(&[1.0, 3.0, 3.0, 2.0]);
        let mut c = Candidates::new(&mut v, -1, false);
        apply_temp(&mut c, 0.0);
        let l: Vec<f32> = c.data().iter().map(|d| d.logit).collect();
        assert_eq!(l, vec![f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY, f32::NEG_INFINITY]);
    }

    #[test]
    fn bucketed_sort_equals_a_full_sort_on_distinct_logits() {
        // Fewer under Miri, which is slow: still more than the 300 kept, past the 128 of a plain sort.
        let n = if cfg!(miri) { 1000 } else { 5000 };
        let logits: Vec<f32> = (0..n).map(|i| ((i * 7919) % n) as f32 * 0.01 - 25.0).collect();
        let mut v = from_logits(&logits);
        let mut c = Candidates::new(&mut v, -1, false);
        sort_top(&mut c, 300);
        assert_eq!(c.len(), 300);
        let mut expect = logits.clone();
        expect.sort_by(|a, b| b.total_cmp(a));
        let got: Vec<f32> = c.data().iter().map(|d| d.logit).collect();
        assert_eq!(got, expect[..300]);
    }

    #[test]
    fn drop_front_moves_the_start() {
        let mut v = from_logits(&[1.0, 2.0, 3.0]);
        let mut c = Candidates::new(&mut v, -1, false);
        c.drop_front(2);
        assert_eq!(c.offset(), 2);
        assert_eq!(ids(&c), vec![2]);
    }

    #[test]
    fn float_to_int_is_x86s() {
        assert_eq!(cvtt_i32(f32::NAN), i32::MIN);
        assert_eq!(cvtt_i32(f32::INFINITY), i32::MIN);
        assert_eq!(cvtt_i32(-3.7), -3);
        assert_eq!(cvtt_i32(5e9), i32::MIN);
    }
}

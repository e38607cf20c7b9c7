//! Infill (fill-in-the-middle): prefer ending when end-of-generation tokens are likely enough, merge
//! candidates whose text is a prefix of another's, and drop the unlikely rest.

use super::candidates::softmax;
use super::{Candidates, Sampler, TokenData, TokenVocab, TOKEN_NULL};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Infill {
    vocab: &'static dyn TokenVocab,
}

impl Infill {
    /// (`vocab` is `'static` as far as Rust knows; C keeps the model alive as long as the sampler.)
    pub fn new(vocab: &'static dyn TokenVocab) -> Self {
        Infill { vocab }
    }

    /// Move the candidates for which `keep(candidate, is_eog)` holds to the front, in order; returns
    /// how many were kept, how many of those are not EOG, and their probability mass.
    fn compact(&self, cur: &mut Candidates<'_>, keep: impl Fn(&TokenData, bool) -> bool) -> (usize, usize, f32) {
        let data = cur.data_mut();
        let (mut n, mut n_non_eog, mut p_sum) = (0, 0, 0.0f32);
        for i in 0..data.len() {
            let is_eog = self.vocab.is_eog(data[i].id);
            if !keep(&data[i], is_eog) {
                continue;
            }
            if !is_eog {
                n_non_eog += 1;
            }
            p_sum += data[i].p;
            data[n] = data[i];
            n += 1;
        }
        (n, n_non_eog, p_sum)
    }
}

/// `!(p < t)`, which keeps NaN probabilities as llama.cpp's `p < t` test does.
fn not_below(p: f32, t: f32) -> bool {
    p.partial_cmp(&t) != Some(std::cmp::Ordering::Less)
}

fn normalize(cur: &mut Candidates<'_>, p_sum: f32) {
    for d in cur.data_mut() {
        d.p /= p_sum;
    }
}

impl Sampler for Infill {
    fn name(&self) -> &'static CStr {
        c"infill"
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if cur.is_empty() {
            return;
        }
        softmax(cur, true);
        let (mut p_txt_sum, mut p_eog_sum) = (0.0f32, 0.0f32);
        for d in cur.data() {
            if self.vocab.is_eog(d.id) {
                p_eog_sum += d.p;
            } else {
                p_txt_sum += d.p;
            }
        }

        // EOG likely enough (weighted by the number of candidates): keep only the EOG tokens.
        if 3.0 * p_eog_sum * cur.len() as f32 > p_txt_sum {
            let (n, _, p_sum) = self.compact(cur, |_, is_eog| is_eog);
            cur.truncate(n);
            normalize(cur, p_sum);
            return;
        }

        // Merge each candidate whose text is a prefix of another's into the more likely of the two.
        let pieces: Vec<Vec<u8>> = cur
            .data()
            .iter()
            .map(|d| self.vocab.piece(d.id, false).into_owned())
            .collect();
        let data = cur.data_mut();
        for i0 in 0..data.len() {
            for i1 in 0..data.len() {
                if data[i0].logit == f32::NEG_INFINITY {
                    break;
                }
                if i0 == i1 || data[i1].logit == f32::NEG_INFINITY {
                    continue;
                }
                let (a, b) = (&pieces[i0], &pieces[i1]);
                if !a.is_empty() && b.starts_with(a) {
                    let (dst, src) = if data[i1].p > data[i0].p { (i1, i0) } else { (i0, i1) };
                    data[dst].p += data[src].p;
                    data[src].logit = f32::NEG_INFINITY;
                    data[src].p = 0.0;
                }
            }
        }

        // Drop unlikely text tokens; EOG tokens always stay.
        let (n, n_non_eog, p_sum) = self.compact(cur, |d, is_eog| is_eog || not_below(d.p, 0.2));
        if n_non_eog == 0 {
            // Nothing but EOG is left: end the turn (on the first slot, whatever it holds now).
            cur.truncate(1);
            let eot = self.vocab.eot_or_eos();
            let first = &mut cur.data_mut()[0];
            if eot == TOKEN_NULL {
                crate::log_warn!("infill sampler: the vocabulary has neither an EOT nor an EOS token");
            } else {
                first.id = eot;
            }
            first.logit = 1.0;
            return;
        }
        cur.truncate(n);
        normalize(cur, p_sum);
        let thold = (1.0 / (n_non_eog as f64 + 1.0)) as f32;
        let (n, _, p_sum) = self.compact(cur, |d, is_eog| is_eog || not_below(d.p, thold));
        cur.truncate(n);
        normalize(cur, p_sum);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::vocab::test_vocab::WordVocab;
    use super::*;
    use std::sync::LazyLock;

    // Statics rather than leaked boxes: the sampler keeps a `&'static` vocabulary, and Miri
    // reports leaks.
    static SIX: LazyLock<WordVocab> = LazyLock::new(|| WordVocab::new(&["<eot>", "a", "b", "c", "d", "e", "f"], &[0]));

    fn infill() -> Infill {
        static VOCAB: LazyLock<WordVocab> =
            LazyLock::new(|| WordVocab::new(&["<eot>", "hel", "hell", "hello", "dummy"], &[0]));
        Infill::new(&*VOCAB)
    }

    #[test]
    fn merges_common_prefixes() {
        // The llama.h example: hel .5, hell .2, hello .1, dummy .1 (+ eot .1 is too likely; use .0001).
        let mut v = from_probs(&[0.0001, 0.5, 0.2, 0.1, 0.1]);
        let mut c = Candidates::new(&mut v, -1, false);
        infill().apply(&mut c);
        // "hel" absorbs hell and hello (0.8); dummy (0.1) falls under 0.2; then 1/(1+1) keeps hel.
        assert_eq!(ids(&c), vec![1, 0]);
        let p_hel = c.data()[0].p;
        assert!(p_hel > 0.99, "{p_hel}");
    }

    #[test]
    fn likely_eog_wins() {
        let mut v = from_probs(&[0.3, 0.4, 0.3, 0.0, 0.0]);
        let mut c = Candidates::new(&mut v, -1, false);
        infill().apply(&mut c);
        assert_eq!(ids(&c), vec![0]);
        assert_probs(&c, &[1.0]);
    }

    #[test]
    fn only_weak_text_left_ends_the_turn() {
        // Six unrelated texts at 1/6 each: none reaches 0.2, so the turn ends with EOT.
        let mut s = Infill::new(&*SIX);
        let mut v = from_probs(&[0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        assert_eq!(c.len(), 1);
        assert_eq!((c.data()[0].id, c.data()[0].logit), (0, 1.0));
    }

    #[test]
    fn no_eog_candidate_at_all_still_ends_the_turn() {
        // Nothing survives the 0.2 cut and no EOG is there to keep: the first slot becomes EOT.
        let mut s = Infill::new(&*SIX);
        let mut v = from_probs(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        v.remove(0);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        assert_eq!(c.len(), 1);
        assert_eq!((c.data()[0].id, c.data()[0].logit), (0, 1.0));
    }
}

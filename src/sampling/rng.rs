//! The random stream of llama.cpp's samplers: `std::mt19937` and the way libstdc++ (GCC 12) turns its
//! output into floating-point numbers (`std::generate_canonical`, `uniform_real_distribution`,
//! `discrete_distribution`), reproduced operation by operation so a seed gives the same draws.

use super::{Candidates, DEFAULT_SEED};

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// The 32-bit Mersenne Twister with the standard's parameters (`std::mt19937`).
#[derive(Clone)]
pub struct Mt19937 {
    state: Box<[u32; N]>,
    index: usize,
}

impl Mt19937 {
    pub fn new(seed: u32) -> Self {
        let mut state = Box::new([0u32; N]);
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: N }
    }

    fn twist(&mut self) {
        let s = &mut self.state;
        for i in 0..N {
            let y = (s[i] & UPPER_MASK) | (s[(i + 1) % N] & LOWER_MASK);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            s[i] = s[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `std::uniform_real_distribution<double>(0, 1)`: generate_canonical<double, 53> takes two
    /// 32-bit draws, low word first, summed in double.
    pub fn uniform_f64(&mut self) -> f64 {
        let lo = f64::from(self.next_u32());
        let hi = f64::from(self.next_u32());
        let r = (lo + hi * 4_294_967_296.0) / 18_446_744_073_709_551_616.0;
        if r >= 1.0 {
            1.0f64.next_down()
        } else {
            r
        }
    }

    /// `std::uniform_real_distribution<float>(0, 1)`: one draw converted to float (which may round up
    /// to 2^32, hence the clamp below 1 that libstdc++ applies).
    pub fn uniform_f32(&mut self) -> f32 {
        let r = self.next_u32() as f32 / 4_294_967_296.0f32;
        if r >= 1.0 {
            1.0f32.next_down()
        } else {
            r
        }
    }
}

/// The random state of a seeded sampler: the seed it was given, the seed in use (drawn anew on every
/// reset when the given one is `LLAMA_DEFAULT_SEED`) and the generator started from the latter.
#[derive(Clone)]
pub struct SeededRng {
    seed: u32,
    seed_cur: u32,
    rng: Mt19937,
}

impl SeededRng {
    pub fn new(seed: u32) -> Self {
        let seed_cur = resolve_seed(seed);
        SeededRng {
            seed,
            seed_cur,
            rng: Mt19937::new(seed_cur),
        }
    }

    /// Back to the start of the stream, through a fresh random seed if the given one asked for it.
    pub fn reset(&mut self) {
        *self = SeededRng::new(self.seed);
    }

    /// The seed the sampler was created with.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// The seed the current stream started from (what `llama_sampler_get_seed` reports).
    pub fn current_seed(&self) -> u32 {
        self.seed_cur
    }

    pub fn generator(&mut self) -> &mut Mt19937 {
        &mut self.rng
    }

    /// Select a candidate drawn by its probability (`std::discrete_distribution`) and return its index.
    pub fn select(&mut self, cur: &mut Candidates<'_>) -> usize {
        let idx = discrete(cur.data().iter().map(|d| d.p), &mut self.rng);
        cur.selected = idx as i64;
        idx
    }
}

/// The seed a sampler uses: `seed` itself, or a fresh random one for `LLAMA_DEFAULT_SEED`
/// (llama.cpp asks `std::random_device`, which reads the OS entropy source).
fn resolve_seed(seed: u32) -> u32 {
    if seed != DEFAULT_SEED {
        return seed;
    }
    use std::io::Read;
    let mut buf = [0u8; 4];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok()
    {
        return u32::from_ne_bytes(buf);
    }
    // No entropy device: fall back to the clock and the process-random hasher keys.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() as u32
}

/// `std::discrete_distribution<int>(weights)(rng)` as libstdc++ computes it: the weights as doubles,
/// normalised by their sum, cumulated (last forced to 1), then a lower_bound of one canonical double.
/// Fewer than two weights return 0 without drawing.
fn discrete(weights: impl ExactSizeIterator<Item = f32> + Clone, rng: &mut Mt19937) -> usize {
    let n = weights.len();
    if n < 2 {
        return 0;
    }
    let sum: f64 = weights.clone().fold(0.0, |acc, w| acc + f64::from(w));
    let mut cumulative = Vec::with_capacity(n);
    let mut run = 0.0f64;
    for (i, w) in weights.enumerate() {
        let p = f64::from(w) / sum;
        run = if i == 0 { p } else { run + p };
        cumulative.push(run);
    }
    cumulative[n - 1] = 1.0;
    let u = rng.uniform_f64();
    lower_bound(&cumulative, u)
}

/// libstdc++'s `std::lower_bound` (its exact halving, which matters when NaNs break monotonicity).
fn lower_bound(v: &[f64], x: f64) -> usize {
    let mut first = 0;
    let mut len = v.len();
    while len > 0 {
        let half = len >> 1;
        let middle = first + half;
        if v[middle] < x {
            first = middle + 1;
            len = len - half - 1;
        } else {
            len = half;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_the_standard_check_value() {
        // The C++ standard requires the 10000th output of a default-seeded (5489) mt19937 to be this.
        let mut r = Mt19937::new(5489);
        let mut v = 0;
        for _ in 0..10000 {
            v = r.next_u32();
        }
        assert_eq!(v, 4_123_659_995);
    }

    #[test]
    fn first_outputs_for_seed_42() {
        let mut r = Mt19937::new(42);
        assert_eq!(r.next_u32(), 1_608_637_542);
        assert_eq!(r.next_u32(), 3_421_126_067);
    }

    #[test]
    fn canonical_double_uses_two_words_low_first() {
        let mut a = Mt19937::new(7);
        let mut b = Mt19937::new(7);
        let lo = f64::from(b.next_u32());
        let hi = f64::from(b.next_u32());
        assert_eq!(a.uniform_f64(), (lo + hi * 4294967296.0) / 18446744073709551616.0);
    }

    #[test]
    fn discrete_with_one_weight_does_not_draw() {
        let mut a = Mt19937::new(1);
        assert_eq!(discrete([0.5f32].into_iter(), &mut a), 0);
        assert_eq!(a.next_u32(), Mt19937::new(1).next_u32());
    }

    #[test]
    fn discrete_picks_by_cumulative_weight() {
        // With weights 1,0,3 the first quarter of [0,1) maps to 0, the rest to 2.
        let mut r = Mt19937::new(3);
        let u = r.clone().uniform_f64();
        let got = discrete([1.0f32, 0.0, 3.0].into_iter(), &mut r);
        assert_eq!(got, if u <= 0.25 { 0 } else { 2 });
    }

    #[test]
    fn random_seed_is_drawn_for_the_default_seed() {
        assert_eq!(resolve_seed(5), 5);
        // Two random draws colliding is possible but has probability 2^-32.
        assert_ne!(resolve_seed(DEFAULT_SEED), resolve_seed(DEFAULT_SEED));
    }
}

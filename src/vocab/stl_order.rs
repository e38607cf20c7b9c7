//! The order in which llama.cpp meets the tokens when it looks for EOT/FIM tokens by their text.
//!
//! llama.cpp walks its `std::unordered_map<std::string, llama_token>` and keeps the first match, so
//! when a vocabulary has two candidates (SmolLM2 has both `<|im_end|>` and `<|endoftext|>`), the
//! winner is decided by libstdc++'s hash and bucket layout. This reproduces that layout: the string
//! hash (`std::_Hash_bytes`, seed 0xc70f6907), the prime bucket counts the table grows through, and
//! where insertion and rehashing put each node in the table's single linked list.

const SEED: u64 = 0xc70f_6907;
const MUL: u64 = 0xc6a4_a793_5bd1_e995;

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

/// `std::hash<std::string>` on 64-bit libstdc++.
pub(super) fn std_hash(bytes: &[u8]) -> u64 {
    let mut hash = SEED ^ (bytes.len() as u64).wrapping_mul(MUL);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let data = shift_mix(u64::from_le_bytes(word).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash = (hash ^ data).wrapping_mul(MUL);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let data = tail.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        hash = (hash ^ data).wrapping_mul(MUL);
    }
    shift_mix(shift_mix(hash).wrapping_mul(MUL))
}

/// The bucket counts a default-constructed table passes through (max load factor 1): it grows to the
/// next one when an insertion would take it past the current count.
const BUCKET_COUNTS: [u64; 19] = [
    13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061, 712697, 1447153, 2938679,
    5967347,
];

const NIL: u32 = u32::MAX;

/// Iteration order (indices into `hashes`) of a libstdc++ unordered_map after inserting distinct keys
/// with these hashes in this order; `None` past the bucket counts known here.
pub(super) fn iteration_order(hashes: &[u64]) -> Option<Vec<u32>> {
    let n = u32::try_from(hashes.len()).ok().filter(|&n| n < NIL)?;
    // Node `n` is the list head ("before begin"); `buckets[b]` is the node before bucket b's first.
    let head = n as usize;
    let mut next = vec![NIL; head + 1];
    let mut buckets: Vec<u32> = Vec::new();
    let mut grown = 0;
    for i in 0..head {
        if i as u64 + 1 > buckets.len() as u64 {
            let count = *BUCKET_COUNTS.get(grown)?;
            grown += 1;
            buckets = rehash(&mut next, head, hashes, count);
        }
        let count = buckets.len() as u64;
        let b = (hashes[i] % count) as usize;
        if buckets[b] != NIL {
            let before = buckets[b] as usize;
            next[i] = next[before];
            next[before] = i as u32;
        } else {
            // A bucket's first node goes to the front of the list.
            next[i] = next[head];
            next[head] = i as u32;
            if next[i] != NIL {
                buckets[(hashes[next[i] as usize] % count) as usize] = i as u32;
            }
            buckets[b] = n;
        }
    }
    let mut order = Vec::with_capacity(head);
    let mut p = next[head];
    while p != NIL {
        order.push(p);
        p = next[p as usize];
    }
    Some(order)
}

/// Moves every node into `count` buckets, walking the list as libstdc++'s `_M_rehash_aux` does.
fn rehash(next: &mut [u32], head: usize, hashes: &[u64], count: u64) -> Vec<u32> {
    let mut buckets = vec![NIL; count as usize];
    let mut p = next[head];
    next[head] = NIL;
    let mut first_bucket = 0;
    while p != NIL {
        let node = p as usize;
        let after = next[node];
        let b = (hashes[node] % count) as usize;
        if buckets[b] == NIL {
            next[node] = next[head];
            next[head] = p;
            buckets[b] = head as u32;
            if next[node] != NIL {
                buckets[first_bucket] = p;
            }
            first_bucket = b;
        } else {
            let before = buckets[b] as usize;
            next[node] = next[before];
            next[before] = p;
        }
        p = after;
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_libstdcxx() {
        // Values printed by `std::hash<std::string>{}` with GCC 12's libstdc++.
        assert_eq!(std_hash(b"abc"), 0x32d8_2bf8_ed3d_ba39);
        assert_eq!(std_hash(b""), 0x553e_9390_1e46_2a6e);
        assert_eq!(std_hash(b"<|im_end|>"), 0x1c4a_d163_ccd5_c545);
    }
}

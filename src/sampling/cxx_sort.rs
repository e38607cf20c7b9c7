//! `std::sort` and `std::partial_sort` as libstdc++ (GCC 12) implements them. Both are unstable, so the
//! order they leave equal elements in is part of llama.cpp's results (a tie at the top-k boundary, or
//! which of two equal candidates a seeded draw lands on). Reproducing the algorithms step by step gives
//! the same permutation.
//!
//! libstdc++'s "unguarded" loops rely on sentinels that a comparator broken by NaN can defeat (C++ then
//! reads out of bounds); here each of them also stops at the slice end, which changes nothing whenever
//! the C++ code is well defined.

/// libstdc++'s `_S_threshold`: partitions at most this long are left to insertion sort.
const THRESHOLD: usize = 16;

/// `std::sort(v.begin(), v.end(), less)`.
pub fn sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    if v.len() > 1 {
        let depth = 2 * (usize::BITS - 1 - v.len().leading_zeros()) as usize;
        introsort_loop(v, depth, less);
        final_insertion_sort(v, less);
    }
}

/// `std::partial_sort(v.begin(), v.begin() + middle, v.end(), less)`: the `middle` smallest elements
/// (under `less`) sorted at the front, the rest in heap-selection order behind them.
pub fn partial_sort<T: Copy>(v: &mut [T], middle: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let middle = middle.min(v.len());
    heap_select(v, middle, less);
    sort_heap(&mut v[..middle], less);
}

fn introsort_loop<T: Copy>(v: &mut [T], mut depth: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let mut last = v.len();
    while last > THRESHOLD {
        if depth == 0 {
            partial_sort(&mut v[..last], last, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(&mut v[..last], less);
        if cut >= last {
            // Only a NaN-broken comparator gets here (C++ would have run past the end): heapsort the rest.
            partial_sort(&mut v[..last], last, less);
            return;
        }
        introsort_loop(&mut v[cut..last], depth, less);
        last = cut;
    }
}

/// Median of (v[1], v[mid], v[last-1]) moved to v[0], then the unguarded partition of v[1..].
fn partition_pivot<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) -> usize {
    let last = v.len();
    let mid = last / 2;
    move_median_to_first(v, 1, mid, last - 1, less);
    unguarded_partition(v, 1, last, less)
}

fn move_median_to_first<T: Copy>(v: &mut [T], a: usize, b: usize, c: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, pick);
}

/// Hoare partition around the pivot at v[0], scanning [first, last).
fn unguarded_partition<T: Copy>(
    v: &mut [T],
    mut first: usize,
    mut last: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> usize {
    let pivot = v[0];
    loop {
        while first < v.len() && less(&v[first], &pivot) {
            first += 1;
        }
        last = last.saturating_sub(1);
        while last > 0 && less(&pivot, &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn final_insertion_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let val = v[i];
            v.copy_within(0..i, 1);
            v[0] = val;
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

fn unguarded_linear_insert<T: Copy>(v: &mut [T], mut last: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let val = v[last];
    while last > 0 && less(&val, &v[last - 1]) {
        v[last] = v[last - 1];
        last -= 1;
    }
    v[last] = val;
}

/// Keep the `middle` smallest elements in a max-heap (under `less`) at the front.
fn heap_select<T: Copy>(v: &mut [T], middle: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let (heap, rest) = v.split_at_mut(middle);
    make_heap(heap, less);
    let Some(&first) = heap.first() else { return };
    let mut top = first;
    for x in rest {
        if less(x, &top) {
            // __pop_heap(first, middle, i): the heap top goes to i, x sinks into the heap.
            let value = *x;
            *x = top;
            adjust_heap(heap, 0, value, less);
            top = heap[0];
        }
    }
}

fn make_heap<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let value = v[parent];
        adjust_heap(v, parent, value, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

fn sort_heap<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let mut last = v.len();
    while last > 1 {
        last -= 1;
        let value = v[last];
        v[last] = v[0];
        adjust_heap(&mut v[..last], 0, value, less);
    }
}

/// libstdc++'s `__adjust_heap`: move the hole down to a leaf along the larger children, then push
/// `value` up from there.
fn adjust_heap<T: Copy>(v: &mut [T], mut hole: usize, value: T, less: &mut impl FnMut(&T, &T) -> bool) {
    let len = v.len();
    let top = hole;
    let mut child = hole;
    while len > 0 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len >= 2 && len.is_multiple_of(2) && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    // __push_heap
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn sort_sorts_and_keeps_the_multiset() {
        let mut s = 1;
        // 5000 adds nothing to 1000's paths that Miri, which is slow, needs to see.
        let sizes: &[usize] = if cfg!(miri) {
            &[0, 1, 2, 5, 16, 17, 100, 1000]
        } else {
            &[0, 1, 2, 5, 16, 17, 100, 1000, 5000]
        };
        for &n in sizes {
            let orig: Vec<u64> = (0..n).map(|_| lcg(&mut s) % 50).collect();
            let mut v = orig.clone();
            sort(&mut v, &mut |a, b| a < b);
            let mut expect = orig.clone();
            expect.sort();
            assert_eq!(v, expect, "n={n}");
        }
    }

    #[test]
    fn partial_sort_puts_the_smallest_first_in_order() {
        let mut s = 9;
        for (n, k) in [(10usize, 3usize), (1000, 40), (1000, 1000), (7, 0), (300, 128)] {
            let orig: Vec<u64> = (0..n).map(|_| lcg(&mut s) % 97).collect();
            let mut v = orig.clone();
            partial_sort(&mut v, k, &mut |a, b| a < b);
            let mut expect = orig.clone();
            expect.sort();
            assert_eq!(v[..k], expect[..k]);
            let mut rest = v.clone();
            rest.sort();
            assert_eq!(rest, expect);
        }
    }

    #[test]
    fn nan_never_escapes_the_slice() {
        let mut v: Vec<f32> = (0..200).map(|i| if i % 3 == 0 { f32::NAN } else { i as f32 }).collect();
        sort(&mut v, &mut |a, b| a > b);
        partial_sort(&mut v, 50, &mut |a, b| a > b);
        assert_eq!(v.len(), 200);
    }
}

//! Books of the handles C holds. A handle is recognised by looking its address up, never by
//! reading through it, so a freed, foreign or garbage pointer is refused with a message instead of
//! dereferenced. A freed handle's allocation is kept in a bounded quarantine: its address is not
//! reused while it is there, so a double free or a use after free of it is recognised as such.
//! After `QUARANTINE` later frees of the same kind the address may come back for a new object, and
//! a stale pointer to it then reaches that object: this is the one mistake the books cannot catch.

use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many freed handles of one kind keep their address reserved (fewer under Miri, which runs
/// the tests that fill it a hundred times slower).
pub(crate) const QUARANTINE: usize = if cfg!(miri) { 64 } else { 4096 };

/// The live handles of one kind (`T`: what the book knows of each) and the allocations of the
/// most recently freed ones (`Q`, whose addresses they were).
pub(crate) struct Book<T, Q> {
    kind: &'static str,
    live: BTreeMap<usize, T>,
    freed: VecDeque<(usize, Q)>,
    freed_keys: BTreeSet<usize>,
}

impl<T, Q> Book<T, Q> {
    pub const fn new(kind: &'static str) -> Self {
        Book {
            kind,
            live: BTreeMap::new(),
            freed: VecDeque::new(),
            freed_keys: BTreeSet::new(),
        }
    }

    pub fn insert(&mut self, key: usize, v: T) {
        // An address in quarantine is still allocated, so a new object cannot have it.
        debug_assert!(!self.is_freed(key));
        self.live.insert(key, v);
    }

    /// Whether `key` was one of this book's handles and has been freed recently.
    pub fn is_freed(&self, key: usize) -> bool {
        self.freed_keys.contains(&key)
    }

    fn refusal(&self, key: usize) -> Error {
        if key == 0 {
            Error::invalid(format!("{} is NULL", self.kind))
        } else if self.is_freed(key) {
            Error::invalid(format!("{} {key:#x} was freed already", self.kind))
        } else {
            Error::invalid(format!("{key:#x} is not a live {} handle", self.kind))
        }
    }

    pub fn get(&self, key: usize) -> Result<&T> {
        self.live.get(&key).ok_or_else(|| self.refusal(key))
    }

    pub fn get_mut(&mut self, key: usize) -> Result<&mut T> {
        if !self.live.contains_key(&key) {
            return Err(self.refusal(key));
        }
        Ok(self.live.get_mut(&key).expect("checked above"))
    }

    pub fn remove(&mut self, key: usize) -> Result<T> {
        self.live.remove(&key).ok_or_else(|| self.refusal(key))
    }

    /// Keep `q`, the allocation behind the freed handle `key`, so that the address stays taken;
    /// the oldest one goes when the quarantine is full.
    pub fn retire(&mut self, key: usize, q: Q) -> Option<Q> {
        self.freed.push_back((key, q));
        self.freed_keys.insert(key);
        if self.freed.len() <= QUARANTINE {
            return None;
        }
        let (old, q) = self.freed.pop_front()?;
        self.freed_keys.remove(&old);
        Some(q)
    }

    /// The live handles whose record `gone` picks, taken out of the book.
    pub fn take_if(&mut self, mut gone: impl FnMut(&T) -> bool) -> Vec<(usize, T)> {
        let keys: Vec<usize> = self.live.iter().filter(|(_, v)| gone(v)).map(|(k, _)| *k).collect();
        keys.into_iter()
            .filter_map(|k| self.live.remove(&k).map(|v| (k, v)))
            .collect()
    }
}

/// The allocation that gives an opaque handle its address.
pub(crate) type Token = Box<u64>;

/// Handles of an opaque kind (model, vocab, context, memory): each is the address of a small
/// allocation of its own, mapped to the object.
pub(crate) struct Handles<V> {
    book: Book<(Token, V), Token>,
}

impl<V> Handles<V> {
    pub const fn new(kind: &'static str) -> Self {
        Handles { book: Book::new(kind) }
    }

    /// A new handle for `v`.
    pub fn insert(&mut self, v: V) -> usize {
        self.insert_tagged(v, 0)
    }

    /// A new handle for `v` whose address holds `word` (what a client reading through the handle
    /// finds there).
    pub fn insert_tagged(&mut self, v: V, word: u64) -> usize {
        let token: Token = Box::new(word);
        let key = &*token as *const u64 as usize;
        self.book.insert(key, (token, v));
        key
    }

    pub fn get(&self, key: usize) -> Result<&V> {
        self.book.get(key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: usize) -> Result<&mut V> {
        self.book.get_mut(key).map(|(_, v)| v)
    }

    /// Free the handle: the object is returned (to be dropped outside the lock the book is kept
    /// under), the address goes into quarantine.
    pub fn remove(&mut self, key: usize) -> Result<V> {
        let (token, v) = self.book.remove(key)?;
        self.book.retire(key, token);
        Ok(v)
    }

    /// Free every handle whose object `dead` says is gone.
    pub fn remove_if(&mut self, mut dead: impl FnMut(&V) -> bool) -> Vec<V> {
        let gone = self.book.take_if(|(_, v)| dead(v));
        gone.into_iter()
            .map(|(key, (token, v))| {
                self.book.retire(key, token);
                v
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_handle_is_refused_as_freed_and_a_foreign_one_as_unknown() {
        let mut h: Handles<&str> = Handles::new("widget");
        let a = h.insert("a");
        assert_eq!(*h.get(a).unwrap(), "a");
        assert_eq!(h.remove(a).unwrap(), "a");
        let freed = h.get(a).unwrap_err().to_string();
        assert!(freed.contains("freed already"), "{freed}");
        assert!(h.remove(a).unwrap_err().to_string().contains("freed already"));
        let foreign = h.get(a + 8).unwrap_err().to_string();
        assert!(foreign.contains("not a live widget handle"), "{foreign}");
        assert!(h.get(0).unwrap_err().to_string().contains("is NULL"));
    }

    #[test]
    fn quarantined_addresses_are_not_handed_out_again() {
        let mut h: Handles<u32> = Handles::new("widget");
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..64 {
            let k = h.insert(i);
            assert!(seen.insert(k), "address {k:#x} reused while quarantined");
            h.remove(k).unwrap();
        }
    }

    #[test]
    fn the_quarantine_is_bounded() {
        let mut b: Book<(), u32> = Book::new("widget");
        for k in 1..=QUARANTINE + 3 {
            let evicted = b.retire(k, k as u32);
            assert_eq!(evicted, (k > QUARANTINE).then(|| (k - QUARANTINE) as u32));
        }
        assert!(!b.is_freed(1));
        assert!(b.is_freed(QUARANTINE + 3));
    }

    #[test]
    fn remove_if_retires_what_it_takes() {
        let mut h: Handles<u32> = Handles::new("widget");
        let keys: Vec<usize> = (0..4).map(|i| h.insert(i)).collect();
        let mut gone = h.remove_if(|v| v % 2 == 1);
        gone.sort();
        assert_eq!(gone, vec![1, 3]);
        assert!(h.get(keys[1]).unwrap_err().to_string().contains("freed already"));
        assert_eq!(*h.get(keys[2]).unwrap(), 2);
    }
}

//! An ordered map with hashed lookups, for the maps keyed by object id that every packet
//! and every frame search: the store's objects and the replicas' bookkeeping.
//!
//! A `BTreeMap` gives what determinism needs — iteration in key order — but every lookup
//! walks two or three nodes of keys, each cold by the time the next datagram for this node
//! arrives (the simulator runs every node in one process; a server runs many objects).
//! Here the values sit in a slab (the `slab` crate) whose slots never move, a hash index
//! finds a key's slot in one probe, and a sorted vector of (key, slot) gives the key order
//! for walks.
//! Inserting or removing a key shifts the sorted vector (a `memmove` of 24-byte pairs,
//! a few hundred per node), which is rarer than lookups by far.
//!
//! The index hashes with `foldhash` seeded at random per process: object ids come from
//! peers, and a seeded hash keeps a peer from choosing ids that collide. The seed changes
//! only where keys sit in the index, never what any method returns or the order of a
//! walk. No published crate combines a hash index with key-ordered iteration (`indexmap`
//! keeps insertion order; re-sorting it on every insertion costs more than this).

use std::collections::HashMap;
use std::hash::Hash;

/// An ordered map: lookups through a hash index, iteration by ascending key, and the
/// results of a `BTreeMap` for every method it has.
///
/// A value can also be *lent* ([`IndexedMap::lend`]): taken out while its key keeps its
/// slot and its place in the order, and every method answers as if the key had been
/// removed, until [`IndexedMap::insert`] fills the slot again. The store lends each
/// primary to its think function this way, where a removal and a re-insertion moved the
/// sorted keys twice and rehashed the key (2.2 % of the default simulation's
/// instructions, `crates/sim/PERFORMANCE.md`, eighth round).
#[derive(Clone, Debug)]
pub(crate) struct IndexedMap<K, V> {
    /// Values, by slot (free slots are reused); `None` in the slot of a lent key.
    slots: slab::Slab<Option<V>>,
    /// Each key's slot.
    index: HashMap<K, usize, foldhash::fast::RandomState>,
    /// Every key with its slot, by ascending key.
    order: Vec<(K, usize)>,
    /// How many keys are lent (their slots hold `None`).
    lent: usize,
}

impl<K, V> Default for IndexedMap<K, V> {
    fn default() -> Self {
        Self {
            slots: slab::Slab::new(),
            index: HashMap::default(),
            order: Vec::new(),
            lent: 0,
        }
    }
}

impl<K: Ord + Hash + Copy, V> IndexedMap<K, V> {
    /// An empty map.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.order.len() - self.lent
    }

    /// True if the map has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `k`.
    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.slots.get(*self.index.get(k)?)?.as_ref()
    }

    /// The value of `k`, mutably.
    pub(crate) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.slots.get_mut(*self.index.get(k)?)?.as_mut()
    }

    /// True if `k` has a value.
    pub(crate) fn contains_key(&self, k: &K) -> bool {
        // The value's slot is read only while some key is lent.
        self.index
            .get(k)
            .is_some_and(|s| self.lent == 0 || self.slots.get(*s).is_some_and(Option::is_some))
    }

    /// Sets `k` to `v`; returns the value it replaced.
    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        if let Some(&s) = self.index.get(&k) {
            let old = self.slots[s].replace(v);
            if old.is_none() {
                self.lent -= 1;
            }
            return old;
        }
        self.add(k, Some(v));
        None
    }

    /// The value of `k`, inserted as `f()` if absent (`entry(k).or_insert_with(f)`).
    pub(crate) fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        let s = match self.index.get(&k) {
            Some(&s) => s,
            None => {
                // Added empty, as if lent, and filled below.
                self.lent += 1;
                self.add(k, None)
            }
        };
        let slot = &mut self.slots[s];
        if slot.is_none() {
            self.lent -= 1;
        }
        slot.get_or_insert_with(f)
    }

    /// Removes `k`; returns its value.
    pub(crate) fn remove(&mut self, k: &K) -> Option<V> {
        let s = self.index.remove(k)?;
        if let Ok(i) = self.order.binary_search_by(|(x, _)| x.cmp(k)) {
            self.order.remove(i);
        }
        let v = self.slots.try_remove(s)?;
        if v.is_none() {
            self.lent -= 1;
        }
        v
    }

    /// True if `k` is lent ([`Self::lend`]).
    pub(crate) fn is_lent(&self, k: &K) -> bool {
        self.index
            .get(k)
            .and_then(|s| self.slots.get(*s))
            .is_some_and(Option::is_none)
    }

    /// Takes `k`'s value out and leaves the key its slot and its place in the order: until
    /// [`Self::insert`] (or [`Self::get_or_insert_with`]) fills the slot, or [`Self::remove`]
    /// drops the key, every method answers as if `k` were absent.
    pub(crate) fn lend(&mut self, k: &K) -> Option<V> {
        let v = self.slots.get_mut(*self.index.get(k)?)?.take()?;
        self.lent += 1;
        Some(v)
    }

    /// The entries, by ascending key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.order
            .iter()
            .filter_map(|(k, s)| self.slots.get(*s)?.as_ref().map(|v| (k, v)))
    }

    /// Adds `k`, absent, with `v`; returns its slot.
    fn add(&mut self, k: K, v: Option<V>) -> usize {
        let s = self.slots.insert(v);
        self.index.insert(k, s);
        let i = self.order.partition_point(|(x, _)| *x < k);
        self.order.insert(i, (k, s));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u32),
        Remove(u16),
        Bump(u16),
        GetMut(u16),
        /// Lend the key's value (the model removes it).
        Lend(u16),
        /// Put the most recently lent value back under its key (the model inserts it).
        GiveBack,
    }

    fn op(keys: u16) -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u16>(), any::<u32>()).prop_map(move |(k, v)| Op::Insert(k % keys, v)),
            any::<u16>().prop_map(move |k| Op::Remove(k % keys)),
            any::<u16>().prop_map(move |k| Op::Bump(k % keys)),
            any::<u16>().prop_map(move |k| Op::GetMut(k % keys)),
            any::<u16>().prop_map(move |k| Op::Lend(k % keys)),
            Just(Op::GiveBack),
        ]
    }

    proptest! {
        /// Every operation returns what `BTreeMap`'s does, and iteration visits the same
        /// entries in the same order, through insertions and removals that reuse slots.
        #[test]
        fn behaves_like_a_btreemap(ops in proptest::collection::vec(op(48), 0..300)) {
            let mut m: IndexedMap<u16, u32> = IndexedMap::new();
            let mut r: BTreeMap<u16, u32> = BTreeMap::new();
            let mut lent: Vec<(u16, u32)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(m.insert(k, v), r.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(m.remove(&k), r.remove(&k)),
                    Op::Bump(k) => {
                        *m.get_or_insert_with(k, || 7) += 1;
                        *r.entry(k).or_insert_with(|| 7) += 1;
                    }
                    Op::GetMut(k) => {
                        if let Some(v) = m.get_mut(&k) { *v ^= 0x55; }
                        if let Some(v) = r.get_mut(&k) { *v ^= 0x55; }
                    }
                    Op::Lend(k) => {
                        let v = m.lend(&k);
                        prop_assert_eq!(v, r.remove(&k));
                        lent.extend(v.map(|v| (k, v)));
                    }
                    Op::GiveBack => {
                        if let Some((k, v)) = lent.pop() {
                            prop_assert_eq!(m.insert(k, v), r.insert(k, v));
                        }
                    }
                }
                prop_assert_eq!(m.len(), r.len());
                prop_assert_eq!(m.is_empty(), r.is_empty());
                prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
                for k in 0..48 {
                    prop_assert_eq!(m.get(&k), r.get(&k));
                    prop_assert_eq!(m.contains_key(&k), r.contains_key(&k));
                }
            }
            // Slots are reused: none beyond the most entries held at once.
            prop_assert!(m.slots.iter().all(|(s, _)| s < 48));
        }
    }
}

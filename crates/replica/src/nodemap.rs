//! An ordered map keyed by node id with a direct index: the replica manager's state per
//! peer, looked up by every packet it receives and for every update it queues.
//!
//! Entries sit in two vectors sorted by node id (like [`crate::vecmap::VecMap`]: walks go
//! by ascending id, as determinism needs), and a table indexed by the id's number gives
//! each entry's place, so a lookup reads one table slot and the entry instead of a binary
//! search's six or seven probes over the keys (a node talks to most of the cluster: the
//! search was 2 to 3 % of a simulated node's instructions, `crates/sim/PERFORMANCE.md`,
//! seventh round). Cluster ids are small numbers; an id of [`DIRECT`] or more is found by
//! the binary search, so the table never grows past that however large the ids a caller
//! uses. Inserting or removing an entry renumbers the places after it, which is rare next
//! to lookups (a peer's state lives as long as the peer).

use worldmesh_core::NodeId;

/// Node ids below this are found through the table; larger ones by binary search.
const DIRECT: usize = 4096;

/// Marks a table slot whose id has no entry.
const NONE: u32 = u32::MAX;

/// An ordered map from node ids to `V`, with the results of a `BTreeMap` for every method
/// it has.
#[derive(Clone, Debug)]
pub(crate) struct NodeMap<V> {
    keys: Vec<NodeId>,
    vals: Vec<V>,
    /// `at[i]`: the place of node `i` in `keys`, or [`NONE`]; ids at or past its length
    /// have no entry or are at least [`DIRECT`].
    at: Vec<u32>,
}

impl<V> Default for NodeMap<V> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            vals: Vec::new(),
            at: Vec::new(),
        }
    }
}

impl<V> NodeMap<V> {
    /// The place of `k` in `keys`, or where it would be inserted.
    fn find(&self, k: NodeId) -> Result<usize, usize> {
        let i = k.0 as usize;
        if i < DIRECT {
            return match self.at.get(i) {
                Some(&p) if p != NONE => Ok(p as usize),
                // Absent: the place comes from the search (rare: a new peer).
                _ => Err(self.keys.partition_point(|x| *x < k)),
            };
        }
        self.keys.binary_search(&k)
    }

    /// Points the table at the places of `keys[from..]` (after an insertion or removal
    /// shifted them).
    fn renumber(&mut self, from: usize) {
        for (p, k) in self.keys.iter().enumerate().skip(from) {
            let i = k.0 as usize;
            if i < DIRECT {
                if self.at.len() <= i {
                    self.at.resize(i + 1, NONE);
                }
                self.at[i] = p as u32;
            }
        }
    }

    /// The value of `k`.
    pub(crate) fn get(&self, k: &NodeId) -> Option<&V> {
        self.find(*k).ok().map(|p| &self.vals[p])
    }

    /// The value of `k`, mutably.
    pub(crate) fn get_mut(&mut self, k: &NodeId) -> Option<&mut V> {
        self.find(*k).ok().map(|p| &mut self.vals[p])
    }

    /// The value of `k`, inserted as `V::default()` if absent (`entry(k).or_default()`).
    pub(crate) fn entry_or_default(&mut self, k: NodeId) -> &mut V
    where
        V: Default,
    {
        let p = match self.find(k) {
            Ok(p) => p,
            Err(p) => {
                self.keys.insert(p, k);
                self.vals.insert(p, V::default());
                self.renumber(p);
                p
            }
        };
        &mut self.vals[p]
    }

    /// Removes `k`; returns its value.
    pub(crate) fn remove(&mut self, k: &NodeId) -> Option<V> {
        let p = self.find(*k).ok()?;
        self.keys.remove(p);
        let v = self.vals.remove(p);
        if let Some(slot) = self.at.get_mut(k.0 as usize) {
            *slot = NONE;
        }
        self.renumber(p);
        Some(v)
    }

    /// The entries, by ascending key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&NodeId, &V)> {
        self.keys.iter().zip(self.vals.iter())
    }

    /// The entries, by ascending key, values mutably.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&NodeId, &mut V)> {
        self.keys.iter().zip(self.vals.iter_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Bump(u32),
        Remove(u32),
        GetMut(u32),
    }

    /// Ids mostly small (through the table), some at and past [`DIRECT`] (searched).
    fn id() -> impl Strategy<Value = u32> {
        prop_oneof![
            4 => 0u32..48,
            1 => (DIRECT as u32 - 3)..(DIRECT as u32 + 3),
            1 => any::<u32>(),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => id().prop_map(Op::Bump),
            1 => id().prop_map(Op::Remove),
            2 => id().prop_map(Op::GetMut),
        ]
    }

    proptest! {
        /// Every operation agrees with `BTreeMap`, and so do the walks, after any mix of
        /// insertions and removals of ids through the table and past it.
        #[test]
        fn behaves_like_a_btreemap(ops in proptest::collection::vec(op(), 0..120)) {
            let mut m: NodeMap<u16> = NodeMap::default();
            let mut r: BTreeMap<NodeId, u16> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Bump(k) => {
                        *m.entry_or_default(NodeId(k)) += 1;
                        *r.entry(NodeId(k)).or_default() += 1;
                    }
                    Op::Remove(k) => prop_assert_eq!(m.remove(&NodeId(k)), r.remove(&NodeId(k))),
                    Op::GetMut(k) => {
                        if let Some(v) = m.get_mut(&NodeId(k)) { *v ^= 0x55; }
                        if let Some(v) = r.get_mut(&NodeId(k)) { *v ^= 0x55; }
                        prop_assert_eq!(m.get(&NodeId(k)), r.get(&NodeId(k)));
                    }
                }
                prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
            }
            for (_, v) in m.iter_mut() { *v = v.wrapping_mul(3); }
            for v in r.values_mut() { *v = v.wrapping_mul(3); }
            prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
        }
    }

    #[test]
    fn the_table_stays_within_its_bound_whatever_the_ids() {
        let mut m: NodeMap<u8> = NodeMap::default();
        for k in [u32::MAX, DIRECT as u32, 7, 3_000_000_000] {
            *m.entry_or_default(NodeId(k)) = 1;
        }
        assert_eq!(m.at.len(), 8, "only id 7 is in the table");
        assert_eq!(m.iter().count(), 4);
    }
}

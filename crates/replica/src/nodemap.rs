//! An ordered map keyed by node id with a direct index: the replica manager's state per
//! peer, looked up by every packet it receives and for every update it queues.
//!
//! Values sit in a vector whose slots do not move when other entries come and go (a
//! removed entry's slot takes the last value), a table indexed by the id's number gives
//! each id's slot, and a sorted vector of (id, slot) gives the walks by ascending id that
//! determinism needs. A lookup reads one table slot and the value instead of a binary
//! search's six or seven probes over the keys (a node talks to most of the cluster: the
//! search was 2 to 3 % of a simulated node's instructions, `crates/sim/PERFORMANCE.md`,
//! seventh round). Cluster ids are small numbers; an id of [`DIRECT`] or more is found by
//! a binary search of the sorted vector, so the table never grows past that however large
//! the ids a caller uses. Inserting or removing an entry shifts the sorted vector's pairs
//! after it (8 bytes each), which is rare next to lookups: a peer's state lives as long
//! as the peer.

use worldmesh_core::NodeId;

/// Node ids below this are found through the table; larger ones by binary search.
const DIRECT: usize = 4096;

/// Marks a table slot whose id has no entry.
const NONE: u32 = u32::MAX;

/// An ordered map from node ids to `V`, with the results of a `BTreeMap` for every method
/// it has.
#[derive(Clone, Debug)]
pub(crate) struct NodeMap<V> {
    /// Every key with its value's slot, by ascending key.
    order: Vec<(NodeId, u32)>,
    /// The values, by slot.
    vals: Vec<V>,
    /// `at[i]`: the slot of node `i`'s value, or [`NONE`] (ids at or past its length have
    /// no entry, or are at least [`DIRECT`]).
    at: Vec<u32>,
    /// By slot: the value was handed out mutably since its mark was last taken.
    marked: Vec<bool>,
    /// The keys marked, each once, in the order they were.
    touched: Vec<NodeId>,
}

impl<V> Default for NodeMap<V> {
    fn default() -> Self {
        Self {
            order: Vec::new(),
            vals: Vec::new(),
            at: Vec::new(),
            marked: Vec::new(),
            touched: Vec::new(),
        }
    }
}

impl<V> NodeMap<V> {
    /// The slot of `k`'s value.
    fn slot(&self, k: NodeId) -> Option<usize> {
        let i = k.0 as usize;
        if i < DIRECT {
            return self.at.get(i).filter(|s| **s != NONE).map(|s| *s as usize);
        }
        let p = self.order.binary_search_by_key(&k, |(x, _)| *x).ok()?;
        Some(self.order[p].1 as usize)
    }

    /// Sets the table's entry for `k` (ids past [`DIRECT`] have none) to `slot`.
    fn set_at(&mut self, k: NodeId, slot: u32) {
        let i = k.0 as usize;
        if i < DIRECT {
            if self.at.len() <= i {
                self.at.resize(i + 1, NONE);
            }
            self.at[i] = slot;
        }
    }

    /// The value of `k`.
    pub(crate) fn get(&self, k: &NodeId) -> Option<&V> {
        self.slot(*k).map(|s| &self.vals[s])
    }

    /// Marks the value in slot `s`, of key `k` (see [`NodeMap::take_marked`]).
    fn mark(&mut self, s: usize, k: NodeId) {
        if !self.marked[s] {
            self.marked[s] = true;
            self.touched.push(k);
        }
    }

    /// The value of `k`, mutably; marks it.
    pub(crate) fn get_mut(&mut self, k: &NodeId) -> Option<&mut V> {
        let s = self.slot(*k)?;
        self.mark(s, *k);
        Some(&mut self.vals[s])
    }

    /// Marks `k`'s value as if it had been handed out mutably (it is taken again by the
    /// next [`NodeMap::take_marked`]); nothing for an absent key.
    pub(crate) fn mark_again(&mut self, k: NodeId) {
        if let Some(s) = self.slot(k) {
            self.mark(s, k);
        }
    }

    /// Replaces `out` with the keys of every value handed out mutably (by `get_mut`,
    /// `entry_or_default`, or the tests' `for_each_mut`) or marked again since the marks
    /// were last taken, by ascending key, and clears their marks. A value that was not
    /// handed out mutably is as the last taking left it: what the caller learned of it
    /// then still holds.
    pub(crate) fn take_marked(&mut self, out: &mut Vec<NodeId>) {
        out.clear();
        let mut touched = std::mem::take(&mut self.touched);
        for k in touched.drain(..) {
            if let Some(s) = self.slot(k) {
                self.marked[s] = false;
                out.push(k);
            }
        }
        // Keeps the (now empty) buffer for the next marks.
        self.touched = touched;
        out.sort_unstable();
    }

    /// The value of `k`, inserted as `V::default()` if absent (`entry(k).or_default()`).
    pub(crate) fn entry_or_default(&mut self, k: NodeId) -> &mut V
    where
        V: Default,
    {
        let s = match self.slot(k) {
            Some(s) => s,
            None => {
                let s = self.vals.len();
                self.vals.push(V::default());
                self.marked.push(false);
                let p = self.order.partition_point(|(x, _)| *x < k);
                self.order.insert(p, (k, s as u32));
                self.set_at(k, s as u32);
                s
            }
        };
        self.mark(s, k);
        &mut self.vals[s]
    }

    /// Removes `k`; returns its value.
    pub(crate) fn remove(&mut self, k: &NodeId) -> Option<V> {
        let s = self.slot(*k)?;
        let p = self.order.binary_search_by_key(k, |(x, _)| *x).ok()?;
        self.order.remove(p);
        self.set_at(*k, NONE);
        let v = self.vals.swap_remove(s);
        if self.marked.swap_remove(s) {
            self.touched.retain(|x| x != k);
        }
        // The last value moved into the freed slot: found by a scan (removals are rare).
        let last = self.vals.len() as u32;
        if let Some(e) = self.order.iter_mut().find(|(_, slot)| *slot == last) {
            e.1 = s as u32;
            let moved = e.0;
            self.set_at(moved, s as u32);
        }
        Some(v)
    }

    /// The entries, by ascending key (the tests' view; the manager never walks every peer).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&NodeId, &V)> {
        self.order.iter().map(|(k, s)| (k, &self.vals[*s as usize]))
    }

    /// Calls `f` with every entry, by ascending key, values mutably; marks them all.
    #[cfg(test)]
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(NodeId, &mut V)) {
        for i in 0..self.order.len() {
            let (k, s) = self.order[i];
            self.mark(s as usize, k);
            f(k, &mut self.vals[s as usize]);
        }
    }

    /// Calls `f` with every marked entry (see [`NodeMap::take_marked`]), values mutably,
    /// in no particular order.
    pub(crate) fn for_each_marked_mut(&mut self, mut f: impl FnMut(NodeId, &mut V)) {
        let touched = std::mem::take(&mut self.touched);
        for &k in &touched {
            if let Some(s) = self.slot(k) {
                f(k, &mut self.vals[s]);
            }
        }
        self.touched = touched;
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
        Take,
        Marked,
        MarkAgain(u32),
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
            1 => Just(Op::Take),
            1 => Just(Op::Marked),
            1 => id().prop_map(Op::MarkAgain),
        ]
    }

    proptest! {
        /// Every operation agrees with `BTreeMap`, and so do the walks, after any mix of
        /// insertions and removals of ids through the table and past it. The marks are
        /// exactly the keys handed out mutably since the last taking and still present:
        /// `take_marked` gives them by ascending key and `for_each_marked_mut` visits them
        /// once each.
        #[test]
        fn behaves_like_a_btreemap(ops in proptest::collection::vec(op(), 0..120)) {
            let mut m: NodeMap<u16> = NodeMap::default();
            let mut r: BTreeMap<NodeId, u16> = BTreeMap::new();
            let mut marks: std::collections::BTreeSet<NodeId> = Default::default();
            let mut taken = Vec::new();
            for op in ops {
                match op {
                    Op::Bump(k) => {
                        *m.entry_or_default(NodeId(k)) += 1;
                        *r.entry(NodeId(k)).or_default() += 1;
                        marks.insert(NodeId(k));
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(m.remove(&NodeId(k)), r.remove(&NodeId(k)));
                        marks.remove(&NodeId(k));
                    }
                    Op::GetMut(k) => {
                        if let Some(v) = m.get_mut(&NodeId(k)) { *v ^= 0x55; }
                        if let Some(v) = r.get_mut(&NodeId(k)) {
                            *v ^= 0x55;
                            marks.insert(NodeId(k));
                        }
                        prop_assert_eq!(m.get(&NodeId(k)), r.get(&NodeId(k)));
                    }
                    Op::MarkAgain(k) => {
                        m.mark_again(NodeId(k));
                        if r.contains_key(&NodeId(k)) {
                            marks.insert(NodeId(k));
                        }
                    }
                    Op::Take => {
                        m.take_marked(&mut taken);
                        prop_assert!(taken.iter().eq(marks.iter()));
                        marks.clear();
                    }
                    Op::Marked => {
                        let mut seen = Vec::new();
                        m.for_each_marked_mut(|k, v| {
                            *v = v.wrapping_add(1);
                            seen.push(k);
                        });
                        for k in &marks {
                            let v = r.get_mut(k).expect("present");
                            *v = v.wrapping_add(1);
                        }
                        seen.sort_unstable();
                        prop_assert!(seen.iter().eq(marks.iter()));
                    }
                }
                prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
            }
            m.for_each_mut(|_, v| *v = v.wrapping_mul(3));
            for v in r.values_mut() { *v = v.wrapping_mul(3); }
            prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
            m.take_marked(&mut taken);
            prop_assert!(taken.iter().eq(r.keys()), "a walk marks every entry");
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
        assert_eq!(m.remove(&NodeId(DIRECT as u32)), Some(1));
        assert_eq!(
            m.get(&NodeId(7)),
            Some(&1),
            "the value moved into the freed slot is found"
        );
    }
}

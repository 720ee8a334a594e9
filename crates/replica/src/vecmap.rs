//! A small ordered map kept as two sorted vectors (keys, values).
//!
//! The replica manager keeps a few maps per primary and per peer keyed by node id (who
//! subscribes, what each receiver acknowledged, what is queued for each peer), each with
//! at most one entry per node of the cluster. Every packet and every frame looks these
//! up, iterates them in key order and prunes them. As sorted vectors they are contiguous
//! (a lookup is a binary search over a few cache lines of keys; iteration and pruning are
//! linear scans), and they behave exactly like the `BTreeMap`s they replace: same
//! ascending iteration order, same last-insert-wins on duplicate keys.

/// An ordered map of few entries: keys sorted ascending, values alongside.
#[derive(Clone, Debug)]
pub(crate) struct VecMap<K, V> {
    keys: Vec<K>,
    vals: Vec<V>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            vals: Vec::new(),
        }
    }
}

impl<K: Ord + Copy, V> VecMap<K, V> {
    /// An empty map.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The value of `k`.
    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.keys.binary_search(k).ok().map(|i| &self.vals[i])
    }

    /// True if `k` has a value.
    pub(crate) fn contains_key(&self, k: &K) -> bool {
        self.keys.binary_search(k).is_ok()
    }

    /// The value of `k`, mutably.
    pub(crate) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.keys.binary_search(k).ok().map(|i| &mut self.vals[i])
    }

    /// Sets `k` to `v`; returns the value it replaced.
    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.keys.binary_search(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.vals[i], v)),
            Err(i) => {
                self.keys.insert(i, k);
                self.vals.insert(i, v);
                None
            }
        }
    }

    /// Removes `k`; returns its value.
    pub(crate) fn remove(&mut self, k: &K) -> Option<V> {
        let i = self.keys.binary_search(k).ok()?;
        self.keys.remove(i);
        Some(self.vals.remove(i))
    }

    /// The value of `k`, inserted as `V::default()` if absent (`entry(k).or_default()`).
    pub(crate) fn entry_or_default(&mut self, k: K) -> &mut V
    where
        V: Default,
    {
        let i = match self.keys.binary_search(&k) {
            Ok(i) => i,
            Err(i) => {
                self.keys.insert(i, k);
                self.vals.insert(i, V::default());
                i
            }
        };
        &mut self.vals[i]
    }

    /// Makes `keys` (ascending, without duplicates) the map's keys: the entries of other
    /// keys go, the values of kept keys stay, new keys get `V::default()`. The same map as
    /// `retain` of the keys in `keys` followed by `entry_or_default` of each, in one merge
    /// (nothing to do when the keys are already these).
    pub(crate) fn set_keys(&mut self, keys: &[K])
    where
        V: Default,
    {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys ascending, once each");
        if self.keys == keys {
            return;
        }
        let mut old = std::mem::take(&mut self.keys)
            .into_iter()
            .zip(std::mem::take(&mut self.vals))
            .peekable();
        self.keys.reserve(keys.len());
        self.vals.reserve(keys.len());
        for &k in keys {
            while old.next_if(|(o, _)| *o < k).is_some() {}
            let v = old.next_if(|(o, _)| *o == k).map_or_else(V::default, |(_, v)| v);
            self.keys.push(k);
            self.vals.push(v);
        }
    }

    /// Keeps the entries for which `f` is true, visiting them in ascending key order.
    pub(crate) fn retain(&mut self, mut f: impl FnMut(&K, &mut V) -> bool) {
        let mut kept = 0;
        for i in 0..self.keys.len() {
            if f(&self.keys[i], &mut self.vals[i]) {
                if kept != i {
                    self.keys.swap(kept, i);
                    self.vals.swap(kept, i);
                }
                kept += 1;
            }
        }
        self.keys.truncate(kept);
        self.vals.truncate(kept);
    }

    /// The keys, ascending.
    pub(crate) fn keys(&self) -> std::slice::Iter<'_, K> {
        self.keys.iter()
    }

    /// The entries, by ascending key.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.keys.iter().zip(self.vals.iter())
    }

    /// The entries, by ascending key, values mutably.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.keys.iter().zip(self.vals.iter_mut())
    }

    /// The values, by ascending key.
    pub(crate) fn values(&self) -> std::slice::Iter<'_, V> {
        self.vals.iter()
    }

    /// The values, by ascending key, mutably.
    pub(crate) fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.vals.iter_mut()
    }
}

impl<K: Ord + Copy, V> FromIterator<(K, V)> for VecMap<K, V> {
    /// Like `BTreeMap`'s: a later duplicate key replaces the earlier value.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = Self::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u16),
        Remove(u8),
        Bump(u8),
        Retain(u16),
        GetMut(u8),
        SetKeys(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Insert(k % 32, v)),
            any::<u8>().prop_map(|k| Op::Remove(k % 32)),
            any::<u8>().prop_map(|k| Op::Bump(k % 32)),
            any::<u16>().prop_map(Op::Retain),
            any::<u8>().prop_map(|k| Op::GetMut(k % 32)),
            proptest::collection::btree_set(0u8..32, 0..12)
                .prop_map(|s| Op::SetKeys(s.into_iter().collect())),
        ]
    }

    proptest! {
        /// Every operation agrees with `BTreeMap`, and so does the iteration order
        /// (including the order `retain` visits entries in).
        #[test]
        fn behaves_like_a_btreemap(
            init in proptest::collection::vec((0u8..32, any::<u16>()), 0..40),
            ops in proptest::collection::vec(op(), 0..60),
        ) {
            let mut m: VecMap<u8, u16> = init.iter().copied().collect();
            let mut r: BTreeMap<u8, u16> = init.iter().copied().collect();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(m.insert(k, v), r.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(m.remove(&k), r.remove(&k)),
                    Op::Bump(k) => {
                        *m.entry_or_default(k) += 1;
                        *r.entry(k).or_default() += 1;
                    }
                    Op::Retain(t) => {
                        let (mut seen_m, mut seen_r) = (Vec::new(), Vec::new());
                        m.retain(|k, v| { seen_m.push(*k); *v = v.wrapping_add(1); *v % 3 != t % 3 });
                        r.retain(|k, v| { seen_r.push(*k); *v = v.wrapping_add(1); *v % 3 != t % 3 });
                        prop_assert_eq!(seen_m, seen_r);
                    }
                    Op::GetMut(k) => {
                        if let Some(v) = m.get_mut(&k) { *v ^= 0x55; }
                        if let Some(v) = r.get_mut(&k) { *v ^= 0x55; }
                        prop_assert_eq!(m.get(&k), r.get(&k));
                        prop_assert_eq!(m.contains_key(&k), r.contains_key(&k));
                    }
                    Op::SetKeys(keys) => {
                        m.set_keys(&keys);
                        r.retain(|k, _| keys.binary_search(k).is_ok());
                        for k in &keys {
                            r.entry(*k).or_default();
                        }
                    }
                }
                prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
                prop_assert!(m.keys().eq(r.keys()));
            }
            prop_assert!(m.values().eq(r.values()));
            for v in m.values_mut() { *v = v.wrapping_mul(3); }
            for v in r.values_mut() { *v = v.wrapping_mul(3); }
            prop_assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
            for (_, v) in m.iter_mut() { *v = 0; }
            prop_assert!(m.iter().all(|(_, v)| *v == 0));
        }
    }
}

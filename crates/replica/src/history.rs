//! The bounded version history kept per primary and per replica for delta baselines
//! (paper `000` §5: a delta is encoded, and applied, against a state the receiver has
//! acknowledged, so both sides keep the last few versions).
//!
//! Each entry keeps its version beside its state. Versions go up by one from frame to
//! frame in the common case, so a lookup first tries the slot where the version would be
//! if they did (one entry: the version check and the state share cache lines); while the
//! versions are strictly increasing (always, as the replica manager uses them) a miss
//! falls back to a binary search, otherwise to the linear scan, all with the same answer
//! as the linear scan. A primary's history keeps the game's history copies of its
//! versions (`GameObject::history_copy`: what encoding reads, without what only its think
//! uses).

use std::collections::VecDeque;

/// Versions and their states, oldest first, at most a caller-given number of them.
#[derive(Clone, Debug)]
pub(crate) struct History<O> {
    entries: VecDeque<(u64, O)>,
    /// The version of the newest (back) entry, 0 while empty: kept beside the deque's
    /// header so a lookup does not read the newest state's line only to learn its version
    /// (the first of two cache misses a lookup paid; `crates/sim/PERFORMANCE.md`).
    newest: u64,
    /// The versions are strictly increasing (so each occurs once and binary search finds
    /// it). Cleared for good by an out-of-order or repeated version.
    increasing: bool,
}

impl<O> Default for History<O> {
    fn default() -> Self {
        Self {
            entries: VecDeque::new(),
            newest: 0,
            increasing: true,
        }
    }
}

impl<O: Clone> History<O> {
    /// A history holding only `state` as `version`.
    pub(crate) fn with(version: u64, state: O) -> Self {
        let mut h = Self::default();
        h.entries.push_back((version, state));
        h.newest = version;
        h
    }

    /// Number of versions held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The versions held, oldest first.
    #[cfg(test)]
    fn versions(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries.iter().map(|(v, _)| *v)
    }

    /// The oldest-first position of the first entry with `version`.
    fn position(&self, version: u64) -> Option<usize> {
        if self.increasing {
            // Versions usually go up by one: try where `version` would be if they did (a
            // match is the only one), then search.
            if self.entries.is_empty() {
                return None;
            }
            let newest = self.newest;
            let guess = newest
                .checked_sub(version)
                .and_then(|back| usize::try_from(back).ok())
                .and_then(|back| (self.entries.len() - 1).checked_sub(back));
            if let Some(i) = guess
                && self.entries[i].0 == version
            {
                return Some(i);
            }
            if version > newest {
                return None;
            }
            return self.entries.binary_search_by_key(&version, |(v, _)| *v).ok();
        }
        self.entries.iter().position(|(v, _)| *v == version)
    }

    /// The state of the oldest entry with `version`.
    pub(crate) fn get(&self, version: u64) -> Option<&O> {
        self.position(version).map(|i| &self.entries[i].1)
    }

    /// The state of the newest entry with `version`.
    pub(crate) fn get_newest(&self, version: u64) -> Option<&O> {
        if self.increasing {
            return self.get(version);
        }
        self.entries
            .iter()
            .rev()
            .find(|(v, _)| *v == version)
            .map(|(_, o)| o)
    }

    /// True if some entry has `version`.
    pub(crate) fn contains(&self, version: u64) -> bool {
        self.position(version).is_some()
    }

    /// The newest entry.
    pub(crate) fn back(&self) -> Option<(u64, &O)> {
        self.entries.back().map(|(v, o)| (*v, o))
    }

    /// Appends `state` as `version`, keeping the newest `cap` entries (at least 1).
    pub(crate) fn push(&mut self, version: u64, state: O, cap: usize) {
        self.make_room(cap);
        self.note_appended(version);
        self.entries.push_back((version, state));
        self.newest = version;
    }

    /// Inserts `state` as `version` before the first newer entry, then drops the oldest
    /// entries beyond `cap`.
    pub(crate) fn insert_sorted(&mut self, version: u64, state: O, cap: usize) {
        let pos = self
            .entries
            .iter()
            .position(|(x, _)| *x > version)
            .unwrap_or(self.entries.len());
        if pos > 0 && self.entries[pos - 1].0 == version {
            self.increasing = false;
        }
        self.entries.insert(pos, (version, state));
        self.trim(cap);
        self.newest = self.entries.back().map_or(0, |(v, _)| *v);
    }

    /// Drops the oldest entries until one more fits within `cap` (at least 1). (Dropping
    /// before appending keeps a full history's buffer at `cap` entries: appending first
    /// would grow it past `cap` once.)
    fn make_room(&mut self, cap: usize) {
        let cap = cap.max(1);
        while self.entries.len() >= cap {
            self.entries.pop_front();
        }
    }

    /// Keeps `increasing` true only if `version` is newer than the newest held.
    fn note_appended(&mut self, version: u64) {
        if !self.entries.is_empty() && self.newest >= version {
            self.increasing = false;
        }
    }

    fn trim(&mut self, cap: usize) {
        while self.entries.len() > cap {
            self.entries.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: the `VecDeque<(u64, O)>` the history replaces.
    fn reference_push(r: &mut VecDeque<(u64, String)>, v: u64, s: &str, cap: usize) {
        r.push_back((v, s.to_string()));
        while r.len() > cap {
            r.pop_front();
        }
    }

    fn same(h: &History<String>, r: &VecDeque<(u64, String)>) -> bool {
        h.entries.iter().eq(r.iter()) && h.newest == r.back().map_or(0, |(v, _)| *v)
    }

    #[test]
    fn push_keeps_the_newest_entries_like_a_bounded_deque() {
        for cap in 1..5 {
            let mut a = History::default();
            let mut r = VecDeque::new();
            for v in 1..12u64 {
                let s = format!("state {v}");
                a.push(v, s.clone(), cap);
                reference_push(&mut r, v, &s, cap);
                assert!(same(&a, &r), "push, cap {cap}, v {v}");
            }
            assert_eq!(a.len(), cap);
            assert_eq!(a.back(), Some((11, &"state 11".to_string())));
        }
    }

    #[test]
    fn lookups_agree_with_a_linear_scan_for_increasing_and_repeated_versions() {
        // Increasing (binary search), then an out-of-order push (linear scan from then on).
        let mut h = History::default();
        let mut r: VecDeque<(u64, String)> = VecDeque::new();
        let versions = [2u64, 3, 5, 8, 9, 11, 12, 4, 13, 4, 20];
        for (k, v) in versions.iter().enumerate() {
            let s = format!("#{k}");
            h.push(*v, s.clone(), 6);
            reference_push(&mut r, *v, &s, 6);
            assert_eq!(h.increasing, k < 7, "after {k} pushes");
            for q in 0..22u64 {
                let oldest = r.iter().find(|(x, _)| *x == q).map(|(_, s)| s);
                let newest = r.iter().rev().find(|(x, _)| *x == q).map(|(_, s)| s);
                assert_eq!(h.get(q), oldest, "get {q} after {k}");
                assert_eq!(h.get_newest(q), newest, "get_newest {q} after {k}");
                assert_eq!(h.contains(q), oldest.is_some());
            }
        }
    }

    #[test]
    fn lookups_find_the_oldest_or_newest_entry_of_a_version_across_the_ring_seam() {
        let mut h = History::default();
        // Wrap the ring so the versions span both slices.
        for v in 1..=6u64 {
            h.push(v, format!("s{v}"), 4);
        }
        h.insert_sorted(4, "s4 again".to_string(), 5);
        assert!(h.versions().eq([3, 4, 4, 5, 6]));
        assert_eq!(h.get(4).map(String::as_str), Some("s4"));
        assert_eq!(h.get_newest(4).map(String::as_str), Some("s4 again"));
        assert_eq!(h.get(3).map(String::as_str), Some("s3"));
        assert_eq!(h.get(2), None);
        assert!(h.contains(6) && !h.contains(7));
        h.insert_sorted(1, "s1".to_string(), 5);
        // Inserted at the front, then the oldest (itself) trimmed.
        assert!(h.versions().eq([3, 4, 4, 5, 6]));
    }
}

//! Deadlines of a map's entries, earliest first, so that forgetting the expired entries
//! visits those alone.
//!
//! The subscriber's cached matches, the matches told and the pushes asked for were each
//! swept with `BTreeMap::retain` at every check of the interest (twice per 100 ms), which
//! walked every entry to drop the few that had expired: 4 % of a 64-node run with the
//! `dht` locator (`crates/sim/PERFORMANCE.md`, eleventh round). Here each insertion queues
//! its entry's deadline, and a sweep pops the deadlines that passed and drops an entry
//! only if its current deadline passed too (a refreshed entry keeps its later one). The
//! map ends up exactly as the `retain` left it.

use std::collections::BTreeMap;
use std::time::Duration;

use worldmesh_core::{DeadlineQueue, Time};

/// Queued deadlines of a map's entries (see the module documentation).
#[derive(Debug)]
pub(super) struct Deadlines<K> {
    queue: DeadlineQueue<K>,
}

impl<K> Default for Deadlines<K> {
    fn default() -> Self {
        Self {
            queue: DeadlineQueue::default(),
        }
    }
}

impl<K: Ord + Copy> Deadlines<K> {
    /// Queues `key`'s deadline `at`: call it whenever the entry is inserted or changed.
    pub(super) fn push(&mut self, at: Time, key: K) {
        self.queue.push(at, key);
    }

    /// Removes from `map` every entry whose deadline (`deadline` of its value) is at or
    /// before `now`, as `map.retain(|_, v| deadline(v) > now)` does, provided every
    /// insertion and change of an entry was [`Deadlines::push`]ed with its deadline.
    pub(super) fn expire<V>(&mut self, now: Time, map: &mut BTreeMap<K, V>, deadline: impl Fn(&V) -> Time) {
        self.expire_each(now, map, deadline, |_| {});
    }

    /// [`Deadlines::expire`], calling `removed` with the key of every entry it removes.
    pub(super) fn expire_each<V>(
        &mut self,
        now: Time,
        map: &mut BTreeMap<K, V>,
        deadline: impl Fn(&V) -> Time,
        mut removed: impl FnMut(K),
    ) {
        while let Some((_, key)) = self.queue.pop_due(now) {
            if map.get(&key).is_some_and(|v| deadline(v) <= now) {
                map.remove(&key);
                removed(key);
            }
        }
        // Refreshed entries leave their earlier deadlines queued.
        self.queue
            .compact(map.len(), || map.iter().map(|(k, v)| (deadline(v), *k)));
    }
}

/// The first time at which something done at `t` is no longer within the retell period:
/// `now.saturating_since(t) < retell` exactly while `now` is before it. `saturating_since`
/// counts whole microseconds, so a period with a fraction of one ends at the next whole
/// one. (The one exception: a `t` within `retell` of `Time::MAX` gets `Time::MAX`, which
/// a `now` of `Time::MAX` reaches though the period has not passed.)
pub(super) fn retold_at(t: Time, retell: Duration) -> Time {
    if retell.is_zero() {
        return Time::ZERO;
    }
    let micros = retell.as_micros() + u128::from(!retell.subsec_nanos().is_multiple_of(1_000));
    Time(t.0.saturating_add(u64::try_from(micros).unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Random insertions, refreshes (later and earlier deadlines) and sweeps at times
        /// that do not always go forward: after every sweep the map is what `retain` leaves,
        /// and the keys reported removed are the ones `retain` drops, each once.
        #[test]
        fn the_map_is_what_retain_leaves(
            steps in proptest::collection::vec((0u8..4, 0u32..12, 0u64..2_000, 0u64..3_000), 1..300)
        ) {
            let mut map: BTreeMap<u32, Time> = BTreeMap::new();
            let mut reference = map.clone();
            let mut deadlines = Deadlines::default();
            for (op, key, at, now) in steps {
                let (at, now) = (Time::from_millis(at), Time::from_millis(now));
                if op == 0 {
                    let mut removed = Vec::new();
                    deadlines.expire_each(now, &mut map, |v| *v, |k| removed.push(k));
                    let dropped: Vec<u32> = reference.extract_if(.., |_, v| *v <= now).map(|(k, _)| k).collect();
                    removed.sort_unstable();
                    prop_assert_eq!(&map, &reference);
                    prop_assert_eq!(removed, dropped);
                } else {
                    map.insert(key, at);
                    reference.insert(key, at);
                    deadlines.push(at, key);
                }
            }
        }
    }

    proptest! {
        /// `retold_at` is where `now.saturating_since(t) < retell` turns false, also for
        /// a `now` before `t`, a zero period and periods with fractions of a microsecond:
        /// `now` anywhere around `t`, or within a few microseconds of the period's end.
        #[test]
        fn retold_at_is_where_the_retell_period_ends(
            t in 0u64..10_000,
            retell in prop_oneof![Just(0u64), 1u64..3_000, 1u64..10_000_000],
            near_end in any::<bool>(),
            offset in -3i64..=3,
            anywhere in 0u64..20_000,
        ) {
            // Times in microseconds; periods in nanoseconds.
            let now = if near_end {
                (t + retell / 1_000).saturating_add_signed(offset)
            } else {
                anywhere
            };
            let (t, now, retell) = (Time::from_micros(t), Time::from_micros(now), Duration::from_nanos(retell));
            prop_assert_eq!(now >= retold_at(t, retell), now.saturating_since(t) >= retell);
        }
    }

    /// A key refreshed many times leaves one deadline per refresh until the rebuild, which
    /// keeps the queue within a bound of the map's size.
    #[test]
    fn refreshes_do_not_pile_up() {
        let mut map: BTreeMap<u32, Time> = BTreeMap::new();
        let mut deadlines = Deadlines::default();
        for i in 0..10_000u64 {
            let at = Time::from_millis(1_000_000 + i);
            map.insert(7, at);
            deadlines.push(at, 7);
            deadlines.expire(Time::from_millis(i), &mut map, |v| *v);
        }
        assert_eq!(map.len(), 1);
        assert!(
            deadlines.queue.len() <= 4 + 64 + 1,
            "{} queued",
            deadlines.queue.len()
        );
    }
}

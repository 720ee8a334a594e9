//! Which peers have fallen silent, kept up to date without visiting every peer each frame.
//!
//! Without a membership protocol, a node drops the replicas whose primary's node has sent
//! nothing for `peer_timeout` (paper `000` §5: replica management "deletes replicas that
//! are no longer needed"; a replica its primary no longer refreshes is one). A node keeps
//! a state for every peer it ever exchanged packets with, and over a long game most of
//! them fall silent and stay so: finding the silent ones by testing every known peer each
//! frame cost time that grew with the game's duration (PERFORMANCE.md, ninth and tenth
//! rounds).
//!
//! [`Silence`] keeps the set instead. Each watched peer has a deadline in a queue: the
//! time at which it would be silent if not heard again. A frame takes the deadlines that
//! have passed and tests only those peers, with the same predicate as a full test of
//! every peer (`now - last_heard > timeout`); a peer heard since gets its new deadline. A
//! peer leaves the set when it is heard or forgotten. The set is therefore, at every
//! frame, exactly the peers a test of every peer would find. Each watched peer has one
//! live deadline (a peer forgotten and heard again leaves a stale entry, dropped when it
//! comes up), so the queue stays as small as the set of peers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use worldmesh_core::{DeadlineQueue, NodeId, Time};

/// The peers silent for longer than the timeout, and the deadlines of the others.
#[derive(Default)]
pub(super) struct Silence {
    /// (deadline, peer): the peer is tested once a frame's time passes its deadline. A
    /// peer heard and not silent has an entry no later than its last hearing plus the
    /// timeout. An entry whose deadline is not the peer's in `live` is stale (the peer
    /// was forgotten since) and is dropped when it comes up.
    due: DeadlineQueue<NodeId>,
    /// Each watched peer's deadline: its one live entry in `due`. A peer forgotten and
    /// heard again, however often, thus has one entry tested and re-queued, and the
    /// queue holds at most one per watched peer plus the stale ones of the last timeout.
    live: BTreeMap<NodeId, Time>,
    /// Peers silent for longer than the timeout at the last [`Silence::update`].
    silent: BTreeSet<NodeId>,
    /// A peer fell silent, or a replica was pointed at a silent peer, since the last
    /// [`Silence::take_changed`]: silent peers' replicas may be held.
    changed: bool,
}

impl Silence {
    /// `peer` was heard at `now`; `before` is when it was heard last (`None`: never, or not
    /// since it was forgotten).
    pub(super) fn heard(&mut self, peer: NodeId, before: Option<Time>, now: Time, timeout: Duration) {
        // A peer heard before and not silent already has an entry no later than its new
        // deadline: tested then, it gets the later one. A peer in the set was silent at a
        // frame no later than `now`, so more than `timeout` before `now` (the common case,
        // a peer heard lately, costs no lookup in the set).
        let watched = match before {
            None => false,
            Some(t) => now - t <= timeout || !self.silent.remove(&peer),
        };
        if !watched {
            self.watch(peer, now + timeout);
        }
    }

    /// Queues `peer`'s test at `deadline`, replacing any entry it had.
    fn watch(&mut self, peer: NodeId, deadline: Time) {
        self.live.insert(peer, deadline);
        self.due.push(deadline, peer);
    }

    /// Brings the set up to `now`: every peer whose last hearing (`last_heard`: `None` for
    /// a peer not known or never heard) is more than `timeout` ago is in it.
    pub(super) fn update(
        &mut self,
        now: Time,
        timeout: Duration,
        last_heard: impl Fn(NodeId) -> Option<Time>,
    ) {
        let mut later = Vec::new();
        // `now - t > timeout` implies `now > t + timeout`, the deadline (both in whole
        // microseconds, the timeout truncated): a peer not yet due cannot be silent.
        while let Some((deadline, peer)) = self.due.pop_before(now) {
            if self.live.get(&peer) != Some(&deadline) {
                continue; // stale: the peer was forgotten and, maybe, watched again
            }
            self.live.remove(&peer);
            match last_heard(peer) {
                None => {} // forgotten: watched again when next heard
                Some(t) if now - t > timeout => self.changed |= self.silent.insert(peer),
                Some(t) => later.push((peer, t + timeout)),
            }
        }
        for (peer, deadline) in later {
            self.watch(peer, deadline);
        }
    }

    /// The peers silent at the last [`Silence::update`], by id.
    pub(super) fn silent(&self) -> &BTreeSet<NodeId> {
        &self.silent
    }

    /// `peer` is no longer a member: it leaves the set (its state is gone).
    pub(super) fn forget(&mut self, peer: NodeId) {
        self.silent.remove(&peer);
        self.live.remove(&peer);
    }

    /// A replica now names `peer` as its primary's node.
    pub(super) fn bound(&mut self, peer: NodeId) {
        if self.silent.contains(&peer) {
            self.changed = true;
        }
    }

    /// True if silent peers' replicas may be held: a peer fell silent, or a replica was
    /// bound to a silent peer, since the last call. A replica is created only from its
    /// primary's node's packet (which takes that node out of the set) or bound through
    /// [`Silence::bound`], so when this is false, the replicas of every silent peer were
    /// dropped at the last call that returned true.
    pub(super) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// A packet from this peer.
        Heard(u8),
        /// The peer is declared down and its state forgotten.
        Forget(u8),
        /// A frame: the set is brought up to date.
        Frame,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..12).prop_map(Op::Heard),
            1 => (0u8..12).prop_map(Op::Forget),
            4 => Just(Op::Frame),
        ]
    }

    /// A peer forgotten and heard again many times between two frames leaves one entry
    /// in the queue once the stale ones have come up.
    #[test]
    fn a_peer_forgotten_and_heard_again_keeps_one_entry() {
        let timeout = Duration::from_micros(1_000);
        let mut s = Silence::default();
        let p = NodeId(7);
        let mut now = Time::ZERO;
        for _ in 0..100 {
            now += Duration::from_micros(5);
            s.heard(p, None, now, timeout);
            s.forget(p);
        }
        s.heard(p, None, now, timeout);
        // Heard every 500 µs from then on (within the timeout: `heard` queues nothing), so
        // never silent; every deadline comes up in turn.
        let mut heard_at = now;
        for _ in 0..10 {
            now += Duration::from_micros(500);
            s.update(now, timeout, |_| Some(heard_at));
            s.heard(p, Some(heard_at), now, timeout);
            heard_at = now;
        }
        assert!(s.silent().is_empty());
        assert_eq!(s.due.len(), 1, "one entry left");
        assert_eq!(s.live.len(), 1);
    }

    proptest! {
        /// After any mix of hearings, forgettings and frames, at irregular times (steps
        /// around the timeout, exact ties included), the set is exactly the peers a test of
        /// every known peer finds silent.
        #[test]
        fn the_set_is_what_a_test_of_every_peer_finds(
            ops in proptest::collection::vec((op(), 0u64..1_500), 1..300),
            timeout_us in 1u64..2_000,
        ) {
            let timeout = Duration::from_micros(timeout_us);
            let mut s = Silence::default();
            // The model: each known peer's last hearing (None: known, never heard).
            let mut heard: BTreeMap<NodeId, Option<Time>> = BTreeMap::new();
            let mut now = Time::ZERO;
            for (op, step) in ops {
                now += Duration::from_micros(step);
                match op {
                    Op::Heard(p) => {
                        let p = NodeId(u32::from(p));
                        let before = heard.insert(p, Some(now)).flatten();
                        s.heard(p, before, now, timeout);
                    }
                    Op::Forget(p) => {
                        let p = NodeId(u32::from(p));
                        heard.remove(&p);
                        s.forget(p);
                    }
                    Op::Frame => {
                        s.update(now, timeout, |p| heard.get(&p).copied().flatten());
                        let every: BTreeSet<NodeId> = heard
                            .iter()
                            .filter(|(_, t)| t.is_some_and(|t| now - t > timeout))
                            .map(|(p, _)| *p)
                            .collect();
                        prop_assert_eq!(s.silent(), &every);
                        // Nothing overdue is left, and at most one live entry per peer
                        // heard and not silent.
                        prop_assert!(s.due.clone().pop_before(now).is_none());
                        let watched = heard.values().filter(|t| t.is_some()).count() - every.len();
                        prop_assert!(s.live.len() <= watched);
                    }
                }
            }
        }

        /// `take_changed` is true after every frame at which a peer fell silent, and after a
        /// replica was bound to a silent peer.
        #[test]
        fn a_peer_falling_silent_or_a_binding_to_one_is_a_change(
            steps in proptest::collection::vec(0u64..3_000, 1..50),
        ) {
            let timeout = Duration::from_micros(1_000);
            let mut s = Silence::default();
            let p = NodeId(3);
            let mut now = Time::ZERO;
            s.heard(p, None, now, timeout);
            let mut last = Some(now);
            for step in steps {
                now += Duration::from_micros(step);
                let was = s.silent().contains(&p);
                s.update(now, timeout, |_| last);
                let is = s.silent().contains(&p);
                prop_assert_eq!(s.take_changed(), is && !was);
                s.bound(p);
                prop_assert_eq!(s.take_changed(), is);
                if step % 2 == 0 {
                    s.heard(p, last, now, timeout);
                    last = Some(now);
                }
            }
        }
    }
}

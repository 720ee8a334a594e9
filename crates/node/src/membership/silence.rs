//! Passive failure detection: suspicion raised by the silence of a member this node hears
//! from every frame.
//!
//! SWIM probes one member per period in a shuffled round robin, so with `n` members the
//! first probe of a member that just crashed comes up to `n` periods later at a given
//! observer; in a running world that wait, not the suspicion time, made the tail of the
//! time to adopt a crashed member's objects (issue 13: `kill -9` of 2 of 8 nodes, p99
//! 2.3–3.1 s against a 3 s target). Yet every member hears from most others every frame
//! (object updates, locator traffic), so a crash is visible to everyone within a few
//! frames. This detector keeps, per member, the time of the last datagram and a moving
//! average of the gaps between datagrams; a member heard *steadily* (average gap at most a
//! third of the threshold, so the threshold spans at least three of its usual gaps) that
//! has been silent for the threshold is reported once, until it is heard again.
//!
//! A report only raises a SWIM *suspicion* ([`super::Membership`] applies it to foca and
//! gossips it); a live member refutes it as it refutes any suspicion, and only a member
//! that stays suspected for `suspect_to_down_after` is declared down. So silence never
//! shortens the time a member has to refute — it only starts the clock sooner.
//!
//! Silence is measured only over the time this node was itself running: a check that runs
//! late (the process was descheduled, or a frame ran long) credits the delay to every
//! member, since what they sent meanwhile is still waiting to be read.
//!
//! Pure state over virtual time: the node calls [`Silence::heard`] for every datagram from
//! an authenticated member and [`Silence::silent`] when [`Silence::poll_timeout`] is due.

use std::collections::BTreeMap;
use std::time::Duration;

use worldmesh_core::{NodeId, Time};

use super::Member;

/// What this node hears from one member.
#[derive(Clone, Copy, Debug)]
struct Heard {
    /// When the last datagram arrived.
    last: Time,
    /// Moving average (weight 1/8) of the gaps between datagrams, µs.
    gap_us: u64,
    /// Reported silent and not heard since.
    reported: bool,
}

impl Heard {
    /// Whether the last datagram arrived less than `window` before `now`.
    fn within(&self, now: Time, window: Duration) -> bool {
        now.saturating_since(self.last) < window
    }
}

/// Suspicions raised by silence, checked every quarter of the threshold.
#[derive(Debug)]
pub(super) struct Silence {
    after: Duration,
    heard: BTreeMap<NodeId, Heard>,
    next_check: Option<Time>,
    /// When the last check ran.
    last_check: Option<Time>,
    /// Suspicions this node raised, to be confirmed when due: (due, node) → (identity,
    /// incarnation suspected).
    pending: BTreeMap<(Time, NodeId), (Member, u16)>,
    /// Suspicions raised so far.
    raised: u64,
}

impl Silence {
    /// A detector with silence threshold `after`.
    pub(super) fn new(after: Duration) -> Self {
        Self {
            after,
            heard: BTreeMap::new(),
            next_check: None,
            last_check: None,
            pending: BTreeMap::new(),
            raised: 0,
        }
    }

    /// Forgets every member and pending suspicion (this node starts its membership
    /// afresh); the count of suspicions raised so far stays.
    pub(super) fn reset(&mut self) {
        *self = Self {
            raised: self.raised,
            ..Self::new(self.after)
        };
    }

    /// Suspicions raised so far.
    pub(super) fn raised(&self) -> u64 {
        self.raised
    }

    /// A datagram from member `from` arrived at `now`.
    pub(super) fn heard(&mut self, now: Time, from: NodeId) {
        let after_us = self.after.as_micros() as u64;
        let h = self.heard.entry(from).or_insert(Heard {
            last: now,
            // Not steady until a run of short gaps has pulled the average down.
            gap_us: after_us,
            reported: false,
        });
        let gap = now.saturating_since(h.last).as_micros() as u64;
        h.gap_us = (h.gap_us * 7 + gap) / 8;
        h.last = now;
        h.reported = false;
        if self.next_check.is_none() {
            self.next_check = Some(now + self.after / 4);
        }
    }

    /// Whether member `node` was heard in the `window` before `now` (the silence
    /// threshold if `None`).
    pub(super) fn heard_within(&self, now: Time, window: Option<Duration>, node: NodeId) -> bool {
        let window = window.unwrap_or(self.after);
        self.heard.get(&node).is_some_and(|h| h.within(now, window))
    }

    /// The members heard within the silence threshold before `now`, in id order (what
    /// [`Silence::heard_within`] says of each, for all of them in one walk).
    pub(super) fn heard_lately(&self, now: Time) -> impl Iterator<Item = NodeId> + '_ {
        self.heard
            .iter()
            .filter(move |(_, h)| h.within(now, self.after))
            .map(|(n, _)| *n)
    }

    /// Forgets member `node` (down, left, or replaced by a new generation).
    pub(super) fn forget(&mut self, node: NodeId) {
        self.heard.remove(&node);
        self.pending.retain(|(_, n), _| *n != node);
    }

    /// When [`Silence::silent`] or [`Silence::due`] next has work.
    pub(super) fn poll_timeout(&self) -> Option<Time> {
        let pending = self.pending.keys().next().map(|(t, _)| *t);
        match (self.next_check, pending) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The steadily heard members silent at `now`, each reported once until heard again.
    pub(super) fn silent(&mut self, now: Time) -> Vec<NodeId> {
        if self.next_check.is_none_or(|t| t > now) {
            return Vec::new();
        }
        let period = self.after / 4;
        self.next_check = (!self.heard.is_empty()).then(|| now + period);
        // A check that runs late means this node itself was not running (descheduled, a
        // long frame): what its peers sent meanwhile is still waiting to be read. Silence
        // counts only the time this node was listening, so the delay is credited to every
        // member (without it, an overloaded node suspected every peer after each stall:
        // `cluster --clients 200` on 2 cores in a debug build).
        let late = self
            .last_check
            .map_or(Duration::ZERO, |t| now.saturating_since(t).saturating_sub(period));
        self.last_check = Some(now);
        if !late.is_zero() {
            for h in self.heard.values_mut() {
                h.last = (h.last + late).min(now);
            }
        }
        let after_us = self.after.as_micros() as u64;
        let mut out = Vec::new();
        for (node, h) in &mut self.heard {
            let steady = h.gap_us * 3 <= after_us;
            let quiet = now.saturating_since(h.last).as_micros() as u64 >= after_us;
            if steady && quiet && !h.reported {
                h.reported = true;
                out.push(*node);
            }
        }
        out
    }

    /// Records a suspicion of `member` at `incarnation`, to confirm at `due`.
    pub(super) fn await_down(&mut self, due: Time, member: Member, incarnation: u16) {
        self.raised += 1;
        self.await_again(due, member, incarnation);
    }

    /// Puts back a suspicion of `member` at `incarnation` that came due, to confirm at
    /// `due` instead (this node's local health stretched it).
    pub(super) fn await_again(&mut self, due: Time, member: Member, incarnation: u16) {
        self.pending.insert((due, member.node), (member, incarnation));
    }

    /// The suspicions this node raised and has not confirmed yet: identity and incarnation.
    pub(super) fn raised_pending(&self) -> impl Iterator<Item = (Member, u16)> + '_ {
        self.pending.values().copied()
    }

    /// The suspicions due at `now`, removed.
    pub(super) fn due(&mut self, now: Time) -> Vec<(Member, u16)> {
        let mut out = Vec::new();
        while let Some(e) = self.pending.first_entry() {
            if e.key().0 > now {
                break;
            }
            out.push(e.remove());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    #[test]
    fn a_steady_member_that_falls_silent_is_reported_once() {
        let mut s = Silence::new(Duration::from_millis(400));
        let n = NodeId(3);
        for ms in (0..=2000).step_by(100) {
            s.heard(t(ms), n);
            assert!(s.silent(t(ms)).is_empty(), "reported while heard at {ms} ms");
        }
        // Silent from 2000 ms: not yet at 2300, reported by 2400 + one check period.
        let mut reported_at = None;
        let mut now = 2000;
        while now <= 3000 {
            if s.poll_timeout().is_some_and(|d| d <= t(now)) && !s.silent(t(now)).is_empty() {
                assert!(reported_at.is_none(), "reported twice");
                reported_at = Some(now);
            }
            now += 10;
        }
        let at = reported_at.expect("never reported");
        assert!((2400..=2500).contains(&at), "reported at {at} ms");
        // Heard again: it can be reported again later.
        s.heard(t(3000), n);
        assert!(s.silent(t(3100)).is_empty());
    }

    #[test]
    fn a_stall_of_this_node_is_not_taken_for_silence_of_its_peers() {
        let mut s = Silence::new(Duration::from_millis(400));
        for ms in (0..=2000).step_by(100) {
            s.heard(t(ms), NodeId(1));
            assert!(s.silent(t(ms)).is_empty());
        }
        // This node stalls from 2000 to 2700 ms: its next check runs 600 ms late, before
        // the datagrams queued meanwhile are read.
        assert!(
            s.silent(t(2700)).is_empty(),
            "a stall here is not a peer's silence"
        );
        s.heard(t(2701), NodeId(1));
        assert!(s.silent(t(2800)).is_empty());
        // A real silence after the stall is still found.
        let mut now = 2800;
        let mut found = false;
        while now <= 3400 {
            now += 100;
            found |= !s.silent(t(now)).is_empty();
        }
        assert!(found, "silence after 2701 ms not reported by 3400 ms");
    }

    #[test]
    fn heard_lately_lists_in_id_order_whom_heard_within_says_was_heard() {
        let mut s = Silence::new(Duration::from_millis(400));
        for (node, ms) in [(5, 100), (1, 450), (3, 600), (9, 700)] {
            s.heard(Time::from_millis(ms), NodeId(node));
        }
        let now = Time::from_millis(860);
        let lately: Vec<NodeId> = s.heard_lately(now).collect();
        assert_eq!(lately, [NodeId(3), NodeId(9)]);
        for node in [1, 3, 5, 9] {
            assert_eq!(
                s.heard_within(now, None, NodeId(node)),
                lately.contains(&NodeId(node))
            );
        }
    }

    #[test]
    fn a_member_heard_only_now_and_then_is_never_reported() {
        // SWIM alone: one datagram a second is not steady traffic.
        let mut s = Silence::new(Duration::from_millis(400));
        for ms in (0..=10_000).step_by(1000) {
            s.heard(t(ms), NodeId(1));
        }
        for ms in (10_000..20_000).step_by(100) {
            assert!(s.silent(t(ms)).is_empty(), "reported at {ms} ms");
        }
    }

    #[test]
    fn suspicions_come_due_in_time_order_and_forget_drops_them() {
        let mut s = Silence::new(Duration::from_millis(400));
        let a = Member::simulated(NodeId(1), 0);
        let b = Member::simulated(NodeId(2), 0);
        s.await_down(t(3000), b, 0);
        s.await_down(t(2000), a, 4);
        assert_eq!(s.poll_timeout(), Some(t(2000)));
        assert!(s.due(t(1999)).is_empty());
        assert_eq!(s.due(t(2500)), vec![(a, 4)]);
        s.forget(NodeId(2));
        assert!(s.due(t(9000)).is_empty());
        assert_eq!(s.raised(), 2);
    }
}

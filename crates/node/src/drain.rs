//! Graceful drain: before a planned stop, a node hands every primary to other members with
//! the migration protocol of paper `001` §3.2, then leaves the cluster.
//!
//! Each frame while draining, the primaries that are not already in flight are grouped by
//! target — the member ranked first for each object by rendezvous hashing, i.e. the node
//! that would adopt it had this node failed, so a drain moves the same objects where a crash
//! would have put them, spread over the members — and each group leaves as one region.
//! Objects spawned meanwhile (a missile fired before its shooter froze) go in a later
//! round. A target that refuses (capacity, or draining itself) or fails is avoided for the
//! rest of the drain. When no primary is left, no migration is in flight and every `Moved`
//! notice has been acknowledged (or the grace period ran out), the node leaves the locator
//! ring and the membership and reports [`DrainState::Done`]. So does a drain left with
//! primaries and no member to take them (every other one refused or failed, or there is
//! none: the whole world is being stopped), once nothing is in flight: it leaves them
//! behind at once instead of waiting out the deadline. Nothing a drain moves is lost or
//! duplicated: migration freezes a region, binds it at the target and forwards late writes
//! (paper `001` §3.2).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time, rendezvous};

/// Tuning of a drain.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainConfig {
    /// Most objects in one region (one migration).
    pub max_region: usize,
    /// After the last primary left, how long to wait for outstanding notices.
    pub settle: Duration,
    /// A drain that has not finished after this long leaves anyway (reporting what is
    /// left behind).
    pub deadline: Duration,
}

impl Default for DrainConfig {
    fn default() -> Self {
        Self {
            max_region: 256,
            settle: Duration::from_secs(2),
            deadline: Duration::from_secs(60),
        }
    }
}

/// Where a drain is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainState {
    /// Primaries are being migrated away.
    Migrating,
    /// Every primary left; waiting for notices to be acknowledged, since this time.
    Settling(Time),
    /// The node left the cluster.
    Done,
}

/// A drain in progress.
#[derive(Clone, Debug)]
pub struct Drain {
    cfg: DrainConfig,
    started: Time,
    state: DrainState,
    /// Targets that refused or failed: not asked again.
    avoid: BTreeSet<NodeId>,
    /// Regions started.
    regions: u64,
    /// The last plan found primaries to move and no member to take them.
    nowhere: bool,
}

impl Drain {
    /// A drain started at `now`.
    pub fn new(cfg: DrainConfig, now: Time) -> Self {
        Self {
            cfg,
            started: now,
            state: DrainState::Migrating,
            avoid: BTreeSet::new(),
            regions: 0,
            nowhere: false,
        }
    }

    /// Where the drain is.
    pub fn state(&self) -> DrainState {
        self.state
    }

    /// When it started.
    pub fn started(&self) -> Time {
        self.started
    }

    /// Regions started so far.
    pub fn regions(&self) -> u64 {
        self.regions
    }

    /// `target` refused a region or failed: avoid it.
    pub fn avoid(&mut self, target: NodeId) {
        self.avoid.insert(target);
    }

    /// The regions to start now: the `idle` primaries (not frozen) grouped by target among
    /// `live` (sorted, without this node). Empty if no target is left.
    pub fn plan(&mut self, idle: &[ObjectId], live: &[NodeId]) -> Vec<(NodeId, Vec<ObjectId>)> {
        let candidates: Vec<NodeId> = live.iter().copied().filter(|n| !self.avoid.contains(n)).collect();
        self.nowhere = !idle.is_empty() && candidates.is_empty();
        let mut by_target: BTreeMap<NodeId, Vec<ObjectId>> = BTreeMap::new();
        for &id in idle {
            if let Some(t) = rendezvous::top(id, candidates.iter().copied(), None) {
                by_target.entry(t).or_default().push(id);
            }
        }
        let mut out = Vec::new();
        for (t, ids) in by_target {
            for chunk in ids.chunks(self.cfg.max_region.max(1)) {
                self.regions += 1;
                out.push((t, chunk.to_vec()));
            }
        }
        out
    }

    /// Advances the drain given what is left: primaries held, migrations in flight and
    /// unacknowledged notices. Returns true when the node should leave now.
    pub fn advance(&mut self, now: Time, primaries: usize, in_flight: usize, unacked: usize) -> bool {
        let overdue = now.saturating_since(self.started) >= self.cfg.deadline;
        let stuck = self.nowhere && in_flight == 0;
        match self.state {
            DrainState::Migrating if (primaries == 0 && in_flight == 0) || stuck || overdue => {
                self.state = DrainState::Settling(now);
                self.advance(now, primaries, in_flight, unacked)
            }
            DrainState::Settling(since)
                if unacked == 0 || now.saturating_since(since) >= self.cfg.settle || overdue =>
            {
                self.state = DrainState::Done;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_spread_regions_over_members_and_skip_avoided_ones() {
        let mut d = Drain::new(
            DrainConfig {
                max_region: 3,
                ..DrainConfig::default()
            },
            Time::ZERO,
        );
        let ids: Vec<ObjectId> = (0..40).map(|s| ObjectId::new(NodeId(0), s)).collect();
        let live = [NodeId(1), NodeId(2), NodeId(3)];
        let plan = d.plan(&ids, &live);
        let moved: usize = plan.iter().map(|(_, r)| r.len()).sum();
        assert_eq!(moved, 40);
        assert!(plan.iter().all(|(_, r)| r.len() <= 3));
        for t in live {
            assert!(plan.iter().any(|(x, _)| *x == t), "{t} gets some");
        }
        d.avoid(NodeId(2));
        assert!(d.plan(&ids, &live).iter().all(|(t, _)| *t != NodeId(2)));
        d.avoid(NodeId(1));
        d.avoid(NodeId(3));
        assert!(d.plan(&ids, &live).is_empty());
    }

    #[test]
    fn finishes_when_nothing_is_left_and_notices_are_acknowledged() {
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        let t = |ms| Time::from_millis(ms);
        assert!(!d.advance(t(100), 3, 1, 0));
        assert!(!d.advance(t(200), 0, 0, 5));
        assert_eq!(d.state(), DrainState::Settling(t(200)));
        assert!(d.advance(t(300), 0, 0, 0));
        assert_eq!(d.state(), DrainState::Done);
        // Unacknowledged notices are waited for at most `settle`.
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        assert!(!d.advance(t(100), 0, 0, 2));
        assert!(d.advance(t(2100), 0, 0, 2));
        // The deadline ends a drain that cannot finish.
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        assert!(!d.advance(t(1000), 5, 0, 0));
        assert!(d.advance(t(60_000), 5, 0, 0));
        assert_eq!(d.state(), DrainState::Done);
    }

    #[test]
    fn a_drain_with_no_member_left_to_take_its_primaries_ends_without_the_deadline() {
        let t = |ms| Time::from_millis(ms);
        let ids: Vec<ObjectId> = (0..5).map(|s| ObjectId::new(NodeId(0), s)).collect();
        // The only other member refused (it drains too): once its region is back (nothing
        // in flight), the drain leaves its primaries behind and ends.
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        assert_eq!(d.plan(&ids, &[NodeId(1)]).len(), 1);
        assert!(!d.advance(t(100), 5, 1, 0));
        d.avoid(NodeId(1));
        assert!(d.plan(&ids, &[NodeId(1)]).is_empty());
        assert!(
            !d.advance(t(200), 5, 1, 0),
            "a migration still in flight is waited for"
        );
        assert!(d.advance(t(300), 5, 0, 0));
        assert_eq!(d.state(), DrainState::Done);
        // Alone in the world: nowhere to go from the start.
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        assert!(d.plan(&ids, &[]).is_empty());
        assert!(d.advance(t(100), 5, 0, 0));
        // A member to go to again (one that joined): the drain goes on.
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        d.avoid(NodeId(1));
        assert!(d.plan(&ids, &[NodeId(1)]).is_empty());
        assert!(!d.plan(&ids, &[NodeId(1), NodeId(2)]).is_empty());
        assert!(!d.advance(t(100), 5, 1, 0));
        // Nothing idle to move (all in flight) is not being stuck.
        let mut d = Drain::new(DrainConfig::default(), Time::ZERO);
        assert!(d.plan(&[], &[]).is_empty());
        assert!(!d.advance(t(100), 5, 0, 0));
    }
}

//! Deleting an object everywhere: the primary's notice, its acknowledgement, and the
//! replica holders' tombstones.
//!
//! A primary the game deletes tells every subscriber and receiver with a `Deleted` notice
//! (paper `000` §3.2: replicas exist only as long as their primary). Three things make the
//! deletion stick under loss, duplication and reordering (fault swarm, crashes seed 1153,
//! where a ghost replica outlived its primary's node):
//!
//! - **Nothing queued survives it.** Updates and logs of the object still queued for any
//!   peer are dropped with the primary: otherwise a packet could carry the notice and, after
//!   it, a full state that brings the replica back.
//! - **The notice is acknowledged.** A packet carrying one is acknowledged like one
//!   carrying updates; a notice not confirmed within `resend_after` is sent again, until
//!   `write_timeout` (or until the peer leaves the membership).
//! - **Holders keep a tombstone.** A replica holder that takes a notice refuses states of
//!   the object for [`TOMBSTONE_TTL`]: one that left the primary before the notice (jitter
//!   reorders datagrams) cannot resurrect it. The deleting node keeps one too, and adopts
//!   no orphan offer of the object meanwhile. Tombstones expire, so memory stays bounded
//!   by the deletion rate, and a node that adopts the object regardless (its primary
//!   failed before every holder heard of the deletion) is followed once they expire.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time};

use super::{GameObject, PeerState, ReplicaManager};
use crate::store::Role;

/// How long a replica holder refuses states of an object its primary deleted.
pub(super) const TOMBSTONE_TTL: Duration = Duration::from_secs(5);

/// Most tombstones kept (the oldest go first beyond).
const MAX_TOMBSTONES: usize = 65_536;

/// Most unacknowledged deletion notices tracked per peer (beyond, a notice is sent once).
const MAX_UNACKED: usize = 4096;

/// Objects deleted lately, oldest first.
#[derive(Default)]
pub(super) struct Tombstones {
    order: VecDeque<(Time, ObjectId)>,
    ids: BTreeSet<ObjectId>,
}

impl Tombstones {
    fn insert(&mut self, now: Time, id: ObjectId) {
        self.expire(now);
        if self.order.len() >= MAX_TOMBSTONES
            && let Some((_, old)) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
        if self.ids.insert(id) {
            self.order.push_back((now, id));
        }
    }

    /// True if `id` was deleted within [`TOMBSTONE_TTL`] of `now`.
    pub(super) fn contains(&mut self, now: Time, id: ObjectId) -> bool {
        if self.ids.is_empty() {
            return false;
        }
        self.expire(now);
        self.ids.contains(&id)
    }

    fn expire(&mut self, now: Time) {
        while let Some(&(at, id)) = self.order.front()
            && now - at > TOMBSTONE_TTL
        {
            self.order.pop_front();
            self.ids.remove(&id);
        }
    }
}

impl PeerState {
    /// Takes the deletion notices queued for this peer, noting them as sent at `now`.
    pub(super) fn take_deletions(&mut self, now: Time) -> Vec<ObjectId> {
        let deleted = std::mem::take(&mut self.deleted);
        for id in &deleted {
            let first = self.unacked_deleted.get(id).map_or(now, |(f, _)| *f);
            if self.unacked_deleted.len() < MAX_UNACKED || self.unacked_deleted.contains_key(id) {
                self.unacked_deleted.insert(*id, (first, now));
            }
        }
        deleted
    }

    /// The peer acknowledged a packet that carried `ids`.
    pub(super) fn deletions_acked(&mut self, ids: &[ObjectId]) {
        for id in ids {
            self.unacked_deleted.remove(id);
        }
    }
}

impl<O: GameObject> ReplicaManager<O> {
    /// The game deleted the primary `id`: unbind it, drop what was queued of it, tell
    /// everyone who held a replica, and keep a tombstone here too (an orphan offer this
    /// node kept for the object while it was the primary must not bring it back: see
    /// [`ReplicaManager::adopt_offer`]).
    pub(super) fn delete_primary(&mut self, now: Time, id: ObjectId) {
        self.tombstones.insert(now, id);
        self.recovered.remove(&id);
        self.names.unbind(id);
        self.applied.remove(&id);
        let Some(meta) = self.prim.remove(&id) else {
            return;
        };
        // Only a marked peer can hold queued updates or logs: a flush takes them all.
        self.net.for_each_marked_mut(|_, p| {
            p.updates.retain(|u| u.id != id);
            p.logs.retain(|l| l.id != id);
        });
        let targets: BTreeSet<NodeId> = meta
            .subscribers
            .keys()
            .chain(meta.receivers.keys())
            .copied()
            .collect();
        for t in targets {
            self.peer(t).deleted.push(id);
        }
    }

    /// `from` deleted the objects `ids`: the replicas that follow it go, fetches asked of
    /// it end, and both stay gone for [`TOMBSTONE_TTL`]. (Notices for objects `from` is not
    /// the primary of change nothing.)
    pub(super) fn on_deleted(&mut self, now: Time, from: NodeId, ids: &[ObjectId]) {
        for &id in ids {
            let held = self
                .store
                .get(id)
                .is_some_and(|e| e.role == Role::Replica { primary: from });
            let asked = self.fetching.get(&id).is_some_and(|(_, n)| *n == from);
            if held {
                self.remove_replica(id);
                self.names.forget(id);
            }
            if held || asked {
                self.fetching.remove(&id);
                self.tombstones.insert(now, id);
            }
        }
    }

    /// Queues again the deletion notices no acknowledgement confirmed within
    /// `resend_after`; forgets those older than `write_timeout`.
    pub(super) fn resend_deletions(&mut self, now: Time) {
        let (resend, timeout) = (self.cfg.resend_after, self.cfg.write_timeout);
        // The peers with notices outstanding, by ascending id (all the others have none);
        // those left with some stay in the set.
        for n in std::mem::take(&mut self.deleting) {
            let Some(p) = self.net.get_mut(&n) else { continue };
            p.unacked_deleted.retain(|_, (first, _)| now - *first <= timeout);
            for (id, (_, sent)) in &p.unacked_deleted {
                if now - *sent >= resend && !p.deleted.contains(id) {
                    p.deleted.push(*id);
                }
            }
            if !p.unacked_deleted.is_empty() {
                self.deleting.insert(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tombstone_lasts_its_ttl_and_the_oldest_go_first_beyond_the_bound() {
        let mut t = Tombstones::default();
        let a = ObjectId::new(NodeId(1), 1);
        let t0 = Time::from_millis(1_000);
        t.insert(t0, a);
        assert!(t.contains(t0 + TOMBSTONE_TTL, a));
        assert!(!t.contains(t0 + TOMBSTONE_TTL + Duration::from_millis(1), a));
        assert!(
            t.order.is_empty() && t.ids.is_empty(),
            "expired entries are freed"
        );
        for k in 0..=MAX_TOMBSTONES as u32 {
            t.insert(t0, ObjectId::new(NodeId(2), k));
        }
        assert_eq!(t.order.len(), MAX_TOMBSTONES);
        assert!(!t.contains(t0, ObjectId::new(NodeId(2), 0)), "the oldest went");
        assert!(t.contains(t0, ObjectId::new(NodeId(2), MAX_TOMBSTONES as u32)));
    }
}

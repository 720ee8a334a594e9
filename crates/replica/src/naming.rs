//! The name service of paper `001` §3 ("Name service and migration"), one instance per node.
//!
//! The paper's name service lets every node bind objects locally and hand out identifiers;
//! when an object migrates, the old node keeps a *forwarding entry* that points at the new
//! binding, lookups follow the chain of forwarding entries, and *leases* let chains
//! collapse (§3.2). worldmesh keeps the [`ObjectId`] stable for an object's whole life and
//! models the paper's "new identifier" as a [`Binding`]: the node now holding the primary
//! plus an *epoch* that counts the object's migrations. The binding is what the new node
//! returns to the old one (step 5 of §3.2) and what `Moved` notices carry.
//!
//! Each node's instance knows three things:
//!
//! - **local** bindings: the primaries this node holds, with their epochs;
//! - **forwarding** entries: objects that migrated away from this node, with the binding
//!   they were handed to. An entry stays until every node told of the move has acknowledged
//!   it and then for a further lease ([`NameService::expire`]); afterwards lookups for the id
//!   here return "not found";
//! - **known** bindings: what this node learned from verified `Moved` notices about objects
//!   held elsewhere. These are *not* leased: every node is told of every move, in order, and
//!   keeps the latest binding (one small entry per migrated object) until the object is
//!   deleted, because that is what lets it verify the next `Moved` notice or transfer of the
//!   object once the old hosts' forwarding entries have expired. Lookups therefore start at
//!   the latest binding, and the chain a lookup follows is at most the moves the asker has
//!   not heard of yet.
//!
//! An object that never migrated needs no entry anywhere: its binding is its creator at
//! epoch 0 ([`Binding::initial`]). This keeps the common case free of name-service state,
//! as the paper's identifiers do for unmigrated objects.

use std::collections::BTreeMap;
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time};

/// Where an object's primary lives: the paper's object identifier after migration
/// (paper `001` §3.2 step 5, "return the new identifier"), as (node, epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, bitcode::Encode, bitcode::Decode)]
pub struct Binding {
    /// The node holding the primary.
    pub node: NodeId,
    /// How many times the object has migrated (0 = still on its creator).
    pub epoch: u32,
}

impl Binding {
    /// The binding of an object that never migrated: its creator, epoch 0.
    pub fn initial(id: ObjectId) -> Self {
        Self {
            node: id.origin,
            epoch: 0,
        }
    }
}

/// What a node's name service says about an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The primary is bound here, at this epoch.
    Local(u32),
    /// The object migrated away from this node: follow the forwarding entry.
    Forwarded(Binding),
    /// Held elsewhere, as far as this node knows (a learned binding or the creator).
    Remote(Binding),
}

/// A forwarding entry left by a migration (paper `001` §3.2 step 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Forwarding {
    to: Binding,
    /// Set once every notified node acknowledged the move: the entry lives until then.
    expires: Option<Time>,
}

/// One node's name service. Iteration is by id (deterministic).
#[derive(Clone, Debug)]
pub struct NameService {
    me: NodeId,
    /// This node's generation: objects created by an earlier generation of this node id are
    /// not presumed to be here.
    generation: u32,
    local: BTreeMap<ObjectId, u32>,
    forwarding: BTreeMap<ObjectId, Forwarding>,
    known: BTreeMap<ObjectId, Binding>,
    lease: Duration,
}

impl NameService {
    /// An empty name service for node `me`; forwarding entries live for `lease` once every
    /// notified node acknowledged the move.
    pub fn new(me: NodeId, lease: Duration) -> Self {
        Self {
            me,
            generation: 0,
            local: BTreeMap::new(),
            forwarding: BTreeMap::new(),
            known: BTreeMap::new(),
            lease,
        }
    }

    /// Sets this node's generation (see [`ObjectId`]).
    pub fn set_generation(&mut self, generation: u32) {
        self.generation = generation;
    }

    /// True if `id` was created by this node in its current generation.
    fn created_here(&self, id: ObjectId) -> bool {
        id.origin == self.me && id.generation() == self.generation
    }

    /// Binds `id` here at `epoch` (step 4 of §3.2, or a new object at epoch 0). Removes any
    /// forwarding entry: an object that comes back needs none.
    pub fn bind_local(&mut self, id: ObjectId, epoch: u32) {
        if epoch > 0 || !self.created_here(id) {
            self.local.insert(id, epoch);
        }
        self.forwarding.remove(&id);
        self.known.remove(&id);
    }

    /// The object is no longer a primary here and did not migrate (deleted).
    pub fn unbind(&mut self, id: ObjectId) {
        self.local.remove(&id);
    }

    /// The epoch of a local primary (0 if it never migrated).
    pub fn local_epoch(&self, id: ObjectId) -> u32 {
        self.local.get(&id).copied().unwrap_or(0)
    }

    /// Step 6 of §3.2: `id` left this node for `to`; keep a forwarding entry until
    /// [`NameService::release`] and a lease after it.
    pub fn forward(&mut self, id: ObjectId, to: Binding) {
        self.local.remove(&id);
        self.forwarding.insert(id, Forwarding { to, expires: None });
        // Kept after the entry expires, like any learned binding.
        self.known.insert(id, to);
    }

    /// Every node told of `id`'s move has acknowledged it: the forwarding entry now expires
    /// after the lease.
    pub fn release(&mut self, id: ObjectId, now: Time) {
        if let Some(f) = self.forwarding.get_mut(&id) {
            f.expires = Some(now + self.lease);
        }
    }

    /// Learns `b` for `id` (from a verified `Moved` notice or a lookup reply), if it is newer
    /// than what is known. A forwarding entry here is shortened to point at the newer
    /// binding directly: the chain collapses. Returns true if `b` was news.
    pub fn learn(&mut self, id: ObjectId, b: Binding, now: Time) -> bool {
        if self.local.contains_key(&id) || (b.node == self.me) {
            return false;
        }
        if b.epoch <= self.resolve(id).binding(self.me).epoch {
            return false;
        }
        if let Some(f) = self.forwarding.get_mut(&id) {
            f.to = b;
        }
        let _ = now;
        self.known.insert(id, b);
        true
    }

    /// Learns `b` for `id` whatever is known (an adoption that won over an equal-epoch
    /// rival: the replica manager has already decided). A forwarding entry here is pointed
    /// at `b`.
    pub fn learn_over(&mut self, id: ObjectId, b: Binding) {
        if b.node == self.me {
            return;
        }
        self.local.remove(&id);
        if let Some(f) = self.forwarding.get_mut(&id) {
            f.to = b;
        }
        self.known.insert(id, b);
    }

    /// What this node knows about `id`. Objects with no entry resolve to their creator.
    pub fn resolve(&self, id: ObjectId) -> Resolution {
        if let Some(e) = self.local.get(&id) {
            return Resolution::Local(*e);
        }
        if let Some(f) = self.forwarding.get(&id) {
            return Resolution::Forwarded(f.to);
        }
        if let Some(b) = self.known.get(&id) {
            return Resolution::Remote(*b);
        }
        let b = Binding::initial(id);
        if self.created_here(id) {
            // Created here and never bound elsewhere: a primary here (or deleted).
            Resolution::Local(0)
        } else {
            Resolution::Remote(b)
        }
    }

    /// True if this node knows an epoch of `id` for a fact: bound here, forwarded from
    /// here, or learned from a notice (not the creator's presumed epoch 0 it assumes for
    /// objects it never heard of).
    pub fn knows(&self, id: ObjectId) -> bool {
        self.local.contains_key(&id) || self.forwarding.contains_key(&id) || self.known.contains_key(&id)
    }

    /// The forwarding entry of `id`, if this node keeps one.
    pub fn forwarding(&self, id: ObjectId) -> Option<Binding> {
        self.forwarding.get(&id).map(|f| f.to)
    }

    /// Every forwarding entry kept here: (object, where it went), by id.
    pub fn forwarding_entries(&self) -> impl Iterator<Item = (ObjectId, Binding)> + '_ {
        self.forwarding.iter().map(|(id, f)| (*id, f.to))
    }

    /// Number of forwarding entries kept.
    pub fn forwarding_len(&self) -> usize {
        self.forwarding.len()
    }

    /// Drops released forwarding entries whose lease ran out. Returns how many.
    pub fn expire(&mut self, now: Time) -> usize {
        let before = self.forwarding.len();
        self.forwarding.retain(|_, f| f.expires.is_none_or(|t| t > now));
        before - self.forwarding.len()
    }

    /// The object was deleted: forget what was learned about it.
    pub fn forget(&mut self, id: ObjectId) {
        self.known.remove(&id);
    }

    /// The objects whose learned binding names `node` (iteration by id).
    pub fn learned_at(&self, node: NodeId) -> impl Iterator<Item = ObjectId> + '_ {
        self.known
            .iter()
            .filter(move |(_, b)| b.node == node)
            .map(|(id, _)| *id)
    }

    /// Number of learned bindings kept.
    pub fn known_len(&self) -> usize {
        self.known.len()
    }
}

impl Resolution {
    /// The binding this resolution points at (`me` for a local primary).
    pub fn binding(self, me: NodeId) -> Binding {
        match self {
            Resolution::Local(epoch) => Binding { node: me, epoch },
            Resolution::Forwarded(b) | Resolution::Remote(b) => b,
        }
    }
}

/// Follows forwarding entries across the name services of several nodes, as a `Lookup`
/// travelling hop by hop does (paper `001` §3.2: "lookups follow the chain"). `services`
/// maps a node to its name service; at most `max_hops` hops are taken. Returns the node
/// that binds `id` locally and the hops taken, or `None` (not found, or a chain too long).
/// The in-process form is what the `migration` experiment times against a direct call
/// (paper `001` Table 2).
pub fn follow_chain<'a>(
    start: NodeId,
    id: ObjectId,
    max_hops: usize,
    services: impl Fn(NodeId) -> Option<&'a NameService>,
) -> Option<(NodeId, usize)> {
    let mut at = start;
    for hops in 0..=max_hops {
        let ns = services(at)?;
        match ns.resolve(id) {
            Resolution::Local(_) => return Some((at, hops)),
            Resolution::Forwarded(b) => at = b.node,
            Resolution::Remote(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u32, s: u32) -> ObjectId {
        ObjectId::new(NodeId(n), s)
    }

    #[test]
    fn unmigrated_objects_resolve_to_their_creator() {
        let ns = NameService::new(NodeId(1), Duration::from_secs(1));
        assert_eq!(ns.resolve(oid(1, 0)), Resolution::Local(0));
        assert_eq!(
            ns.resolve(oid(2, 0)),
            Resolution::Remote(Binding {
                node: NodeId(2),
                epoch: 0
            })
        );
    }

    #[test]
    fn chains_are_followed_collapsed_and_expire_after_the_lease() {
        let lease = Duration::from_secs(2);
        let id = oid(0, 7);
        let mut a = NameService::new(NodeId(0), lease);
        let mut b = NameService::new(NodeId(1), lease);
        let mut c = NameService::new(NodeId(2), lease);
        let to_b = Binding {
            node: NodeId(1),
            epoch: 1,
        };
        let to_c = Binding {
            node: NodeId(2),
            epoch: 2,
        };
        a.forward(id, to_b);
        b.bind_local(id, 1);
        b.forward(id, to_c);
        c.bind_local(id, 2);
        let get = |n: NodeId| [&a, &b, &c].into_iter().find(|s| s.me == n);
        assert_eq!(follow_chain(NodeId(0), id, 8, get), Some((NodeId(2), 2)));
        assert_eq!(follow_chain(NodeId(0), id, 1, get), None, "hop limit");
        // A learns the newer binding: its entry now points at C (chain of one).
        assert!(a.learn(id, to_c, Time::ZERO));
        assert!(!a.learn(id, to_b, Time::ZERO), "older bindings are not news");
        let get = |n: NodeId| [&a, &b, &c].into_iter().find(|s| s.me == n);
        assert_eq!(follow_chain(NodeId(0), id, 8, get), Some((NodeId(2), 1)));
        // Unreleased entries never expire; released ones after the lease.
        assert_eq!(a.expire(Time::from_millis(10_000)), 0);
        a.release(id, Time::from_millis(10_000));
        assert_eq!(a.expire(Time::from_millis(11_000)), 0);
        assert_eq!(a.expire(Time::from_millis(12_001)), 1);
        // The forwarding entry is gone; the learned binding stays (so A can check the next
        // move), and a deletion forgets it: the id then resolves to its creator, A, whose
        // store holds no primary: "not found".
        assert_eq!(a.resolve(id), Resolution::Remote(to_c));
        a.forget(id);
        assert_eq!(a.resolve(id), Resolution::Local(0));
    }
}

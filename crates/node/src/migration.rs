//! The migration protocol between nodes (paper `001` §3 "Name service and migration",
//! §3.2 "Migration"), carried in its own datagrams (`MessageClass::Migration`).
//!
//! A **region** — a set of primaries — moves from its old node to a target as a unit. The
//! paper numbers six steps (Fig. 3: 1 serialize and transmit, 2 deserialize, 3 bind to the
//! new node's name service, 4 return the new identifier, 5 the old node updates its name
//! service, 6 remove the object); the issue splits "transmit" out, giving seven:
//!
//! | §3.2 step | message / code |
//! |---|---|
//! | 1. serialize | [`Migrator::start`] → `ReplicaManager::freeze` (the region stops thinking) |
//! | 2. transfer | [`MigrationMsg::Transfer`] parts, resent until answered |
//! | 3. deserialize, 4. bind | target: `ReplicaManager::bind_migrated` once every part is in |
//! | 5. return the new identifier | [`MigrationMsg::Accept`] with the [`Binding`]s |
//! | 6. update forwarding | old node: `ReplicaManager::complete_migration` installs forwarding entries; [`MigrationMsg::Moved`] notices to every peer, resent until [`MigrationMsg::MovedAck`] |
//! | 7. delete | old node: the frozen primaries are deleted (replicas elsewhere stay) |
//!
//! Writes that reach the old node meanwhile are held while the region is frozen, shipped
//! with the transfer, and afterwards passed on in [`MigrationMsg::Forward`]; writers resend
//! until the new primary acknowledges, and the primary's per-writer logs (moved with the
//! objects) make each write apply once. Lookups ([`MigrationMsg::Lookup`]) follow forwarding
//! entries hop by hop; a forwarding entry expires a lease after every peer acknowledged the
//! `Moved` notice (chains collapse: a node that learns a newer binding points its own entry
//! straight at it), and lookups that find nothing return "not found".
//!
//! Refusals: a target over its capacity answers [`MigrationMsg::Refuse`] and the old node
//! unfreezes the region. A transfer the target cannot verify (the sender is not the
//! objects' host as far as it knows, e.g. an earlier `Moved` has not arrived yet) gets no
//! answer and is resent. There is no abort on silence: a target that never answers keeps
//! the region frozen (failover of dead nodes is another component's job).

use std::collections::BTreeMap;
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_replica::{
    Binding, ForwardedWrite, GameObject, MigrateError, MigratedObject, MovedOutcome, OrphanOffer,
    ReplicaManager,
};

/// Why a target refused a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub enum RefuseReason {
    /// Binding the region would exceed the target's primary capacity.
    Capacity,
    /// The transfer failed validation (bad binding, undecodable state, malformed).
    Invalid,
    /// The target failed or left before it answered (decided locally, never sent).
    TargetDown,
    /// The target is draining itself: it takes no primaries (two draining nodes would
    /// otherwise hand the same objects back and forth).
    Draining,
}

/// A migration-protocol message (paper `001` §3.2).
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum MigrationMsg {
    /// Part `part` of `parts` of region `mig` (steps 1–2), with the writes held for it.
    Transfer {
        /// The sender's migration number.
        mig: u64,
        /// This part (from 0).
        part: u16,
        /// Number of parts.
        parts: u16,
        /// The objects in this part.
        objects: Vec<MigratedObject>,
        /// Writes the old node holds for the region.
        writes: Vec<ForwardedWrite>,
    },
    /// Region `mig` is bound here (steps 4–5): the new bindings.
    Accept {
        /// The migration.
        mig: u64,
        /// The objects' new bindings.
        bindings: Vec<(ObjectId, Binding)>,
    },
    /// Region `mig` is not taken.
    Refuse {
        /// The migration.
        mig: u64,
        /// Why.
        reason: RefuseReason,
    },
    /// These objects moved from the sender to the bindings given (step 6).
    Moved(Vec<(ObjectId, Binding)>),
    /// `Moved` notices received: (object, epoch).
    MovedAck(Vec<(ObjectId, u32)>),
    /// Writes passed on to the object's new host.
    Forward(Vec<ForwardedWrite>),
    /// Where is `id`? Answer `asker` under `qid`; `hops` taken so far.
    Lookup {
        /// The asker's query number.
        qid: u64,
        /// The node that asked.
        asker: NodeId,
        /// The object.
        id: ObjectId,
        /// Forwarding hops taken so far.
        hops: u8,
    },
    /// The sender adopted these orphans of failed nodes: (object, new binding, failed node)
    /// (`crate::adoption`; acknowledged with `MovedAck`).
    Adopted(Vec<(ObjectId, Binding, NodeId)>),
    /// Replica holders' copies of orphans, offered to their adopter (`crate::adoption`).
    Offer(Vec<OrphanOffer>),
    /// The answer to a lookup: the binding, or `None` (not found).
    LookupReply {
        /// The asker's query number.
        qid: u64,
        /// The object.
        id: ObjectId,
        /// Where it is bound.
        binding: Option<Binding>,
        /// Forwarding hops the lookup took.
        hops: u8,
    },
}

/// Tuning of the migration protocol.
#[derive(Clone, Debug)]
pub struct MigrationConfig {
    /// Unanswered transfers and unacknowledged `Moved` notices are resent after this long.
    pub resend: Duration,
    /// Most primaries this node accepts to hold (target capacity, paper `001` §7.4); `None`
    /// is unbounded.
    pub max_primaries: Option<usize>,
    /// Largest transfer part (bytes of object state, estimated) before splitting.
    pub max_part: usize,
    /// Most lookup hops before a lookup gives up ("not found").
    pub max_hops: u8,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        Self {
            resend: Duration::from_millis(300),
            max_primaries: None,
            max_part: 1100,
            max_hops: 8,
        }
    }
}

/// Why a migration could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The target is this node.
    #[error("cannot migrate to this node")]
    SelfTarget,
    /// The target is not a member.
    #[error("{0} is not a member")]
    NotMember(NodeId),
    /// No objects named.
    #[error("empty region")]
    Empty,
    /// The replica manager refused (not a primary here, already migrating).
    #[error(transparent)]
    Replica(#[from] MigrateError),
}

/// Counters of the migration protocol.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MigrationStats {
    /// Regions this node started to migrate.
    pub started: u64,
    /// Regions accepted by their target.
    pub completed: u64,
    /// Regions refused by their target.
    pub refused: u64,
    /// Regions bound here.
    pub bound: u64,
    /// Transfer parts sent, including resends.
    pub transfer_parts_sent: u64,
    /// `Moved` notices sent, including resends.
    pub moved_sent: u64,
    /// Malformed or unverifiable migration messages dropped.
    pub rejected: u64,
    /// Lookups answered or forwarded here.
    pub lookups_served: u64,
}

/// New bindings of a region's objects.
type Bindings = Vec<(ObjectId, Binding)>;

/// A migration this node started.
struct Outgoing {
    target: NodeId,
    ids: Vec<ObjectId>,
    parts: Vec<Vec<MigratedObject>>,
    started: Time,
    last_sent: Time,
    /// False while the old node's store takes the region's records and in-doubt markers
    /// (persistence on): nothing is sent before they are on disk.
    ready: bool,
}

/// A region being received.
struct Incoming {
    parts: Vec<Option<Vec<MigratedObject>>>,
    writes: Vec<ForwardedWrite>,
    bytes: usize,
}

/// What the migrator reports to the node.
#[derive(Clone, Debug, PartialEq)]
pub enum MigrationEvent {
    /// A region this node sent is bound at `target` (step 5 reached the old node).
    Completed {
        /// The target.
        target: NodeId,
        /// The objects and their new bindings.
        bindings: Vec<(ObjectId, Binding)>,
        /// When the migration started.
        started: Time,
    },
    /// A region this node sent was refused.
    Refused {
        /// The target.
        target: NodeId,
        /// The objects (primaries here again).
        ids: Vec<ObjectId>,
        /// Why.
        reason: RefuseReason,
    },
    /// A region from `from` is bound here.
    Bound {
        /// The old node.
        from: NodeId,
        /// The objects.
        ids: Vec<ObjectId>,
    },
    /// A lookup finished.
    Lookup {
        /// The object.
        id: ObjectId,
        /// Where it is bound (`None`: not found).
        binding: Option<Binding>,
        /// Forwarding hops taken.
        hops: u8,
    },
}

/// Most regions being received at once; more are dropped (the sender resends).
const MAX_INCOMING: usize = 64;
/// Most parts a region may have.
const MAX_PARTS: u16 = 4096;
/// How long a bound region's answer is remembered, to answer resent transfers.
const REMEMBER_BOUND: Duration = Duration::from_secs(60);
/// Most bytes of partial regions held at once; parts beyond are dropped (and resent).
const MAX_INCOMING_BYTES: usize = 16 << 20;
/// A lookup unanswered this long is forgotten (lookups are not retried; the caller asks
/// again).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Most lookups in flight.
const MAX_LOOKUPS: usize = 1024;

/// The migration protocol state of one node.
pub struct Migrator {
    me: NodeId,
    cfg: MigrationConfig,
    next_mig: u64,
    outgoing: BTreeMap<u64, Outgoing>,
    incoming: BTreeMap<(NodeId, u64), Incoming>,
    bound: BTreeMap<(NodeId, u64), (Time, Bindings)>,
    /// Unacknowledged `Moved` notices per peer: object → (binding, last sent).
    notices: BTreeMap<NodeId, BTreeMap<ObjectId, (Binding, Time)>>,
    next_qid: u64,
    lookups: BTreeMap<u64, (ObjectId, Time)>,
    /// Bytes of object state and writes held in `incoming`.
    incoming_bytes: usize,
    /// This node drains: transfers to it are refused.
    draining: bool,
    /// Persistence is on: transfers wait for [`Migrator::release_transfer`], acceptances
    /// for [`Migrator::release_accept`] (see [`Migrator::set_persisting`]).
    persisting: bool,
    /// Regions bound here whose records are not on disk yet (no `Accept` sent).
    unpersisted: std::collections::BTreeSet<(NodeId, u64)>,
    /// Regions bound here since the last [`Migrator::take_newly_bound`].
    newly_bound: Vec<((NodeId, u64), Vec<ObjectId>)>,
    stats: MigrationStats,
}

impl Migrator {
    /// From now on, refuse every transfer to this node (it drains).
    pub fn set_draining(&mut self) {
        self.draining = true;
    }

    /// The node persists (issue 19): a migration moves the objects' store records exactly
    /// once. The old node sends a region only once its records and in-doubt markers are
    /// on disk ([`Migrator::release_transfer`]); the new node answers `Accept` only once
    /// the bound objects are on disk ([`Migrator::release_accept`]), and answers a
    /// transfer of objects it already holds under the transfer's epoch (or a later one)
    /// with `Accept` (a resend reaching it after its restart); a target that fails does not
    /// give a region with persisted objects back to its old node, which keeps resending
    /// until the target (restarted) answers — the target may have the objects on disk.
    pub fn set_persisting(&mut self) {
        self.persisting = true;
    }

    /// The region `mig` may be sent: its old node's records are on disk.
    pub fn release_transfer<O: GameObject>(
        &mut self,
        now: Time,
        mig: u64,
        rm: &ReplicaManager<O>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        let Some(o) = self.outgoing.get_mut(&mig).filter(|o| !o.ready) else {
            return;
        };
        o.ready = true;
        o.last_sent = now;
        self.send_transfer(mig, rm, out);
    }

    /// Regions bound here since the last call, by (old node, its migration number): the
    /// node persists them, then calls [`Migrator::release_accept`].
    pub fn take_newly_bound(&mut self) -> Vec<((NodeId, u64), Vec<ObjectId>)> {
        std::mem::take(&mut self.newly_bound)
    }

    /// Region `key` (bound here) is on disk: its `Accept` goes out. Returns the region's
    /// objects (empty if it was released before).
    pub fn release_accept(
        &mut self,
        key: (NodeId, u64),
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) -> Vec<ObjectId> {
        if !self.unpersisted.remove(&key) {
            return Vec::new();
        }
        let Some((_, bindings)) = self.bound.get(&key) else {
            return Vec::new();
        };
        out.push((
            key.0,
            MigrationMsg::Accept {
                mig: key.1,
                bindings: bindings.clone(),
            },
        ));
        bindings.iter().map(|(id, _)| *id).collect()
    }

    /// Announces moves this node's store remembers (forwarding entries recovered after a
    /// restart) to `peers` with `Moved` notices, resent until acknowledged like those of a
    /// migration; the entries are released once every peer acknowledged. Returns the
    /// objects no peer needs telling (release them now).
    pub fn announce(
        &mut self,
        now: Time,
        peers: &[NodeId],
        moved: &[(ObjectId, Binding)],
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) -> Vec<ObjectId> {
        let mut lone = Vec::new();
        for (id, b) in moved {
            let told: Vec<NodeId> = peers.iter().copied().filter(|p| *p != b.node).collect();
            if told.is_empty() {
                lone.push(*id);
            }
            for p in told {
                self.notices.entry(p).or_default().insert(*id, (*b, now));
            }
        }
        for p in peers {
            let batch: Vec<(ObjectId, Binding)> =
                moved.iter().filter(|(_, b)| b.node != *p).copied().collect();
            if !batch.is_empty() {
                self.stats.moved_sent += batch.len() as u64;
                out.push((*p, MigrationMsg::Moved(batch)));
            }
        }
        lone
    }

    /// The migrator of node `me`.
    pub fn new(me: NodeId, cfg: MigrationConfig) -> Self {
        Self {
            me,
            cfg,
            next_mig: 1,
            outgoing: BTreeMap::new(),
            incoming: BTreeMap::new(),
            bound: BTreeMap::new(),
            notices: BTreeMap::new(),
            next_qid: 1,
            lookups: BTreeMap::new(),
            incoming_bytes: 0,
            draining: false,
            persisting: false,
            unpersisted: std::collections::BTreeSet::new(),
            newly_bound: Vec::new(),
            stats: MigrationStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &MigrationStats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &MigrationConfig {
        &self.cfg
    }

    /// Regions in flight from this node.
    pub fn in_flight(&self) -> usize {
        self.outgoing.len()
    }

    /// Unacknowledged `Moved` notices.
    pub fn unacked_notices(&self) -> usize {
        self.notices.values().map(|m| m.len()).sum()
    }

    /// Steps 1–2: freezes the primaries `ids` and queues their transfer to `target`.
    pub fn start<O: GameObject>(
        &mut self,
        now: Time,
        rm: &mut ReplicaManager<O>,
        peers: &[NodeId],
        ids: &[ObjectId],
        target: NodeId,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) -> Result<u64, StartError> {
        if target == self.me {
            return Err(StartError::SelfTarget);
        }
        if peers.binary_search(&target).is_err() {
            return Err(StartError::NotMember(target));
        }
        if ids.is_empty() {
            return Err(StartError::Empty);
        }
        let objects = rm.freeze(now, ids, target)?;
        let mut parts: Vec<Vec<MigratedObject>> = Vec::new();
        let mut size = 0;
        for o in objects {
            let s = o.state.len() + 8 * o.subscribers.len() + 16 * o.applied.len() + 32;
            if parts.is_empty() || (size + s > self.cfg.max_part && !parts.last().is_some_and(Vec::is_empty))
            {
                parts.push(Vec::new());
                size = 0;
            }
            size += s;
            if let Some(p) = parts.last_mut() {
                p.push(o);
            }
        }
        let mig = self.next_mig;
        self.next_mig += 1;
        self.outgoing.insert(
            mig,
            Outgoing {
                target,
                ids: ids.to_vec(),
                parts,
                started: now,
                last_sent: now,
                ready: !self.persisting,
            },
        );
        self.stats.started += 1;
        if !self.persisting {
            self.send_transfer(mig, rm, out);
        }
        Ok(mig)
    }

    fn send_transfer<O: GameObject>(
        &mut self,
        mig: u64,
        rm: &ReplicaManager<O>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        let Some(o) = self.outgoing.get(&mig) else { return };
        let parts = o.parts.len() as u16;
        let writes = rm.held_writes(&o.ids);
        for (k, objects) in o.parts.iter().enumerate() {
            out.push((
                o.target,
                MigrationMsg::Transfer {
                    mig,
                    part: k as u16,
                    parts,
                    objects: objects.clone(),
                    writes: if k == 0 { writes.clone() } else { Vec::new() },
                },
            ));
            self.stats.transfer_parts_sent += 1;
        }
    }

    /// Per-frame upkeep: resends unanswered transfers and unacknowledged notices, forgets
    /// old answers.
    pub fn on_frame<O: GameObject>(
        &mut self,
        now: Time,
        rm: &ReplicaManager<O>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        // A region none of whose objects is frozen here any more was superseded (another
        // node's binding of them won, see `ReplicaManager::learn_adoption`): dropped.
        self.outgoing
            .retain(|_, o| o.ids.iter().any(|id| rm.frozen().contains(id)));
        let due: Vec<u64> = self
            .outgoing
            .iter()
            .filter(|(_, o)| o.ready && now - o.last_sent >= self.cfg.resend)
            .map(|(m, _)| *m)
            .collect();
        for mig in due {
            if let Some(o) = self.outgoing.get_mut(&mig) {
                o.last_sent = now;
            }
            self.send_transfer(mig, rm, out);
        }
        for (peer, items) in self.notices.iter_mut() {
            let mut batch = Vec::new();
            for (id, (b, sent)) in items.iter_mut() {
                if now - *sent >= self.cfg.resend {
                    *sent = now;
                    batch.push((*id, *b));
                }
            }
            if !batch.is_empty() {
                self.stats.moved_sent += batch.len() as u64;
                out.push((*peer, MigrationMsg::Moved(batch)));
            }
        }
        let unpersisted = &self.unpersisted;
        self.bound
            .retain(|k, (t, _)| now - *t < REMEMBER_BOUND || unpersisted.contains(k));
        self.lookups.retain(|_, (_, t)| now - *t < LOOKUP_TIMEOUT);
    }

    /// Member `dead` failed or left: migrations to it are given up (their regions think
    /// here again), regions it was sending are forgotten, and notices to it dropped.
    pub fn member_down<O: GameObject>(
        &mut self,
        rm: &mut ReplicaManager<O>,
        dead: NodeId,
        events: &mut Vec<MigrationEvent>,
    ) {
        // With persistence, a region holding persisted objects stays frozen and is resent
        // to the target when it is back: it may have bound them to its store already.
        let keep = |o: &Outgoing| {
            self.persisting
                && o.ids.iter().any(|id| {
                    rm.store()
                        .get(*id)
                        .is_some_and(|e| e.object.durability() != worldmesh_core::Durability::Ephemeral)
                })
        };
        let lost: Vec<u64> = self
            .outgoing
            .iter()
            .filter(|(_, o)| o.target == dead && !keep(o))
            .map(|(m, _)| *m)
            .collect();
        for mig in lost {
            if let Some(o) = self.outgoing.remove(&mig) {
                rm.abandon_migration(&o.ids);
                self.stats.refused += 1;
                events.push(MigrationEvent::Refused {
                    target: dead,
                    ids: o.ids,
                    reason: RefuseReason::TargetDown,
                });
            }
        }
        let gone: Vec<(NodeId, u64)> = self
            .incoming
            .keys()
            .filter(|(n, _)| *n == dead)
            .copied()
            .collect();
        for k in gone {
            if let Some(inc) = self.incoming.remove(&k) {
                self.incoming_bytes -= inc.bytes;
            }
        }
        self.notices.remove(&dead);
    }

    /// Starts a lookup of `id` (paper `001` §3.2): answered at once if this node knows the
    /// binding or that nothing is known here; otherwise a `Lookup` goes to the node the name
    /// service points at and the answer arrives as a [`MigrationEvent::Lookup`].
    pub fn lookup<O: GameObject>(
        &mut self,
        now: Time,
        rm: &ReplicaManager<O>,
        id: ObjectId,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) -> Option<MigrationEvent> {
        let next = match rm.lookup(id) {
            Ok(b) => {
                return Some(MigrationEvent::Lookup {
                    id,
                    binding: Some(b),
                    hops: 0,
                });
            }
            Err(Some(b)) => b.node,
            Err(None) => match rm.primary_node(id) {
                Some(n) => n,
                None => {
                    return Some(MigrationEvent::Lookup {
                        id,
                        binding: None,
                        hops: 0,
                    });
                }
            },
        };
        if self.lookups.len() >= MAX_LOOKUPS {
            return None;
        }
        let qid = self.next_qid;
        self.next_qid += 1;
        self.lookups.insert(qid, (id, now));
        out.push((
            next,
            MigrationMsg::Lookup {
                qid,
                asker: self.me,
                id,
                hops: 1,
            },
        ));
        None
    }

    /// Handles a migration message from peer `from`. Everything a peer could get wrong is
    /// counted in `rejected` and changes nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn handle<O: GameObject>(
        &mut self,
        now: Time,
        rm: &mut ReplicaManager<O>,
        peers: &[NodeId],
        from: NodeId,
        msg: MigrationMsg,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<MigrationEvent>,
    ) {
        match msg {
            MigrationMsg::Transfer {
                mig,
                part,
                parts,
                objects,
                writes,
            } => self.on_transfer(now, rm, from, (mig, part, parts), objects, writes, out, events),
            MigrationMsg::Accept { mig, bindings } => {
                let Some(o) = self.outgoing.get(&mig).filter(|o| o.target == from) else {
                    return; // a duplicate answer, or not ours: nothing to do
                };
                // The target must return exactly the region's objects, bound to itself.
                let ok = bindings.len() == o.ids.len()
                    && bindings
                        .iter()
                        .all(|(id, b)| b.node == from && o.ids.contains(id));
                if !ok {
                    self.stats.rejected += 1;
                    return;
                }
                let Some(o) = self.outgoing.remove(&mig) else {
                    return;
                };
                let moved = rm.complete_migration(now, &o.ids, o.target);
                for p in peers.iter().filter(|p| **p != o.target) {
                    let q = self.notices.entry(*p).or_default();
                    for (id, b) in &moved {
                        q.insert(*id, (*b, now));
                    }
                    self.stats.moved_sent += moved.len() as u64;
                    out.push((*p, MigrationMsg::Moved(moved.clone())));
                }
                if peers.iter().all(|p| *p == o.target) {
                    for (id, _) in &moved {
                        rm.release_forwarding(*id, now);
                    }
                }
                self.stats.completed += 1;
                events.push(MigrationEvent::Completed {
                    target: o.target,
                    bindings: moved,
                    started: o.started,
                });
            }
            MigrationMsg::Refuse { mig, reason } => {
                if self.outgoing.get(&mig).is_none_or(|o| o.target != from) {
                    self.stats.rejected += 1;
                    return;
                }
                if let Some(o) = self.outgoing.remove(&mig) {
                    rm.unfreeze(&o.ids);
                    self.stats.refused += 1;
                    events.push(MigrationEvent::Refused {
                        target: o.target,
                        ids: o.ids,
                        reason,
                    });
                }
            }
            MigrationMsg::Moved(items) => {
                let mut acks = Vec::new();
                for (id, b) in items {
                    match rm.on_moved(now, from, id, b) {
                        MovedOutcome::Accepted | MovedOutcome::Superseded => acks.push((id, b.epoch)),
                        MovedOutcome::Refused => self.stats.rejected += 1,
                    }
                }
                if !acks.is_empty() {
                    out.push((from, MigrationMsg::MovedAck(acks)));
                }
            }
            MigrationMsg::MovedAck(acks) => {
                let Some(q) = self.notices.get_mut(&from) else {
                    return;
                };
                let mut done = Vec::new();
                for (id, epoch) in acks {
                    if q.get(&id).is_some_and(|(b, _)| b.epoch == epoch) {
                        q.remove(&id);
                        done.push(id);
                    }
                }
                if q.is_empty() {
                    self.notices.remove(&from);
                }
                for id in done {
                    if !self.notices.values().any(|q| q.contains_key(&id)) {
                        rm.release_forwarding(id, now);
                    }
                }
            }
            MigrationMsg::Forward(writes) => rm.receive_forwarded(writes),
            // Adoption messages are the node's adoption protocol's (`crate::adoption`).
            MigrationMsg::Adopted(_) | MigrationMsg::Offer(_) => {}
            MigrationMsg::Lookup { qid, asker, id, hops } => {
                self.stats.lookups_served += 1;
                let reply = |binding| MigrationMsg::LookupReply {
                    qid,
                    id,
                    binding,
                    hops,
                };
                match rm.lookup(id) {
                    Ok(b) => out.push((asker, reply(Some(b)))),
                    Err(Some(b)) if hops < self.cfg.max_hops && peers.binary_search(&b.node).is_ok() => out
                        .push((
                            b.node,
                            MigrationMsg::Lookup {
                                qid,
                                asker,
                                id,
                                hops: hops + 1,
                            },
                        )),
                    Err(_) => out.push((asker, reply(None))),
                }
            }
            MigrationMsg::LookupReply {
                qid,
                id,
                binding,
                hops,
            } => {
                if self.lookups.get(&qid).is_none_or(|(q, _)| *q != id) {
                    self.stats.rejected += 1;
                    return;
                }
                self.lookups.remove(&qid);
                events.push(MigrationEvent::Lookup { id, binding, hops });
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_transfer<O: GameObject>(
        &mut self,
        now: Time,
        rm: &mut ReplicaManager<O>,
        from: NodeId,
        (mig, part, parts): (u64, u16, u16),
        objects: Vec<MigratedObject>,
        writes: Vec<ForwardedWrite>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<MigrationEvent>,
    ) {
        let key = (from, mig);
        if let Some((_, bindings)) = self.bound.get(&key) {
            if self.unpersisted.contains(&key) {
                // Bound, not on disk yet: the answer waits for the store.
                rm.receive_forwarded(writes);
                return;
            }
            // Already bound: our answer was lost. Writes still held by the sender apply once.
            out.push((
                from,
                MigrationMsg::Accept {
                    mig,
                    bindings: bindings.clone(),
                },
            ));
            rm.receive_forwarded(writes);
            return;
        }
        if parts == 0 || parts > MAX_PARTS || part >= parts {
            self.stats.rejected += 1;
            return;
        }
        if !self.incoming.contains_key(&key) && self.incoming.len() >= MAX_INCOMING {
            self.stats.rejected += 1;
            return;
        }
        let size: usize = objects.iter().map(|o| o.state.len() + 64).sum::<usize>()
            + writes.iter().map(|w| w.item.data.len() + 32).sum::<usize>();
        if self.incoming_bytes + size > MAX_INCOMING_BYTES {
            self.stats.rejected += 1;
            return;
        }
        let inc = self.incoming.entry(key).or_insert_with(|| Incoming {
            parts: vec![None; usize::from(parts)],
            writes: Vec::new(),
            bytes: 0,
        });
        if inc.parts.len() != usize::from(parts) {
            self.stats.rejected += 1;
            return;
        }
        if inc.parts[usize::from(part)].is_some() {
            return; // a resent part already held
        }
        inc.parts[usize::from(part)] = Some(objects);
        inc.writes.extend(writes);
        inc.bytes += size;
        self.incoming_bytes += size;
        if inc.parts.iter().any(Option::is_none) {
            return;
        }
        let Some(inc) = self.incoming.remove(&key) else {
            return;
        };
        self.incoming_bytes -= inc.bytes;
        let all: Vec<MigratedObject> = inc.parts.into_iter().flatten().flatten().collect();
        if self.draining {
            out.push((
                from,
                MigrationMsg::Refuse {
                    mig,
                    reason: RefuseReason::Draining,
                },
            ));
            return;
        }
        if self.persisting
            && all.iter().all(|m| {
                let known = rm.names().resolve(m.id).binding(self.me);
                let moved_on_from_here = known.epoch > m.binding.epoch
                    && (known.node == self.me || rm.names().forwarding(m.id).is_some());
                (known == m.binding || moved_on_from_here) && !rm.frozen().contains(&m.id)
            })
        {
            // A resend of a region this node bound (and persisted) before it restarted, and
            // may have moved on since: the hand-off happened. Not when it only heard of
            // another holder, under the transfer's epoch (a rival adoption) or a later one
            // (an adoption elsewhere): accepting would have the sender give its primary up
            // and announce this node as holding what it never bound (fault swarm,
            // `--faults all` seeds 671, 7538); `bind_migrated` refuses it instead, and the
            // sender's copy settles with the other holder's by the rival rule.
            let bindings: Vec<(ObjectId, Binding)> = all.iter().map(|o| (o.id, o.binding)).collect();
            rm.receive_forwarded(inc.writes);
            self.bound.insert(key, (now, bindings.clone()));
            out.push((from, MigrationMsg::Accept { mig, bindings }));
            return;
        }
        if let Some(max) = self.cfg.max_primaries
            && rm.store().primary_count() + all.len() > max
        {
            out.push((
                from,
                MigrationMsg::Refuse {
                    mig,
                    reason: RefuseReason::Capacity,
                },
            ));
            return;
        }
        match rm.bind_migrated(now, from, &all) {
            Ok(()) => {
                let bindings: Vec<(ObjectId, Binding)> = all.iter().map(|o| (o.id, o.binding)).collect();
                let ids: Vec<ObjectId> = all.iter().map(|o| o.id).collect();
                rm.receive_forwarded(inc.writes);
                rm.settle_versions(now, &ids);
                self.bound.insert(key, (now, bindings.clone()));
                self.stats.bound += 1;
                if self.persisting {
                    self.unpersisted.insert(key);
                    self.newly_bound.push((key, ids.clone()));
                } else {
                    out.push((from, MigrationMsg::Accept { mig, bindings }));
                }
                events.push(MigrationEvent::Bound { from, ids });
            }
            Err(MigrateError::NotOwner { .. } | MigrateError::StillFrozen(_)) => {
                // Not verifiable yet (an earlier move is not known here, or this node's own
                // migration of the object awaits its answer): wait for a resend.
                self.stats.rejected += 1;
            }
            Err(_) => {
                self.stats.rejected += 1;
                out.push((
                    from,
                    MigrationMsg::Refuse {
                        mig,
                        reason: RefuseReason::Invalid,
                    },
                ));
            }
        }
    }
}

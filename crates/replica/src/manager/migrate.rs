//! The replica manager's side of migration (paper `001` §3.2). The node runs the protocol
//! (messages, retransmission, who migrates what); this module does what each step does to
//! the local state:
//!
//! 1. **serialize** — [`ReplicaManager::freeze`]: the region's primaries stop being thought,
//!    writes to them are held, and each is snapshotted (state, version, writers' logs);
//! 2. **transfer** — the node ships the [`MigratedObject`]s;
//! 3. **deserialize** and 4. **bind** — [`ReplicaManager::bind_migrated`] on the new node:
//!    the states are decoded and bound as primaries under a new epoch;
//! 5. **return the new identifier** — the node answers with the [`Binding`];
//! 6. **update forwarding** and 7. **delete** — [`ReplicaManager::complete_migration`] on the
//!    old node installs forwarding entries, deletes the primaries (silently: replicas
//!    elsewhere stay) and passes the held writes on.
//!
//! Version numbers continue across the move (the new primary starts at the version the
//! old one had when frozen, with the identical state), so a replica's version checks stay
//! valid. Delta baselines are *not* carried over: the new node keeps no history but the
//! bound version and has no record of what receivers acknowledged, so every holder gets a
//! full state first (holders ask for it when they accept the `Moved` notice).

use std::collections::BTreeSet;

use worldmesh_core::{NodeId, ObjectId, Time};

use super::{PrimaryMeta, ReplicaManager};
use crate::message::{ForwardedWrite, InterestItem};
use crate::naming::{Binding, NameService, Resolution};
use crate::store::Role;
use crate::{GameObject, Mode};

/// Largest number of out-of-order write sequence numbers remembered per (object, writer).
const MAX_LOG_GAP: usize = 4096;

/// Which writes of one writer a primary has applied: every seq `<= floor`, plus `above`.
///
/// A writer numbers its writes to each object from `generation << 32` + 1, so the high
/// half of a sequence number names the writer's generation (its incarnation). A log holds
/// one generation, the newest seen: a write of a later generation starts the log afresh
/// (the writer restarted; its earlier incarnation's numbers mean nothing to it any more),
/// and a write of an earlier one is void (that incarnation is gone: it is not applied).
/// Without this, a writer that restarted and numbered from 1 again would have its first
/// writes taken for ones applied before its crash — acknowledged, never applied (crash
/// trials, issue 19).
#[derive(Clone, Debug, Default, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub struct WriterLog {
    /// All sequence numbers up to this one were applied.
    pub floor: u64,
    /// Sequence numbers above `floor` that were applied (out of order).
    pub above: BTreeSet<u64>,
}

/// The writer generation a sequence number (or a log's floor) belongs to.
fn generation_of(seq: u64) -> u64 {
    seq >> 32
}

impl WriterLog {
    /// Records `seq`: `Some(true)` if it is new (apply it), `Some(false)` if it was applied
    /// before or belongs to an earlier generation of the writer, `None` if the log cannot
    /// hold it (too far ahead; the writer will resend).
    pub fn record(&mut self, seq: u64) -> Option<bool> {
        let (g, mine) = (generation_of(seq), generation_of(self.floor));
        if g < mine {
            return Some(false);
        }
        if g > mine {
            // The writer's next incarnation: its first write resets the log.
            self.floor = g << 32;
            self.above.clear();
        }
        if seq <= self.floor || self.above.contains(&seq) {
            return Some(false);
        }
        if self.above.len() >= MAX_LOG_GAP {
            return None;
        }
        self.above.insert(seq);
        while self.above.remove(&(self.floor + 1)) {
            self.floor += 1;
        }
        Some(true)
    }

    /// Takes every write `other` lists as applied here too (the union of both logs, if
    /// they are of one generation; else the later generation's log).
    pub fn merge(&mut self, other: &WriterLog) {
        let (theirs, mine) = (generation_of(other.floor), generation_of(self.floor));
        if theirs < mine {
            return;
        }
        if theirs > mine {
            *self = other.clone();
            return;
        }
        if other.floor > self.floor {
            self.floor = other.floor;
        }
        let floor = self.floor;
        self.above.retain(|s| *s > floor);
        self.above
            .extend(other.above.iter().copied().filter(|s| *s > floor));
        while self.above.remove(&(self.floor + 1)) {
            self.floor += 1;
        }
    }
}

/// One primary in transit (paper `001` §3.2 steps 1–2).
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct MigratedObject {
    /// The object (its id never changes).
    pub id: ObjectId,
    /// Its binding after the move (the target node, the next epoch).
    pub binding: Binding,
    /// The version of `state`; the new primary continues from it.
    pub version: u64,
    /// The full state (`GameObject::encode_state`).
    pub state: Vec<u8>,
    /// Nodes receiving or subscribed to its updates (they keep getting them).
    pub subscribers: Vec<NodeId>,
    /// Which writes were applied, per writer (so none is applied twice after the move).
    pub applied: Vec<(NodeId, WriterLog)>,
}

/// Why a migration step was refused. Peers can cause every case; none changes any state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// The object is not a primary here.
    #[error("{0} is not a primary on this node")]
    NotPrimary(ObjectId),
    /// The object is already being migrated.
    #[error("{0} is already being migrated")]
    AlreadyMigrating(ObjectId),
    /// A transfer names an object whose current host is not the sender.
    #[error("{from} does not host {id} (its binding here is {known:?})")]
    NotOwner {
        /// The object.
        id: ObjectId,
        /// The sender.
        from: NodeId,
        /// What this node knows.
        known: Binding,
    },
    /// A transfer's binding is not for this node or not newer than the known one.
    #[error("bad binding {binding:?} for {id}")]
    BadBinding {
        /// The object.
        id: ObjectId,
        /// The binding received.
        binding: Binding,
    },
    /// The object comes back while this node's own migration of it awaits its answer.
    #[error("{0} is still frozen here")]
    StillFrozen(ObjectId),
    /// A transferred state did not decode.
    #[error("state of {0} does not decode")]
    Undecodable(ObjectId),
    /// A transfer named an object twice, or was empty.
    #[error("malformed transfer: {0}")]
    Malformed(&'static str),
}

/// What a `Moved` notice did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MovedOutcome {
    /// News, from the object's current host: learned (acknowledge it).
    Accepted,
    /// Already known or superseded (acknowledge it).
    Superseded,
    /// The sender does not host the object as far as this node knows (do not acknowledge;
    /// a legitimate notice is resent and accepted once the earlier moves are known).
    Refused,
}

impl<O: GameObject> ReplicaManager<O> {
    /// This node's name service.
    pub fn names(&self) -> &NameService {
        &self.names
    }

    /// Primaries currently frozen for migration.
    pub fn frozen(&self) -> &BTreeSet<ObjectId> {
        &self.frozen
    }

    /// The node this node believes holds the primary of `id` (`None`: this node, or no one).
    pub fn primary_node(&self, id: ObjectId) -> Option<NodeId> {
        match self.store.get(id).map(|e| e.role) {
            Some(Role::Replica { primary }) => Some(primary),
            Some(Role::Primary) => None,
            None => {
                let n = self.names.resolve(id).binding(self.me).node;
                (n != self.me).then_some(n)
            }
        }
    }

    /// Answers a lookup for `id` (paper `001` §3.2): `Ok(binding)` if the primary is bound
    /// here, `Err(Some(next))` to follow a forwarding entry, `Err(None)` if not found.
    pub fn lookup(&self, id: ObjectId) -> Result<Binding, Option<Binding>> {
        match self.names.resolve(id) {
            Resolution::Local(epoch) if self.prim.contains_key(&id) => Ok(Binding { node: self.me, epoch }),
            Resolution::Forwarded(b) => Err(Some(b)),
            _ => Err(None),
        }
    }

    /// Step 1 of §3.2 (serialize): freezes the primaries `ids` (they stop thinking; writes
    /// to them are held) and snapshots them for `target`. Atomic: on error nothing changes.
    pub fn freeze(
        &mut self,
        now: Time,
        ids: &[ObjectId],
        target: NodeId,
    ) -> Result<Vec<MigratedObject>, MigrateError> {
        for (k, id) in ids.iter().enumerate() {
            if !self.prim.contains_key(id) {
                return Err(MigrateError::NotPrimary(*id));
            }
            if self.frozen.contains(id) || ids[..k].contains(id) {
                return Err(MigrateError::AlreadyMigrating(*id));
            }
        }
        // Writes applied since the last frame changed the object without a new version:
        // give the snapshot its own version (and, with backups, its log snapshot) so no two
        // states share one. Frozen, the primaries take no version after it.
        self.settle_versions(now, ids);
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let (Some(meta), Some(entry)) = (self.prim.get(id), self.store.get(*id)) else {
                continue;
            };
            let state = meta.last_encoding.clone();
            let subscribers: BTreeSet<NodeId> = meta
                .subscribers
                .keys()
                .chain(meta.receivers.keys())
                .copied()
                .filter(|n| *n != target)
                .collect();
            let applied = self
                .applied
                .get(id)
                .map(|m| m.iter().map(|(n, l)| (*n, l.clone())).collect())
                .unwrap_or_default();
            out.push(MigratedObject {
                id: *id,
                binding: Binding {
                    node: target,
                    epoch: self.names.local_epoch(*id) + 1,
                },
                version: entry.version,
                state,
                subscribers: subscribers.into_iter().collect(),
                applied,
            });
            self.frozen.insert(*id);
        }
        Ok(out)
    }

    /// Writes held for the frozen primaries `ids` (to ship with the transfer).
    pub fn held_writes(&self, ids: &[ObjectId]) -> Vec<ForwardedWrite> {
        ids.iter()
            .filter_map(|id| self.buffered.get(id))
            .flatten()
            .cloned()
            .collect()
    }

    /// The target refused the region: the primaries think again and the writes held for
    /// them are applied here.
    pub fn unfreeze(&mut self, ids: &[ObjectId]) {
        for id in ids {
            if self.frozen.remove(id) {
                for fw in self.buffered.remove(id).unwrap_or_default() {
                    self.receive_write(fw.writer, fw.item);
                }
                self.send_pending_to(Time::ZERO, *id);
            }
        }
    }

    /// Ends the migration of `ids` whose target was declared down before it answered: the
    /// objects stay primaries here, bound under the epoch after the one the transfer
    /// offered. The target may have bound them before it went (or was only thought to
    /// go) down, under that offered epoch; a later move or adoption from here, at the
    /// offered epoch again, made two primaries of one epoch (fault swarm, `--faults all`
    /// seed 658). Past it, this binding wins over the target's wherever the two meet, and
    /// the target drops its copy when it learns it was declared down.
    pub fn abandon_migration(&mut self, ids: &[ObjectId]) {
        for id in ids {
            if self.frozen.contains(id) && self.prim.contains_key(id) {
                let offered = self.names.local_epoch(*id).saturating_add(1);
                self.names.bind_local(*id, offered.saturating_add(1));
            }
        }
        self.unfreeze(ids);
    }

    /// Steps 6–7 of §3.2 on the old node, once the target returned the bindings: installs
    /// forwarding entries, deletes the frozen primaries without telling replica holders to
    /// drop them, and passes the held writes on to the new node. Returns the bindings to
    /// announce in `Moved` notices. Ids not frozen here are skipped (a duplicate accept).
    ///
    /// In broadcast mode, or where this node backs the object up at its new host, the old
    /// node asks the new host for a full state: its updates were refused while the object
    /// was still a (frozen) primary here, and a backup without a copy could not adopt it.
    pub fn complete_migration(
        &mut self,
        now: Time,
        ids: &[ObjectId],
        target: NodeId,
    ) -> Vec<(ObjectId, Binding)> {
        let mut moved = Vec::new();
        for id in ids {
            if !self.frozen.remove(id) {
                continue;
            }
            let b = Binding {
                node: target,
                epoch: self.names.local_epoch(*id) + 1,
            };
            self.prim.remove(id);
            self.store.remove(*id);
            self.applied.remove(id);
            self.names.forward(*id, b);
            for fw in self.buffered.remove(id).unwrap_or_default() {
                self.outgoing.push((target, fw));
            }
            self.stats.migrated_out += 1;
            moved.push((*id, b));
            if self.mode == Mode::Broadcast || self.backs_up(*id, target) {
                self.fetching.insert(*id, (now, target));
                self.peer(target).interest.push(InterestItem { id: *id, have: 0 });
            }
            // This node's own writes made while the object was frozen follow it.
            self.send_pending_to(Time::ZERO, *id);
        }
        moved
    }

    /// Steps 3–4 of §3.2 on the new node: checks every object (sent by its current host,
    /// bound to this node under a newer epoch, decodable), then binds them all as primaries.
    /// Atomic: on error nothing changes. A replica held here is replaced; writes this node
    /// had sent to the object are applied here (each once).
    pub fn bind_migrated(
        &mut self,
        now: Time,
        from: NodeId,
        objects: &[MigratedObject],
    ) -> Result<(), MigrateError> {
        if objects.is_empty() {
            return Err(MigrateError::Malformed("empty transfer"));
        }
        let mut decoded = Vec::with_capacity(objects.len());
        for (k, m) in objects.iter().enumerate() {
            if objects[..k].iter().any(|o| o.id == m.id) {
                return Err(MigrateError::Malformed("object named twice"));
            }
            if self.frozen.contains(&m.id) {
                return Err(MigrateError::StillFrozen(m.id));
            }
            let known = self.names.resolve(m.id).binding(self.me);
            if self.prim.contains_key(&m.id) || m.binding.node != self.me || m.binding.epoch <= known.epoch {
                return Err(MigrateError::BadBinding {
                    id: m.id,
                    binding: m.binding,
                });
            }
            if known.node != from {
                self.stats.moved_refused += 1;
                return Err(MigrateError::NotOwner {
                    id: m.id,
                    from,
                    known,
                });
            }
            let o = O::decode_state(&m.state).map_err(|_| MigrateError::Undecodable(m.id))?;
            decoded.push(o);
        }
        for (m, object) in objects.iter().zip(decoded) {
            // A replica held here may be fresher than the state bound: it followed a rival
            // primary of the same epoch (two adopters of one orphan, not yet settled). The
            // bound state then goes on above it, so a version here never goes back and
            // never names two states (fault swarm, `--faults all` seed 615).
            let version = match self.store.get(m.id) {
                Some(e) if e.version >= m.version => e.version + 1,
                _ => m.version,
            };
            if self.store.get(m.id).is_some() {
                self.store.remove(m.id);
            }
            self.repl.remove(&m.id);
            self.fetching.remove(&m.id);
            let subscribers = match self.mode {
                Mode::Broadcast => self.peers.iter().map(|p| (*p, Time::MAX)).collect(),
                Mode::Interest => m
                    .subscribers
                    .iter()
                    .filter(|n| **n != self.me && self.peers.binary_search(n).is_ok())
                    .map(|n| (*n, now + self.cfg.interest_ttl))
                    .collect(),
            };
            let mut meta = PrimaryMeta::new(version, &object, m.state.clone(), subscribers);
            meta.backups = self.backups_for(m.id);
            self.prim.insert(m.id, meta);
            let _ = self.store.insert_primary(m.id, object, version, now);
            self.applied.insert(m.id, m.applied.iter().cloned().collect());
            if self.cfg.backups > 0 {
                // The backups learn which writes the bound state contains with its first
                // update: an adopter of it then takes a resent write as a duplicate (a
                // write applied at the old node, its acknowledgement lost in the move).
                self.snapshot_logs(m.id, version);
            }
            self.names.bind_local(m.id, m.binding.epoch);
            self.stats.migrated_in += 1;
            // This node's own writes to the object now land here.
            self.send_pending_to(now, m.id);
        }
        Ok(())
    }

    /// Gives each local primary of `ids` a new version now if writes changed it since its
    /// last one, as the next frame would: writes applied right after a bind (those held by
    /// the old node) must not go out in a state still named by the bound version, whose
    /// log snapshot does not list them (an adopter of that state would apply them again).
    pub fn settle_versions(&mut self, now: Time, ids: &[ObjectId]) {
        let hist = self.cfg.history.max(1);
        let backups = self.cfg.backups > 0;
        let mut logged = Vec::new();
        for id in ids {
            let (Some(meta), Some(entry)) = (self.prim.get_mut(id), self.store.get_mut(*id)) else {
                continue;
            };
            let mut state = Vec::new();
            entry.object.encode_state(&mut state);
            let wrote = std::mem::take(&mut meta.wrote) && backups;
            if state != meta.last_encoding || wrote {
                entry.version += 1;
                entry.state_time = now;
                entry.updated_at = now;
                meta.last_encoding = state;
                meta.keep_version(entry.version, &entry.object, hist);
                if wrote {
                    logged.push((*id, entry.version));
                }
            }
        }
        for (id, version) in logged {
            self.snapshot_logs(id, version);
        }
    }

    /// Writes passed on by `from` for their writers (old host → new host). Applied once,
    /// held, or passed on again like direct writes.
    pub fn receive_forwarded(&mut self, writes: Vec<ForwardedWrite>) {
        for fw in writes {
            self.receive_write(fw.writer, fw.item);
        }
    }

    /// A `Moved { id, binding }` notice from `from` (paper `001` §3.2: replica holders learn
    /// the new location). Accepted only from the node this node believes hosts `id`, and
    /// only if newer; then a held replica follows the new primary (fetching a full state
    /// from it) and this node's pending writes to `id` are resent there.
    pub fn on_moved(&mut self, now: Time, from: NodeId, id: ObjectId, binding: Binding) -> MovedOutcome {
        let current = match self.store.get(id).map(|e| e.role) {
            Some(Role::Primary) => {
                let epoch = self.names.local_epoch(id);
                return if binding.epoch <= epoch {
                    MovedOutcome::Superseded
                } else {
                    self.stats.moved_refused += 1;
                    MovedOutcome::Refused
                };
            }
            _ => self.names.resolve(id).binding(self.me),
        };
        if binding.epoch <= current.epoch {
            return MovedOutcome::Superseded;
        }
        if from != current.node || from == self.me || binding.node == from {
            // Not from the host this node knows (possibly a later move whose predecessor's
            // notice has not arrived yet: that one is resent, then this one).
            self.stats.moved_refused += 1;
            return MovedOutcome::Refused;
        }
        if binding.node == self.me {
            // Moved here but not bound here: only a transfer binds an object.
            self.stats.moved_refused += 1;
            return MovedOutcome::Refused;
        }
        self.names.learn(id, binding, now);
        self.stats.moved_accepted += 1;
        let held = self.rebind_replica(id, binding.node);
        if held || self.mode == Mode::Broadcast {
            self.fetching.insert(id, (now, binding.node));
            self.peer(binding.node)
                .interest
                .push(InterestItem { id, have: 0 });
            if let Some(m) = self.repl.get_mut(&id) {
                m.registered_at = Some(now);
            }
        }
        self.send_pending_to(now, id);
        MovedOutcome::Accepted
    }

    /// (Re)sends every pending write of this node to `id`.
    pub(super) fn send_pending_to(&mut self, now: Time, id: ObjectId) {
        let mine: Vec<(ObjectId, u64)> = self
            .pending
            .range((id, 0)..=(id, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for (id, seq) in mine {
            self.send_pending(now, id, seq);
        }
    }

    /// Whether [`Self::take_outgoing`] or [`Self::take_redirects`] has anything to take:
    /// checked after every datagram, where both are nearly always empty.
    pub fn has_forwarding_work(&self) -> bool {
        !(self.outgoing.is_empty() && self.redirects.is_empty())
    }

    /// Writes to pass on to other nodes, drained (the node sends them as `Forward`).
    pub fn take_outgoing(&mut self) -> Vec<(NodeId, ForwardedWrite)> {
        std::mem::take(&mut self.outgoing)
    }

    /// Interest registrations that found only a forwarding entry here: (sender, id, binding)
    /// to answer with a `Moved` hint. Drained.
    pub fn take_redirects(&mut self) -> Vec<(NodeId, ObjectId, Binding)> {
        std::mem::take(&mut self.redirects)
    }

    /// A forwarding entry here is no longer needed by anyone told of the move: it expires
    /// after the lease (paper `001` §3.2).
    pub fn release_forwarding(&mut self, id: ObjectId, now: Time) {
        self.names.release(id, now);
    }

    /// Writes of this node not yet acknowledged by their primaries.
    pub fn pending_writes(&self) -> usize {
        self.pending.len()
    }

    /// The writes of this node not yet acknowledged: (target, this node's sequence number
    /// for writes to it, from 1), ascending.
    pub fn pending_write_ids(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        self.pending.keys().copied()
    }

    /// Sequence numbers of `writer`'s writes applied to the local primary `id`.
    pub fn applied_log(&self, id: ObjectId, writer: NodeId) -> Option<&WriterLog> {
        self.applied.get(&id).and_then(|m| m.get(&writer))
    }

    /// Drops pending writes for `id` if it is known to be gone (used by tests and drivers
    /// after a deletion). Returns how many.
    pub fn forget_writes_to(&mut self, id: ObjectId) -> usize {
        let keys: Vec<(ObjectId, u64)> = self
            .pending
            .range((id, 0)..=(id, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in &keys {
            self.pending.remove(k);
        }
        keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writers_next_generation_starts_its_log_afresh_and_voids_the_previous_one() {
        let g1 = 1u64 << 32;
        let g2 = 2u64 << 32;
        let mut l = WriterLog::default();
        for s in 1..=5 {
            assert_eq!(l.record(g1 + s), Some(true));
        }
        // The writer restarted (generation 2) and numbers from 1 again: applied, not
        // taken for generation 1's writes.
        assert_eq!(l.record(g2 + 1), Some(true));
        assert_eq!(l.record(g2 + 1), Some(false));
        // A late write of the dead generation is void.
        assert_eq!(l.record(g1 + 6), Some(false));
        assert_eq!(l.floor, g2 + 1);
        // Merging: a log of an older generation changes nothing; a newer one replaces.
        let old = WriterLog {
            floor: g1 + 9,
            above: BTreeSet::new(),
        };
        l.merge(&old);
        assert_eq!(l.floor, g2 + 1);
        let newer = WriterLog {
            floor: (3u64 << 32) + 2,
            above: BTreeSet::new(),
        };
        l.merge(&newer);
        assert_eq!(l, newer);
    }

    #[test]
    fn writer_log_applies_each_seq_once_in_any_order() {
        let mut l = WriterLog::default();
        assert_eq!(l.record(2), Some(true));
        assert_eq!(l.record(2), Some(false));
        assert_eq!(l.floor, 0);
        assert_eq!(l.record(1), Some(true));
        assert_eq!((l.floor, l.above.len()), (2, 0));
        assert_eq!(l.record(1), Some(false));
        assert_eq!(l.record(3), Some(true));
        assert_eq!(l.floor, 3);
    }
}

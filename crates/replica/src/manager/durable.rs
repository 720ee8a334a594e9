//! The replica manager's side of persistence (issue 19): durable writes held until they are
//! on disk, and primaries brought back from a node's store.
//!
//! The node decides what to persist and when (`node::persist`); the driver performs the
//! store's batches. This module does what that needs of the local state:
//!
//! - with [`ReplicaConfig::hold_durable_acks`](super::ReplicaConfig::hold_durable_acks), a
//!   forwarded write applied to a primary of class [`Durability::Durable`] is **not**
//!   acknowledged at once: it is queued for the write log ([`ReplicaManager::take_durable_writes`])
//!   and acknowledged by [`ReplicaManager::durable_persisted`] once the batch holding it
//!   (and the object's new state) is on disk. Until then a resend of it is recognised as a
//!   duplicate and not acknowledged either; with backups, the acknowledgement then also
//!   waits for them (`backup`);
//! - [`ReplicaManager::recover_primary`] installs a primary read back from the store, and
//!   [`ReplicaManager::install_writer_log`] the per-writer log of a live writer, so a write
//!   resent after the restart is applied exactly once.

use worldmesh_core::{Durability, NodeId, ObjectId, Time};

use super::{GameObject, PrimaryMeta, ReplicaManager, WriterLog};
use crate::naming::Binding;

/// A forwarded write applied to a durable primary, waiting to be logged and acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableWrite {
    /// The object written.
    pub id: ObjectId,
    /// The node that made the write.
    pub writer: NodeId,
    /// The writer's sequence number for writes to `id`.
    pub seq: u64,
    /// The encoded write (as it travelled).
    pub data: Vec<u8>,
}

/// Writes held for the log at most (beyond, a write is applied but its acknowledgement is
/// dropped: the writer resends it and the resend is acknowledged as a duplicate once the
/// state containing it is persisted).
const MAX_HELD_DURABLE: usize = 1 << 16;

impl<O: GameObject> ReplicaManager<O> {
    /// True if a forwarded write applied to the local primary `id` waits for persistence.
    pub(super) fn holds_durable(&self, id: ObjectId) -> bool {
        self.cfg.hold_durable_acks
            && self
                .store
                .get(id)
                .is_some_and(|e| e.object.durability() == Durability::Durable)
    }

    /// Holds the acknowledgement of a forwarded write applied to a durable primary until
    /// [`ReplicaManager::durable_persisted`].
    pub(super) fn hold_durable(&mut self, writer: NodeId, id: ObjectId, seq: u64, data: Vec<u8>) {
        if let Some(m) = self.prim.get_mut(&id) {
            m.wrote = true;
        }
        if self.durable_new.len() + self.durable_held.len() >= MAX_HELD_DURABLE {
            self.stats.durable_ack_dropped += 1;
            return;
        }
        self.stats.durable_held += 1;
        self.durable_held.insert((writer, id, seq));
        self.durable_new.push(DurableWrite {
            id,
            writer,
            seq,
            data,
        });
    }

    /// True if the acknowledgement of this write is held for persistence (a resend is not
    /// acknowledged before it is on disk).
    pub(super) fn durable_pending(&self, writer: NodeId, id: ObjectId, seq: u64) -> bool {
        self.durable_held.contains(&(writer, id, seq))
    }

    /// The durable writes applied since the last call: the node logs them in its next
    /// batch and calls [`ReplicaManager::durable_persisted`] when the batch is on disk.
    pub fn take_durable_writes(&mut self) -> Vec<DurableWrite> {
        std::mem::take(&mut self.durable_new)
    }

    /// These writes (writer, object, sequence number) are on disk: acknowledge them to
    /// their writers (through the backups' wait, if any). A write whose object is no longer
    /// a primary here is not acknowledged: its writer resends it to the new primary, which
    /// knows it applied it.
    pub fn durable_persisted(&mut self, writes: &[(NodeId, ObjectId, u64)]) {
        for &(writer, id, seq) in writes {
            if !self.durable_held.remove(&(writer, id, seq)) {
                continue; // its writer failed meanwhile, or it was never held
            }
            if self.prim.contains_key(&id) {
                self.acknowledge_write(writer, id, seq);
            }
        }
    }

    /// Forgets held durable acknowledgements of a failed writer (its next generation numbers
    /// its writes anew).
    pub(super) fn forget_durable_writer(&mut self, writer: NodeId) {
        self.durable_held.retain(|(w, _, _)| *w != writer);
    }

    /// Installs a primary read back from this node's store after a restart: `object` at
    /// `version`, bound here under `epoch`. The caller picks a version above any the
    /// previous incarnation can have produced (see [`ReplicaManager::recovery_version`]),
    /// and an epoch that loses to any adoption made while this node was down. Returns false
    /// (and changes nothing) if the object is already held here.
    pub fn recover_primary(&mut self, now: Time, id: ObjectId, epoch: u32, version: u64, object: O) -> bool {
        if self.store.get(id).is_some() {
            return false;
        }
        let mut encoding = Vec::new();
        object.encode_state(&mut encoding);
        if self
            .store
            .insert_primary(id, object.clone(), version, now)
            .is_err()
        {
            return false;
        }
        let subscribers = self.initial_subscribers();
        let mut meta = PrimaryMeta::new(version, &object, encoding, subscribers);
        meta.backups = self.backups_for(id);
        self.prim.insert(id, meta);
        self.names.bind_local(id, epoch);
        self.stats.recovered += 1;
        self.recovered.insert(id);
        true
    }

    /// Installs a forwarding entry read back from this node's store after a restart: `id`
    /// migrated from here to `to` (paper `001` §3.2 step 6). Writes and lookups that reach
    /// this node for `id` are passed on to `to` again. Ignored for an object held here.
    pub fn recover_forwarding(&mut self, id: ObjectId, to: Binding) {
        if self.store.get(id).is_some() || to.node == self.me {
            return;
        }
        self.names.forward(id, to);
    }

    /// The first version of a primary recovered at `version` from a checkpoint taken at
    /// `since`: above every version the previous incarnation can have produced after it
    /// (the same bound as adoption's).
    pub fn recovery_version(&self, version: u64, since: Time, now: Time) -> u64 {
        self.adoption_version(version, since, now)
    }

    /// Merges the per-writer log of `writer` for the local primary `id` (read back from the
    /// store): writes it lists are taken as applied.
    pub fn install_writer_log(&mut self, id: ObjectId, writer: NodeId, log: &WriterLog) {
        if !self.prim.contains_key(&id) {
            return;
        }
        let mine = self.applied.entry(id).or_default().entry(writer).or_default();
        mine.merge(log);
        // The recovered state contains these writes: its backups get them with it.
        if let Some(version) = self.store.get(id).map(|e| e.version) {
            self.snapshot_logs(id, version);
        }
    }

    /// The per-writer log of `writer` for the local primary `id`, if any write of it was
    /// applied here.
    pub fn writer_log(&self, id: ObjectId, writer: NodeId) -> Option<&WriterLog> {
        self.applied.get(&id).and_then(|m| m.get(&writer))
    }

    /// Every per-writer log of the local primary `id` (which writes of each writer it
    /// contains), by writer.
    pub fn writer_logs(&self, id: ObjectId) -> Vec<(NodeId, WriterLog)> {
        self.applied
            .get(&id)
            .map(|m| m.iter().map(|(n, l)| (*n, l.clone())).collect())
            .unwrap_or_default()
    }

    /// The name-service epoch under which `id` is bound here.
    pub fn local_epoch(&self, id: ObjectId) -> u32 {
        self.names.local_epoch(id)
    }
}

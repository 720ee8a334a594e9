//! Backups: keeping every primary's state fresh at the members that would adopt it.
//!
//! Colyseus replicates an object only where some primary is interested in it (paper `000`
//! §5), so an object nobody looks at — a static item in an empty room — has no replica
//! anywhere, and a node failure would lose it. With [`ReplicaConfig::backups`] = k, each
//! primary also sends every update to the k members ranked first for it by rendezvous
//! hashing (the same ranking the adoption protocol uses to pick an orphan's new primary,
//! `node::adoption`), and those members keep the replica whatever their interest. When the
//! primary's node fails, the first live member of that ranking holds a fresh copy and
//! adopts it at once; up to k − 1 further failures at the same moment are covered too.
//!
//! Two more things make an **acknowledged write** survive the primary's failure, applied
//! exactly once:
//!
//! - a write applied to a primary is acknowledged to its writer only once every backup has
//!   acknowledged a version containing it ([`DeferredAck`]); until then the writer keeps it
//!   and would resend it to the adopter;
//! - the primary's per-writer logs (which writes it applied) travel to the backups beside
//!   the versions they belong to ([`LogItem`]), so the adopter knows which resent writes
//!   its adopted state already contains.
//!
//! What can still be lost when a primary's node fails: updates (and so unacknowledged
//! writes' effects) newer than the freshest version its backups acknowledged — at most a
//! few frames of motion — and, if every backup failed at the same moment, whatever the
//! remaining replica holders did not have (they offer their copies to the adopter).

use worldmesh_core::{NodeId, ObjectId, rendezvous};

use super::{GameObject, LogItem, ReplicaManager, Role};

/// A write acknowledgement waiting for the backups (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DeferredAck {
    /// Who made the write.
    pub writer: NodeId,
    /// The object written.
    pub id: ObjectId,
    /// The writer's sequence number.
    pub seq: u64,
    /// The first version whose state contains the write.
    pub version: u64,
}

impl<O: GameObject> ReplicaManager<O> {
    /// The members that back up the local primary `id`: the `backups` best-ranked peers.
    pub(super) fn backups_for(&self, id: ObjectId) -> Vec<NodeId> {
        rendezvous::top_k(id, &self.peers, None, self.cfg.backups)
    }

    /// True if this node is among the backups of `id`, whose primary is on `primary`.
    pub(super) fn backs_up(&self, id: ObjectId, primary: NodeId) -> bool {
        if self.cfg.backups == 0 || primary == self.me {
            return false;
        }
        let mut members: Vec<NodeId> = self.peers.clone();
        members.push(self.me);
        rendezvous::top_k(id, &members, Some(primary), self.cfg.backups).contains(&self.me)
    }

    /// The backups of the local primary `id` (empty if it is not one, or none are set).
    pub fn backups_of(&self, id: ObjectId) -> &[NodeId] {
        self.prim.get(&id).map_or(&[], |m| m.backups.as_slice())
    }

    /// Recomputes every local primary's backups after a membership change.
    pub(super) fn recompute_backups(&mut self) {
        if self.cfg.backups == 0 {
            return;
        }
        let ids: Vec<ObjectId> = self.prim.keys().copied().collect();
        for id in ids {
            let b = self.backups_for(id);
            if let Some(m) = self.prim.get_mut(&id) {
                m.backups = b;
            }
        }
    }

    /// A write from `writer` was applied to the local primary `id`: acknowledge it now, or
    /// once the backups have a version containing it.
    pub(super) fn acknowledge_write(&mut self, writer: NodeId, id: ObjectId, seq: u64) {
        let deferred = self.cfg.backups > 0
            && self.prim.get(&id).is_some_and(|m| !m.backups.is_empty())
            && self.store.get(id).is_some();
        if deferred {
            let version = self.store.get(id).map_or(0, |e| e.version) + 1;
            if let Some(m) = self.prim.get_mut(&id) {
                m.wrote = true;
            }
            self.stats.acks_deferred += 1;
            self.deferred.push(DeferredAck {
                writer,
                id,
                seq,
                version,
            });
        } else {
            if let Some(m) = self.prim.get_mut(&id) {
                m.wrote = true;
            }
            self.peer(writer).write_acks.push((id, seq));
        }
    }

    /// A duplicate of an applied write: acknowledge it, unless its first acknowledgement is
    /// still waiting for the backups (it goes out with that one).
    pub(super) fn acknowledge_duplicate(&mut self, writer: NodeId, id: ObjectId, seq: u64) {
        if !self.durable_pending(writer, id, seq)
            && !self
                .deferred
                .iter()
                .any(|d| d.writer == writer && d.id == id && d.seq == seq)
        {
            self.peer(writer).write_acks.push((id, seq));
        }
    }

    /// Sends the deferred acknowledgements whose write every backup now has (or whose
    /// object is no longer a primary here: its new host acknowledges resends).
    pub(super) fn release_deferred_acks(&mut self) {
        if self.deferred.is_empty() {
            return;
        }
        let mut keep = Vec::with_capacity(self.deferred.len());
        let mut release = Vec::new();
        for d in std::mem::take(&mut self.deferred) {
            let Some(m) = self.prim.get(&d.id) else {
                continue; // deleted or moved away: the writer resends to the new host
            };
            let done = m
                .backups
                .iter()
                .all(|b| m.receivers.get(b).is_some_and(|st| st.acked >= d.version));
            if done { release.push(d) } else { keep.push(d) }
        }
        self.deferred = keep;
        for d in release {
            self.peer(d.writer).write_acks.push((d.id, d.seq));
        }
    }

    /// The log snapshot to send with an update of `id` to `to`, if `to` is a backup that
    /// has not acknowledged the snapshot's version.
    pub(super) fn logs_for(&self, id: ObjectId, to: NodeId, acked: u64) -> Option<LogItem> {
        let m = self.prim.get(&id)?;
        let (version, logs) = m.logs.as_ref()?;
        (acked < *version && m.backups.contains(&to)).then(|| LogItem {
            id,
            version: *version,
            logs: logs.clone(),
        })
    }

    /// A log snapshot from `from` for the replica `id` this node backs up.
    pub(super) fn on_logs(&mut self, from: NodeId, item: LogItem) {
        let confirmed = match self.store.get(item.id).map(|e| e.role) {
            Some(Role::Replica { primary }) if primary == from => {
                self.confirmed(item.id).map_or(0, |(v, _)| v)
            }
            _ => return,
        };
        let Some(m) = self.repl.get_mut(&item.id) else {
            return;
        };
        if m.logs.iter().any(|(v, _)| *v == item.version) {
            return;
        }
        let at = m.logs.partition_point(|(v, _)| *v < item.version);
        m.logs.insert(at, (item.version, item.logs));
        // Keep the newest snapshot the confirmed state contains, and everything newer
        // (bounded: a primary sends one snapshot per version).
        while m.logs.len() > 1 && m.logs[1].0 <= confirmed {
            m.logs.pop_front();
        }
        while m.logs.len() > 64 {
            m.logs.pop_front();
        }
    }

    /// The per-writer logs that the confirmed state of replica `id` contains: the newest
    /// snapshot at or below its version (empty if none arrived).
    pub(super) fn logs_contained(&self, id: ObjectId, version: u64) -> Vec<(NodeId, super::WriterLog)> {
        self.repl
            .get(&id)
            .and_then(|m| m.logs.iter().rev().find(|(v, _)| *v <= version))
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    }

    /// Records the per-writer logs of a primary that just took `version` after writes.
    pub(super) fn snapshot_logs(&mut self, id: ObjectId, version: u64) {
        let logs: Vec<(NodeId, super::WriterLog)> = self
            .applied
            .get(&id)
            .map(|m| m.iter().map(|(n, l)| (*n, l.clone())).collect())
            .unwrap_or_default();
        if let Some(m) = self.prim.get_mut(&id) {
            m.logs = Some((version, logs));
        }
    }
}

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
//! - the primary's per-writer logs (which writes it applied) ride with **every** update it
//!   sends a backup, tagged with that update's version ([`LogItem`]), so the adopter knows
//!   exactly which resent writes the state it adopts already contains. A backup takes a
//!   log only beside a state it accepted, and adopts the newest state it holds the log of:
//!   a state whose log it lacks (one it got before it became a backup) is never paired with
//!   another version's log, which would miss the writes in between and apply their resends
//!   twice (the real-process crash trials caught exactly that: a node restarted from its
//!   store became the backup, got the state by a fetch without its log, and adopted it a
//!   second later with a log 25 frames older);
//! - a member that becomes a backup starts from a full state (and its log), and a backup
//!   that refuses an update does not acknowledge the packet carrying it, so "every backup
//!   acknowledged version v" always means "every backup holds v and its log".
//!
//! What can still be lost when a primary's node fails: updates (and so unacknowledged
//! writes' effects) newer than the freshest version its backups acknowledged — at most a
//! few frames of motion — and, if every backup failed at the same moment, whatever the
//! remaining replica holders did not have (they offer their copies to the adopter). An
//! adopter that holds no state with its log (it never backed the object up, or became a
//! backup less than a round trip before the failure) adopts its newest state with no log:
//! a write that state contains and whose writer had no acknowledgement yet is then
//! applied a second time when resent.

use worldmesh_core::{NodeId, ObjectId, Time, rendezvous};

use super::{GameObject, LogItem, ReplicaManager, Role};
use crate::message::InterestItem;

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

/// Per-writer logs of one object, by writer.
type WriterLogs = Vec<(NodeId, super::WriterLog)>;

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
    /// A member that becomes a backup of a primary starts afresh: what it acknowledged
    /// before (as a plain subscriber, without logs) must not count as a backup's
    /// acknowledgement, so its next update is a full state with its log.
    pub(super) fn recompute_backups(&mut self) {
        if self.cfg.backups == 0 {
            return;
        }
        let ids: Vec<ObjectId> = self.prim.keys().copied().collect();
        for id in ids {
            let b = self.backups_for(id);
            if let Some(m) = self.prim.get_mut(&id) {
                for n in &b {
                    if !m.backups.contains(n) {
                        m.receivers.remove(n);
                    }
                }
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

    /// The log to send with an update of `id` at `version` to `to`, if `to` backs `id` up
    /// and has not acknowledged it yet: the per-writer logs the state at `version` contains
    /// (the snapshot taken with the newest version that followed writes; none taken yet:
    /// no write was applied).
    pub(super) fn logs_for(&self, id: ObjectId, to: NodeId, version: u64) -> Option<LogItem> {
        let m = self.prim.get(&id)?;
        if !m.backups.contains(&to) {
            return None;
        }
        let snapshot = m.logs.as_ref().map_or(0, |(v, _)| *v);
        if m.receivers
            .get(&to)
            .is_some_and(|st| st.log_acked == Some(snapshot))
        {
            return None;
        }
        Some(LogItem {
            id,
            version,
            logs: m.logs.as_ref().map(|(_, l)| l.clone()).unwrap_or_default(),
        })
    }

    /// A log from `from` for the replica `id` this node backs up. Taken only beside a state
    /// of that version accepted from `from` (the update rides ahead of it in the packet);
    /// returns false if not (the packet is then not acknowledged: see the module docs).
    pub(super) fn on_logs(&mut self, from: NodeId, item: LogItem) -> bool {
        if !matches!(
            self.store.get(item.id).map(|e| e.role),
            Some(Role::Replica { primary }) if primary == from
        ) {
            return false;
        }
        let Some(m) = self.repl.get_mut(&item.id) else {
            return false;
        };
        if !m.history.contains(item.version) {
            return false;
        }
        if m.logs.iter().any(|(v, _)| *v == item.version) {
            return true;
        }
        let at = m.logs.partition_point(|(v, _)| *v < item.version);
        m.logs.insert(at, (item.version, item.logs));
        // Keep the logs of states still held (bounded: one per version).
        let history = &m.history;
        m.logs.retain(|(v, _)| history.contains(*v));
        while m.logs.len() > 64 {
            m.logs.pop_front();
        }
        true
    }

    /// After a packet from `from`: the update of `id` at `version` it carried as to a
    /// backup left this node with that state and its log. The log rode in the packet, or —
    /// the primary omits it once this node acknowledged its current snapshot — it is the
    /// newest log held for an earlier version of the same primary (no write came between).
    /// False if the state was not taken, or no log can be told: the packet is then not
    /// acknowledged, and a log that should have been held here is fetched afresh with the
    /// state.
    pub(super) fn log_of_update(&mut self, now: Time, from: NodeId, id: ObjectId, version: u64) -> bool {
        if !matches!(self.store.get(id).map(|e| e.role), Some(Role::Replica { primary }) if primary == from) {
            return false;
        }
        let Some(m) = self.repl.get_mut(&id) else {
            return false;
        };
        if !m.history.contains(version) {
            return false;
        }
        if m.logs.iter().any(|(v, _)| *v == version) {
            return true;
        }
        let Some(inherited) = m
            .logs
            .iter()
            .rev()
            .find(|(v, _)| *v < version)
            .map(|(_, l)| l.clone())
        else {
            // The primary believes this node holds a log it does not: ask for the state
            // again (a fetch answer carries its log).
            if self
                .fetching
                .get(&id)
                .is_none_or(|(t, _)| now.saturating_since(*t) >= super::FETCH_BACKOFF)
            {
                self.fetching.insert(id, (now, from));
                self.peer(from).interest.push(InterestItem { id, have: 0 });
            }
            return false;
        };
        let at = m.logs.partition_point(|(v, _)| *v < version);
        m.logs.insert(at, (version, inherited));
        let history = &m.history;
        m.logs.retain(|(v, _)| history.contains(*v));
        while m.logs.len() > 64 {
            m.logs.pop_front();
        }
        true
    }

    /// The state of replica `id` to adopt or offer, with the per-writer logs it contains:
    /// the newest state held whose log came with it. With no log (`None`; this node never
    /// backed the object up): the confirmed state — the case of every backup failing at
    /// once, where a resent write the state contains applies twice.
    pub(super) fn logged_state(&self, id: ObjectId) -> Option<(u64, &O, Option<WriterLogs>)> {
        let m = self.repl.get(&id)?;
        for (v, logs) in m.logs.iter().rev() {
            if let Some(o) = m.history.get_newest(*v) {
                return Some((*v, o, Some(logs.clone())));
            }
        }
        let (v, o) = m.history.back()?;
        Some((v, o, None))
    }

    /// True if some state of replica `id` held here came with its log (this node backs the
    /// object up): adopting it applies resent writes exactly once. An adopter without one
    /// waits for offers and prefers one that has it (`node::adoption`).
    pub fn has_logged_state(&self, id: ObjectId) -> bool {
        self.logged_state(id).is_some_and(|(_, _, l)| l.is_some())
    }

    /// True if this node, about to adopt its replica of `id`, should first collect the
    /// offers of the other holders: backups are configured, and no state of its replica
    /// came with its log (it did not back the object up, or only became a backup less
    /// than a round trip before the failure), while the member that did may offer one.
    pub fn lacks_log(&self, id: ObjectId) -> bool {
        self.cfg.backups > 0
            && matches!(self.store.get(id).map(|e| e.role), Some(Role::Replica { .. }))
            && !self.has_logged_state(id)
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

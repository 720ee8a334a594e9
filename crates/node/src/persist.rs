//! Persistence as an effect (issue 19): what the node asks its store to keep, and how it
//! comes back from it.
//!
//! The node never touches a disk. After each frame it may emit a [`PersistRequest`] — one
//! `worldmesh_store::Batch`, applied atomically — that the driver performs off the frame's
//! thread and reports done with [`crate::Node::handle_persisted`] (the simulator performs
//! the same requests against a model). What goes in a batch, by the object's
//! [`Durability`] class:
//!
//! - **`Durable`** primaries (player-built structures) are written in the batch of every
//!   frame in which their version changed, and every forwarded write applied to one is
//!   logged in that batch as a `WriteRecord` — its acknowledgement to the writer waits
//!   until the batch is on disk (`ReplicaConfig::hold_durable_acks`). The object's state
//!   and the log entry land in the same atomic batch, so an acknowledged durable write
//!   survives any crash, and the log tells the restarted node which writes its state
//!   already contains (a resend is then acknowledged, not applied again).
//! - **`Checkpointed`** primaries (avatars) are written every
//!   [`PersistConfig::checkpoint_every`] frames if they changed, from the node's first
//!   frame on: a crash loses at most one checkpoint interval of their changes.
//! - **`Ephemeral`** objects (missiles) are never written.
//!
//! A primary that leaves the node (deleted, adopted elsewhere after this node was declared
//! failed) is deleted from the store in the next batch of its class, with its log; one that
//! migrated away, in the next batch whatever its class. Checkpoint batches carry the
//! `Checkpoint` marker (frame, time).
//!
//! ## Migration: the record moves exactly once
//!
//! A migrating primary of class `Durable` or `Checkpointed` (paper `001` §3.2) moves its
//! record from the old node's store to the new node's without ever being in neither, and
//! is installed as a primary from at most one of them after any crash:
//!
//! 1. the old node freezes the region and puts, in a batch of its own, each object's
//!    record (the frozen state) and an **in-doubt marker**: a forwarding record to the
//!    binding the object will have at the target (epoch + 1). The transfer is sent only
//!    once that batch is on disk (`Release::Transfer`);
//! 2. the target binds the region and puts, in a batch of its own, the objects' records
//!    under the new epoch and their writers' logs (floor markers and the sequence numbers
//!    above them, carried in the transfer: a write applied at the old node and resent
//!    after a crash is then recognised, not applied again). Its `Accept` — and the
//!    announcement of the new binding to the other members, which makes the old node give
//!    its copy up — waits for that batch (`Release::Accept`);
//! 3. on `Accept` the old node deletes the records in its next batch; the marker stays as
//!    the object's forwarding entry (below).
//!
//! If the target fails before answering, the old node keeps the region frozen and resends
//! it to the target's next incarnation (the target may hold it on disk). A target that
//! already binds the objects under the transfer's epoch or a later one answers a
//! (re)sent transfer with `Accept` at once (`Migrator::set_persisting`). A store holding
//! an object's record **and** a marker with a later epoch after a crash holds it in
//! doubt: recovery does not install it as an ordinary primary but migrates it to the
//! marker's target again once the target is a member (both for a whole-world restart,
//! [`crate::Node::recover`], and for a node rejoining, after the settle of
//! [`crate::Node::recover_after_join`]). The target either binds it (it never got it) or
//! answers that it holds it (then the old copy is dropped): only the newer copy is ever a
//! primary. The cost is two store round trips on a migration's path, and a region that
//! stays frozen (unavailable) while its target is down.
//!
//! ## Name service: what is persisted, and why
//!
//! Only **forwarding entries** are (`ForwardingRecord`, with the in-doubt markers in the
//! same table): they are the one piece of name-service state a restarted node cannot get
//! back from anyone. The objects' own bindings are implied by the primaries (a recovered
//! primary is bound here under its stored epoch), and the bindings learned from other
//! nodes' notices are soft state — newer ones arrive with the next notices, and a lookup
//! that starts from an object's creator follows forwarding entries to it. But a node that
//! moved an object away is the first hop of that chain for every node that still names the
//! object by its creator (a node restarted itself, or one that missed the notice); if it
//! forgot the entry at a restart, lookups and writes reaching it would find nothing and
//! the object would be unreachable from those nodes. So every forwarding entry is written
//! in the batch after it appears and deleted in the batch after its lease ends, and a
//! restarted node reinstalls the entries (writes reaching it are passed on, lookups
//! forwarded) and announces them to the members again with `Moved` notices; each entry is
//! released (its lease starts) once every member acknowledged. `BindingRecord`s are not
//! used.
//!
//! ## The write log
//!
//! A log entry is keyed by (object, writer, writer's sequence number) and its value is
//! `writer's generation (u32, little-endian) | the write as it travelled`. Sequence numbers
//! restart at 1 in a writer's next generation, so a log is only trusted for the generation
//! that wrote it. At each checkpoint the entries at or below a writer's contiguous floor
//! are replaced by one **floor marker** under sequence number 0, valued
//! `generation (u32) | floor (u64)`, so the log stays as small as the writes still out of
//! order.
//!
//! ## Recovery
//!
//! [`crate::Node::recover`] (before the first frame) installs every stored primary: under
//! the **epoch it was stored with** — so an adoption made by another member while this node
//! was down (epoch + 1) wins over the recovered copy wherever the two meet, and the stale
//! copy is given up — and at a version above any the previous incarnation can have
//! produced since the last checkpoint (adoption's bound). Per-writer logs are kept aside
//! until the writer is seen as a member: a log of the writer's current generation is
//! installed, others are discarded and their entries deleted. A node without dynamic
//! membership cannot tell generations apart and discards every log: a write in flight at
//! the crash may then be applied twice (never lost).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_replica::{Binding, GameObject, ReplicaManager, Role, WriterLog};
use worldmesh_store::{Batch, Checkpoint, ForwardingRecord, ObjectRecord, Recovered, WriteKey, WriteRecord};

/// Persistence tuning of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistConfig {
    /// Frames between checkpoints of `Checkpointed` primaries (10 = one second at 10 Hz).
    pub checkpoint_every: u32,
}

impl Default for PersistConfig {
    fn default() -> Self {
        Self { checkpoint_every: 10 }
    }
}

/// A batch the driver must apply to the node's store, then report with
/// [`crate::Node::handle_persisted`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistRequest {
    /// Identifies the request (increasing from 1; completions are reported in order).
    pub id: u64,
    /// The changes, applied atomically.
    pub batch: Batch,
}

/// Counters of persistence at one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PersistStats {
    /// Batches requested.
    pub batches: u64,
    /// Batches reported done.
    pub completed: u64,
    /// Object records written.
    pub objects_put: u64,
    /// Object records deleted.
    pub objects_deleted: u64,
    /// Durable writes logged.
    pub writes_logged: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Primaries installed from the store at startup.
    pub recovered_objects: u64,
    /// Per-writer logs installed after recovery (their writer is live in the same
    /// generation).
    pub recovered_logs: u64,
    /// Per-writer logs discarded after recovery (their writer restarted, or membership is
    /// off).
    pub discarded_logs: u64,
    /// Recovered objects not installed: the world moved on from them while the node was
    /// down (adopted or migrated under a later epoch, or held here as a replica by then).
    #[serde(default)]
    pub superseded: u64,
}

/// Why a node cannot recover from its store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoverError {
    /// A stored state does not decode as this game's object.
    #[error("stored state of {id} (version {version}) does not decode: {reason}")]
    Undecodable {
        /// The object.
        id: ObjectId,
        /// Its stored version.
        version: u64,
        /// The game's error.
        reason: String,
    },
    /// A log entry's value is too short for its header.
    #[error("log entry of {id} by {writer} #{seq} has {len} bytes, too short for its header")]
    ShortLogEntry {
        /// The object.
        id: ObjectId,
        /// The writer.
        writer: NodeId,
        /// The sequence number.
        seq: u64,
        /// Bytes present.
        len: usize,
    },
    /// The node was configured without persistence (`NodeConfig::persist`).
    #[error("the node was configured without persistence")]
    Disabled,
    /// Recovery must happen before the node holds anything.
    #[error("recovery after the node started holding objects")]
    NotFresh,
}

/// What recovery installed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Primaries installed, by class.
    pub checkpointed: usize,
    /// Primaries of class `Durable` installed.
    pub durable: usize,
    /// Log entries read.
    pub log_entries: usize,
    /// The last checkpoint's frame and time.
    pub last_checkpoint: Option<Checkpoint>,
}

/// A durable write whose acknowledgement waits for a batch: (writer, object, seq).
type HeldAck = (NodeId, ObjectId, u64);

/// A migration step that waits for a batch to be on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// The old node's outgoing region (its records and in-doubt markers are on disk).
    Transfer(u64),
    /// A region bound here, by (old node, its migration number): its records are on disk.
    Accept((NodeId, u64)),
}

/// A writer's recovered log for one object, kept until the writer is seen.
struct KeptLog {
    generation: u32,
    id: ObjectId,
    log: WriterLog,
    /// The log's entries in the store (deleted if the log is discarded).
    seqs: Vec<u64>,
}

/// The persistence state of one node.
pub(crate) struct Persistence {
    cfg: PersistConfig,
    next_id: u64,
    frames_since: u32,
    /// What the store holds (as requested): object → (epoch, version, class).
    stored: BTreeMap<ObjectId, (u32, u64, Durability)>,
    /// Log entries in the store per (object, writer), 0 being the floor marker.
    logged: BTreeMap<(ObjectId, NodeId), BTreeSet<u64>>,
    /// Requests not yet reported done, with the writes each acknowledges and the
    /// migration steps each releases.
    in_flight: VecDeque<(u64, Vec<HeldAck>, Vec<Release>)>,
    /// Forwarding records in the store (as requested): object → where it went.
    fwd_stored: BTreeMap<ObjectId, Binding>,
    /// Objects of this node in doubt: frozen for a migration (or recovered from one) whose
    /// target may have them on disk already — object → its binding at the target. Their
    /// forwarding record is the in-doubt marker.
    doubt: BTreeMap<ObjectId, Binding>,
    /// Recovered objects in doubt, waiting to be migrated again to their target.
    redrive: Vec<(ObjectRecord, Binding)>,
    /// Recovered forwarding entries not yet announced to the members.
    unannounced: Vec<(ObjectId, Binding)>,
    queue: VecDeque<PersistRequest>,
    /// Recovered logs per writer, until the writer is seen as a member.
    kept: BTreeMap<NodeId, Vec<KeptLog>>,
    /// Log entries to delete in the next batch (discarded logs).
    to_delete: Vec<WriteKey>,
    /// Object records to delete in the next batch (recovered copies the world moved on
    /// from).
    to_delete_objects: Vec<ObjectId>,
    /// Log entries to put in the next batch (writers' logs carried in by migrations).
    pending_logs: Vec<WriteRecord>,
    /// The generation this node renewed to (declared failed while it lived), to raise the
    /// store's last one in the next batch: a later process of the node must start above it.
    renewed: Option<u32>,
    /// Recovered objects waiting for the cluster to settle (a node rejoining a running
    /// world).
    deferred: Option<Deferred>,
    /// The time of the last checkpoint recovered from.
    since: Time,
    stats: PersistStats,
}

/// Stored primaries of a node rejoining a running world, installed only once the cluster
/// had time to tell it what moved on while it was down.
struct Deferred {
    records: Vec<ObjectRecord>,
    since: Time,
    settle: Duration,
    joined_at: Option<Time>,
}

/// The value of a log entry: writer's generation, then the write.
fn log_value(generation: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + data.len());
    v.extend_from_slice(&generation.to_le_bytes());
    v.extend_from_slice(data);
    v
}

impl Persistence {
    pub(crate) fn new(cfg: PersistConfig) -> Self {
        Self {
            cfg: PersistConfig {
                checkpoint_every: cfg.checkpoint_every.max(1),
            },
            next_id: 1,
            // The first frame is a checkpoint: the world a node starts with is on disk at
            // once, with a marker that later recoveries bound their version jump by.
            frames_since: cfg.checkpoint_every.max(1) - 1,
            stored: BTreeMap::new(),
            logged: BTreeMap::new(),
            in_flight: VecDeque::new(),
            fwd_stored: BTreeMap::new(),
            doubt: BTreeMap::new(),
            redrive: Vec::new(),
            unannounced: Vec::new(),
            queue: VecDeque::new(),
            kept: BTreeMap::new(),
            to_delete: Vec::new(),
            to_delete_objects: Vec::new(),
            pending_logs: Vec::new(),
            renewed: None,
            deferred: None,
            since: Time::ZERO,
            stats: PersistStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> &PersistStats {
        &self.stats
    }

    pub(crate) fn poll(&mut self) -> Option<PersistRequest> {
        self.queue.pop_front()
    }

    /// Requests not yet reported done (queued or being applied).
    pub(crate) fn pending(&self) -> usize {
        self.in_flight.len()
    }

    /// Request `id` is on disk: the durable writes it logged are acknowledged. Returns the
    /// migration steps it releases.
    pub(crate) fn persisted<O: GameObject>(
        &mut self,
        id: u64,
        replicas: &mut ReplicaManager<O>,
    ) -> Vec<Release> {
        let mut released = Vec::new();
        // Completions come in order; an unknown or repeated id changes nothing.
        while let Some((first, ..)) = self.in_flight.front() {
            if *first > id {
                break;
            }
            let Some((_, acks, rel)) = self.in_flight.pop_front() else {
                break;
            };
            self.stats.completed += 1;
            replicas.durable_persisted(&acks);
            released.extend(rel);
        }
        released
    }

    /// Migration `mig` of the frozen primaries `ids` to `target` starts: a batch now puts
    /// their records (the frozen states) and an in-doubt marker each — a forwarding record
    /// to the binding they will have there. The transfer waits for it
    /// (`Release::Transfer`); returns false if nothing needs persisting (send at once).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn migrating<O: GameObject>(
        &mut self,
        now: Time,
        frame: u64,
        replicas: &mut ReplicaManager<O>,
        generation_of: impl Fn(NodeId) -> u32,
        mig: u64,
        ids: &[ObjectId],
        target: NodeId,
    ) -> bool {
        let persisted: Vec<ObjectId> = ids
            .iter()
            .copied()
            .filter(|id| {
                replicas
                    .store()
                    .get(*id)
                    .is_some_and(|e| e.object.durability() != Durability::Ephemeral)
            })
            .collect();
        if persisted.is_empty() {
            return false;
        }
        for id in &persisted {
            let to = Binding {
                node: target,
                epoch: replicas.local_epoch(*id) + 1,
            };
            self.doubt.insert(*id, to);
        }
        self.batch(
            now,
            frame,
            replicas,
            generation_of,
            &persisted,
            false,
            vec![Release::Transfer(mig)],
        );
        true
    }

    /// Region `key` was bound here: a batch now puts the objects' records and their
    /// writers' logs; its `Accept` waits for it (`Release::Accept`). Returns false if
    /// nothing needs persisting (answer at once).
    pub(crate) fn bound<O: GameObject>(
        &mut self,
        now: Time,
        frame: u64,
        replicas: &mut ReplicaManager<O>,
        generation_of: impl Fn(NodeId) -> u32,
        key: (NodeId, u64),
        ids: &[ObjectId],
    ) -> bool {
        let persisted: Vec<ObjectId> = ids
            .iter()
            .copied()
            .filter(|id| {
                replicas.store().get(*id).is_some_and(|e| {
                    e.role == Role::Primary && e.object.durability() != Durability::Ephemeral
                })
            })
            .collect();
        if persisted.is_empty() {
            return false;
        }
        // Which writes the states contain, per writer: a resend after a crash of this node
        // is then not applied twice.
        for id in &persisted {
            for (writer, log) in replicas.writer_logs(*id) {
                self.log_snapshot(*id, writer, &log, &generation_of);
            }
        }
        self.batch(
            now,
            frame,
            replicas,
            generation_of,
            &persisted,
            false,
            vec![Release::Accept(key)],
        );
        true
    }

    /// Queues the entries of a writer's log carried in by a migration: a floor marker and
    /// one entry per sequence number above it (the write itself is in the state).
    fn log_snapshot(
        &mut self,
        id: ObjectId,
        writer: NodeId,
        log: &WriterLog,
        generation_of: &impl Fn(NodeId) -> u32,
    ) {
        let generation = generation_of(writer);
        let seqs = self.logged.entry((id, writer)).or_default();
        if log.floor > 0 {
            let mut v = generation.to_le_bytes().to_vec();
            v.extend_from_slice(&log.floor.to_le_bytes());
            self.pending_logs.push(WriteRecord {
                key: WriteKey {
                    target: id,
                    writer,
                    seq: 0,
                },
                bytes: v,
            });
            seqs.insert(0);
        }
        for seq in &log.above {
            self.pending_logs.push(WriteRecord {
                key: WriteKey {
                    target: id,
                    writer,
                    seq: *seq,
                },
                bytes: generation.to_le_bytes().to_vec(),
            });
            seqs.insert(*seq);
        }
    }

    /// The node renewed its generation: the next batch raises the store's last claimed
    /// generation to it ([`worldmesh_store::Op::RaiseGeneration`]), so that a process
    /// restarted from this store after a crash never runs as a generation this one used
    /// (its clock may have stepped back, or renewals come faster than its seconds). A crash
    /// before that batch is on disk leaves only the wall clock to keep them apart.
    pub(crate) fn renewed(&mut self, generation: u32) {
        self.renewed = Some(generation);
    }

    /// The batch of the frame just run, if it changes anything. `generation_of` names a
    /// writer's current generation (0 without membership).
    pub(crate) fn after_frame<O: GameObject>(
        &mut self,
        now: Time,
        frame: u64,
        replicas: &mut ReplicaManager<O>,
        generation_of: impl Fn(NodeId) -> u32,
    ) {
        self.batch(now, frame, replicas, generation_of, &[], true, Vec::new());
    }

    /// Queues a batch of what changed: `force` are put whatever their class (a migration
    /// step), `tick` counts a frame (a checkpoint comes due), `release` waits for it.
    #[allow(clippy::too_many_arguments)]
    fn batch<O: GameObject>(
        &mut self,
        now: Time,
        frame: u64,
        replicas: &mut ReplicaManager<O>,
        generation_of: impl Fn(NodeId) -> u32,
        force: &[ObjectId],
        tick: bool,
        release: Vec<Release>,
    ) {
        let writes = replicas.take_durable_writes();
        if tick {
            self.frames_since += 1;
        }
        let checkpoint = tick && self.frames_since >= self.cfg.checkpoint_every;
        let mut b = Batch::new();
        if let Some(g) = self.renewed.take() {
            b.raise_generation(g);
        }
        for w in self.pending_logs.drain(..) {
            b.put_write(w);
        }
        for k in self.to_delete.drain(..) {
            b.delete_write(k);
        }
        for id in std::mem::take(&mut self.to_delete_objects) {
            b.delete_object(id);
            self.stats.objects_deleted += 1;
        }
        for (id, e) in replicas.store().iter() {
            if e.role != Role::Primary {
                continue;
            }
            let class = e.object.durability();
            if class == Durability::Ephemeral
                || (class == Durability::Checkpointed && !checkpoint && !force.contains(&id))
            {
                continue;
            }
            let epoch = replicas.local_epoch(id);
            if self
                .stored
                .get(&id)
                .is_some_and(|(ep, v, _)| *ep == epoch && *v == e.version)
            {
                continue;
            }
            let mut state = Vec::new();
            e.object.encode_state(&mut state);
            b.put_object(ObjectRecord {
                id,
                epoch,
                version: e.version,
                durability: class,
                kind: e.object.kind(),
                state,
            });
            self.stored.insert(id, (epoch, e.version, class));
            self.stats.objects_put += 1;
        }
        let gone: Vec<ObjectId> = self
            .stored
            .iter()
            .filter(|(id, (_, _, class))| {
                // Migrated away: gone at once (its forwarding record replaces it).
                (checkpoint || *class == Durability::Durable || replicas.names().forwarding(**id).is_some())
                    && !matches!(replicas.store().get(**id).map(|e| e.role), Some(Role::Primary))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.stored.remove(&id);
            b.delete_object(id);
            self.stats.objects_deleted += 1;
            let writers: Vec<(ObjectId, NodeId)> = self
                .logged
                .range((id, NodeId(0))..=(id, NodeId(u32::MAX)))
                .map(|(k, _)| *k)
                .collect();
            for k in writers {
                for seq in self.logged.remove(&k).unwrap_or_default() {
                    b.delete_write(WriteKey {
                        target: k.0,
                        writer: k.1,
                        seq,
                    });
                }
            }
        }
        self.forwarding_changes(replicas, &mut b);
        let mut acks = Vec::with_capacity(writes.len());
        for w in writes {
            let generation = generation_of(w.writer);
            b.put_write(WriteRecord {
                key: WriteKey {
                    target: w.id,
                    writer: w.writer,
                    seq: w.seq,
                },
                bytes: log_value(generation, &w.data),
            });
            self.logged.entry((w.id, w.writer)).or_default().insert(w.seq);
            acks.push((w.writer, w.id, w.seq));
            self.stats.writes_logged += 1;
        }
        if checkpoint {
            self.frames_since = 0;
            self.compact(replicas, &generation_of, &mut b);
            if !b.is_empty() || !self.stored.is_empty() {
                b.checkpoint(Checkpoint { frame, time: now });
                self.stats.checkpoints += 1;
            }
        }
        if b.is_empty() && release.is_empty() {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.stats.batches += 1;
        self.in_flight.push_back((id, acks, release));
        self.queue.push_back(PersistRequest { id, batch: b });
    }

    /// Puts and deletes forwarding records so the store holds this node's forwarding
    /// entries plus the in-doubt markers of its objects being migrated.
    fn forwarding_changes<O: GameObject>(&mut self, replicas: &ReplicaManager<O>, b: &mut Batch) {
        let redrive = &self.redrive;
        self.doubt
            .retain(|id, _| replicas.frozen().contains(id) || redrive.iter().any(|(o, _)| o.id == *id));
        let mut want: BTreeMap<ObjectId, Binding> = replicas.names().forwarding_entries().collect();
        want.extend(self.doubt.iter().map(|(id, to)| (*id, *to)));
        if want == self.fwd_stored {
            return;
        }
        for (id, to) in &want {
            if self.fwd_stored.get(id) != Some(to) {
                b.put_forwarding(ForwardingRecord {
                    id: *id,
                    to_node: to.node,
                    to_epoch: to.epoch,
                    expires: None,
                });
            }
        }
        for id in self.fwd_stored.keys() {
            if !want.contains_key(id) {
                b.delete_forwarding(*id);
            }
        }
        self.fwd_stored = want;
    }

    /// Makes the next [`Persistence::after_frame`] a checkpoint.
    pub(crate) fn checkpoint_next(&mut self) {
        self.frames_since = self.cfg.checkpoint_every;
    }

    /// Replaces the log entries at or below each writer's floor by one floor marker.
    fn compact<O: GameObject>(
        &mut self,
        replicas: &ReplicaManager<O>,
        generation_of: &impl Fn(NodeId) -> u32,
        b: &mut Batch,
    ) {
        for ((id, writer), seqs) in self.logged.iter_mut() {
            let Some(log) = replicas.writer_log(*id, *writer).filter(|l| l.floor > 0) else {
                continue;
            };
            let below: Vec<u64> = seqs.range(1..=log.floor).copied().collect();
            if below.is_empty() {
                continue;
            }
            let mut v = generation_of(*writer).to_le_bytes().to_vec();
            v.extend_from_slice(&log.floor.to_le_bytes());
            b.put_write(WriteRecord {
                key: WriteKey {
                    target: *id,
                    writer: *writer,
                    seq: 0,
                },
                bytes: v,
            });
            seqs.insert(0);
            for seq in below {
                seqs.remove(&seq);
                b.delete_write(WriteKey {
                    target: *id,
                    writer: *writer,
                    seq,
                });
            }
        }
    }

    /// Installs what the store holds (see the module docs). `membership` says whether
    /// writers' generations will be known (else every log is discarded). With `settle`,
    /// the objects are installed only `settle` after the node joined the cluster, and only
    /// those the world has not moved on from ([`Persistence::activate_due`]).
    pub(crate) fn recover<O: GameObject>(
        &mut self,
        now: Time,
        replicas: &mut ReplicaManager<O>,
        rec: Recovered,
        membership: bool,
        settle: Option<Duration>,
    ) -> Result<RecoveryReport, RecoverError> {
        if replicas.store().primary_count() > 0
            || !self.stored.is_empty()
            || self.deferred.is_some()
            || !self.fwd_stored.is_empty()
        {
            return Err(RecoverError::NotFresh);
        }
        let since = rec.last_checkpoint.map_or(Time::ZERO, |c| c.time);
        self.since = since;
        let mut rec = rec;
        // Forwarding records: a migration's in-doubt marker next to the object's record
        // (the target may hold it on disk: migrate it there again), or a forwarding entry
        // (the object left: lookups and writes reaching this node are passed on).
        for f in &rec.forwarding {
            let to = Binding {
                node: f.to_node,
                epoch: f.to_epoch,
            };
            self.fwd_stored.insert(f.id, to);
            match rec.objects.iter().position(|o| o.id == f.id) {
                Some(k) if to.epoch > rec.objects[k].epoch => {
                    let o = rec.objects.remove(k);
                    self.doubt.insert(f.id, to);
                    self.redrive.push((o, to));
                }
                // A stale marker (the object came back here later): the record wins, and
                // the marker is deleted by the next batch.
                Some(_) => {}
                None => {
                    replicas.recover_forwarding(f.id, to);
                    self.unannounced.push((f.id, to));
                }
            }
        }
        let mut report = RecoveryReport {
            last_checkpoint: rec.last_checkpoint,
            log_entries: rec.writes.len(),
            ..RecoveryReport::default()
        };
        let mut objects = Vec::with_capacity(rec.objects.len());
        for o in &rec.objects {
            let object = O::decode_state(&o.state).map_err(|e| RecoverError::Undecodable {
                id: o.id,
                version: o.version,
                reason: e.to_string(),
            })?;
            match object.durability() {
                Durability::Durable => report.durable += 1,
                _ => report.checkpointed += 1,
            }
            objects.push(object);
        }
        // Logs: (writer, generation, object) → log and its entries.
        let mut logs: BTreeMap<(NodeId, u32, ObjectId), (WriterLog, Vec<u64>)> = BTreeMap::new();
        for w in &rec.writes {
            let (k, seq) = (w.key, w.key.seq);
            let short = |len| RecoverError::ShortLogEntry {
                id: k.target,
                writer: k.writer,
                seq,
                len,
            };
            let generation = w
                .bytes
                .get(..4)
                .map(|g| u32::from_le_bytes([g[0], g[1], g[2], g[3]]))
                .ok_or_else(|| short(w.bytes.len()))?;
            let entry = logs.entry((k.writer, generation, k.target)).or_default();
            entry.1.push(seq);
            if seq == 0 {
                let f = w.bytes.get(4..12).ok_or_else(|| short(w.bytes.len()))?;
                let floor = u64::from_le_bytes(f.try_into().unwrap_or([0; 8]));
                entry.0.merge(&WriterLog {
                    floor,
                    above: BTreeSet::new(),
                });
            } else {
                let _ = entry.0.record(seq);
            }
        }
        let held: BTreeSet<ObjectId> = rec
            .objects
            .iter()
            .map(|o| o.id)
            .chain(self.redrive.iter().map(|(o, _)| o.id))
            .collect();
        match settle {
            Some(settle) => {
                self.deferred = Some(Deferred {
                    records: rec.objects,
                    since,
                    settle,
                    joined_at: None,
                });
            }
            None => {
                for (o, object) in rec.objects.into_iter().zip(objects) {
                    self.install(now, replicas, o.id, o.epoch, o.version, since, object);
                }
            }
        }
        for ((writer, generation, id), (log, seqs)) in logs {
            self.logged
                .entry((id, writer))
                .or_default()
                .extend(seqs.iter().copied());
            let kept = KeptLog {
                generation,
                id,
                log,
                seqs,
            };
            if membership && held.contains(&id) {
                self.kept.entry(writer).or_default().push(kept);
            } else {
                self.discard(writer, kept);
            }
        }
        Ok(report)
    }

    /// Installs one stored primary at a version above any its previous incarnation can
    /// have produced since the checkpoint at `since`.
    #[allow(clippy::too_many_arguments)]
    fn install<O: GameObject>(
        &mut self,
        now: Time,
        replicas: &mut ReplicaManager<O>,
        id: ObjectId,
        epoch: u32,
        stored_version: u64,
        since: Time,
        object: O,
    ) -> bool {
        let class = object.durability();
        let version = replicas.recovery_version(stored_version, since, now);
        if !replicas.recover_primary(now, id, epoch, version, object) {
            return false;
        }
        self.stored.insert(id, (epoch, stored_version, class));
        self.stats.recovered_objects += 1;
        true
    }

    /// The node joined the cluster: deferred objects come due `settle` from now.
    pub(crate) fn joined(&mut self, now: Time) {
        if let Some(d) = &mut self.deferred {
            d.joined_at.get_or_insert(now);
        }
    }

    /// The objects waiting for the cluster to settle before they are installed.
    pub(crate) fn deferred_ids(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.deferred.iter().flat_map(|d| d.records.iter().map(|o| o.id))
    }

    /// When deferred objects come due, if they wait for a time already known.
    pub(crate) fn deferred_due(&self) -> Option<Time> {
        let d = self.deferred.as_ref()?;
        d.joined_at.map(|t| t + d.settle)
    }

    /// Installs the deferred objects once due: each one the world has not moved on from —
    /// not held here (as a replica fetched from an adopter), and bound nowhere under a
    /// later epoch than the stored one — as a primary under its stored epoch; the others
    /// leave the store. Writers' logs of installed objects are installed for writers live
    /// (`live`: a member's current generation) in the generation that wrote them. Returns
    /// the objects installed.
    pub(crate) fn activate_due<O: GameObject>(
        &mut self,
        now: Time,
        replicas: &mut ReplicaManager<O>,
        live: impl Fn(NodeId) -> Option<u32>,
    ) -> Vec<ObjectId> {
        if self.deferred_due().is_none_or(|t| now < t) {
            return Vec::new();
        }
        let Some(d) = self.deferred.take() else {
            return Vec::new();
        };
        let mut installed = Vec::new();
        for o in d.records {
            if replicas
                .store()
                .get(o.id)
                .is_some_and(|e| e.role == Role::Primary)
            {
                // Bound here again meanwhile (a migration resent to this node): that
                // primary owns the record now.
                self.stats.superseded += 1;
                continue;
            }
            // Or a live member announced it holds the object, under any epoch: the stored
            // copy may come from an adoption this node made on the wrong side of a
            // partition (the primary it took over was alive) under a later epoch than the
            // live primary's, and the two would never resolve in an interest-managed world,
            // where they send each other nothing (fault swarm, `--faults all` seed 3662).
            let b = replicas.binding_of(o.id);
            let served = replicas.knows_binding(o.id)
                && b.node != replicas.me()
                && replicas.peers().binary_search(&b.node).is_ok()
                && !replicas.binding_failed(o.id);
            let moved_on = replicas.store().get(o.id).is_some() || b.epoch > o.epoch || served;
            let object = O::decode_state(&o.state).ok();
            match object {
                Some(object) if !moved_on => {
                    if self.install(now, replicas, o.id, o.epoch, o.version, d.since, object) {
                        installed.push(o.id);
                    }
                }
                _ => {
                    self.stats.superseded += 1;
                    self.to_delete_objects.push(o.id);
                }
            }
        }
        // Logs: installed objects' logs for live writers now; others wait for their writer.
        let writers: Vec<NodeId> = self.kept.keys().copied().collect();
        for w in writers {
            if let Some(g) = live(w) {
                self.member_up(w, g, replicas);
            }
        }
        installed
    }

    /// Installs the recovered objects in doubt whose migration target is a member
    /// (`is_member`), once no recovered object waits for the cluster to settle, so the
    /// node migrates them there again (returned, by target): the target either binds them
    /// or, holding them already, accepts at once. Those the world moved on from leave the
    /// store. Writers' logs of installed objects are installed for live writers (`live`).
    pub(crate) fn take_redrive<O: GameObject>(
        &mut self,
        now: Time,
        replicas: &mut ReplicaManager<O>,
        is_member: impl Fn(NodeId) -> bool,
        live: impl Fn(NodeId) -> Option<u32>,
    ) -> Vec<(NodeId, Vec<ObjectId>)> {
        if self.redrive.is_empty() || self.deferred.is_some() {
            return Vec::new();
        }
        let mut out: BTreeMap<NodeId, Vec<ObjectId>> = BTreeMap::new();
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.redrive)
            .into_iter()
            .partition(|(_, to)| is_member(to.node));
        self.redrive = wait;
        for (o, to) in due {
            let moved_on = replicas.store().get(o.id).is_some() || replicas.binding_of(o.id).epoch > o.epoch;
            let since = self.since;
            let installed = match O::decode_state(&o.state) {
                Ok(object) if !moved_on => {
                    self.install(now, replicas, o.id, o.epoch, o.version, since, object)
                }
                _ => false,
            };
            match installed {
                true => out.entry(to.node).or_default().push(o.id),
                false => {
                    self.stats.superseded += 1;
                    self.doubt.remove(&o.id);
                    if !replicas
                        .store()
                        .get(o.id)
                        .is_some_and(|e| e.role == Role::Primary)
                    {
                        self.to_delete_objects.push(o.id);
                    }
                }
            }
        }
        let writers: Vec<NodeId> = self.kept.keys().copied().collect();
        for w in writers {
            if let Some(g) = live(w) {
                self.member_up(w, g, replicas);
            }
        }
        out.into_iter().collect()
    }

    /// Recovered forwarding entries not announced yet (drained).
    pub(crate) fn take_unannounced(&mut self) -> Vec<(ObjectId, Binding)> {
        std::mem::take(&mut self.unannounced)
    }

    /// `writer` is a member in `generation`: its recovered logs of that generation are
    /// installed, the others discarded.
    pub(crate) fn member_up<O: GameObject>(
        &mut self,
        writer: NodeId,
        generation: u32,
        replicas: &mut ReplicaManager<O>,
    ) {
        for k in self.kept.remove(&writer).unwrap_or_default() {
            let waiting = self
                .deferred
                .as_ref()
                .is_some_and(|d| d.records.iter().any(|o| o.id == k.id))
                || self.redrive.iter().any(|(o, _)| o.id == k.id);
            if waiting && k.generation == generation {
                // Its object is not installed yet: kept for the activation.
                self.kept.entry(writer).or_default().push(k);
            } else if k.generation == generation && self.stored.contains_key(&k.id) {
                replicas.install_writer_log(k.id, writer, &k.log);
                self.stats.recovered_logs += 1;
            } else {
                self.discard(writer, k);
            }
        }
    }

    fn discard(&mut self, writer: NodeId, k: KeptLog) {
        self.stats.discarded_logs += 1;
        if let Some(set) = self.logged.get_mut(&(k.id, writer)) {
            for s in &k.seqs {
                set.remove(s);
            }
        }
        for seq in k.seqs {
            self.to_delete.push(WriteKey {
                target: k.id,
                writer,
                seq,
            });
        }
    }
}

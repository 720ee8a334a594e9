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
//! A primary that leaves the node (deleted, migrated, adopted elsewhere after this node
//! was declared failed) is deleted from the store in the next batch of its class, with its
//! log. Checkpoint batches carry the `Checkpoint` marker (frame, time).
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
//!
//! Not persisted yet: name-service bindings and forwarding entries (they are rebuilt from
//! the cluster's notices).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_replica::{GameObject, ReplicaManager, Role, WriterLog};
use worldmesh_store::{Batch, Checkpoint, ObjectRecord, Recovered, WriteKey, WriteRecord};

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
    /// Requests not yet reported done, with the writes each acknowledges.
    in_flight: VecDeque<(u64, Vec<HeldAck>)>,
    queue: VecDeque<PersistRequest>,
    /// Recovered logs per writer, until the writer is seen as a member.
    kept: BTreeMap<NodeId, Vec<KeptLog>>,
    /// Log entries to delete in the next batch (discarded logs).
    to_delete: Vec<WriteKey>,
    /// Object records to delete in the next batch (recovered copies the world moved on
    /// from).
    to_delete_objects: Vec<ObjectId>,
    /// Recovered objects waiting for the cluster to settle (a node rejoining a running
    /// world).
    deferred: Option<Deferred>,
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
            queue: VecDeque::new(),
            kept: BTreeMap::new(),
            to_delete: Vec::new(),
            to_delete_objects: Vec::new(),
            deferred: None,
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

    /// Request `id` is on disk: the durable writes it logged are acknowledged.
    pub(crate) fn persisted<O: GameObject>(&mut self, id: u64, replicas: &mut ReplicaManager<O>) {
        // Completions come in order; an unknown or repeated id changes nothing.
        while let Some((first, _)) = self.in_flight.front() {
            if *first > id {
                break;
            }
            let Some((_, acks)) = self.in_flight.pop_front() else {
                break;
            };
            self.stats.completed += 1;
            replicas.durable_persisted(&acks);
        }
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
        let writes = replicas.take_durable_writes();
        self.frames_since += 1;
        let checkpoint = self.frames_since >= self.cfg.checkpoint_every;
        let mut b = Batch::new();
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
            if class == Durability::Ephemeral || (class == Durability::Checkpointed && !checkpoint) {
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
                (checkpoint || *class == Durability::Durable)
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
        if b.is_empty() {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.stats.batches += 1;
        self.in_flight.push_back((id, acks));
        self.queue.push_back(PersistRequest { id, batch: b });
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
        if replicas.store().primary_count() > 0 || !self.stored.is_empty() || self.deferred.is_some() {
            return Err(RecoverError::NotFresh);
        }
        let since = rec.last_checkpoint.map_or(Time::ZERO, |c| c.time);
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
        let held: BTreeSet<ObjectId> = rec.objects.iter().map(|o| o.id).collect();
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
            let moved_on = replicas.store().get(o.id).is_some() || replicas.binding_of(o.id).epoch > o.epoch;
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
                .is_some_and(|d| d.records.iter().any(|o| o.id == k.id));
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

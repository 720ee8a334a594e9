//! The replica manager (paper `000` §5): keeps primaries' replicas on other nodes in sync
//! with delta-encoded updates, decides which replicas this node holds, forwards tentative
//! writes, and replicates attached objects proactively.
//!
//! It is sans-IO: the node calls [`ReplicaManager::frame`] once per frame,
//! [`ReplicaManager::handle_packet`] for every received packet and
//! [`ReplicaManager::on_discovered`] when the locator reports a matching publication,
//! then sends what [`ReplicaManager::flush`] returns.
//!
//! # Protocol
//!
//! - **Fetch and interest registration.** A node that wants a replica sends an
//!   `Interest { id, have: 0 }` to the primary's node; the primary answers at once with the
//!   full state. While the replica stays wanted the holder re-registers every
//!   `interest_refresh`; the primary keeps a subscriber for `interest_ttl` after the last
//!   registration (soft state). A replica no local primary has wanted for `linger` is
//!   dropped and unsubscribed.
//! - **Updates.** Each frame a primary whose state changed gets a new version. For every
//!   receiver whose acknowledged version is older, the primary sends a delta against that
//!   acknowledged version (it keeps the last `history` versions), or the full state when the
//!   receiver has none. Unacknowledged versions are resent after `resend_after`, so lost
//!   datagrams heal without a separate retransmission protocol.
//! - **Acknowledgements.** Packets carry a per-stream sequence number; the receiver
//!   acknowledges sequence numbers and the sender maps them back to the versions they
//!   carried. A receiver applies a delta only to exactly the baseline version it names
//!   (kept in a per-replica history); if that version is gone it asks for a full state.
//!   A packet whose state the receiver refused because the sender is not bound to the
//!   object here yet stays unacknowledged, so the state comes again once it learns the
//!   binding. Deletion notices are acknowledged and resent too (`manager/deletion`).
//! - **Tentative writes** to a replica are applied locally and forwarded to the primary,
//!   which applies writes in arrival order: that order is what every replica then sees.
//! - **Proactive replication.** An object attached to a local primary is sent to every
//!   receiver of its parent without any discovery (§5 "Proactive replication").
//! - **Broadcast mode** (the baseline architecture): every peer is a permanent subscriber
//!   of every primary and keeps every replica; no discovery, no interest messages.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3, Time};

use crate::history::History;
use crate::indexed::IndexedMap;
use crate::message::{ForwardedWrite, InterestItem, LogItem, Packet, ReplicaMsg, UpdateItem, WriteItem};
use crate::naming::{Binding, NameService, Resolution};
use crate::nodemap::NodeMap;
use crate::store::{ObjectStore, Role};
use crate::vecmap::VecMap;
use crate::{GameObject, ThinkContext};

mod adopt;
mod backup;
mod deletion;
mod durable;
mod guard;
mod migrate;
mod silence;
pub use adopt::{AdoptError, OrphanOffer};
pub use durable::DurableWrite;
pub use migrate::{MigrateError, MigratedObject, MovedOutcome, WriterLog};

/// How replicas are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every node replicates every object (the broadcast architecture).
    Broadcast,
    /// Nodes replicate what their primaries are interested in (Colyseus).
    Interest,
}

/// Tuning of the replica manager.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    /// Versions kept per object for delta baselines, on both sides (32 frames = 3.2 s at 10 Hz).
    pub history: usize,
    /// How often a replica holder re-registers interest with the primary.
    pub interest_refresh: Duration,
    /// How long a primary keeps a subscriber after its last registration.
    pub interest_ttl: Duration,
    /// How long a replica no local primary wants is kept before it is dropped.
    pub linger: Duration,
    /// An unacknowledged version is sent again after this long.
    pub resend_after: Duration,
    /// Replicas whose primary's node has been silent this long are dropped.
    pub peer_timeout: Duration,
    /// A node serving replicas to a peer sends at least one packet this often.
    pub keepalive: Duration,
    /// Acknowledgements ride on packets going to their destination anyway; a packet
    /// carrying only acknowledgements is sent at most this often per peer. (Older
    /// acknowledged baselines cost nothing for objects that move every frame: the same
    /// fields change either way.)
    pub ack_interval: Duration,
    /// Largest packet payload (bytes) before splitting.
    pub max_payload: usize,
    /// Distance added around every area of interest for discovery and for keeping
    /// replicas, in game units: objects about to enter an area of interest are fetched
    /// before they do. A fixed-margin form of the interest prediction of paper `000` §6.2
    /// (the locator adds velocity-based prediction on top).
    pub interest_margin: f32,
    /// Interest prediction (paper `000` §6.2, "PredTime"): every area of interest grown by
    /// the margin is swept along its object's [`GameObject::velocity`] over this lead time,
    /// and a candidate object counts as wanted if it is inside that swept box now or will
    /// be after moving along its own velocity for the same time. Zero turns prediction off
    /// (the margin alone).
    pub interest_lead: Duration,
    /// A tentative write not acknowledged by its primary within this time is given up
    /// (counted in `writes_expired`): its target was deleted or is unreachable. A write
    /// given up to a target not known to be deleted leaves a **void** in its place (see
    /// [`WriteItem::data`]), sent like a write for up to [`VOID_LIFETIMES`] more timeouts,
    /// so the primary's log of this writer is not left with a hole: a log holds a bounded
    /// number of writes above its first gap and refuses the writer's writes beyond them.
    pub write_timeout: Duration,
    /// How long a forwarding entry outlives the acknowledgement of its last `Moved` notice
    /// (paper `001` §7.1 leases; learned bindings are kept, see [`crate::NameService`]).
    pub name_lease: Duration,
    /// Backups per primary: the members ranked first for the object by rendezvous hashing
    /// ([`worldmesh_core::rendezvous`]) receive every update and keep the replica whatever
    /// their interest, so that an orphan has a fresh copy at the node that adopts it when
    /// the primary's node fails. With backups, a write is acknowledged to its writer only
    /// once every backup acknowledged a version that contains it, and the primary's
    /// per-writer logs travel to the backups: an acknowledged write survives the primary's
    /// failure and is applied exactly once. 0 (the papers' setting, and the simulator's
    /// default) turns this off.
    pub backups: usize,
    /// Replicas whose primary's node has been silent for `peer_timeout` are dropped. A node
    /// whose membership protocol decides failures (SWIM, `node::membership`) turns this off:
    /// the replicas of a failed member's objects are what adoption needs.
    pub drop_silent_peers: bool,
    /// Most object versions a primary can produce per second (a version per frame at most,
    /// plus one per migration): a replica refuses an update whose version runs further ahead
    /// of the one it holds than this rate allows for the time since (`refused_version_jump`),
    /// and a new replica whose version exceeds what this rate allows since the world began.
    /// A bogus huge version would otherwise freeze the replica (every genuine update after
    /// it looks stale). 0 turns the check off.
    pub max_version_rate: f64,
    /// Most replicas this node holds from one primary node (`refused_creation_cap` beyond).
    pub max_replicas_per_peer: usize,
    /// Most new replicas one primary node may create here per second, with bursts of up to
    /// `new_replicas_burst` (a token bucket per peer; `refused_creation_cap` beyond).
    pub new_replicas_per_sec: f64,
    /// Burst size of the per-peer creation budget.
    pub new_replicas_burst: f64,
    /// Record every forwarded write a primary applies ([`ReplicaManager::applied_writes`],
    /// at most [`MAX_TRACED_WRITES`]), for the fault swarm's exactly-once check. Off by
    /// default.
    pub trace_writes: bool,
    /// A forwarded write applied to a primary of class `Durable` is acknowledged only once
    /// the node's store holds it (see `durable`): the node logs it and reports the batch
    /// done with [`ReplicaManager::durable_persisted`]. Set by a node that persists; off
    /// by default.
    pub hold_durable_acks: bool,
}

/// Most refused states of unheld objects remembered (see `refused_unheld`), and most
/// failed bindings (see `failed_bindings`).
const MAX_REFUSED_UNHELD: usize = 4096;

/// Most applied writes [`ReplicaConfig::trace_writes`] records.
pub const MAX_TRACED_WRITES: usize = 1 << 20;

/// A forwarded write a primary applied (recorded with [`ReplicaConfig::trace_writes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AppliedWrite {
    /// The object written to.
    pub id: ObjectId,
    /// The node that made the write.
    pub writer: NodeId,
    /// The writer's sequence number of the write.
    pub seq: u64,
    /// The epoch of the object's binding here when it was applied.
    pub epoch: u32,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        Self {
            history: 32,
            interest_refresh: Duration::from_secs(1),
            interest_ttl: Duration::from_secs(3),
            linger: Duration::from_millis(1000),
            resend_after: Duration::from_millis(600),
            peer_timeout: Duration::from_secs(2),
            keepalive: Duration::from_millis(500),
            ack_interval: Duration::from_millis(300),
            max_payload: 1200,
            interest_margin: 0.0,
            interest_lead: Duration::ZERO,
            write_timeout: Duration::from_secs(10),
            name_lease: Duration::from_secs(5),
            backups: 0,
            drop_silent_peers: true,
            trace_writes: false,
            hold_durable_acks: false,
            // 10 Hz frames, with room for migrations and clock skew.
            max_version_rate: 40.0,
            max_replicas_per_peer: 100_000,
            new_replicas_per_sec: 5_000.0,
            new_replicas_burst: 50_000.0,
        }
    }
}

/// Counters of the replica manager.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaStats {
    /// Update items sent (full or delta).
    pub updates_sent: u64,
    /// Of which full states.
    pub full_states_sent: u64,
    /// Bytes of state/delta data in update items sent (no headers).
    pub update_data_bytes: u64,
    /// Updates refused: sender is not the primary, or this node is.
    pub refused_updates: u64,
    /// Updates older than the replica (reordered or duplicated datagrams).
    pub stale_updates: u64,
    /// Bindings found stale: the node they name, or the node a replica held here follows,
    /// answered a fetch with [`ReplicaMsg::NotPrimary`](crate::ReplicaMsg::NotPrimary).
    pub stale_bindings: u64,
    /// Deltas whose baseline this node no longer had (a full state was requested).
    pub missing_baseline: u64,
    /// Updates or writes whose bytes did not decode.
    pub undecodable: u64,
    /// Tentative writes forwarded to a remote primary.
    pub writes_forwarded: u64,
    /// Writes applied to local primaries (local or forwarded).
    pub writes_applied: u64,
    /// Of which written by another node (applied once per writer and sequence number, so
    /// never more than the writers forwarded).
    pub writes_applied_remote: u64,
    /// Writes dropped (unknown target, or forwarded to a node that is not its primary).
    pub writes_dropped: u64,
    /// Replicas created.
    pub replicas_created: u64,
    /// Replicas dropped (interest ended, primary deleted, primary's node silent).
    pub replicas_dropped: u64,
    /// Fetches (interest registrations with no state held) sent.
    pub fetches_sent: u64,
    /// Packets sent that carried nothing but a keepalive.
    pub keepalive_packets: u64,
    /// Packets sent that carried only acknowledgements.
    pub ack_only_packets: u64,
    /// Writes resent because no acknowledgement came within `resend_after`.
    pub writes_resent: u64,
    /// Writes received again after they were applied (acknowledged, not applied twice).
    pub writes_duplicate: u64,
    /// Writes for migrated objects passed on to their new node (paper `001` §3.2).
    pub writes_rerouted: u64,
    /// Writes given up after `write_timeout` without an acknowledgement (each leaves a
    /// void in its place unless its target is known deleted).
    pub writes_expired: u64,
    /// Primaries handed to another node by migration.
    pub migrated_out: u64,
    /// Primaries bound here by migration.
    pub migrated_in: u64,
    /// `Moved` notices accepted (a replica holder learned a new primary location).
    pub moved_accepted: u64,
    /// `Moved` notices or transfers refused: the sender is not the object's current host.
    pub moved_refused: u64,
    /// Updates refused because their version ran further ahead than any primary can go
    /// (see [`ReplicaConfig::max_version_rate`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_version_jump: u64,
    /// New replicas refused because their primary's node exceeded its creation budget or
    /// its replica cap here (see [`ReplicaConfig::max_replicas_per_peer`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_creation_cap: u64,
    /// Orphans adopted here from a replica held here (the primary's node failed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub adopted: u64,
    /// Orphans adopted here from a state another replica holder offered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub adopted_from_offer: u64,
    /// Adoption notices accepted (a replica holder learned an orphan's new primary).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub adoptions_learned: u64,
    /// Primaries given up after losing an adoption race to a node that adopted the same
    /// orphan under an equal epoch with a higher rendezvous score, or a newer epoch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub demoted: u64,
    /// Orphan replicas dropped: the game's policy despawns them, or no node adopted them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub orphans_dropped: u64,
    /// Write acknowledgements held until every backup had the write.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub acks_deferred: u64,
    /// Write acknowledgements held until the node's store had the write (`Durable`
    /// objects, with [`ReplicaConfig::hold_durable_acks`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub durable_held: u64,
    /// Durable writes applied while too many were waiting for the store: applied, but
    /// their acknowledgement dropped (the writer resends).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub durable_ack_dropped: u64,
    /// Primaries brought back from this node's store after a restart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recovered: u64,
    /// Voids (writes their writers gave up) taken by a local primary: numbers recorded as
    /// done in its log of the writer, nothing applied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub voids_recorded: u64,
    /// Voids of this node dropped unacknowledged after [`VOID_LIFETIMES`] timeouts: their
    /// targets may keep a hole in their logs of this node's writes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub voids_expired: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

struct PrimaryMeta<O> {
    history: History<O>,
    last_encoding: Vec<u8>,
    subscribers: VecMap<NodeId, Time>,
    receivers: VecMap<NodeId, RecvState>,
    motion: Motion,
    /// The members that back this primary up (see [`ReplicaConfig::backups`]), best first.
    backups: Vec<NodeId>,
    /// Writes were applied since the last version: the next frame takes a new version (and
    /// a log snapshot) even if the encoded state did not change.
    wrote: bool,
    /// The per-writer logs as of the version given, for the backups.
    logs: Option<(u64, Vec<(NodeId, WriterLog)>)>,
}

impl<O: GameObject> PrimaryMeta<O> {
    /// The replication state of a primary at `version` with no receivers yet; its history
    /// holds [`GameObject::history_copy`] of `object`.
    fn new(version: u64, object: &O, encoding: Vec<u8>, subscribers: VecMap<NodeId, Time>) -> Self {
        Self {
            history: History::with(version, object.history_copy()),
            last_encoding: encoding,
            subscribers,
            receivers: VecMap::new(),
            motion: Motion::default(),
            backups: Vec::new(),
            wrote: false,
            logs: None,
        }
    }

    /// Keeps `object`'s [`GameObject::history_copy`] as `version` in the history, which
    /// holds the newest `cap` versions.
    fn keep_version(&mut self, version: u64, object: &O, cap: usize) {
        self.history.push(version, object.history_copy(), cap);
    }
}

/// A primary's velocity estimated from its positions at successive frames: the default of
/// paper `000` §6.2 ("moving average of an object's velocity"), used for interest
/// prediction when the game does not state a [`GameObject::velocity`].
#[derive(Clone, Copy, Default)]
struct Motion {
    last: Option<(Point3, Time)>,
    velocity: Option<Point3>,
}

impl Motion {
    /// Weight of the newest frame's velocity in the moving average.
    const ALPHA: f32 = 0.5;

    /// Takes the position at `now`. A move longer than `jump` in one step (a respawn or a
    /// teleport, not motion) restarts the estimate.
    fn observe(&mut self, pos: Point3, now: Time, jump: f32) {
        if let Some((p0, t0)) = self.last {
            let dt = (now - t0).as_secs_f32();
            if dt > 0.0 {
                let d = Point3::new(pos.x - p0.x, pos.y - p0.y, pos.z - p0.z);
                if d.is_finite() && p0.distance(pos) <= jump {
                    let v = Point3::new(d.x / dt, d.y / dt, d.z / dt);
                    let a = Self::ALPHA;
                    self.velocity = Some(self.velocity.map_or(v, |o| {
                        Point3::new(
                            a * v.x + (1.0 - a) * o.x,
                            a * v.y + (1.0 - a) * o.y,
                            a * v.z + (1.0 - a) * o.z,
                        )
                    }));
                } else {
                    self.velocity = None;
                }
            }
        }
        self.last = Some((pos, now));
    }
}

#[derive(Clone, Copy, Default)]
struct RecvState {
    acked: u64,
    sent_version: u64,
    sent_at: Time,
    /// A backup acknowledged the primary's log snapshot of this version (see `backup`):
    /// its updates need not carry the log again until the next snapshot.
    log_acked: Option<u64>,
}

struct ReplicaMeta<O> {
    history: History<O>,
    wanted_at: Time,
    registered_at: Option<Time>,
    /// Per-writer log snapshots received as a backup, oldest first (see [`LogItem`]).
    logs: VecDeque<(u64, Vec<(NodeId, WriterLog)>)>,
    /// The primary was adopted by another node: its next full state jumps versions.
    adopted: bool,
}

impl<O> ReplicaMeta<O> {
    fn new(now: Time) -> Self {
        Self {
            history: History::default(),
            wanted_at: now,
            registered_at: Some(now),
            logs: VecDeque::new(),
            adopted: false,
        }
    }
}

/// A packet sent to a peer, for mapping its acknowledgement back.
struct SentPacket {
    seq: u32,
    /// The (object, version) updates it carried.
    updates: Vec<(ObjectId, u64)>,
    /// The objects whose log rode with their update.
    logs: Vec<ObjectId>,
    /// The deletion notices it carried.
    deleted: Vec<ObjectId>,
}

#[derive(Default)]
struct PeerState {
    next_seq: u32,
    sent_log: VecDeque<SentPacket>,
    /// `sent_log` is not in increasing `seq` order (sequence numbers wrapped): found by a
    /// scan, not a binary search. Removals keep the order, so only a push can set it.
    sent_unsorted: bool,
    to_ack: Vec<u32>,
    last_sent: Option<Time>,
    last_heard: Option<Time>,
    updates: Vec<UpdateItem>,
    interest: Vec<InterestItem>,
    unsubscribe: Vec<ObjectId>,
    writes: Vec<WriteItem>,
    deleted: Vec<ObjectId>,
    /// Deletion notices sent and not yet acknowledged, with when they were last sent:
    /// resent after `resend_after` (a lost notice would leave a ghost replica), given up
    /// after `write_timeout`.
    unacked_deleted: BTreeMap<ObjectId, (Time, Time)>,
    write_acks: Vec<(ObjectId, u64)>,
    /// Objects this peer probed that are not primaries here (see [`ReplicaMsg::NotPrimary`]).
    not_primary: Vec<ObjectId>,
    /// Objects bound to this peer to ask it about ([`ReplicaMsg::Probe`]).
    probes: Vec<ObjectId>,
    /// Send a packet even if empty (liveness).
    keepalive: bool,
    last_ack: Option<Time>,
    /// Per-writer logs of primaries this peer backs up, to send.
    logs: Vec<LogItem>,
    /// Replicas held here whose primary is on this peer.
    held: usize,
    /// Creation budget: tokens left and when they were counted.
    tokens: f64,
    tokens_at: Option<Time>,
}

impl PeerState {
    /// Something besides update acknowledgements to send.
    fn has_payload(&self) -> bool {
        self.keepalive
            || !(self.updates.is_empty()
                && self.interest.is_empty()
                && self.unsubscribe.is_empty()
                && self.writes.is_empty()
                && self.deleted.is_empty()
                && self.write_acks.is_empty()
                && self.not_primary.is_empty()
                && self.probes.is_empty()
                && self.logs.is_empty())
    }

    /// Anything at all to send.
    fn has_content(&self) -> bool {
        self.keepalive
            || !(self.updates.is_empty()
                && self.interest.is_empty()
                && self.unsubscribe.is_empty()
                && self.writes.is_empty()
                && self.deleted.is_empty()
                && self.write_acks.is_empty()
                && self.not_primary.is_empty()
                && self.probes.is_empty()
                && self.logs.is_empty()
                && self.to_ack.is_empty())
    }
}

/// Most writes held for one frozen primary during its migration.
const MAX_HELD_WRITES: usize = 4096;

/// Most rival (sender, object) pairs remembered between two `take_rivals` calls.
const MAX_RIVALS: usize = 1024;
/// Sent-packet records kept per peer for mapping acknowledgements back to versions.
const SENT_LOG: usize = 256;
/// A fetch is not repeated for the same object within this time.
const FETCH_BACKOFF: Duration = Duration::from_millis(500);
/// A fetched state is accepted this long after the fetch was sent (longer than any
/// plausible round trip: a reply slower than the retry back-off is still welcome).
const FETCH_ACCEPT: Duration = Duration::from_secs(5);

/// Most [`ReplicaMsg::NotPrimary`] answers, and most [`ReplicaMsg::Probe`] questions,
/// queued for one peer between two packets.
const MAX_NOT_PRIMARY: usize = 256;

/// The replica manager of one node.
pub struct ReplicaManager<O: GameObject> {
    me: NodeId,
    mode: Mode,
    cfg: ReplicaConfig,
    peers: Vec<NodeId>,
    store: ObjectStore<O>,
    next_seq: u32,
    frame: u64,
    /// The local primaries' replication state (a few dozen per node: a sorted vector).
    prim: VecMap<ObjectId, PrimaryMeta<O>>,
    repl: IndexedMap<ObjectId, ReplicaMeta<O>>,
    /// Fetches in flight: when, and from which node (the only node, besides the name
    /// service's binding, whose state for an unheld object is accepted).
    fetching: BTreeMap<ObjectId, (Time, NodeId)>,
    net: NodeMap<PeerState>,
    /// The peers silent for `peer_timeout` (with `drop_silent_peers`).
    silence: silence::Silence,
    stats: ReplicaStats,
    /// Updates refused because this node holds the object as primary: (sender, object),
    /// at most one per pair until taken (a rival primary elsewhere, see
    /// [`ReplicaManager::take_rivals`]).
    rivals: BTreeSet<(NodeId, ObjectId)>,
    names: NameService,
    /// Primaries being migrated away: not thought, writes to them buffered.
    frozen: BTreeSet<ObjectId>,
    /// Writes that arrived for frozen primaries, to be forwarded to their new node.
    buffered: BTreeMap<ObjectId, Vec<ForwardedWrite>>,
    /// Replicas whose primary deleted them lately: no state brings them back.
    tombstones: deletion::Tombstones,
    /// Writes to pass on to another node (drained by the node: `Migration` datagrams).
    outgoing: Vec<(NodeId, ForwardedWrite)>,
    /// Interest registrations that reached this node after their object left it: the
    /// sender gets a `Moved` hint (drained by the node).
    redirects: Vec<(NodeId, ObjectId, Binding)>,
    /// Which writes each writer got applied, per local primary.
    applied: BTreeMap<ObjectId, BTreeMap<NodeId, WriterLog>>,
    /// This node's next write sequence number per target.
    write_seq: BTreeMap<ObjectId, u64>,
    /// This node's writes not yet acknowledged by their primary.
    pending: BTreeMap<(ObjectId, u64), PendingWrite>,
    /// This node's generation: the middle part of the ids of objects it creates.
    generation: u32,
    /// Acknowledgements of writes applied here, held until every backup has them.
    deferred: Vec<backup::DeferredAck>,
    /// Replicas of a failed member's objects awaiting their adoption: kept whatever the
    /// local interest, since they may be the only copy left (see [`Self::keep_orphan`]).
    kept_orphans: BTreeSet<ObjectId>,
    /// Objects whose replica (held or asked for) stays whatever the local interest, until
    /// unpinned ([`ReplicaManager::pin`]).
    pinned: BTreeSet<ObjectId>,
    /// Forwarded writes applied here, with [`ReplicaConfig::trace_writes`].
    write_trace: Vec<AppliedWrite>,
    /// Objects not held here whose state was refused because it came from a node the
    /// object is not bound to here (bounded): if that node's adoption is learned later,
    /// its state is fetched (`learn_adoption`).
    refused_unheld: BTreeMap<ObjectId, NodeId>,
    /// Replicas held here whose states were refused because they came from another node
    /// than the one the replica follows (bounded): the node that sent them. The followed
    /// node is asked whether it holds the object ([`ReplicaMsg::Probe`]); if it answers
    /// that it does not, the replica follows the sender instead (`on_not_primary`).
    refused_followed: BTreeMap<ObjectId, NodeId>,
    /// Objects not held here whose learned binding named a member that failed after this
    /// node learned it (bounded): the binding each had then. While it is still the binding
    /// known here, it is dead — that node's primaries went with it — and any live
    /// member's claim to the object wins over it (see `adopt::binding_failed`).
    failed_bindings: BTreeMap<ObjectId, Binding>,
    /// Durable writes applied since the node last took them for its store's log.
    durable_new: Vec<DurableWrite>,
    /// Durable writes (writer, object, seq) whose acknowledgement waits for the store.
    durable_held: BTreeSet<(NodeId, ObjectId, u64)>,
    /// Primaries recovered from this node's store and still held: one that loses to an
    /// adoption made while this node was down is fetched back as a replica at once.
    recovered: BTreeSet<ObjectId>,
    /// The peers with deletion notices not yet acknowledged (`PeerState::unacked_deleted`
    /// not empty), which `resend_deletions` visits.
    deleting: BTreeSet<NodeId>,
}

/// A write of this node awaiting its primary's acknowledgement.
struct PendingWrite {
    /// The encoded write; empty once it is a void (given up).
    data: Vec<u8>,
    created: Time,
    sent_at: Option<Time>,
    /// Given up: a void sent in the write's place since `created`.
    void: bool,
}

/// How many `write_timeout`s a void (a write given up) is sent for before it is dropped
/// too: a target unreachable that long may keep a hole in its log of this writer.
pub const VOID_LIFETIMES: u32 = 6;

/// What a frame did, for the node's events.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FrameReport {
    /// Primaries created this frame.
    pub spawned: Vec<ObjectId>,
    /// Primaries deleted this frame.
    pub deleted: Vec<ObjectId>,
    /// Replicas dropped this frame.
    pub dropped: Vec<ObjectId>,
}

impl<O: GameObject> ReplicaManager<O> {
    /// A manager for node `me` with the given members (`peers` excludes `me`).
    pub fn new(me: NodeId, mode: Mode, cfg: ReplicaConfig, peers: Vec<NodeId>) -> Self {
        let cfg_lease = cfg.name_lease;
        Self {
            me,
            mode,
            cfg,
            peers,
            store: ObjectStore::new(),
            next_seq: 0,
            frame: 0,
            prim: VecMap::new(),
            repl: IndexedMap::new(),
            fetching: BTreeMap::new(),
            kept_orphans: BTreeSet::new(),
            pinned: BTreeSet::new(),
            write_trace: Vec::new(),
            refused_unheld: BTreeMap::new(),
            refused_followed: BTreeMap::new(),
            failed_bindings: BTreeMap::new(),
            net: NodeMap::default(),
            silence: silence::Silence::default(),
            stats: ReplicaStats::default(),
            rivals: BTreeSet::new(),
            names: NameService::new(me, cfg_lease),
            frozen: BTreeSet::new(),
            buffered: BTreeMap::new(),
            tombstones: deletion::Tombstones::default(),
            outgoing: Vec::new(),
            redirects: Vec::new(),
            applied: BTreeMap::new(),
            write_seq: BTreeMap::new(),
            pending: BTreeMap::new(),
            generation: 0,
            deferred: Vec::new(),
            durable_new: Vec::new(),
            durable_held: BTreeSet::new(),
            recovered: BTreeSet::new(),
            deleting: BTreeSet::new(),
        }
    }

    /// Sets this node's generation (its incarnation: see [`ObjectId`]); objects created
    /// from now on carry it. Call before the first spawn.
    pub fn set_generation(&mut self, generation: u32) {
        self.generation = generation;
        self.names.set_generation(generation);
    }

    /// The members this node replicates with (sorted, without this node).
    pub fn peers(&self) -> &[NodeId] {
        &self.peers
    }

    /// This node.
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// The local store.
    pub fn store(&self) -> &ObjectStore<O> {
        &self.store
    }

    /// The forwarded writes this node applied as primary, in order (empty unless
    /// [`ReplicaConfig::trace_writes`] is on).
    pub fn applied_writes(&self) -> &[AppliedWrite] {
        &self.write_trace
    }

    /// Counters.
    pub fn stats(&self) -> &ReplicaStats {
        &self.stats
    }

    /// The replication mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Nodes currently receiving updates of the local primary `id`.
    pub fn receivers_of(&self, id: ObjectId) -> Vec<NodeId> {
        self.prim
            .get(&id)
            .map(|m| m.receivers.keys().copied().collect())
            .unwrap_or_default()
    }

    /// The last state of replica `id` confirmed by its primary, with its version. The
    /// object in the store may differ from it by tentative writes made here since.
    pub fn confirmed(&self, id: ObjectId) -> Option<(u64, &O)> {
        self.repl.get(&id).and_then(|m| m.history.back())
    }

    /// Creates a primary and returns its id.
    pub fn spawn(&mut self, now: Time, object: O) -> ObjectId {
        let id = ObjectId::with_generation(self.me, self.generation, self.next_seq);
        // A generation's 2^32 ids used up: continue in the next generation number (ids
        // stay unique as long as generations of one node id only grow).
        match self.next_seq.checked_add(1) {
            Some(n) => self.next_seq = n,
            None => {
                self.next_seq = 0;
                self.generation = self.generation.wrapping_add(1);
            }
        }
        let mut enc = Vec::new();
        object.encode_state(&mut enc);
        let subscribers = self.initial_subscribers();
        let mut meta = PrimaryMeta::new(1, &object, enc, subscribers);
        meta.backups = self.backups_for(id);
        self.prim.insert(id, meta);
        // Ids are fresh by construction, so this cannot collide.
        let _ = self.store.insert_primary(id, object, 1, now);
        id
    }

    /// Runs one frame: think every primary, apply writes, version changed states, maintain
    /// replicas and interest registrations, and queue updates. Call [`Self::flush`] after.
    pub fn frame(&mut self, now: Time, dt: Duration, rng: &mut DetRng, world: &O::World) -> FrameReport {
        self.frame += 1;
        let mut report = FrameReport::default();
        let mut spawned = Vec::new();
        let mut writes = Vec::new();
        for id in self.store.primary_ids() {
            if self.frozen.contains(&id) {
                continue; // being migrated (paper `001` §3.2 step 1): no longer thought here
            }
            let Some(mut entry) = self.store.lend(id) else {
                continue;
            };
            let mut ctx = ThinkContext::new(
                now,
                dt,
                self.me,
                id,
                rng,
                world,
                &self.store,
                &mut spawned,
                &mut writes,
            );
            entry.object.think(&mut ctx);
            if ctx.wants_delete() {
                self.store.end_loan(id);
                self.delete_primary(now, id);
                report.deleted.push(id);
            } else {
                self.store.give_back(id, entry);
            }
        }
        for o in spawned {
            report.spawned.push(self.spawn(now, o));
        }
        for (target, w) in writes {
            self.apply_local_write(now, target, &w);
        }
        self.resend_writes(now);
        self.resend_deletions(now);
        self.version_primaries(now, world);
        if self.mode == Mode::Interest {
            report.dropped.extend(self.maintain_interest(now, world));
        }
        if self.cfg.drop_silent_peers {
            report.dropped.extend(self.drop_silent_peers(now));
        }
        if self.mode == Mode::Broadcast {
            self.ask_again(now);
        }
        self.fetching.retain(|_, (t, _)| now - *t < FETCH_ACCEPT);
        self.names.expire(now);
        self.queue_updates(now);
        report
    }

    fn peer(&mut self, id: NodeId) -> &mut PeerState {
        self.net.entry_or_default(id)
    }

    /// The permanent subscribers of a new primary: every peer in broadcast mode.
    fn initial_subscribers(&self) -> VecMap<NodeId, Time> {
        match self.mode {
            Mode::Broadcast => self.peers.iter().map(|p| (*p, Time::MAX)).collect(),
            Mode::Interest => VecMap::new(),
        }
    }

    /// Applies a write that comes from outside the frame loop (an embedding game's input,
    /// a driver command) exactly as a think function's write: authoritatively on a local
    /// primary, tentatively on a replica and forwarded (reliably) to its primary with the
    /// next packets to that node. A write to an unknown object is dropped and counted
    /// (`writes_dropped`).
    pub fn write(&mut self, now: Time, target: ObjectId, write: &O::Write) {
        self.apply_local_write(now, target, write);
    }

    /// Applies a write made on this node: authoritative on a primary, tentative on a
    /// replica (then sent to the primary, reliably: see [`WriteItem`]). A write to a primary
    /// being migrated is held and delivered to its new node.
    fn apply_local_write(&mut self, now: Time, target: ObjectId, w: &O::Write) {
        let Some(entry) = self.store.get_mut(target) else {
            self.stats.writes_dropped += 1;
            return;
        };
        let role = entry.role;
        if role == Role::Primary && !self.frozen.contains(&target) {
            entry.object.apply_write(w);
            self.stats.writes_applied += 1;
            return;
        }
        let seq = {
            // Sequence numbers carry this node's generation in their high half, so a
            // restarted writer's numbers never collide with its previous incarnation's in
            // a primary's log (see `WriterLog`).
            let s = self
                .write_seq
                .entry(target)
                .or_insert(u64::from(self.generation) << 32);
            *s += 1;
            *s
        };
        let data = bitcode::encode(w);
        if role != Role::Primary {
            // Tentative on a replica. (A frozen primary's snapshot is taken: the write waits
            // in `pending` and follows the object to its new node.)
            entry.object.apply_write(w);
        }
        self.pending.insert(
            (target, seq),
            PendingWrite {
                data,
                created: now,
                sent_at: None,
                void: false,
            },
        );
        self.stats.writes_forwarded += 1;
        self.send_pending(now, target, seq);
    }

    /// Sends (or resends) pending write `(target, seq)` to where the primary now is. A
    /// write whose object became a primary here is applied at once.
    fn send_pending(&mut self, now: Time, target: ObjectId, seq: u64) {
        if self.frozen.contains(&target) {
            return; // sent once the migration is answered
        }
        let dst = match self.store.get(target).map(|e| e.role) {
            Some(Role::Replica { primary }) => primary,
            _ => match self.names.resolve(target) {
                Resolution::Local(_) if self.prim.contains_key(&target) => {
                    if let Some(p) = self.pending.remove(&(target, seq)) {
                        let me = self.me;
                        self.receive_write(
                            me,
                            WriteItem {
                                id: target,
                                seq,
                                data: p.data,
                            },
                        );
                    }
                    return;
                }
                r => r.binding(self.me).node,
            },
        };
        if dst == self.me {
            return; // not bound anywhere known; retried until the write times out
        }
        let Some(p) = self.pending.get_mut(&(target, seq)) else {
            return;
        };
        p.sent_at = Some(now);
        let item = WriteItem {
            id: target,
            seq,
            data: p.data.clone(),
        };
        self.peer(dst).writes.push(item);
    }

    /// Resends writes not acknowledged within `resend_after`; gives a write up after
    /// `write_timeout`, sending a void in its place (unless its target is known deleted)
    /// for [`VOID_LIFETIMES`] timeouts more.
    fn resend_writes(&mut self, now: Time) {
        let mut due = Vec::new();
        let mut expired = Vec::new();
        let void_timeout = self.cfg.write_timeout.saturating_mul(VOID_LIFETIMES);
        for ((id, seq), p) in &mut self.pending {
            let limit = if p.void {
                void_timeout
            } else {
                self.cfg.write_timeout
            };
            if now - p.created > limit {
                expired.push((*id, *seq));
            } else if p.sent_at.is_none_or(|t| now - t >= self.cfg.resend_after) {
                due.push((*id, *seq));
            }
        }
        for k in expired {
            let Some(p) = self.pending.get_mut(&k) else {
                continue;
            };
            if p.void {
                self.pending.remove(&k);
                self.stats.voids_expired += 1;
                continue;
            }
            self.stats.writes_expired += 1;
            if self.tombstones.contains(now, k.0) {
                self.pending.remove(&k);
                continue;
            }
            p.void = true;
            p.data = Vec::new();
            p.created = now;
            due.push(k);
        }
        for (id, seq) in due {
            self.stats.writes_resent += 1;
            self.send_pending(now, id, seq);
        }
    }

    /// A write from `writer` (directly or forwarded) for object `item.id`: applied once to a
    /// live local primary and acknowledged to the writer; held if the primary is being
    /// migrated; passed on if the object migrated away; else dropped (the writer retries).
    fn receive_write(&mut self, writer: NodeId, item: WriteItem) {
        // `None`: a void (the writer gave the write up), recorded but not applied.
        let w: Option<O::Write> = match bitcode::decode(&item.data) {
            Ok(w) => Some(w),
            Err(_) if item.data.is_empty() => None,
            Err(_) => {
                self.stats.undecodable += 1;
                return;
            }
        };
        if self.prim.contains_key(&item.id) {
            if self.frozen.contains(&item.id) {
                let held = self.buffered.entry(item.id).or_default();
                // Bounded: beyond this the write is dropped unacknowledged (the writer
                // resends it to the new host).
                if held.len() < MAX_HELD_WRITES {
                    held.push(ForwardedWrite { writer, item });
                }
                return;
            }
            let log = self
                .applied
                .entry(item.id)
                .or_default()
                .entry(writer)
                .or_default();
            match log.record(item.seq) {
                Some(true) => {
                    match &w {
                        Some(w) => {
                            if let Some(e) = self.store.get_mut(item.id) {
                                e.object.apply_write(w);
                            }
                        }
                        None => {
                            // Nothing to apply; its number is done, and the log that says
                            // so reaches the backups (and the disk) before the writer
                            // hears, as a write's would.
                            self.stats.voids_recorded += 1;
                            if writer == self.me {
                                if let Some(m) = self.prim.get_mut(&item.id) {
                                    m.wrote = true;
                                }
                            } else if self.holds_durable(item.id) {
                                self.hold_durable(writer, item.id, item.seq, item.data);
                            } else {
                                self.acknowledge_write(writer, item.id, item.seq);
                            }
                            return;
                        }
                    }
                    if self.cfg.trace_writes && self.write_trace.len() < MAX_TRACED_WRITES {
                        self.write_trace.push(AppliedWrite {
                            id: item.id,
                            writer,
                            seq: item.seq,
                            epoch: self.names.local_epoch(item.id),
                        });
                    }
                    self.stats.writes_applied += 1;
                    if writer != self.me {
                        self.stats.writes_applied_remote += 1;
                        if self.holds_durable(item.id) {
                            self.hold_durable(writer, item.id, item.seq, item.data);
                        } else {
                            self.acknowledge_write(writer, item.id, item.seq);
                        }
                    } else if let Some(m) = self.prim.get_mut(&item.id) {
                        m.wrote = true;
                    }
                }
                Some(false) => {
                    self.stats.writes_duplicate += 1;
                    if writer != self.me {
                        self.acknowledge_duplicate(writer, item.id, item.seq);
                    }
                }
                None => {} // log full: not applied, not acknowledged; retried later
            }
            return;
        }
        if let Some(b) = self.names.forwarding(item.id) {
            self.stats.writes_rerouted += 1;
            self.outgoing.push((b.node, ForwardedWrite { writer, item }));
            return;
        }
        self.stats.writes_dropped += 1;
    }

    fn version_primaries(&mut self, now: Time, world: &O::World) {
        let hist = self.cfg.history.max(1);
        let backups = self.cfg.backups > 0;
        let mut logged = Vec::new();
        let mut buf = Vec::new();
        for (id, meta) in self.prim.iter_mut() {
            // A frozen primary's state is the snapshot on its way to its new node.
            if self.frozen.contains(id) {
                continue;
            }
            let Some(entry) = self.store.get_mut(*id) else {
                continue;
            };
            if let Some(b) = entry.object.interest(world)
                && entry.object.velocity().is_none()
            {
                let jump = ((b.max.x - b.min.x).min(b.max.y - b.min.y) / 2.0).max(0.0);
                meta.motion.observe(entry.object.position(), now, jump);
            }
            buf.clear();
            entry.object.encode_state(&mut buf);
            // With backups, applied writes always take a new version: the log snapshot
            // shipped to the backups is tagged with it (see `backup`).
            let wrote = std::mem::take(&mut meta.wrote) && backups;
            if buf != meta.last_encoding || wrote {
                std::mem::swap(&mut meta.last_encoding, &mut buf);
                entry.version += 1;
                entry.state_time = now;
                entry.updated_at = now;
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

    /// Is some local primary interested in `obj` (its fine-grained check, or `obj` inside
    /// its area of interest grown by the margin), or is it attached to an object held here?
    /// `primaries` pairs each local primary with its area of interest grown by the margin
    /// (computed once per frame); the cheap box tests of all primaries run before any of the
    /// game's own checks (which must be pure, as [`GameObject::is_interested`] says).
    fn wanted(&self, obj: &O, primaries: &[(&O, Option<Aabb>)], world: &O::World) -> bool {
        if obj.attached_to().is_some_and(|p| self.store.get(p).is_some()) {
            return true;
        }
        let pos = obj.position();
        let lead = self.cfg.interest_lead;
        let ahead = (!lead.is_zero())
            .then(|| obj.position_ahead(lead, world))
            .filter(|a| *a != pos && a.is_finite());
        // The areas first, for every primary, then the game's own checks: the same answer
        // as asking both of each primary in turn, but a replica inside some area (most
        // are) costs no call of the game's check, which recomputes its area each time.
        primaries
            .iter()
            .any(|(_, grown)| grown.is_some_and(|b| b.contains(pos) || ahead.is_some_and(|a| b.contains(a))))
            || primaries.iter().any(|(p, _)| p.is_interested(obj, world))
    }

    /// How far `o` moves along its velocity over the prediction lead time, if prediction
    /// is on and the object moves. The velocity is the game's own
    /// ([`GameObject::velocity`]) or, for a local primary `id` that has an area of interest,
    /// the moving average of its observed motion (paper `000` §6.2's default).
    fn lead_displacement(&self, id: Option<ObjectId>, o: &O) -> Option<Point3> {
        let lead = self.cfg.interest_lead.as_secs_f32();
        if lead <= 0.0 {
            return None;
        }
        o.velocity()
            .or_else(|| {
                id.and_then(|id| self.prim.get(&id))
                    .and_then(|m| m.motion.velocity)
            })
            .filter(|v| v.is_finite())
            .map(|v| Point3::ORIGIN.moved(v, lead))
    }

    /// Where the local primary `id` expects to be after the interest lead time, when
    /// prediction is on and that is elsewhere: the game's [`GameObject::position_ahead`],
    /// or the moving average of its observed motion if the game states neither a jump
    /// nor a velocity. The node publishes it beside the position (paper `000` §6.2).
    pub fn position_ahead(&self, id: ObjectId, world: &O::World) -> Option<Point3> {
        let lead = self.cfg.interest_lead;
        if lead.is_zero() {
            return None;
        }
        let o = &self.store.get(id)?.object;
        let pos = o.position();
        let mut ahead = o.position_ahead(lead, world);
        if ahead == pos
            && let Some(d) = self.lead_displacement(Some(id), o)
        {
            ahead = pos.moved(d, 1.0);
        }
        (ahead != pos && ahead.is_finite()).then_some(ahead)
    }

    /// The area of interest this node discovers and keeps replicas for on behalf of the
    /// local primary `id`: its [`GameObject::interest`] grown by the margin and swept along
    /// its velocity over the lead time (paper `000` §6.2). `None` if `id` is not held here
    /// or has no interest, or if neither margin nor prediction is configured (then only the
    /// game's own check applies).
    pub fn predicted_interest(&self, id: ObjectId, world: &O::World) -> Option<Aabb> {
        let o = &self.store.get(id)?.object;
        let m = self.cfg.interest_margin;
        let d = self.lead_displacement(Some(id), o);
        if m <= 0.0 && d.is_none() {
            return None;
        }
        let grown = o.interest(world)?.expand(m.max(0.0));
        Some(d.map_or(grown, |d| grown.swept(d)))
    }

    fn maintain_interest(&mut self, now: Time, world: &O::World) -> Vec<ObjectId> {
        let mut dropped = Vec::new();
        let mut register: Vec<(NodeId, InterestItem)> = Vec::new();
        {
            let primaries: Vec<(&O, Option<Aabb>)> = self
                .store
                .primaries()
                .map(|(id, e)| (&e.object, self.predicted_interest(id, world)))
                .collect();
            let mut wanted_now = Vec::new();
            for (id, e) in self.store.iter() {
                if let Role::Replica { primary } = e.role
                    && self.wanted(&e.object, &primaries, world)
                {
                    wanted_now.push((id, primary, e.version));
                }
            }
            // Refreshes to one primary's node are batched: when one is due, every replica
            // from that node past half its period is refreshed in the same packet.
            let refresh = self.cfg.interest_refresh;
            let mut due: Vec<NodeId> = wanted_now
                .iter()
                .filter(|(id, ..)| {
                    self.repl
                        .get(id)
                        .is_some_and(|m| m.registered_at.is_none_or(|t| now - t >= refresh))
                })
                .map(|(_, p, _)| *p)
                .collect();
            due.sort_unstable();
            due.dedup();
            for (id, primary, version) in wanted_now {
                if let Some(m) = self.repl.get_mut(&id) {
                    m.wanted_at = now;
                    if due.binary_search(&primary).is_ok()
                        && m.registered_at.is_none_or(|t| now - t >= refresh / 2)
                    {
                        m.registered_at = Some(now);
                        register.push((primary, InterestItem { id, have: version }));
                    }
                }
            }
        }
        for (p, item) in register {
            self.peer(p).interest.push(item);
        }
        let stale: Vec<ObjectId> = self
            .repl
            .iter()
            .filter(|(_, m)| now - m.wanted_at > self.cfg.linger)
            .map(|(id, _)| *id)
            .filter(|id| !self.kept_orphans.contains(id) && !self.pinned.contains(id))
            .filter(|id| !self.may_be_orphan(now, *id))
            .filter(|id| {
                // A backup keeps its replica whatever its interest.
                self.cfg.backups == 0
                    || !matches!(self.store.get(*id).map(|e| e.role), Some(Role::Replica { primary }) if self.backs_up(*id, primary))
            })
            .collect();
        for id in stale {
            if let Some(Role::Replica { primary }) = self.store.get(id).map(|e| e.role) {
                self.peer(primary).unsubscribe.push(id);
            }
            self.remove_replica(id);
            dropped.push(id);
        }
        dropped
    }

    /// True if the node this node's name service binds `id` to is alive: a live peer, or
    /// this node for an object it created in its current generation. A binding learned
    /// from a member that failed since is not, even once that node id is a member again
    /// as a new generation ([`ReplicaManager::binding_failed`]): the live primary may
    /// announce nothing this node takes (one that recovered the object from its store
    /// under an older epoch announces nothing; a notice taken as superseded before the
    /// failure is not sent again), and this node would refuse its states for good
    /// (fault swarm, `--faults all` seeds 203, 260, 340).
    fn binding_is_live(&self, id: ObjectId) -> bool {
        match self.names.resolve(id) {
            Resolution::Local(_) => true,
            r => {
                let n = r.binding(self.me).node;
                n != self.me && self.peers.binary_search(&n).is_ok() && !self.binding_failed(id)
            }
        }
    }

    /// True if the replica `id` may be about to become an orphan: the membership protocol
    /// decides failures here (`drop_silent_peers` off) and its primary's node has sent
    /// nothing for a quarter of `linger` (2.5 frames at 10 Hz). Such a replica is kept whatever the local interest until the
    /// node is heard again or declared failed (then [`Self::keep_orphan`] holds it): an
    /// interest replica that lingered out while the failure was being detected (seconds
    /// over a WAN) was sometimes the last copy of an object whose backups failed too
    /// (`experiment adoption`).
    fn may_be_orphan(&self, now: Time, id: ObjectId) -> bool {
        if self.cfg.drop_silent_peers {
            return false;
        }
        let Some(Role::Replica { primary }) = self.store.get(id).map(|e| e.role) else {
            return false;
        };
        self.net
            .get(&primary)
            .and_then(|p| p.last_heard)
            .is_some_and(|t| now - t > self.cfg.linger / 4)
    }

    /// Keeps the replica of `id` (a failed member's object awaiting adoption) even when no
    /// local interest wants it any more, until [`Self::release_orphan`] or its removal: a
    /// replica that lingers out while the failure is being detected and the adopter
    /// found may be the only copy left (without backups).
    pub fn keep_orphan(&mut self, id: ObjectId) {
        if matches!(self.store.get(id).map(|e| e.role), Some(Role::Replica { .. })) {
            self.kept_orphans.insert(id);
        }
    }

    /// Keeps the replica of `id`, once it arrives, whatever the local interest, until
    /// [`Self::unpin`]: a node deciding whether a copy of its own store is still needed
    /// reads the answer of the object's primary from it (`node::persist`).
    pub fn pin(&mut self, id: ObjectId) {
        self.pinned.insert(id);
    }

    /// Ends [`Self::pin`] for `id`.
    pub fn unpin(&mut self, id: ObjectId) {
        self.pinned.remove(&id);
    }

    /// Ends [`Self::keep_orphan`] for `id`: it was adopted, or given up.
    pub fn release_orphan(&mut self, id: ObjectId) {
        self.kept_orphans.remove(&id);
    }

    fn remove_replica(&mut self, id: ObjectId) {
        self.kept_orphans.remove(&id);
        if let Some(Role::Replica { primary }) = self.store.get(id).map(|e| e.role) {
            self.store.remove(id);
            self.stats.replicas_dropped += 1;
            if let Some(p) = self.net.get_mut(&primary) {
                p.held = p.held.saturating_sub(1);
            }
        }
        self.repl.remove(&id);
    }

    /// Points the replica `id` at its primary's new node (a migration or an adoption),
    /// moving it between the per-peer replica counts. False if `id` is not a replica here.
    fn rebind_replica(&mut self, id: ObjectId, to: NodeId) -> bool {
        let Some(Role::Replica { primary }) = self.store.get(id).map(|e| e.role) else {
            return false;
        };
        if let Some(p) = self.net.get_mut(&primary) {
            p.held = p.held.saturating_sub(1);
        }
        self.peer(to).held += 1;
        self.silence.bound(to);
        // Logs of the previous primary's versions say nothing of the new one's.
        if let Some(m) = self.repl.get_mut(&id) {
            m.logs.clear();
        }
        self.store.rebind_replica(id, to)
    }

    fn drop_silent_peers(&mut self, now: Time) -> Vec<ObjectId> {
        let net = &self.net;
        self.silence.update(now, self.cfg.peer_timeout, |p| {
            net.get(&p).and_then(|s| s.last_heard)
        });
        let silent = self.silence.silent();
        if silent.is_empty() {
            return Vec::new();
        }
        // The silent peers dropped our replicas too (same timeout on their side): forget
        // what they acknowledged, so they get full states when they are heard again.
        for meta in self.prim.values_mut() {
            for (n, st) in meta.receivers.iter_mut() {
                if silent.contains(n) {
                    *st = RecvState::default();
                }
            }
        }
        // Their replicas go; when no peer fell silent and no replica was bound to a silent
        // peer since the last search, that search dropped them all.
        if !self.silence.take_changed() {
            return Vec::new();
        }
        let silent = self.silence.silent();
        let dead: Vec<ObjectId> = self
            .store
            .iter()
            .filter(|(_, e)| matches!(e.role, Role::Replica { primary } if silent.contains(&primary)))
            .map(|(id, _)| id)
            .collect();
        for id in &dead {
            self.remove_replica(*id);
        }
        dead
    }

    fn queue_updates(&mut self, now: Time) {
        let ids: Vec<ObjectId> = self.prim.keys().copied().collect();
        // Reused across objects: the nodes to update (sorted, deduplicated).
        let mut targets: Vec<NodeId> = Vec::new();
        let mut out: Vec<(NodeId, UpdateItem)> = Vec::new();
        // Reused across objects: per version acknowledged by a receiver of the current
        // object, the place in `out` of the update made for it. Receivers that acknowledged
        // the same version get the same bytes: each distinct baseline is encoded once per
        // object and frame (the others take a copy), not once per receiver.
        let mut made: Vec<(u64, usize)> = Vec::new();
        for id in ids {
            let Some(entry) = self.store.get(id) else { continue };
            let version = entry.version;
            let parent = entry.object.attached_to().filter(|p| self.prim.contains_key(p));
            targets.clear();
            let mut extra = false;
            if let Some(meta) = self.prim.get_mut(&id) {
                meta.subscribers.retain(|_, exp| *exp > now);
                targets.extend(meta.subscribers.keys());
                if !meta.backups.is_empty() {
                    targets.extend(meta.backups.iter().copied());
                    extra = true;
                }
            }
            if extra {
                targets.sort_unstable();
                targets.dedup();
            }
            if let Some(p) = parent.and_then(|p| self.prim.get(&p)) {
                targets.extend(p.subscribers.keys().copied());
                targets.extend(p.receivers.keys().copied());
                targets.sort_unstable();
                targets.dedup();
            }
            let Some(meta) = self.prim.get_mut(&id) else {
                continue;
            };
            meta.receivers.set_keys(&targets);
            for (&t, st) in targets.iter().zip(meta.receivers.values_mut()) {
                if st.acked >= version {
                    continue;
                }
                if st.sent_version == version && now - st.sent_at < self.cfg.resend_after {
                    continue;
                }
                let mut item = match made.iter().find(|(acked, _)| *acked == st.acked) {
                    Some(&(_, at)) => out[at].1.clone(),
                    None => {
                        made.push((st.acked, out.len()));
                        make_update(id, version, st.acked, &meta.history)
                    }
                };
                st.sent_version = version;
                st.sent_at = now;
                item.logged = extra && meta.backups.contains(&t);
                out.push((t, item));
            }
            made.clear();
            for (t, item) in out.drain(..) {
                self.count_update(&item);
                if item.logged
                    && let Some(l) = self.logs_for(id, t, item.version)
                {
                    self.peer(t).logs.push(l);
                }
                self.peer(t).updates.push(item);
            }
        }
    }

    fn count_update(&mut self, item: &UpdateItem) {
        self.stats.updates_sent += 1;
        self.stats.update_data_bytes += item.data.len() as u64;
        if item.base == 0 {
            self.stats.full_states_sent += 1;
        }
    }

    /// The locator found a publication of `id` (primary on `primary`, at `pos`) matching
    /// one of this node's subscriptions. Fetches the replica if a local primary's
    /// interest (grown by the margin) contains `pos`. Returns true if a fetch was queued for
    /// `primary` (the node should send to it now, with [`Self::flush_peer`], rather than
    /// wait for the frame).
    pub fn on_discovered(
        &mut self,
        now: Time,
        id: ObjectId,
        primary: NodeId,
        pos: Point3,
        world: &O::World,
    ) -> bool {
        if self.mode != Mode::Interest || primary == self.me || self.store.get(id).is_some() {
            return false;
        }
        if self
            .fetching
            .get(&id)
            .is_some_and(|(t, _)| now - *t < FETCH_BACKOFF)
        {
            return false;
        }
        let wanted = self.store.primaries().any(|(pid, e)| {
            self.predicted_interest(pid, world)
                .or_else(|| e.object.interest(world))
                .is_some_and(|b| b.contains(pos))
        });
        if !wanted {
            return false;
        }
        self.fetching.insert(id, (now, primary));
        self.stats.fetches_sent += 1;
        self.peer(primary).interest.push(InterestItem { id, have: 0 });
        true
    }

    /// The locator asked this node, as the primary's node, to send `to` the state of `id`
    /// now (a rendezvous matched it inside `to`'s unpredicted interest): treated as a fetch
    /// from `to`, unless `to` already receives `id`. Returns true if a state was queued for
    /// `to` (send it with [`Self::flush_peer`]).
    pub fn push_to(&mut self, now: Time, to: NodeId, id: ObjectId) -> bool {
        if self.mode != Mode::Interest || to == self.me {
            return false;
        }
        if self
            .prim
            .get(&id)
            .is_none_or(|m| m.subscribers.get(&to).is_some_and(|t| *t > now))
        {
            return false;
        }
        self.on_interest(now, to, InterestItem { id, have: 0 })
    }

    /// True if some local primary's interest (with the discovery margin) holds `pos`.
    fn wanted_at(&self, pos: Point3, world: &O::World) -> bool {
        let m = self.cfg.interest_margin;
        self.prim.keys().any(|pid| {
            self.store.get(*pid).is_some_and(|e| {
                e.role == Role::Primary
                    && e.object
                        .interest(world)
                        .is_some_and(|b| b.expand(m).contains(pos))
            })
        })
    }

    /// Handles a packet from `from`. Returns true if something should be sent to `from`
    /// at once (a fetched state, with [`Self::flush_peer`]) rather than at the next frame.
    pub fn handle_packet(&mut self, now: Time, from: NodeId, packet: Packet, world: &O::World) -> bool {
        let mut urgent = false;
        // Only packets that carried updates or deletion notices are acknowledged:
        // acknowledgements exist to confirm delta baselines and deletions (acknowledging
        // acknowledgements would ping-pong forever).
        let mut ack = packet
            .msgs
            .iter()
            .any(|m| matches!(m, ReplicaMsg::Update(_) | ReplicaMsg::Deleted(_)));
        let before = self.peer(from).last_heard.replace(now);
        if self.cfg.drop_silent_peers {
            self.silence.heard(from, before, now, self.cfg.peer_timeout);
        }
        // Updates sent to this node as a backup: each state must end up with its log.
        let mut logged: Vec<(ObjectId, u64)> = Vec::new();
        for msg in packet.msgs {
            match msg {
                ReplicaMsg::Update(items) => {
                    for it in items {
                        if it.logged {
                            logged.push((it.id, it.version));
                        }
                        ack &= self.apply_update(now, from, packet.sent_at, it, world);
                    }
                }
                ReplicaMsg::Interest(items) => {
                    for it in items {
                        urgent |= self.on_interest(now, from, it);
                    }
                }
                ReplicaMsg::Unsubscribe(ids) => {
                    for id in ids {
                        if let Some(m) = self.prim.get_mut(&id) {
                            m.subscribers.remove(&from);
                            m.receivers.remove(&from);
                        }
                    }
                }
                ReplicaMsg::Ack(seqs) => self.on_ack(from, &seqs),
                ReplicaMsg::Write(items) => {
                    for it in items {
                        self.receive_write(from, it);
                    }
                }
                ReplicaMsg::WriteAck(acks) => {
                    for (id, seq) in acks {
                        // Only the object's current primary may acknowledge its writes.
                        if self.primary_node(id) == Some(from) {
                            self.pending.remove(&(id, seq));
                        }
                    }
                }
                ReplicaMsg::Logs(items) => {
                    // A backup that did not take a state and its log leaves the packet
                    // unacknowledged: the primary counts only what its backups hold.
                    for it in items {
                        ack &= self.on_logs(from, it);
                    }
                }
                ReplicaMsg::Deleted(ids) => self.on_deleted(now, from, &ids),
                ReplicaMsg::Probe(ids) => {
                    for id in ids {
                        urgent |= self.on_probe(now, from, id);
                    }
                }
                ReplicaMsg::NotPrimary(ids) => {
                    for id in ids {
                        urgent |= self.on_not_primary(now, from, id);
                    }
                }
            }
        }
        for (id, version) in logged {
            ack &= self.log_of_update(now, from, id, version);
        }
        let p = self.peer(from);
        if ack && p.to_ack.len() < 1024 {
            p.to_ack.push(packet.seq);
        }
        urgent
    }

    /// `from` binds `id` to this node and refuses another node's states of it: answered
    /// as a fetch if `id` is a primary here, else with a `Moved` hint if it moved on, else
    /// with [`ReplicaMsg::NotPrimary`]. Returns true if an answer should go out at once.
    fn on_probe(&mut self, now: Time, from: NodeId, id: ObjectId) -> bool {
        if self.prim.contains_key(&id) || self.names.forwarding(id).is_some() {
            return self.on_interest(now, from, InterestItem { id, have: 0 });
        }
        let p = self.peer(from);
        if p.not_primary.len() >= MAX_NOT_PRIMARY {
            return false;
        }
        p.not_primary.push(id);
        true
    }

    fn on_interest(&mut self, now: Time, from: NodeId, it: InterestItem) -> bool {
        let (Some(entry), Some(meta)) = (self.store.get(it.id), self.prim.get_mut(&it.id)) else {
            if let Some(b) = self.names.forwarding(it.id) {
                self.redirects.push((from, it.id, b));
            }
            return false;
        };
        if self.mode == Mode::Interest {
            meta.subscribers.insert(from, now + self.cfg.interest_ttl);
        }
        let st = meta.receivers.entry_or_default(from);
        // The holder states what it has; trust only versions we can still diff against.
        let have_known = it.have != 0 && meta.history.contains(it.have);
        st.acked = if have_known { st.acked.max(it.have) } else { 0 };
        if it.have == 0 {
            // A fetch: answer now with the full state (and, to a backup, its log).
            let mut item = make_update(it.id, entry.version, 0, &meta.history);
            st.sent_version = entry.version;
            st.sent_at = now;
            st.log_acked = None;
            item.logged = meta.backups.contains(&from);
            self.count_update(&item);
            let log = self.logs_for(it.id, from, item.version);
            let p = self.peer(from);
            p.updates.push(item);
            p.logs.extend(log);
            return true;
        }
        false
    }

    /// `from`, asked about `id` ([`ReplicaMsg::Probe`]), holds no primary of it. If this
    /// node binds `id` to `from` and holds no replica, that binding is stale: `from` gave
    /// the object up to a rival of the same epoch, or lost it when it came back as a new
    /// generation, and the notice that set it here arrived late. Without this, the node refused the live primary's
    /// states for good whenever that primary's binding did not outrank the stale one
    /// (fault swarm, `--faults all` seeds 609, 844, 1036, 1106). The binding counts as
    /// failed ([`Self::binding_failed`]), and the last primary whose state was refused here
    /// is asked for it. If this node holds a replica that follows `from`, the replica
    /// follows the node whose states it refused instead (`follow_serving`). Returns true
    /// if a fetch is queued (send it at once).
    fn on_not_primary(&mut self, now: Time, from: NodeId, id: ObjectId) -> bool {
        if from == self.me {
            return false;
        }
        let named = self.names.resolve(id).binding(self.me);
        if named.node == from {
            // Stale whether or not a replica is held here: should the node a replica follows
            // instead fail, the replica must not fall back on it (`member_down`).
            if self.failed_bindings.len() >= MAX_REFUSED_UNHELD {
                self.failed_bindings.clear();
            }
            self.failed_bindings.insert(id, named);
        }
        match self.store.get(id).map(|e| e.role) {
            None => {}
            Some(Role::Replica { primary }) if primary == from => return self.follow_serving(now, from, id),
            Some(_) => return false,
        }
        if named.node != from {
            return false;
        }
        self.stats.stale_bindings += 1;
        match self.refused_unheld.remove(&id) {
            Some(serving) if serving != from && self.peers.binary_search(&serving).is_ok() => {
                self.fetch_full_state(now, id, serving);
                true
            }
            _ => false,
        }
    }

    fn on_ack(&mut self, from: NodeId, seqs: &[u32]) {
        self.on_ack_versions(from, seqs);
        self.release_deferred_acks();
    }

    fn on_ack_versions(&mut self, from: NodeId, seqs: &[u32]) {
        let p = self.net.entry_or_default(from);
        for s in seqs {
            // Acknowledgements come oldest first, so the front entry is usually the one: the
            // first entry with that seq, as the scan and the search would find.
            let pos = if p.sent_log.front().is_some_and(|sp| sp.seq == *s) {
                Some(0)
            } else if p.sent_unsorted {
                p.sent_log.iter().position(|sp| sp.seq == *s)
            } else {
                // Increasing, so each seq occurs once: the same entry as the scan.
                p.sent_log.binary_search_by_key(s, |sp| sp.seq).ok()
            };
            if let Some(pos) = pos
                && let Some(SentPacket {
                    updates,
                    logs,
                    deleted,
                    ..
                }) = p.sent_log.remove(pos)
            {
                p.deletions_acked(&deleted);
                for (id, v) in updates {
                    let Some(m) = self.prim.get_mut(&id) else { continue };
                    // The snapshot current now, if the log that rode with `v` was it (a
                    // later snapshot comes with a later version).
                    let snapshot = m.logs.as_ref().map_or(0, |(sv, _)| *sv);
                    let log_too = snapshot <= v && logs.contains(&id);
                    if let Some(st) = m.receivers.get_mut(&from) {
                        st.acked = st.acked.max(v);
                        if log_too {
                            st.log_acked = Some(snapshot);
                        }
                    }
                }
            }
        }
    }

    /// The (sender, object) pairs whose updates were refused since the last call because
    /// this node holds the object as primary: another node believes it is the primary too
    /// (views that differed during a failure). The node tells each sender its own binding,
    /// and the rival rule (`learn_adoption`) demotes the loser.
    pub fn take_rivals(&mut self) -> BTreeSet<(NodeId, ObjectId)> {
        std::mem::take(&mut self.rivals)
    }

    /// Applies (or refuses, or ignores) one update. Returns false if it refused a state of
    /// an object not held here because `from` is not bound to it here yet: the packet is
    /// then left unacknowledged, so its sender — which may be the primary this node has
    /// not heard of yet — sends the state again, rather than count it as delivered and,
    /// for an object that no longer changes, never send it again (fault swarm, crashes
    /// seed 1577: a joiner refused an adopter's only full state, and the one fetch it
    /// made on learning the adoption was lost).
    fn apply_update(
        &mut self,
        now: Time,
        from: NodeId,
        sent_at: Time,
        it: UpdateItem,
        world: &O::World,
    ) -> bool {
        let (held, held_at) = match self.store.get(it.id).map(|e| (e.role, e.version, e.updated_at)) {
            Some((Role::Primary, ..)) => {
                self.stats.refused_updates += 1;
                if self.rivals.len() < MAX_RIVALS {
                    self.rivals.insert((from, it.id));
                }
                return true;
            }
            Some((Role::Replica { primary }, _, at)) if primary != from => {
                self.stats.refused_updates += 1;
                // Not while the followed node's own states keep coming (a move or a rival
                // adoption being settled): only a replica it left without news asks.
                if now - at >= FETCH_BACKOFF {
                    self.probe_followed(now, it.id, primary, from);
                }
                return true;
            }
            Some((Role::Replica { .. }, v, at)) => (Some(v), at),
            // An unheld object: accept it only from the node the name service binds it to,
            // from the node this node asked for it, or — when the binding known here points
            // at no live member (its node failed or restarted before this node learned the
            // adoption) — from the member that serves it.
            None if self.names.resolve(it.id).binding(self.me).node != from
                && self.fetching.get(&it.id).is_none_or(|(_, n)| *n != from)
                && self.binding_is_live(it.id) =>
            {
                self.stats.refused_updates += 1;
                if self.refused_unheld.len() >= MAX_REFUSED_UNHELD {
                    self.refused_unheld.clear();
                }
                self.refused_unheld.insert(it.id, from);
                self.probe_binding(now, it.id);
                return false;
            }
            None if self.tombstones.contains(now, it.id) => {
                // A state that left its primary before the deletion notice did. Not
                // acknowledged: if a node adopted the object regardless (a copy that missed
                // the deletion, recovered from a store or offered as an orphan), a state
                // acknowledged here would count as delivered, and an object that no longer
                // changes would never be sent again once the tombstone expires (fault
                // swarm, `--faults all` seeds 5597, 7842).
                self.stats.stale_updates += 1;
                return false;
            }
            None => (None, Time::ZERO),
        };
        // The first full state of an adopted primary jumps versions by design.
        let adopted = it.base == 0 && self.repl.get(&it.id).is_some_and(|m| m.adopted);
        if !adopted && !self.version_ok(held.map(|v| (v, held_at)), it.version, now) {
            return true;
        }
        // One lookup of the replica's history serves the duplicate check and the baseline.
        let history = self.repl.get(&it.id).map(|m| &m.history);
        if held.is_some_and(|v| v >= it.version) && history.is_some_and(|h| h.contains(it.version)) {
            self.stats.stale_updates += 1; // a duplicate
            return true;
        }
        let decoded = if it.base == 0 {
            O::decode_state(&it.data)
        } else {
            match history.and_then(|h| h.get(it.base)) {
                Some(base) => O::apply_delta(base, &it.data),
                None if held.is_none() && self.mode == Mode::Interest => {
                    // A delta for an object not held (dropped, or never fetched): ignore;
                    // discovery fetches it again if it is wanted.
                    self.stats.stale_updates += 1;
                    return true;
                }
                None => {
                    // A held replica whose baseline is gone, or (broadcast) an object
                    // dropped while its node was unreachable: ask for a full state.
                    self.stats.missing_baseline += 1;
                    if self
                        .fetching
                        .get(&it.id)
                        .is_none_or(|(t, _)| now - *t >= FETCH_BACKOFF)
                    {
                        self.fetching.insert(it.id, (now, from));
                        self.peer(from).interest.push(InterestItem { id: it.id, have: 0 });
                    }
                    return true;
                }
            }
        };
        let object = match decoded {
            Ok(o) => o,
            Err(_) => {
                self.stats.undecodable += 1;
                return true;
            }
        };
        let hist = self.cfg.history.max(1);
        if let Some(v) = held
            && v >= it.version
        {
            // Older than what is held (reordered): not applied, but kept as a baseline,
            // because the sender will treat it as acknowledged once this packet is acked.
            self.stats.stale_updates += 1;
            if let Some(m) = self.repl.get_mut(&it.id) {
                m.history.insert_sorted(it.version, object, hist);
            }
            return true;
        }
        if held.is_none()
            && self.mode == Mode::Interest
            && !self.fetching.contains_key(&it.id)
            && object.attached_to().is_none_or(|p| self.store.get(p).is_none())
            && !(it.base == 0 && self.wanted_at(object.position(), world))
            && !self.backs_up(it.id, from)
        {
            // Not asked for, not attached to anything held here and not a full state a
            // local primary wants (a primary's push after a locator match is one; an update
            // that crossed an unsubscribe is not): drop it rather than resurrect the replica.
            self.stats.stale_updates += 1;
            return true;
        }
        if held.is_none() && !self.creation_allowed(from, now) {
            return true;
        }
        match self
            .store
            .apply_replica_state(from, it.id, object.clone(), it.version, sent_at, now)
        {
            Ok(created) => {
                if created {
                    self.stats.replicas_created += 1;
                    self.fetching.remove(&it.id);
                    self.peer(from).held += 1;
                }
                let m = self.repl.get_or_insert_with(it.id, || ReplicaMeta::new(now));
                m.history.push(it.version, object, hist);
                m.adopted = false;
            }
            Err(_) => self.stats.refused_updates += 1,
        }
        true
    }

    /// Asks the node this node binds the unheld `id` to about it ([`ReplicaMsg::Probe`],
    /// at most once per fetch back-off, 500 ms; not if held here), e.g. when another node serves
    /// `id` and its states are refused here. If the bound node holds it, its state comes
    /// back and this node follows it; if not, it says so ([`ReplicaMsg::NotPrimary`]) and
    /// this node follows the serving node instead.
    pub fn probe_binding(&mut self, now: Time, id: ObjectId) {
        let named = self.names.resolve(id).binding(self.me);
        if named.node == self.me
            || self.store.get(id).is_some()
            || self.peers.binary_search(&named.node).is_err()
            || self
                .fetching
                .get(&id)
                .is_some_and(|(t, _)| now - *t < FETCH_BACKOFF)
        {
            return;
        }
        self.send_probe(now, id, named.node);
    }

    /// The replica `id` follows `followed`, a live member, and refused a state of it from
    /// `serving`: asks `followed` whether it holds the object (at most once per fetch
    /// back-off). If it does, its state comes back and nothing changes; if it does not, it
    /// answers [`ReplicaMsg::NotPrimary`] and the replica follows `serving`
    /// (`follow_serving`).
    ///
    /// A replica can follow a member without the object when the binding it fell back on
    /// is stale: the real-process crash trials (`crates/server/tests/crash_trials.rs`) had
    /// a restarted node fetch the ledger from its primary without learning the primary's
    /// binding, rebind the replica to the object's origin when that primary failed
    /// (`member_down`), and then refuse every state of the ledger's next primary — the
    /// primary's own restarted process, which recovered it from its store under the same
    /// binding and so sent no notice. Chosen as that primary's backup, it never
    /// acknowledged, and no write was acknowledged for 28 s.
    fn probe_followed(&mut self, now: Time, id: ObjectId, followed: NodeId, serving: NodeId) {
        if self.peers.binary_search(&followed).is_err()
            || self
                .fetching
                .get(&id)
                .is_some_and(|(t, _)| now - *t < FETCH_BACKOFF)
        {
            return;
        }
        if self.refused_followed.len() >= MAX_REFUSED_UNHELD {
            self.refused_followed.clear();
        }
        self.refused_followed.insert(id, serving);
        self.send_probe(now, id, followed);
    }

    /// `followed`, the node the replica `id` follows, does not hold the object: the
    /// replica follows the node whose state it refused last, if that is a live member,
    /// starting from a full state; this node's pending writes to `id` go there. Returns
    /// true if a fetch should go out at once.
    fn follow_serving(&mut self, now: Time, followed: NodeId, id: ObjectId) -> bool {
        let Some(serving) = self.refused_followed.remove(&id) else {
            return false;
        };
        if serving == followed || serving == self.me || self.peers.binary_search(&serving).is_err() {
            return false;
        }
        self.stats.stale_bindings += 1;
        if !self.rebind_replica(id, serving) {
            return false;
        }
        // The serving node's versions need not continue the ones held here.
        if let Some(m) = self.repl.get_mut(&id) {
            m.adopted = true;
        }
        self.fetch_full_state(now, id, serving);
        self.send_pending_to(now, id);
        true
    }

    /// Asks `from` for a full state of `id` (a counted fetch, remembered for the back-off).
    fn fetch_full_state(&mut self, now: Time, id: ObjectId, from: NodeId) {
        self.fetching.insert(id, (now, from));
        self.stats.fetches_sent += 1;
        self.peer(from).interest.push(InterestItem { id, have: 0 });
    }

    /// Broadcast mode: fetches and probes of objects not held here that the node they are
    /// bound to has not answered within the back-off are asked again, as probes (answered
    /// with the state, or with [`ReplicaMsg::NotPrimary`], which ends the asking). A fetch
    /// is one message, and a primary counts a state as delivered once its packet is
    /// acknowledged: a rival that gave its copy up, having acknowledged (and refused) the
    /// winner's state while it held the copy, asked the winner once; when that fetch was
    /// lost, an object that no longer changed was never sent to it again (fault swarm,
    /// `--faults all` seed 781, 10 % loss). Interest mode asks again through its
    /// subscriptions' refreshes.
    fn ask_again(&mut self, now: Time) {
        let due: Vec<(ObjectId, NodeId)> = self
            .fetching
            .iter()
            .filter(|(id, (t, _))| now - *t >= FETCH_BACKOFF && self.store.get(**id).is_none())
            .map(|(id, (_, n))| (*id, *n))
            .collect();
        for (id, asked) in due {
            if self.names.resolve(id).binding(self.me).node == asked
                && self.binding_is_live(id)
                && !self.tombstones.contains(now, id)
            {
                self.send_probe(now, id, asked);
            }
        }
    }

    /// Asks `to` whether it holds `id` ([`ReplicaMsg::Probe`]; a counted fetch, remembered
    /// for the back-off).
    fn send_probe(&mut self, now: Time, id: ObjectId, to: NodeId) {
        self.fetching.insert(id, (now, to));
        self.stats.fetches_sent += 1;
        let p = self.peer(to);
        if p.probes.len() < MAX_NOT_PRIMARY {
            p.probes.push(id);
        }
    }

    /// Packets to send at the end of a frame: everything queued for every peer, plus a
    /// keepalive to each node this node serves that has heard nothing for `keepalive`, so it
    /// can tell this node is alive.
    pub fn flush(&mut self, now: Time) -> Vec<(NodeId, Packet)> {
        // Every peer a primary serves is due a keepalive once `ka` passed since its last
        // packet. Marking a known peer twice is marking it once, so the known ones are
        // marked as met; only the unknown ones (their state is created here) are sorted
        // first, so states are created in id order. Sorting every (primary, receiver)
        // pair, as this did, cost 1.5 % of a 512-node run (`crates/sim/PERFORMANCE.md`,
        // ninth round).
        let ka = self.cfg.keepalive;
        let due = |p: &PeerState| p.last_sent.is_none_or(|t| now - t >= ka);
        let mut unknown: Vec<NodeId> = Vec::new();
        for s in self
            .prim
            .values()
            .flat_map(|m| m.receivers.keys().chain(m.subscribers.keys()))
        {
            match self.net.get(s) {
                // Read, and written (which marks it) only when it changes.
                Some(p) => {
                    if !p.keepalive
                        && due(p)
                        && let Some(p) = self.net.get_mut(s)
                    {
                        p.keepalive = true;
                    }
                }
                None => unknown.push(*s),
            }
        }
        unknown.sort_unstable();
        unknown.dedup();
        for s in unknown {
            // A new state has sent nothing yet: it is due.
            self.peer(s).keepalive = true;
        }
        // The peers with something to send, by ascending id. Only a peer handed out
        // mutably since the last flush can have gained something (`NodeMap::take_marked`),
        // and one left with something unsent is marked again below: the peers a node
        // once heard from and no longer hears are not walked at every frame (that walk
        // grew with the game's duration: `crates/sim/PERFORMANCE.md`, ninth round).
        let ack_every = self.cfg.ack_interval;
        let mut candidates = Vec::new();
        self.net.take_marked(&mut candidates);
        let mut dsts: Vec<NodeId> = Vec::with_capacity(candidates.len());
        let mut waiting: Vec<NodeId> = Vec::new();
        for d in candidates {
            let Some(p) = self.net.get(&d) else { continue };
            if p.has_payload() || (!p.to_ack.is_empty() && p.last_ack.is_none_or(|t| now - t >= ack_every)) {
                dsts.push(d);
            } else if p.has_content() {
                waiting.push(d);
            }
        }
        for d in waiting {
            self.net.mark_again(d);
        }
        let mut out = Vec::new();
        for d in dsts {
            self.packets_for(now, d, |p| out.push((d, p)));
        }
        out
    }

    /// Packets to send to `dst` now (between frames: a fetch or its answer), with everything
    /// queued for it, so the rest of the traffic keeps its per-frame batching.
    pub fn flush_peer(&mut self, now: Time, dst: NodeId) -> Vec<Packet> {
        let mut out = Vec::new();
        self.packets_for(now, dst, |p| out.push(p));
        out
    }

    /// Hands `emit` the packets to send to `dst` now, in order (one, unless the queued
    /// updates do not fit in `max_payload`).
    fn packets_for(&mut self, now: Time, dst: NodeId, mut emit: impl FnMut(Packet)) {
        let max = self.cfg.max_payload;
        let Some(p) = self.net.get_mut(&dst) else {
            return;
        };
        if !p.has_content() {
            return;
        }
        p.keepalive = false;
        let mut head: Vec<ReplicaMsg> = Vec::new();
        if !p.to_ack.is_empty() {
            head.push(ReplicaMsg::Ack(std::mem::take(&mut p.to_ack)));
            p.last_ack = Some(now);
        }
        if !p.interest.is_empty() {
            head.push(ReplicaMsg::Interest(std::mem::take(&mut p.interest)));
        }
        if !p.unsubscribe.is_empty() {
            head.push(ReplicaMsg::Unsubscribe(std::mem::take(&mut p.unsubscribe)));
        }
        if !p.writes.is_empty() {
            head.push(ReplicaMsg::Write(std::mem::take(&mut p.writes)));
        }
        let deleted = p.take_deletions(now);
        if !p.unacked_deleted.is_empty() {
            self.deleting.insert(dst);
        }
        if !deleted.is_empty() {
            head.push(ReplicaMsg::Deleted(deleted.clone()));
        }
        if !p.write_acks.is_empty() {
            head.push(ReplicaMsg::WriteAck(std::mem::take(&mut p.write_acks)));
        }
        if !p.not_primary.is_empty() {
            head.push(ReplicaMsg::NotPrimary(std::mem::take(&mut p.not_primary)));
        }
        if !p.probes.is_empty() {
            head.push(ReplicaMsg::Probe(std::mem::take(&mut p.probes)));
        }
        let mut logs = std::mem::take(&mut p.logs);
        let mut updates = std::mem::take(&mut p.updates);
        // Split updates into packets of at most `max` bytes (estimated conservatively): find
        // where each packet after the first starts, then split (usually there is one packet,
        // which takes the queue as it is).
        let mut starts: Vec<usize> = Vec::new();
        let (mut first, mut size) = (0, 64usize);
        for (i, u) in updates.iter().enumerate() {
            let s = u.data.len() + 24;
            if i > first && size + s > max {
                starts.push(i);
                (first, size) = (i, 64);
            }
            size += s;
        }
        let chunk_count = starts.len() + 1;
        let mut taken = 0;
        for k in 0..chunk_count {
            let chunk: Vec<UpdateItem> = match starts.get(k) {
                // The items up to where the next packet starts.
                Some(&next) => updates.drain(..next - taken).collect(),
                None => std::mem::take(&mut updates),
            };
            taken += chunk.len();
            p.next_seq = p.next_seq.wrapping_add(1).max(1);
            let seq = p.next_seq;
            let carried: Vec<(ObjectId, u64)> = chunk.iter().map(|u| (u.id, u.version)).collect();
            let deleted_here = if k == 0 { deleted.clone() } else { Vec::new() };
            if !carried.is_empty() || !deleted_here.is_empty() {
                if p.sent_log.is_empty() {
                    p.sent_unsorted = false;
                } else if p.sent_log.back().is_some_and(|b| b.seq >= seq) {
                    p.sent_unsorted = true;
                }
                p.sent_log.push_back(SentPacket {
                    seq,
                    updates: carried,
                    logs: Vec::new(),
                    deleted: deleted_here,
                });
                while p.sent_log.len() > SENT_LOG {
                    p.sent_log.pop_front();
                }
            }
            let mut msgs = if k == 0 {
                std::mem::take(&mut head)
            } else {
                Vec::new()
            };
            // A log rides in the packet of its object's update, after it (the receiver takes
            // a log only beside the state it belongs to): acknowledging that packet
            // confirms both (see `backup`).
            let here: Vec<LogItem> = if logs.is_empty() {
                Vec::new()
            } else {
                let (here, rest): (Vec<LogItem>, Vec<LogItem>) = logs
                    .into_iter()
                    .partition(|l| chunk.iter().any(|u| u.id == l.id) || k + 1 == chunk_count);
                logs = rest;
                here
            };
            if let Some(sp) = p.sent_log.back_mut()
                && sp.seq == seq
            {
                sp.logs.extend(here.iter().map(|l| l.id));
            }
            if !chunk.is_empty() {
                msgs.push(ReplicaMsg::Update(chunk));
            }
            if !here.is_empty() {
                msgs.push(ReplicaMsg::Logs(here));
            }
            match msgs.as_slice() {
                [] => self.stats.keepalive_packets += 1,
                [ReplicaMsg::Ack(_)] => self.stats.ack_only_packets += 1,
                _ => {}
            }
            emit(Packet {
                seq,
                sent_at: now,
                msgs,
            });
        }
        p.last_sent = Some(now);
    }
}

/// The update bringing a receiver that acknowledged `acked` to `version`. The state sent
/// is always the snapshot taken when `version` was assigned (from `history`), never the
/// live object: writes forwarded to the primary between frames change the live object
/// and only become visible under the next version.
fn make_update<O: GameObject>(id: ObjectId, version: u64, acked: u64, history: &History<O>) -> UpdateItem {
    // Room for a typical state or delta, so encoding does not grow the buffer.
    let mut data = Vec::with_capacity(32);
    let Some(current) = history.get_newest(version) else {
        // Unreachable by construction (the newest version is always in the history);
        // an empty full state would be refused by the receiver's decoder.
        return UpdateItem {
            id,
            version,
            base: 0,
            data,
            logged: false,
        };
    };
    let base = if acked != 0 { history.get(acked) } else { None };
    match base {
        Some(obj) => {
            current.encode_delta(obj, &mut data);
            UpdateItem {
                id,
                version,
                base: acked,
                data,
                logged: false,
            }
        }
        None => {
            current.encode_state(&mut data);
            UpdateItem {
                id,
                version,
                base: 0,
                data,
                logged: false,
            }
        }
    }
}

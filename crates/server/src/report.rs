//! What a node process prints for its launcher (`worldmesh cluster`, tests): one line per
//! milestone on standard output, each a prefix and a JSON object, and the final report.
//!
//! - `WORLDMESH-READY {node, addr, generation, members}`: bound and joined; with
//!   `--wait-start` the node then waits for a `start` line on standard input;
//! - `WORLDMESH-STARTED {node, unix_ms, primaries}`: the run started (founders spawned
//!   their initial objects, listed);
//! - `WORLDMESH-EVENT {unix_ms, event, …}`: with `--events-json`, membership, adoption,
//!   drain and refusal events, stamped with wall time;
//! - `WORLDMESH-SUMMARY {…}`: the [`NodeReport`], at the end.

use serde::{Deserialize, Serialize};
use worldmesh_core::{NodeId, ObjectId};
use worldmesh_net::transport::TransportStats;
use worldmesh_net::{DriverStats, EventKind, NodeEvent};
use worldmesh_node::{Event, NodeSummary};

/// Prefix of the final report line.
pub const SUMMARY_PREFIX: &str = "WORLDMESH-SUMMARY ";
/// Prefix of the ready line.
pub const READY_PREFIX: &str = "WORLDMESH-READY ";
/// Prefix of the started line.
pub const STARTED_PREFIX: &str = "WORLDMESH-STARTED ";
/// Prefix of an event line.
pub const EVENT_PREFIX: &str = "WORLDMESH-EVENT ";

/// The ready line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ready {
    /// Node id.
    pub node: NodeId,
    /// The address the others dial.
    pub addr: std::net::SocketAddr,
    /// This process's generation.
    pub generation: u32,
    /// Live members it knows (itself included).
    pub members: usize,
    /// The player port's address, if the node admits players.
    #[serde(default)]
    pub players: Option<std::net::SocketAddr>,
    /// The metrics endpoint's address (`http://ADDR/metrics`), if metrics are on.
    #[serde(default)]
    pub metrics: Option<std::net::SocketAddr>,
}

/// The started line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Started {
    /// Node id.
    pub node: NodeId,
    /// When, UNIX ms.
    pub unix_ms: u64,
    /// The initial objects it spawned.
    pub primaries: Vec<ObjectId>,
    /// The objects it recovered from its store (`--data-dir` holding a previous run; it
    /// then spawns nothing).
    #[serde(default)]
    pub recovered: Vec<ObjectId>,
}

/// Everything a node process reports at the end: the node's summary (the same figures the
/// simulator reports) plus the transport's and the process's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node's summary over the run (from the start barrier to the end).
    #[serde(flatten)]
    pub node: NodeSummary,
    /// `quic` or `udp-insecure`.
    pub transport_kind: String,
    /// The transport's counters: application bytes by class, real wire bytes, refusals by
    /// reason, unknown senders.
    pub transport: TransportStats,
    /// Connections the transport refused, by reason (every reason, zeros included).
    pub transport_refusals: std::collections::BTreeMap<String, u64>,
    /// Datagrams the node refused, by reason (every reason, zeros included).
    pub node_rejections: std::collections::BTreeMap<String, u64>,
    /// Datagrams from unknown senders: from an address outside the transport's book
    /// (UDP baseline; QUIC drops unauthenticated packets before they are datagrams) and
    /// from authenticated non-members (refused by the node).
    pub unknown_senders: UnknownSenders,
    /// Wire bytes sent − application bytes sent (QUIC headers, acks, handshakes,
    /// keep-alives; hellos for the UDP baseline).
    pub transport_overhead_bytes: i64,
    /// The driver's counters.
    pub driver: DriverStats,
    /// Primaries held at the end, ascending.
    pub primary_ids: Vec<ObjectId>,
    /// Live members other than this node at the end, ascending.
    pub members: Vec<NodeId>,
    /// This process's generation.
    pub generation: u32,
    /// When the run started (the start barrier), UNIX ms.
    pub started_unix_ms: u64,
    /// When it ended, UNIX ms.
    pub ended_unix_ms: u64,
    /// CPU time of the process over the run, seconds (Linux; 0 elsewhere).
    pub cpu_seconds: f64,
    /// How it ended: `stopped`, `drained`, `handle_dropped`.
    pub stop: String,
    /// Primaries left behind by a drain.
    pub left_behind: usize,
    /// Frame durations: time in each frame and how late it started (quantiles over the
    /// last frames, the same figures `worldmesh_frame_*` metrics expose).
    #[serde(default)]
    pub frame_time: worldmesh_net::metrics::FrameTimeSummary,
    /// Players: sessions and the player port, if the node admitted players.
    #[serde(default)]
    pub players: Option<PlayersReport>,
    /// Persistence, if the node had a store (`--data-dir`).
    #[serde(default)]
    pub persist: Option<PersistReport>,
    /// The membership profile the node ran (`lan` or `wan`) and why, e.g. `wan (none
    /// named; emulated round trips up to 420 ms)`.
    #[serde(default)]
    pub membership_profile: String,
}

/// What a node persisted over the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PersistReport {
    /// The node's counters: batches, objects written and deleted, durable writes logged,
    /// checkpoints, what it recovered at start.
    pub node: worldmesh_node::PersistStats,
    /// How the store kept up: batches applied, apply time quantiles (fsync included).
    pub store: worldmesh_net::PersistTimes,
}

/// A node's players over the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlayersReport {
    /// The session table's counters (connects, refusals and disconnects by reason,
    /// inputs applied, views sent).
    pub sessions: worldmesh_node::sessions::SessionStats,
    /// The player port's counters.
    pub port: worldmesh_net::players::PlayerPortStats,
    /// The assignment agent's counters (joins, leaves and moves as coordinator, checks
    /// against a from-scratch solve, mismatches), if the node took part.
    #[serde(default)]
    pub assignment: Option<worldmesh_node::assignment::AssignmentStats>,
}

/// Datagrams from senders that are not members, at both layers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct UnknownSenders {
    /// At the transport (an address outside the address book).
    pub transport: u64,
    /// At the node (an authenticated peer that is not a live member).
    pub not_member: u64,
}

impl NodeReport {
    /// The labelled refusal maps and unknown-sender counts from the counters.
    pub fn labels(
        t: &TransportStats,
        r: &worldmesh_node::Rejections,
    ) -> (
        std::collections::BTreeMap<String, u64>,
        std::collections::BTreeMap<String, u64>,
        UnknownSenders,
    ) {
        let tr = t
            .refusals_named()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let nr = r.labelled().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let u = UnknownSenders {
            transport: t.unknown_sender,
            not_member: r.not_member,
        };
        (tr, nr, u)
    }
}

/// CPU time this process has used so far, in seconds: the sum over its threads of
/// `/proc/self/task/*/schedstat` (time on CPU, ns). `None` where /proc is unavailable.
pub fn cpu_seconds() -> Option<f64> {
    let mut ns: u64 = 0;
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        ns += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e9)
}

/// The JSON form of the events worth a line (`None` for the frequent ones: object
/// creations, replica drops, migrations, datagram rejections).
pub fn event_json(e: &NodeEvent) -> Option<serde_json::Value> {
    use serde_json::json;
    let t = e.unix_ms;
    let v = match &e.kind {
        EventKind::Node(Event::MemberUp(m)) => {
            json!({"unix_ms": t, "event": "member_up", "member": m.node, "generation": m.generation, "addr": m.addr})
        }
        EventKind::Node(Event::MemberDown(m, why)) => {
            json!({"unix_ms": t, "event": "member_down", "member": m.node, "generation": m.generation, "cause": why.as_str()})
        }
        EventKind::Node(Event::Joined) => json!({"unix_ms": t, "event": "joined"}),
        EventKind::Node(Event::Rejoined(m)) => {
            json!({"unix_ms": t, "event": "rejoined", "generation": m.generation})
        }
        EventKind::Node(Event::Adopted {
            id,
            dead,
            epoch,
            version,
        }) => {
            json!({"unix_ms": t, "event": "adopted", "id": id, "dead": dead, "epoch": epoch, "version": version})
        }
        EventKind::Node(Event::OrphanDropped { id, dead }) => {
            json!({"unix_ms": t, "event": "orphan_dropped", "id": id, "dead": dead})
        }
        EventKind::Node(Event::Drained { left_behind }) => {
            json!({"unix_ms": t, "event": "drained", "left_behind": left_behind})
        }
        EventKind::SeedsReached(seeds) => {
            json!({"unix_ms": t, "event": "seeds_reached", "seeds": seeds.iter().map(|s| s.node).collect::<Vec<_>>()})
        }
        EventKind::PeerUp { node, generation, .. } => {
            json!({"unix_ms": t, "event": "peer_up", "peer": node, "generation": generation})
        }
        EventKind::PeerLost {
            node,
            generation,
            reason,
        } => {
            json!({"unix_ms": t, "event": "peer_lost", "peer": node, "generation": generation, "reason": reason})
        }
        EventKind::Refused {
            addr,
            node,
            reason,
            detail,
        } => {
            json!({"unix_ms": t, "event": "refused", "addr": addr, "claimed": node, "reason": reason.name(), "detail": detail})
        }
        EventKind::Node(_) => return None,
    };
    Some(v)
}

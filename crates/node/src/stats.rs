//! Per-node statistics and their summaries (BRIEF §4 metrics).
//!
//! Both drivers report the same [`NodeSummary`]: the simulator for every node it runs, a
//! real node process on exit. [`RunSummary`] aggregates them into the figures the CLI
//! prints: per-node outbound bandwidth (mean and the 95th percentile of 1-second bursts,
//! as in paper `000` §6.3), aggregate bandwidth, objects per node and messages by class.

use serde::{Deserialize, Serialize};
use worldmesh_core::traffic::Count;
use worldmesh_core::{MessageClass, NodeId, Time, TrafficCounters};

/// Why the node refused a datagram (typed, counted apart: [`Rejections`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rejection {
    /// The frame header did not parse (magic, protocol version, class, length).
    BadFrame(FrameFault),
    /// The sender is not a live member.
    NotMember,
    /// No subsystem here handles this class (e.g. locator traffic without a locator).
    NoHandler(MessageClass),
    /// The payload did not decode as its class's message.
    BadPayload(MessageClass),
    /// The message decoded but its protocol refused it (instance failover, membership).
    Refused(MessageClass),
    /// A membership message named another member as its sender.
    Impersonation,
    /// This node could not encode a message it meant to send (too large).
    Encode(MessageClass),
}

/// What was wrong with a frame header (a copy of [`worldmesh_core::WireError`]'s header
/// cases, small enough to count per datagram without allocating).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameFault {
    /// Fewer bytes than a header.
    Truncated,
    /// Not a worldmesh datagram.
    BadMagic,
    /// A protocol version this build does not speak.
    UnsupportedVersion(u8),
    /// An unknown message class.
    UnknownClass(u8),
    /// The declared length is over the limit or does not match the bytes present.
    BadLength,
}

impl From<&worldmesh_core::WireError> for FrameFault {
    fn from(e: &worldmesh_core::WireError) -> Self {
        use worldmesh_core::WireError as W;
        match e {
            W::TruncatedHeader { .. } => Self::Truncated,
            W::BadMagic(_) => Self::BadMagic,
            W::UnsupportedVersion { got } => Self::UnsupportedVersion(*got),
            W::UnknownClass(c) => Self::UnknownClass(*c),
            _ => Self::BadLength,
        }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::BadFrame(FrameFault::Truncated) => f.write_str("truncated datagram"),
            Rejection::BadFrame(FrameFault::BadMagic) => f.write_str("not a worldmesh datagram"),
            Rejection::BadFrame(FrameFault::UnsupportedVersion(v)) => write!(
                f,
                "unsupported protocol version {v} (this build speaks {})",
                worldmesh_core::wire::PROTOCOL_VERSION
            ),
            Rejection::BadFrame(FrameFault::UnknownClass(c)) => write!(f, "unknown message class {c}"),
            Rejection::BadFrame(FrameFault::BadLength) => f.write_str("bad declared length"),
            Rejection::NotMember => f.write_str("sender is not a member"),
            Rejection::NoHandler(c) => write!(f, "no handler here for {c} datagrams"),
            Rejection::BadPayload(c) => write!(f, "malformed {c} payload"),
            Rejection::Refused(c) => write!(f, "{c} message refused by its protocol"),
            Rejection::Impersonation => f.write_str("membership message names another sender"),
            Rejection::Encode(c) => write!(f, "could not encode a {c} message"),
        }
    }
}

/// Refused datagrams by reason. Serialized only when something was refused, so reports of
/// runs without refusals keep their shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejections {
    /// Header did not parse.
    pub bad_frame: u64,
    /// Sender not a live member.
    pub not_member: u64,
    /// No handler for the class.
    pub no_handler: u64,
    /// Payload did not decode.
    pub bad_payload: u64,
    /// Refused by the class's protocol.
    pub refused: u64,
    /// A membership message claimed another sender.
    pub impersonation: u64,
    /// Messages this node could not encode.
    pub encode: u64,
}

impl Rejections {
    /// Counts one refusal.
    pub fn count(&mut self, r: Rejection) {
        let c = match r {
            Rejection::BadFrame(_) => &mut self.bad_frame,
            Rejection::NotMember => &mut self.not_member,
            Rejection::NoHandler(_) => &mut self.no_handler,
            Rejection::BadPayload(_) => &mut self.bad_payload,
            Rejection::Refused(_) => &mut self.refused,
            Rejection::Impersonation => &mut self.impersonation,
            Rejection::Encode(_) => &mut self.encode,
        };
        *c += 1;
    }

    /// Refusals of every reason.
    pub fn total(&self) -> u64 {
        self.bad_frame
            + self.not_member
            + self.no_handler
            + self.bad_payload
            + self.refused
            + self.impersonation
            + self.encode
    }

    /// Adds another node's counts.
    pub fn merge(&mut self, o: &Rejections) {
        self.bad_frame += o.bad_frame;
        self.not_member += o.not_member;
        self.no_handler += o.no_handler;
        self.bad_payload += o.bad_payload;
        self.refused += o.refused;
        self.impersonation += o.impersonation;
        self.encode += o.encode;
    }

    /// True if nothing was refused.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// `(reason, count)` pairs for tables and metrics labels.
    pub fn labelled(&self) -> [(&'static str, u64); 7] {
        [
            ("bad_frame", self.bad_frame),
            ("not_member", self.not_member),
            ("no_handler", self.no_handler),
            ("bad_payload", self.bad_payload),
            ("refused", self.refused),
            ("impersonation", self.impersonation),
            ("encode", self.encode),
        ]
    }
}

/// Membership and adoption figures of a node with dynamic membership.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterSummary {
    /// Live members seen at the end (this node included).
    pub members: usize,
    /// This node's generation.
    pub generation: u32,
    /// Members that joined (up events) during the run.
    pub members_up: u64,
    /// Members declared down or gone during the run (not those a fresh start of this
    /// node forgot: `Departure::Forgotten`).
    pub members_down: u64,
    /// Of `members_down`, those that left gracefully (their leave notice arrived): the
    /// rest failed.
    #[serde(default)]
    pub members_left: u64,
    /// This node's local health score (0 = healthy, up to 8): how far it distrusts its
    /// own failure verdicts, raised while its probes fail on members it still hears
    /// ([`crate::membership::Membership::local_health`]).
    #[serde(default)]
    pub local_health: u32,
    /// Suspicions this node raised because a member it heard every frame fell silent
    /// ([`crate::membership::Membership::silent_suspicions`]).
    #[serde(default)]
    pub silent_suspicions: u64,
    /// Down verdicts from gossip about members this node still heard, read as
    /// suspicions ([`crate::membership::Membership::downgraded_verdicts`]).
    #[serde(default)]
    pub downgraded_verdicts: u64,
    /// Adoption counters.
    pub adoption: crate::adoption::AdoptionStats,
    /// Regions moved away by a drain.
    pub drained_regions: u64,
}

/// Counters a node keeps while it runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStats {
    /// When the node started; 1-second windows count from here.
    pub origin: Time,
    /// Bytes and packets by class and direction.
    pub traffic: TrafficCounters,
    /// Outbound bytes (wire, all classes) in each 1-second window since time zero.
    pub sent_per_second: Vec<u64>,
    /// Datagrams dropped because they did not parse (bad header or payload).
    pub malformed: u64,
    /// Refused datagrams by reason (those that did not parse are also in `malformed`).
    pub rejections: Rejections,
    /// Frames run.
    pub frames: u64,
    /// Object update items sent (full states and deltas).
    pub update_items: u64,
    /// Wire bytes of the datagrams that carried update items.
    pub update_packet_bytes: u64,
    /// Datagrams that carried update items.
    pub update_packet_count: u64,
    /// Encoded bytes of the update messages alone (item headers + state/delta data,
    /// without packet, frame, UDP or IP headers), over a deterministic sample of one
    /// update-carrying packet in eight.
    pub update_msg_bytes_sampled: u64,
    /// Update items in the sampled packets.
    pub update_items_sampled: u64,
}

impl NodeStats {
    /// Records a sent datagram at time `now`.
    pub fn on_send(&mut self, now: Time, class: MessageClass, payload_len: usize) {
        self.traffic.on_send(class, payload_len);
        let sec = (now - self.origin).as_secs() as usize;
        // Bounded: one slot per second of run time.
        if self.sent_per_second.len() <= sec {
            self.sent_per_second.resize(sec + 1, 0);
        }
        self.sent_per_second[sec] += payload_len as u64 + worldmesh_core::traffic::UDP_IPV4_OVERHEAD;
    }
}

/// What one node reports at the end of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// The node.
    pub node: NodeId,
    /// Mean outbound bandwidth over the run, kbit/s.
    pub out_kbps_mean: f64,
    /// 95th percentile of outbound bandwidth over 1-second windows, kbit/s.
    pub out_kbps_p95: f64,
    /// Mean inbound bandwidth, kbit/s.
    pub in_kbps_mean: f64,
    /// Primaries held at the end.
    pub primaries: usize,
    /// Replicas held at the end.
    pub replicas: usize,
    /// Mean age at the end (now − primary's send time) of replicas updated in the last
    /// second, ms.
    pub staleness_mean_ms: f64,
    /// Largest replica age at the end, ms.
    pub staleness_max_ms: f64,
    /// Sent bytes/packets by class (index = `MessageClass as usize`).
    pub sent: [Count; 6],
    /// Received bytes/packets by class.
    pub received: [Count; 6],
    /// Datagrams dropped as malformed.
    pub malformed: u64,
    /// Object states refused.
    pub rejected_states: u64,
    /// Wire bytes per object update, headers of the datagrams that carried them included.
    pub bytes_per_update: f64,
    /// The replica manager's counters.
    pub replica: worldmesh_replica::ReplicaStats,
    /// Refused datagrams by reason (absent when none were refused).
    #[serde(default, skip_serializing_if = "Rejections::is_empty")]
    pub rejections: Rejections,
    /// Membership and adoption (absent for a node with a fixed member list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterSummary>,
}

/// p-th percentile (0..=100) of `values` by nearest rank; 0 for an empty slice.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

impl NodeSummary {
    /// Summarizes `stats` over the window `[from_s, to_s)` seconds of the node's run
    /// (1-second windows count from the node's start). Replica ages are given by the
    /// caller (they need the store and the clock).
    pub fn new(
        node: NodeId,
        stats: &NodeStats,
        window: (f64, f64),
        primaries: usize,
        replicas: usize,
        replica_ages_ms: &[f64],
    ) -> Self {
        let (from_s, to_s) = window;
        let first = from_s.max(0.0).floor() as usize;
        // Only whole seconds inside the window count as 1-s windows.
        let last = (to_s.floor() as usize).max(first + 1);
        let bursts: Vec<f64> = (first..last)
            .map(|s| stats.sent_per_second.get(s).copied().unwrap_or(0) as f64 * 8.0 / 1000.0)
            .collect();
        let out_mean = bursts.iter().sum::<f64>() / bursts.len().max(1) as f64;
        let secs = (to_s - from_s).max(1e-9);
        let kbps = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / secs;
        let n = replica_ages_ms.len();
        Self {
            node,
            out_kbps_mean: out_mean,
            out_kbps_p95: percentile(&bursts, 95.0),
            // Received bytes are not bucketed per second: mean over the whole run.
            in_kbps_mean: kbps(stats.traffic.total_received().bytes) * secs / to_s.max(1e-9),
            primaries,
            replicas,
            staleness_mean_ms: if n == 0 {
                0.0
            } else {
                replica_ages_ms.iter().sum::<f64>() / n as f64
            },
            staleness_max_ms: replica_ages_ms.iter().copied().fold(0.0, f64::max),
            sent: stats.traffic.sent,
            received: stats.traffic.received,
            malformed: stats.malformed,
            rejected_states: 0,
            bytes_per_update: if stats.update_items == 0 {
                0.0
            } else {
                stats.update_packet_bytes as f64 / stats.update_items as f64
            },
            replica: worldmesh_replica::ReplicaStats::default(),
            rejections: stats.rejections.clone(),
            cluster: None,
        }
    }
}

/// Aggregate figures of a run over all nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Number of nodes.
    pub nodes: usize,
    /// Mean over nodes of per-node mean outbound kbit/s.
    pub out_kbps_mean: f64,
    /// Mean over nodes of per-node p95 1-second outbound kbit/s.
    pub out_kbps_p95_mean: f64,
    /// Largest per-node p95 1-second outbound kbit/s.
    pub out_kbps_p95_max: f64,
    /// Sum over nodes of mean outbound kbit/s.
    pub aggregate_kbps: f64,
    /// Mean objects (primaries + replicas) held per node.
    pub objects_per_node: f64,
    /// Mean replica staleness over nodes, ms.
    pub staleness_mean_ms: f64,
    /// Largest replica staleness, ms.
    pub staleness_max_ms: f64,
    /// Sent packets and bytes by class, summed over nodes, in `MessageClass::ALL` order.
    pub sent_by_class: Vec<(String, Count)>,
    /// Malformed datagrams dropped, summed over nodes.
    pub malformed: u64,
    /// Object states refused, summed over nodes.
    pub rejected_states: u64,
    /// Refused datagrams by reason, summed over nodes (absent when none).
    #[serde(default, skip_serializing_if = "Rejections::is_empty")]
    pub rejections: Rejections,
}

impl RunSummary {
    /// Aggregates node summaries.
    pub fn from_nodes(nodes: &[NodeSummary]) -> Self {
        let n = nodes.len().max(1) as f64;
        let mean = |f: &dyn Fn(&NodeSummary) -> f64| nodes.iter().map(f).sum::<f64>() / n;
        let mut by_class = [Count::default(); 6];
        for s in nodes {
            for (i, c) in s.sent.iter().enumerate() {
                by_class[i].merge(*c);
            }
        }
        Self {
            nodes: nodes.len(),
            out_kbps_mean: mean(&|s| s.out_kbps_mean),
            out_kbps_p95_mean: mean(&|s| s.out_kbps_p95),
            out_kbps_p95_max: nodes.iter().map(|s| s.out_kbps_p95).fold(0.0, f64::max),
            aggregate_kbps: nodes.iter().map(|s| s.out_kbps_mean).sum(),
            objects_per_node: mean(&|s| (s.primaries + s.replicas) as f64),
            staleness_mean_ms: mean(&|s| s.staleness_mean_ms),
            staleness_max_ms: nodes.iter().map(|s| s.staleness_max_ms).fold(0.0, f64::max),
            sent_by_class: MessageClass::ALL
                .iter()
                .map(|c| (c.name().to_owned(), by_class[*c as usize]))
                .collect(),
            malformed: nodes.iter().map(|s| s.malformed).sum(),
            rejected_states: nodes.iter().map(|s| s.rejected_states).sum(),
            rejections: nodes.iter().fold(Rejections::default(), |mut a, s| {
                a.merge(&s.rejections);
                a
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 95.0), 95.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn summary_computes_bursts_and_means() {
        let mut s = NodeStats::default();
        // 2 s run: 972 payload bytes in second 0 (1000 on the wire), 4972 in second 1.
        s.on_send(Time::from_millis(10), MessageClass::ObjectUpdate, 972);
        s.on_send(Time::from_millis(1500), MessageClass::Control, 4972);
        let sum = NodeSummary::new(NodeId(3), &s, (0.0, 2.0), 8, 2, &[10.0, 30.0]);
        assert_eq!(sum.out_kbps_mean, 6000.0 * 8.0 / 1000.0 / 2.0);
        assert_eq!(sum.out_kbps_p95, 40.0);
        assert_eq!(sum.staleness_mean_ms, 20.0);
        assert_eq!(sum.staleness_max_ms, 30.0);
        let run = RunSummary::from_nodes(&[sum.clone(), sum]);
        assert_eq!(run.aggregate_kbps, 48.0);
        assert_eq!(run.objects_per_node, 10.0);
        assert_eq!(run.sent_by_class[0].1.packets, 2);
    }
}

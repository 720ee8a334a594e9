//! What a simulation run produces.

use serde::{Deserialize, Serialize};
use worldmesh_node::{NodeSummary, RunSummary};

use crate::config::SimConfig;
use crate::metrics::MetricsReport;
use crate::network::NetworkStats;

/// The result of a run: configuration, aggregate and per-node figures, network counters.
/// Contains no wall-clock figure, so two runs with the same seed produce byte-identical
/// JSON (the determinism test compares exactly that).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    /// The configuration that ran.
    pub config: SimConfig,
    /// Simulated seconds.
    pub sim_seconds: f64,
    /// Aggregate figures.
    pub summary: RunSummary,
    /// Fraction of (node, remote primary) pairs for which the node holds a replica at the
    /// end. 1.0 means every node sees every other node's objects (broadcast's promise).
    pub coverage: f64,
    /// Consistency metrics and baselines (after warm-up).
    pub metrics: MetricsReport,
    /// Wire bytes per object update (datagram headers shared among the updates they carry).
    pub bytes_per_update: f64,
    /// Bytes per object update inside the packet: the encoded update item (object id,
    /// versions, length and state/delta data), without packet, frame, UDP or IP headers.
    /// This is the figure comparable to Colyseus's 145-byte mean delta (paper `000` §7).
    pub item_bytes_per_update: f64,
    /// Bytes of state/delta data per object update (no headers at all).
    pub data_bytes_per_update: f64,
    /// Fraction of updates that were full states (first sends, resyncs).
    pub full_state_fraction: f64,
    /// What the network did.
    pub network: NetworkStats,
    /// Per-node figures.
    pub nodes: Vec<NodeSummary>,
    /// Region migrations the placement loops started (absent when placement is off).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub region_migrations: Option<u64>,
    /// The SWIM timing the nodes ran, and why (absent with a fixed member list).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub membership: Option<MembershipTiming>,
}

/// Which SWIM profile a run with dynamic membership used, and why: named by
/// `[cluster] profile`, or chosen by the network's largest round trip
/// (`node::membership::MembershipConfig::profile_for`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MembershipTiming {
    /// `lan` or `wan`.
    pub profile: String,
    /// Named by the configuration (else chosen by `largest_rtt_ms`).
    pub named: bool,
    /// The latency matrix's largest round trip, ms.
    pub largest_rtt_ms: f64,
}

impl std::fmt::Display for MembershipTiming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.named { "named" } else { "none named" };
        write!(
            f,
            "{} ({why}; largest round trip {:.0} ms)",
            self.profile, self.largest_rtt_ms
        )
    }
}

impl SimReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

//! What a simulation run produces.

use serde::{Deserialize, Serialize};
use worldmesh_node::{NodeSummary, RunSummary};

use crate::config::SimConfig;
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
    /// What the network did.
    pub network: NetworkStats,
    /// Per-node figures.
    pub nodes: Vec<NodeSummary>,
}

impl SimReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

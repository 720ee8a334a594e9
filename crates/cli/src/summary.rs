//! The run summary printed by `simulate` and `cluster` (the same table for both).

use worldmesh_node::{NodeSummary, RunSummary};
use worldmesh_report::Table;

/// Formats a float with `d` decimals.
pub fn f(v: f64, d: usize) -> String {
    format!("{v:.d$}")
}

/// The headline table: bandwidth, objects, staleness, time.
pub fn headline(title: &str, run: &RunSummary, extra: &[(&str, String)]) -> Table {
    let mut t = Table::new(title, &["metric", "value"]);
    t.push(["nodes".into(), run.nodes.to_string()]);
    t.push(["per-node outbound kbps, mean".into(), f(run.out_kbps_mean, 1)]);
    t.push([
        "per-node outbound kbps, p95 of 1-s bursts (mean over nodes)".into(),
        f(run.out_kbps_p95_mean, 1),
    ]);
    t.push([
        "per-node outbound kbps, p95 of 1-s bursts (worst node)".into(),
        f(run.out_kbps_p95_max, 1),
    ]);
    t.push(["aggregate outbound kbps".into(), f(run.aggregate_kbps, 1)]);
    t.push([
        "objects per node (primaries + replicas)".into(),
        f(run.objects_per_node, 1),
    ]);
    t.push([
        "age of last update at end (replicas updated in the last 1 s), mean ms".into(),
        f(run.staleness_mean_ms, 1),
    ]);
    t.push([
        "age of last update at end (replicas updated in the last 1 s), max ms".into(),
        f(run.staleness_max_ms, 1),
    ]);
    t.push([
        "malformed datagrams / refused states".into(),
        format!("{} / {}", run.malformed, run.rejected_states),
    ]);
    for (k, v) in extra {
        t.push([(*k).to_owned(), v.clone()]);
    }
    t
}

/// Messages by class, summed over nodes.
pub fn by_class(run: &RunSummary, secs: f64) -> Table {
    let mut t = Table::new(
        "messages sent, by class (all nodes)",
        &["class", "packets", "bytes", "kbps (all nodes)"],
    );
    for (name, c) in &run.sent_by_class {
        if c.packets == 0 {
            continue;
        }
        t.push([
            name.clone(),
            c.packets.to_string(),
            c.bytes.to_string(),
            f(c.bytes as f64 * 8.0 / 1000.0 / secs.max(1e-9), 1),
        ]);
    }
    t
}

/// One row per node (for small clusters).
pub fn per_node(nodes: &[NodeSummary]) -> Table {
    let mut t = Table::new(
        "per node",
        &[
            "node",
            "out kbps",
            "out p95 kbps",
            "in kbps",
            "primaries",
            "replicas",
            "stale mean ms",
            "malformed",
        ],
    );
    for n in nodes {
        t.push([
            n.node.to_string(),
            f(n.out_kbps_mean, 1),
            f(n.out_kbps_p95, 1),
            f(n.in_kbps_mean, 1),
            n.primaries.to_string(),
            n.replicas.to_string(),
            f(n.staleness_mean_ms, 1),
            n.malformed.to_string(),
        ]);
    }
    t
}

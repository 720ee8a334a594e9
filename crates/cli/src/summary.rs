//! The run summary printed by `simulate` and `cluster` (the same table for both).

use worldmesh_net::transport::TransportStats;
use worldmesh_node::{NodeSummary, RunSummary};
use worldmesh_report::Table;

use worldmesh::report::NodeReport;

/// Formats a float with `d` decimals.
pub fn f(v: f64, d: usize) -> String {
    format!("{v:.d$}")
}

/// The headline table: bandwidth, objects, staleness, time.
pub fn headline<K: AsRef<str>>(title: &str, run: &RunSummary, extra: &[(K, String)]) -> Table {
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
        t.push([k.as_ref().to_owned(), v.clone()]);
    }
    t
}

/// `name=count` pairs with a non-zero count, or `none`.
fn nonzero<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let v: Vec<String> = pairs
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    if v.is_empty() { "none".into() } else { v.join(" ") }
}

/// The membership and adoption rows of a run: members seen at the end, members up, failed
/// and left (as every node saw them: one member's failure counts once per observer),
/// orphans adopted, dropped and refused, regions drained (zeros for nodes with a
/// fixed member list).
pub fn cluster_lines<'a>(nodes: impl IntoIterator<Item = &'a NodeSummary>) -> Vec<(&'static str, String)> {
    let cluster: Vec<_> = nodes.into_iter().filter_map(|n| n.cluster.as_ref()).collect();
    let members_min = cluster.iter().map(|c| c.members).min().unwrap_or(0);
    let members_max = cluster.iter().map(|c| c.members).max().unwrap_or(0);
    let ups: u64 = cluster.iter().map(|c| c.members_up).sum();
    let downs: u64 = cluster.iter().map(|c| c.members_down).sum();
    let left: u64 = cluster.iter().map(|c| c.members_left).sum();
    let adopted: u64 = cluster.iter().map(|c| c.adoption.adopted).sum();
    let dropped: u64 = cluster.iter().map(|c| c.adoption.dropped).sum();
    let refused: u64 = cluster.iter().map(|c| c.adoption.refused).sum();
    let drained: u64 = cluster.iter().map(|c| c.drained_regions).sum();
    vec![
        (
            "membership: members at end (min-max), ups / failures / leaves",
            format!("{members_min}-{members_max}, {ups} / {} / {left}", downs - left),
        ),
        (
            "adoption: orphans adopted / dropped / refused claims; regions drained",
            format!("{adopted} / {dropped} / {refused}; {drained}"),
        ),
    ]
}

/// The rows a real run adds to the headline: the transport (wire bytes, its overhead over
/// the application's bytes, refusals by reason), the node's refusals by reason, unknown
/// senders, membership and adoption figures, and CPU.
pub fn transport_lines(nodes: &[NodeReport]) -> Vec<(String, String)> {
    let mut t = TransportStats::default();
    for n in nodes {
        t.merge(&n.transport);
    }
    let app = t.app_sent().bytes;
    let wire = t.wire_sent.bytes;
    let overhead = t.overhead_sent_bytes();
    let kind = nodes.first().map_or("?", |n| n.transport_kind.as_str());
    let kind = match kind {
        "quic" => "quic (mutual TLS, cluster CA)".to_string(),
        "udp-insecure" => "udp-insecure (INSECURE baseline: trusts source addresses)".to_string(),
        other => other.to_string(),
    };
    let mut rejections = worldmesh_node::Rejections::default();
    for n in nodes {
        rejections.merge(&n.node.rejections);
    }
    let cpu: f64 = nodes.iter().map(|n| n.cpu_seconds).sum::<f64>() / nodes.len().max(1) as f64;
    let mut lines = vec![
        ("transport".into(), kind),
        (
            "wire bytes sent (all nodes) / application bytes sent".into(),
            format!("{wire} / {app}"),
        ),
        (
            "transport overhead: wire - application bytes sent (all nodes)".into(),
            format!(
                "{overhead} ({:.1}% of application bytes)",
                overhead as f64 * 100.0 / app.max(1) as f64
            ),
        ),
        (
            "connections refused, by reason".into(),
            nonzero(t.refusals_named()),
        ),
        (
            "datagrams refused by nodes, by reason".into(),
            nonzero(rejections.labelled()),
        ),
        (
            "unknown senders (transport) / non-members (node)".into(),
            format!("{} / {}", t.unknown_sender, rejections.not_member),
        ),
    ];
    lines.extend(
        cluster_lines(nodes.iter().map(|n| &n.node))
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v)),
    );
    lines.push(("CPU per node over the run, s (mean)".into(), f(cpu, 2)));
    let persist: Vec<_> = nodes.iter().filter_map(|n| n.persist.as_ref()).collect();
    if !persist.is_empty() {
        let s = |g: &dyn Fn(&worldmesh_node::PersistStats) -> u64| -> u64 {
            persist.iter().map(|p| g(&p.node)).sum()
        };
        let p99 = persist.iter().map(|p| p.store.apply_p99_ms).fold(0.0, f64::max);
        lines.push((
            "persistence: objects recovered at start (superseded) / batches on disk / checkpoints / store apply p99 ms (worst node)"
                .into(),
            format!(
                "{} ({}) / {} / {} / {}",
                s(&|x| x.recovered_objects),
                s(&|x| x.superseded),
                s(&|x| x.completed),
                s(&|x| x.checkpoints),
                f(p99, 2)
            ),
        ));
    }
    let players: Vec<_> = nodes.iter().filter_map(|n| n.players.as_ref()).collect();
    if !players.is_empty() {
        let sum = |g: &dyn Fn(&worldmesh_node::sessions::SessionStats) -> u64| -> u64 {
            players.iter().map(|p| g(&p.sessions)).sum()
        };
        // Summed by reason, named as in the report (the variant's name), in name order.
        let mut refused = std::collections::BTreeMap::<String, u64>::new();
        let mut ended = std::collections::BTreeMap::<String, u64>::new();
        for p in &players {
            for (k, v) in &p.sessions.refused {
                *refused.entry(format!("{k:?}")).or_default() += v;
            }
            for (k, v) in &p.sessions.disconnected {
                *ended.entry(format!("{k:?}")).or_default() += v;
            }
        }
        lines.push((
            "players: sessions opened / inputs applied / view datagrams sent".into(),
            format!(
                "{} / {} / {}",
                sum(&|s| s.connected),
                sum(&|s| s.inputs_applied),
                sum(&|s| s.view_datagrams)
            ),
        ));
        let a: Vec<_> = players.iter().filter_map(|p| p.assignment.as_ref()).collect();
        if !a.is_empty() {
            let s = |g: &dyn Fn(&worldmesh_node::assignment::AssignmentStats) -> u64| -> u64 {
                a.iter().map(|x| g(x)).sum()
            };
            lines.push((
                "assignment: joins / leaves placed; moves ordered; hand-offs done / failed; player gone first"
                    .into(),
                format!(
                    "{} / {}; {}; {} / {}; {}",
                    s(&|x| x.joins),
                    s(&|x| x.leaves),
                    s(&|x| x.moves_ordered),
                    sum(&|x| x.handoffs),
                    sum(&|x| x.handoffs_failed),
                    sum(&|x| x.handoffs_abandoned) + s(&|x| x.moves_for_departed)
                ),
            ));
            lines.push((
                "assignment: optimality checks vs a from-scratch solve / mismatches".into(),
                format!("{} / {}", s(&|x| x.checks), s(&|x| x.mismatches)),
            ));
        }
        if sum(&|s| s.region_migrations) > 0 || sum(&|s| s.placement_skipped) > 0 {
            lines.push((
                "placement: region migrations started / rounds skipped (delays not reported yet)".into(),
                format!(
                    "{} / {}",
                    sum(&|s| s.region_migrations),
                    sum(&|s| s.placement_skipped)
                ),
            ));
        }
        lines.push((
            "players: connects refused, by reason".into(),
            nonzero(refused.iter().map(|(k, v)| (k.as_str(), *v))),
        ));
        lines.push((
            "players: sessions ended, by reason".into(),
            nonzero(ended.iter().map(|(k, v)| (k.as_str(), *v))),
        ));
    }
    lines
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

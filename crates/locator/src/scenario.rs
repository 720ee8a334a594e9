//! Measured runs of the locator on the harness with the moving-player workload: the
//! shared engine behind the `locator-bandwidth`, `discovery` and `loadbal` experiments
//! (paper `000` §6.3 Figures 9 and 10, Table 2). Pure computation: no I/O.

use std::time::Duration;

use worldmesh_core::MessageClass;

use crate::config::LocatorConfig;
use crate::harness::{Delay, Harness};
use crate::keyspace::{Keying, RangeKey};
use crate::workload::Workload;

/// What to run.
#[derive(Clone, Debug)]
pub struct ScenarioSpec {
    /// Nodes (all in the ring from the start).
    pub nodes: usize,
    /// Players per node (1: `p2p`, 8: `fed`).
    pub per_node: usize,
    /// `rect` (true) or `sqr` map.
    pub rect: bool,
    /// Keying.
    pub keying: Keying,
    /// `rangedht` naming attribute.
    pub range_key: RangeKey,
    /// Leave-rejoin load balancing.
    pub loadbal: bool,
    /// Route cache on (64 entries) or off.
    pub route_cache: bool,
    /// Time before measuring.
    pub warmup: Duration,
    /// Measured time.
    pub measure: Duration,
    /// Link delays.
    pub delay: Delay,
    /// Seed.
    pub seed: u64,
}

/// Per-node figures over the measured window, per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeRates {
    /// Locator routing bytes sent/s (publications, subscriptions, spreading, hand-offs).
    pub routing: f64,
    /// Match delivery bytes sent/s.
    pub matching: f64,
    /// Overlay maintenance bytes sent/s.
    pub maintenance: f64,
    /// Items stored per second as a rendezvous (matching load).
    pub load: f64,
}

impl NodeRates {
    /// All locator bytes sent/s.
    pub fn total(&self) -> f64 {
        self.routing + self.matching + self.maintenance
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct ScenarioResult {
    /// Per node, over the measured window.
    pub nodes: Vec<NodeRates>,
    /// Hops to the first rendezvous of routed publications and subscriptions (histogram,
    /// whole run).
    pub hops: Vec<u64>,
    /// Discovery latency samples, ms: (routing to first rendezvous, matching after it).
    pub latency_ms: Vec<(f64, f64)>,
    /// Load-balancing moves.
    pub lb_moves: u64,
    /// Refused messages by reason (all zero in a clean run without churn).
    pub rejected: crate::Rejections,
    /// Datagrams delivered by the harness.
    pub delivered: u64,
}

/// The `q`-quantile of a histogram.
pub fn hist_quantile(h: &[u64], q: f64) -> usize {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return 0;
    }
    let target = (q * total as f64).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (i, c) in h.iter().enumerate() {
        acc += c;
        if acc >= target {
            return i;
        }
    }
    h.len().saturating_sub(1)
}

/// Median of values (NaN-free), 0 if empty.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The locator configuration a spec runs with.
pub fn config_for(spec: &ScenarioSpec, world: worldmesh_core::Aabb) -> LocatorConfig {
    let mut cfg = LocatorConfig::new(spec.keying, world);
    cfg.range_key = spec.range_key;
    cfg.dht_regions = (spec.nodes * spec.per_node).max(1) as u32;
    cfg.loadbal = spec.loadbal;
    if !spec.route_cache {
        cfg.route_cache = 0;
    }
    cfg
}

/// Runs one scenario.
pub fn run(spec: &ScenarioSpec) -> Result<ScenarioResult, crate::LocatorError> {
    let frame = Duration::from_millis(100);
    let mut wl = Workload::new(spec.nodes, spec.per_node, spec.rect, spec.seed);
    let cfg = config_for(spec, wl.world);
    let mut h = Harness::new(spec.nodes, spec.nodes, &cfg, spec.delay.clone(), 0.0, spec.seed)?;
    h.run_workload(&mut wl, spec.warmup, frame);
    let snap = |h: &Harness| -> Vec<[u64; 4]> {
        h.nodes()
            .iter()
            .map(|s| {
                let st = s.loc.stats();
                let b = |c: MessageClass| st.traffic.sent[c as usize].bytes;
                [
                    b(MessageClass::LocatorRouting),
                    b(MessageClass::MatchDelivery),
                    b(MessageClass::OverlayMaintenance),
                    st.items_stored,
                ]
            })
            .collect()
    };
    let before = snap(&h);
    let t0 = h.now();
    h.run_workload(&mut wl, spec.measure, frame);
    let after = snap(&h);
    let secs = h.now().saturating_since(t0).as_secs_f64().max(1e-9);
    let nodes = before
        .iter()
        .zip(&after)
        .map(|(a, b)| NodeRates {
            routing: (b[0] - a[0]) as f64 / secs,
            matching: (b[1] - a[1]) as f64 / secs,
            maintenance: (b[2] - a[2]) as f64 / secs,
            load: (b[3] - a[3]) as f64 / secs,
        })
        .collect();
    let mut hops = vec![0u64; 64];
    let mut latency_ms = Vec::new();
    let mut lb_moves = 0;
    let mut rejected = crate::Rejections::default();
    for s in h.nodes() {
        let st = s.loc.stats();
        for (i, c) in st.hops.iter().enumerate() {
            hops[i] += c;
        }
        latency_ms.extend(
            st.discovery_latency
                .iter()
                .map(|(r, m)| (*r as f64 / 1000.0, *m as f64 / 1000.0)),
        );
        lb_moves += st.lb_moves;
        rejected.add(&st.rejected);
    }
    Ok(ScenarioResult {
        nodes,
        hops,
        latency_ms,
        lb_moves,
        rejected,
        delivered: h.delivered(),
    })
}

//! Shared plumbing of the locator experiments (`locator-bandwidth`, `discovery`,
//! `loadbal`): link delays from the latency matrix and the spec of one harness run.

use std::time::Duration;

use worldmesh_core::{DetRng, LatencyMatrix};
use worldmesh_locator::harness::Delay;
use worldmesh_locator::scenario::ScenarioSpec;
use worldmesh_locator::{Keying, RangeKey};

use crate::{Context, ExperimentError, shipped_planetlab_path};

/// The latency matrix of the context (the shipped PlanetLab one by default).
pub fn matrix(ctx: &Context) -> Result<LatencyMatrix, ExperimentError> {
    let path = ctx.latency_file.clone().unwrap_or_else(shipped_planetlab_path);
    LatencyMatrix::load(&path).map_err(|e| ExperimentError::Input(e.to_string()))
}

/// Link delays for `nodes` nodes mapped onto matrix rows (with replacement beyond its size).
pub fn delay(m: &LatencyMatrix, nodes: usize, seed: u64) -> Delay {
    let mut rng = DetRng::new(seed).fork(0x1a7);
    Delay::Matrix {
        matrix: m.clone(),
        hosts: m.map_nodes(nodes, &mut rng),
    }
}

/// Keying name as on the command line.
pub fn keying_name(k: Keying) -> &'static str {
    match k {
        Keying::Dht => "dht",
        Keying::RangeDht => "rangedht",
    }
}

/// A locator variant of the sweeps: keying and `rangedht` key.
pub type Variant = (Keying, RangeKey);

/// The variant's name: `dht`, `rangedht`, `rangedht y`, `rangedht hilbert`.
pub fn variant_name(v: Variant) -> String {
    match v {
        (Keying::RangeDht, k) if k != RangeKey::X => format!("rangedht {k}"),
        (k, _) => keying_name(k).to_string(),
    }
}

/// A run spec with the experiments' defaults (`rangedht` keyed by `x`).
#[allow(clippy::too_many_arguments)]
pub fn spec(
    nodes: usize,
    per_node: usize,
    rect: bool,
    keying: Keying,
    loadbal: bool,
    warmup: Duration,
    measure: Duration,
    delay: Delay,
    seed: u64,
) -> ScenarioSpec {
    ScenarioSpec {
        nodes,
        per_node,
        rect,
        keying,
        range_key: RangeKey::X,
        loadbal,
        route_cache: true,
        warmup,
        measure,
        delay,
        seed,
    }
}

/// [`worldmesh_locator::scenario::run`] with the configuration changed by `tweak` before
/// the run (for the conditions the paper's Mercury differs in: route caching, region
/// count, one walk per range, …). Same measurement: per-node bytes/s by class and items
/// stored per second over the measured window, hops and discovery latencies.
pub fn run_tweaked(
    spec: &ScenarioSpec,
    tweak: &dyn Fn(&mut worldmesh_locator::LocatorConfig),
) -> Result<worldmesh_locator::scenario::ScenarioResult, ExperimentError> {
    use worldmesh_core::MessageClass;
    use worldmesh_locator::harness::Harness;
    use worldmesh_locator::scenario::{NodeRates, ScenarioResult, config_for};
    use worldmesh_locator::workload::Workload;
    let err = |e: worldmesh_locator::LocatorError| ExperimentError::Run(e.to_string());
    let frame = Duration::from_millis(100);
    let mut wl = Workload::new(spec.nodes, spec.per_node, spec.rect, spec.seed);
    let mut cfg = config_for(spec, wl.world);
    tweak(&mut cfg);
    let mut h =
        Harness::new(spec.nodes, spec.nodes, &cfg, spec.delay.clone(), 0.0, spec.seed).map_err(err)?;
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
    let mut r = ScenarioResult {
        nodes,
        hops: vec![0; 64],
        delivered: h.delivered(),
        ..ScenarioResult::default()
    };
    for s in h.nodes() {
        let st = s.loc.stats();
        for (i, c) in st.hops.iter().enumerate() {
            if let Some(slot) = r.hops.get_mut(i) {
                *slot += c;
            }
        }
        r.latency_ms.extend(
            st.discovery_latency
                .iter()
                .map(|(a, m)| (*a as f64 / 1000.0, *m as f64 / 1000.0)),
        );
        r.lb_moves += st.lb_moves;
        r.rejected.add(&st.rejected);
    }
    Ok(r)
}

/// Median RTT of the context's matrix, ms (for the conditions of every output).
pub fn median_rtt(m: &LatencyMatrix) -> f64 {
    let n = m.len();
    let mut v: Vec<f64> = Vec::with_capacity(n * n.saturating_sub(1));
    for i in 0..n {
        for j in 0..n {
            if i != j {
                v.push(f64::from(m.rtt_ms(i, j)));
            }
        }
    }
    crate::stats::quantile(&v, 0.5)
}

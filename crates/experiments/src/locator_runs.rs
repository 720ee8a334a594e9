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

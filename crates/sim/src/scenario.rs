//! The `worldmesh simulate` scenario: `nodes` nodes, each holding `bots_per_node`
//! wandering bots as primaries, replicating by broadcast over the modelled network.

use std::sync::Arc;
use worldmesh_core::{DetRng, NodeId, Time};
use worldmesh_game::wander::Bot;
use worldmesh_node::{Node, NodeConfig, RunSummary};
use worldmesh_replica::Role;

use crate::config::{ConfigError, SimConfig};
use crate::engine::Simulation;
use crate::network::NetworkModel;
use crate::report::SimReport;

/// Builds the simulation described by `cfg` (nodes created, bots spawned, nothing run).
pub fn build(cfg: &SimConfig) -> Result<Simulation<Bot>, ConfigError> {
    cfg.validate()?;
    let matrix = cfg.latency_matrix()?;
    let root = DetRng::new(cfg.seed);
    let net = NetworkModel::new(matrix, cfg.nodes, &cfg.network, &root);
    let world = Arc::new(cfg.game.clone());
    let ids: Vec<NodeId> = (0..cfg.nodes as u32).map(NodeId).collect();
    let nodes = ids
        .iter()
        .map(|&id| {
            let peers = ids.iter().copied().filter(|p| *p != id).collect();
            let mut nc = NodeConfig::new(id, peers, cfg.seed);
            nc.frame_interval = cfg.frame_interval();
            // Frames of different nodes are not aligned: start each at a random phase.
            let phase = root
                .fork(u64::from(id.0) + 1)
                .range_f64(0.0, nc.frame_interval.as_secs_f64());
            let mut node = Node::new(nc, Arc::clone(&world), Time::from_secs_f64(phase));
            for _ in 0..cfg.bots_per_node {
                let bot = Bot::random(&world, node.rng());
                node.spawn(Time::ZERO, bot);
            }
            node
        })
        .collect();
    Ok(Simulation::new(nodes, net))
}

/// Fraction of (node, remote primary) pairs for which the node holds a replica.
pub fn coverage(sim: &Simulation<Bot>) -> f64 {
    let total_primaries: usize = sim.nodes().iter().map(|n| n.store().primary_count()).sum();
    let mut expected = 0usize;
    let mut have = 0usize;
    for n in sim.nodes() {
        expected += total_primaries - n.store().primary_count();
        have += n
            .store()
            .iter()
            .filter(|(id, e)| {
                matches!(e.role, Role::Replica { .. })
                    && sim.nodes()[id.origin.0 as usize]
                        .store()
                        .get(*id)
                        .is_some_and(|p| p.role == Role::Primary)
            })
            .count();
    }
    if expected == 0 {
        1.0
    } else {
        have as f64 / expected as f64
    }
}

/// Runs `cfg` to completion. `progress` is called after every simulated second with the
/// fraction done.
pub fn run(cfg: &SimConfig, progress: &mut dyn FnMut(f64)) -> Result<SimReport, ConfigError> {
    let mut sim = build(cfg)?;
    let end = Time::from_secs_f64(cfg.duration_s);
    let mut t = Time::ZERO;
    while t < end {
        t = (t + std::time::Duration::from_secs(1)).min(end);
        sim.run_until(t);
        progress(t.as_secs_f64() / cfg.duration_s);
    }
    Ok(report(cfg, &sim))
}

/// The report of a simulation that ran `cfg.duration_s` seconds.
pub fn report(cfg: &SimConfig, sim: &Simulation<Bot>) -> SimReport {
    let nodes = sim.summaries(cfg.duration_s);
    SimReport {
        config: cfg.clone(),
        sim_seconds: sim.now().as_secs_f64(),
        summary: RunSummary::from_nodes(&nodes),
        coverage: coverage(sim),
        network: sim.network_stats().clone(),
        nodes,
    }
}

//! The `worldmesh simulate` scenario: the Colyseus model workload (paper `000` §4.1) on
//! `nodes` nodes with `players_per_node` players each, under the chosen architecture,
//! over the modelled network, with metrics and baselines collected on the way.

use std::sync::Arc;
use std::time::Duration;
use worldmesh_core::{DetRng, NodeId, Time};
use worldmesh_game::{GameMap, ModelObject, workload};
use worldmesh_locator::{Locator, LocatorConfig};
use worldmesh_node::{Mode, Node, NodeConfig, RunSummary};
use worldmesh_replica::Role;

use crate::config::{Architecture, ConfigError, SimConfig};
use crate::engine::Simulation;
use crate::metrics::Collector;
use crate::network::NetworkModel;
use crate::oracle::Oracle;
use crate::report::{MembershipTiming, SimReport};

/// The simulated game.
pub type Sim = Simulation<ModelObject>;

/// Builds the simulation described by `cfg` (nodes created, bots spawned, nothing run).
pub fn build(cfg: &SimConfig) -> Result<Sim, ConfigError> {
    build_with_spares(cfg, 0)
}

/// Like [`build`], with room in the network model for `spares` more nodes (ids `cfg.nodes`
/// onwards) that join the running world later ([`new_member`], `Simulation::add_node`).
pub fn build_with_spares(cfg: &SimConfig, spares: usize) -> Result<Sim, ConfigError> {
    cfg.validate()?;
    let matrix = cfg.latency_matrix()?;
    let membership = cfg.cluster.membership_config(matrix.largest_round_trip());
    let root = DetRng::new(cfg.seed);
    let net = NetworkModel::new(matrix, cfg.nodes + spares, &cfg.network, &root);
    let world = Arc::new(GameMap::generate(
        &cfg.game,
        cfg.nodes * cfg.players_per_node,
        cfg.seed,
    ));
    let mut per_node = workload::initial_objects(&world, cfg.nodes, cfg.players_per_node, cfg.seed);
    if cfg.placement.enabled {
        // Each player's person connects from a random row of the matrix.
        let mut homes = root.fork(0x686f_6d65);
        let rows = net.rows().max(1);
        for o in per_node.iter_mut().flatten() {
            if let ModelObject::Player(p) = o {
                p.home = Some(homes.index(rows) as u32);
            }
        }
    }
    let capacity = cfg.placement.enabled.then(|| {
        let largest = per_node.iter().map(Vec::len).max().unwrap_or(1).max(1);
        (largest as f64 * cfg.placement.capacity_factor).ceil() as usize
    });
    let mut initial = per_node.into_iter();
    let mode = match cfg.architecture {
        Architecture::Colyseus => Mode::Interest,
        Architecture::Broadcast => Mode::Broadcast,
    };
    let ids: Vec<NodeId> = (0..cfg.nodes as u32).map(NodeId).collect();
    // The distributed locator, when chosen: one per node, all in the initial ring.
    let locator = match cfg.architecture {
        Architecture::Colyseus => locator_config(cfg, &world),
        Architecture::Broadcast => None,
    };
    let nodes = ids
        .iter()
        .map(|&id| {
            let peers = ids.iter().copied().filter(|p| *p != id).collect();
            let mut nc = NodeConfig::new(id, peers, cfg.seed).with_mode(mode);
            nc.frame_interval = cfg.frame_interval();
            nc.replica.interest_margin = cfg.locator.interest_margin;
            nc.replica.interest_lead =
                Duration::from_secs_f64(cfg.locator.interest_lead_ms.max(0.0) / 1000.0);
            nc.membership = membership.clone();
            nc.replica.backups = cfg.cluster.backups;
            nc.replica.trace_writes = cfg.cluster.trace_writes;
            nc.persist = cfg.cluster.persist_config();
            nc.migration.max_primaries = capacity;
            // Frames of different nodes are not aligned: start each at a random phase.
            let phase = root
                .fork(u64::from(id.0) + 1)
                .range_f64(0.0, nc.frame_interval.as_secs_f64());
            let mut node = Node::new(nc, Arc::clone(&world), Time::from_secs_f64(phase));
            for o in initial.next().unwrap_or_default() {
                node.spawn(Time::ZERO, o);
            }
            if let Some(kc) = &locator {
                let loc = Locator::new(id, kc.clone(), &ids, &ids, cfg.seed, Time::ZERO)
                    .map_err(|e| ConfigError::Invalid(format!("locator: {e}")))?;
                node.attach_locator(loc);
            }
            Ok(node)
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let frame = cfg.frame_interval();
    let mut sim = Simulation::new(nodes, net)
        .with_collector(Collector::new(Time::from_secs_f64(cfg.effective_warmup())), frame);
    if cfg.cluster.checkpoint_frames > 0 {
        sim = sim.with_persistence(Duration::from_secs_f64(cfg.cluster.store_latency_ms / 1000.0));
    }
    if cfg.placement.enabled {
        sim = sim.with_placement(worldmesh_node::PlacementConfig {
            interval: Duration::from_secs_f64(cfg.placement.interval_s),
            min_gain_ms: cfg.placement.min_gain_ms,
            capacity,
            ..worldmesh_node::PlacementConfig::default()
        });
    }
    if cfg.architecture == Architecture::Colyseus && locator.is_none() {
        let delay = Duration::from_secs_f64(cfg.locator.delay_ms / 1000.0);
        sim = sim.with_oracle(Oracle::new(frame * 3), frame, delay);
    }
    Ok(sim)
}

/// A node that joins the running world of `cfg` (membership must be on): no objects, no
/// fixed members, the given generation (a restarted node uses a higher one than before).
/// Add it with `Simulation::add_node` or `Simulation::restart`, then call `Node::join` with
/// a seed member.
pub fn new_member(
    cfg: &SimConfig,
    world: Arc<GameMap>,
    id: NodeId,
    generation: u32,
    now: Time,
) -> Result<Node<ModelObject>, ConfigError> {
    if !cfg.cluster.membership {
        return Err(ConfigError::Invalid(
            "joining needs cluster.membership = true".into(),
        ));
    }
    let mode = match cfg.architecture {
        Architecture::Colyseus => Mode::Interest,
        Architecture::Broadcast => Mode::Broadcast,
    };
    let mut nc = NodeConfig::new(id, Vec::new(), cfg.seed).with_mode(mode);
    nc.frame_interval = cfg.frame_interval();
    nc.replica.interest_margin = cfg.locator.interest_margin;
    nc.replica.interest_lead = Duration::from_secs_f64(cfg.locator.interest_lead_ms.max(0.0) / 1000.0);
    nc.membership = cfg
        .cluster
        .membership_config(cfg.latency_matrix()?.largest_round_trip());
    nc.replica.backups = cfg.cluster.backups;
    nc.replica.trace_writes = cfg.cluster.trace_writes;
    nc.persist = cfg.cluster.persist_config();
    nc.generation = generation;
    let mut node = Node::new(nc, Arc::clone(&world), now);
    if cfg.architecture == Architecture::Colyseus
        && let Some(kc) = locator_config(cfg, &world)
    {
        let loc = Locator::new(id, kc, &[id], &[], cfg.seed, now)
            .map_err(|e| ConfigError::Invalid(format!("locator: {e}")))?;
        node.attach_locator(loc);
    }
    Ok(node)
}

/// The distributed locator's configuration for `cfg` on `world` (paper `000` §6): `None`
/// unless `cfg.locator.kind` is `dht` or `rangedht`. The simulator and the real node
/// process (`worldmesh node --locator`) build their locators with
/// [`worldmesh_locator::LocatorSettings::build`].
pub fn locator_config(cfg: &SimConfig, world: &GameMap) -> Option<LocatorConfig> {
    // `dht`: as many regions as players by default (paper `000` §6.3).
    let regions = (cfg.nodes * cfg.players_per_node).clamp(1, 1 << 20) as u32;
    let mut kc = cfg
        .locator
        .build(world.locator_bounds(), regions, cfg.game.player_speed)?;
    // Pieces of key ranges are sized alike on every node, joiners included.
    kc.chunk_members = cfg.nodes;
    Some(kc)
}

/// Fraction of (node, remote primary) pairs for which the node holds a replica.
pub fn coverage(sim: &Sim) -> f64 {
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
    run_counting(cfg, 1, progress).map(|(report, _)| report)
}

/// [`run`] on up to `threads` threads (the report is the same on any number; see
/// `Simulation::with_threads` for the runs that use one whatever is asked), also
/// returning the number of engine events processed (datagrams delivered, timers fired,
/// the world's own events). The loop stays in this crate: the simulation is generic over
/// the game object, and a caller in a crate built without optimisation (the experiments
/// in the debug build) would otherwise instantiate the whole node stack unoptimised.
pub fn run_counting(
    cfg: &SimConfig,
    threads: usize,
    progress: &mut dyn FnMut(f64),
) -> Result<(SimReport, RunStats), ConfigError> {
    let mut sim = build(cfg)?.with_threads(threads);
    let end = Time::from_secs_f64(cfg.duration_s);
    let mut t = Time::ZERO;
    while t < end {
        t = (t + std::time::Duration::from_secs(1)).min(end);
        sim.run_until(t);
        progress(t.as_secs_f64() / cfg.duration_s);
    }
    let (rounds, in_rounds) = sim.parallel_rounds();
    let (groups, lookahead) = sim.parallel_plan().unzip();
    let stats = RunStats {
        engine_events: sim.engine_events(),
        threads: if sim.runs_in_parallel() { threads.max(1) } else { 1 },
        rounds,
        events_in_rounds: in_rounds,
        lookahead,
        groups: groups.unwrap_or_default(),
        oracle_delay: sim.oracle_delay(),
    };
    Ok((report(cfg, &sim), stats))
}

/// How a run went, beside its report (none of it changes the report).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Engine events processed: datagrams delivered or dropped on arrival, timers fired,
    /// the world's own events.
    pub engine_events: u64,
    /// Threads the run used (1 when the run cannot use rounds: see
    /// `Simulation::with_threads`).
    pub threads: usize,
    /// Parallel rounds run.
    pub rounds: u64,
    /// Engine events taken in parallel rounds.
    pub events_in_rounds: u64,
    /// The rounds' window: how far one group of nodes is from reaching another.
    pub lookahead: Option<std::time::Duration>,
    /// Nodes per group of the rounds.
    pub groups: Vec<u32>,
    /// The oracle locator's delivery delay, if the oracle runs: no parallel round runs
    /// longer.
    pub oracle_delay: Option<std::time::Duration>,
}

/// The SWIM timing `sim`'s nodes run, and why, if membership is on.
fn membership_timing(cfg: &SimConfig, sim: &Sim) -> Option<MembershipTiming> {
    let largest_rtt = sim.network().matrix().largest_round_trip();
    cfg.cluster
        .membership_profile(largest_rtt)
        .map(|profile| MembershipTiming {
            profile: profile.to_owned(),
            named: cfg.cluster.profile.is_some(),
            largest_rtt_ms: largest_rtt.as_micros() as f64 / 1000.0,
        })
}

/// The report of a simulation that ran `cfg.duration_s` seconds.
pub fn report(cfg: &SimConfig, sim: &Sim) -> SimReport {
    let nodes = sim.summaries(cfg.effective_warmup(), cfg.duration_s);
    let (items, wire, data, full) = sim.nodes().iter().fold((0u64, 0u64, 0u64, 0u64), |a, n| {
        let r = n.replicas().stats();
        (
            a.0 + n.stats().update_items,
            a.1 + n.stats().update_packet_bytes,
            a.2 + r.update_data_bytes,
            a.3 + r.full_states_sent,
        )
    });
    let per = |x: u64| if items == 0 { 0.0 } else { x as f64 / items as f64 };
    let (sampled_bytes, sampled_items) = sim.nodes().iter().fold((0u64, 0u64), |a, n| {
        (
            a.0 + n.stats().update_msg_bytes_sampled,
            a.1 + n.stats().update_items_sampled,
        )
    });
    SimReport {
        config: cfg.clone(),
        sim_seconds: sim.now().as_secs_f64(),
        summary: RunSummary::from_nodes(&nodes),
        coverage: coverage(sim),
        metrics: sim
            .collector()
            .map(|c| c.report(cfg.frame_interval().as_secs_f64()))
            .unwrap_or_default(),
        bytes_per_update: per(wire),
        item_bytes_per_update: if sampled_items == 0 {
            0.0
        } else {
            sampled_bytes as f64 / sampled_items as f64
        },
        data_bytes_per_update: per(data),
        full_state_fraction: per(full),
        network: sim.network_stats().clone(),
        nodes,
        region_migrations: cfg.placement.enabled.then(|| sim.region_migrations()),
        membership: membership_timing(cfg, sim),
    }
}

//! `migration`: placement by core selection and migration through the name service
//! (paper `001` §3–§4, §7.4, Table 2).
//!
//! A simulated world on the PlanetLab matrix: some matrix rows are servers (worldmesh
//! nodes), others are players' client locations. Each region is a group of players who
//! live near each other (the `players` rows nearest a random home row) and starts on the
//! server that is *farthest* from them on average — the "population shifted" situation of
//! §3.2. Every node runs the placement loop ([`worldmesh_node::Placement`]: §7.4 activation,
//! then k = 1 core selection over the players' latencies to the servers with capacity,
//! migrate if the gain exceeds a threshold), with the true matrix as its latency oracle.
//! Nodes exchange datagrams with one-way delay RTT/2 between their server rows and 1 %
//! loss; players keep moving and writing to each other while regions move.
//!
//! The run is repeated with the placement loop fed Vivaldi estimates (`worldmesh_netcoord`
//! `ProbeSim` over every host of the matrix) instead of true latencies; both are measured
//! with the true latencies.
//!
//! Reported: the players' mean and max RTT to their region's host before and after
//! placement, the time to migrate (request → bound at the target, and request → the old
//! node has the new binding), the bytes of `Migration` traffic, and the cost of one
//! invocation through the name service (a lookup following a forwarding chain of length
//! 0, 1 and 3, then the call) against a direct call, as in Table 2 (whose values the
//! paper's text does not include; we report ours, measured in one run).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use worldmesh_core::{Aabb, DetRng, LatencyMatrix, MessageClass, NodeId, ObjectId, Point3, Time};
use worldmesh_engine::{Engine, Fate, Links, Step};
use worldmesh_netcoord::Coordinate;
use worldmesh_netcoord::VivaldiConfig;
use worldmesh_netcoord::probe_sim::{ProbeConfig, ProbeSim};
use worldmesh_node::{
    Event, LatencyOracle, Located, MigrationEvent, Mode, Node, NodeConfig, Placement, PlacementConfig,
};
use worldmesh_replica::{Binding, GameObject, NameService, StateError, ThinkContext, follow_chain};
use worldmesh_report::{Plot, Series, Table};

use crate::claim::{Check, Claim, Estimate, Expect};
use crate::stats::parallel;
use crate::{Context, ExperimentError, Outcome};

const CLOSER: Claim = Claim {
    id: "s3-migrate-closer",
    paper: "001",
    location: "§3.1–§3.2 and §4 (core selection drives migration)",
    quote: "An approach to reducing the latency, both due to RTT and loss, is to dynamically find the center of the group of players and migrate the game objects to a server whose location is closer to the majority of the users.",
    metric: "players' mean RTT to their region's host after the placement loop (§7.4 activation, k = 1 core selection, migration through the name service) ÷ before, regions starting on the server farthest from their players, PlanetLab RTTs",
    unit: "ratio",
    expect: Expect::Below(1.0),
};
const OVERHEAD: Claim = Claim {
    id: "table2-overhead-negligible",
    paper: "001",
    location: "§5, Table 2",
    quote: "This overhead is considerable, but negligible when compared to the overhead added by the network.",
    metric: "extra time of one invocation through the name service with a forwarding chain of length 3 over a direct call ÷ the median PlanetLab RTT, % (Table 2's values are not in the text; ours are timed on this machine)",
    unit: "%",
    expect: Expect::Below(1.0),
};
/// Claims of `migration`.
pub const CLAIMS: &[Claim] = &[CLOSER, OVERHEAD];

/// A player: walks along x and now and then writes a "hit" to another player of its region.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
struct Avatar {
    client: u32,
    region: u32,
    x: f32,
    frames: u32,
    hits: u32,
}

impl Located for Avatar {
    fn client_location(&self) -> Option<u32> {
        Some(self.client)
    }
}

impl GameObject for Avatar {
    type World = ();
    type Write = u32;

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        self.frames += 1;
        self.x += 0.5;
        if self.frames.is_multiple_of(5) {
            let mates: Vec<ObjectId> = ctx
                .store
                .iter()
                .filter(|(_, e)| e.object.region == self.region)
                .map(|(id, _)| id)
                .collect();
            if let Some(t) = ctx.rng.choose(&mates) {
                ctx.write(*t, 1);
            }
        }
    }
    fn position(&self) -> Point3 {
        Point3::new(self.x, 0.0, 0.0)
    }
    fn interest(&self, _world: &Self::World) -> Option<Aabb> {
        None
    }
    fn apply_write(&mut self, w: &u32) {
        self.hits += w;
    }
    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }
    fn decode_state(b: &[u8]) -> Result<Self, StateError> {
        bitcode::decode(b).map_err(StateError::from)
    }
}

/// The placement loop's oracle: the latency matrix itself, or Vivaldi estimates from
/// coordinates of every host (`est`), with the nodes' current loads.
struct MatrixOracle<'a> {
    m: &'a LatencyMatrix,
    est: Option<&'a [Coordinate]>,
    servers: &'a [usize],
    loads: Vec<usize>,
}

impl LatencyOracle for MatrixOracle<'_> {
    fn client_rtt_ms(&self, client: u32, node: NodeId) -> Option<f64> {
        let s = *self.servers.get(node.0 as usize)?;
        let c = client as usize;
        if c >= self.m.len() {
            return None;
        }
        match self.est {
            None => Some(f64::from(self.m.rtt_ms(c, s))),
            Some(coords) => coords.get(c)?.distance_ms(coords.get(s)?).ok(),
        }
    }
    fn primaries(&self, node: NodeId) -> Option<usize> {
        self.loads.get(node.0 as usize).copied()
    }
}

/// The experiment's links: one-way delay RTT/2 between the nodes' server rows, and
/// independent loss.
struct Wan<'a> {
    m: &'a LatencyMatrix,
    servers: &'a [usize],
    loss: f64,
    rng: DetRng,
}

impl Links<Vec<u8>> for Wan<'_> {
    fn route(&mut self, _now: Time, src: NodeId, t: &worldmesh_core::Transmit) -> Fate {
        let (Some(&a), Some(&b)) = (
            self.servers.get(src.0 as usize),
            self.servers.get(t.dst.0 as usize),
        ) else {
            return Fate::Partitioned; // no such node
        };
        if self.rng.chance(self.loss) {
            return Fate::Lost;
        }
        let rtt = self.m.rtt_ms(a, b);
        Fate::Deliver(Duration::from_micros((f64::from(rtt) * 500.0) as u64), None)
    }
}

/// What the run counts from the nodes' migration events.
#[derive(Default)]
struct Tally {
    /// When each object's region was asked to move.
    started: BTreeMap<ObjectId, Time>,
    to_bound: Vec<f64>,
    to_accept: Vec<f64>,
    migrations: usize,
    moved: u64,
}

impl Tally {
    fn record(&mut self, now: Time, e: Event) {
        match e {
            Event::Migration(MigrationEvent::Bound { ids, .. }) => {
                if let Some(t0) = ids.first().and_then(|id| self.started.get(id)) {
                    self.to_bound.push((now - *t0).as_secs_f64() * 1000.0);
                }
            }
            Event::Migration(MigrationEvent::Completed {
                started: t0,
                bindings,
                ..
            }) => {
                self.to_accept.push((now - t0).as_secs_f64() * 1000.0);
                self.migrations += 1;
                self.moved += bindings.len() as u64;
            }
            _ => {}
        }
    }
}

/// Parameters of one run.
struct Setup {
    nodes: usize,
    regions: usize,
    players: usize,
    duration: Duration,
    loss: f64,
}

/// What one run measured.
struct RunResult {
    before: Vec<f64>,
    after: Vec<f64>,
    series: Vec<(f64, f64, f64)>,
    to_bound_ms: Vec<f64>,
    to_accept_ms: Vec<f64>,
    migrations: usize,
    migration_bytes: u64,
    migration_packets: u64,
    objects_moved: u64,
    predicted_after: f64,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn simulate(
    m: &LatencyMatrix,
    est: Option<&[Coordinate]>,
    s: &Setup,
    seed: u64,
) -> Result<RunResult, ExperimentError> {
    if m.len() < s.nodes + s.regions * s.players {
        return Err(ExperimentError::Input(format!(
            "latency matrix has {} hosts; need {} servers + {} players",
            m.len(),
            s.nodes,
            s.regions * s.players
        )));
    }
    let mut rng = DetRng::new(seed).fork(0x316);
    let mut rows: Vec<usize> = (0..m.len()).collect();
    rng.shuffle(&mut rows);
    let servers: Vec<usize> = rows[..s.nodes].to_vec();
    let mut free: Vec<usize> = rows[s.nodes..].to_vec();
    // Regions: the `players` free rows nearest a random home row.
    let mut regions: Vec<Vec<usize>> = Vec::new();
    for _ in 0..s.regions {
        let home = free[rng.index(free.len())];
        free.sort_by(|a, b| m.rtt_ms(home, *a).total_cmp(&m.rtt_ms(home, *b)).then(a.cmp(b)));
        regions.push(free.drain(..s.players).collect());
    }
    // Far-away start: each region on the free server with the largest mean RTT to it.
    let mean_rtt = |players: &[usize], server: usize| {
        players
            .iter()
            .map(|c| f64::from(m.rtt_ms(*c, server)))
            .sum::<f64>()
            / players.len() as f64
    };
    let mut hosts: Vec<usize> = Vec::new();
    for r in &regions {
        let far = (0..s.nodes)
            .filter(|n| !hosts.contains(n))
            .max_by(|a, b| {
                mean_rtt(r, servers[*a])
                    .total_cmp(&mean_rtt(r, servers[*b]))
                    .then(b.cmp(a))
            })
            .ok_or_else(|| ExperimentError::Input("more regions than nodes".into()))?;
        hosts.push(far);
    }
    // A node holds at most one region (capacity 1.5 regions), so regions compete for hosts.
    let cap = s.players + s.players / 2;
    let mut nodes: Vec<Node<Avatar>> = (0..s.nodes)
        .map(|i| {
            let peers = (0..s.nodes as u32)
                .filter(|p| *p != i as u32)
                .map(NodeId)
                .collect();
            let mut cfg = NodeConfig::new(NodeId(i as u32), peers, seed).with_mode(Mode::Broadcast);
            cfg.migration.max_primaries = Some(cap);
            Node::new(cfg, Arc::new(()), Time::ZERO)
        })
        .collect();
    for (r, players) in regions.iter().enumerate() {
        for c in players {
            let a = Avatar {
                client: *c as u32,
                region: r as u32,
                x: 0.0,
                frames: 0,
                hits: 0,
            };
            nodes[hosts[r]].spawn(Time::ZERO, a);
        }
    }
    let pcfg = PlacementConfig {
        interval: Duration::from_secs(2),
        churn_fraction: 0.25,
        latency_trigger_ms: 150.0,
        min_gain_ms: 10.0,
        min_players: 1,
        capacity: Some(cap),
    };
    let mut placements: Vec<Placement> = (0..s.nodes).map(|_| Placement::new(pcfg.clone())).collect();
    let latencies = |nodes: &[Node<Avatar>]| -> Vec<f64> {
        let mut v = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            for id in n.store().primary_ids() {
                if let Some(c) = n.store().object(id).and_then(Located::client_location) {
                    v.push(f64::from(m.rtt_ms(c as usize, servers[i])));
                }
            }
        }
        v
    };
    let before = latencies(&nodes);
    let mut series = vec![(0.0, mean(&before), max(&before))];
    let n = nodes.len();
    let wan = Wan {
        m,
        servers: &servers,
        loss: s.loss,
        rng,
    };
    // Events of our own: the samples of the players' latencies, every 500 ms.
    let mut engine: Engine<Node<Avatar>, Wan<'_>, ()> = Engine::new(nodes, wan);
    let mut tally = Tally::default();
    let mut predicted = Vec::new();
    for i in 0..n {
        engine.pump(NodeId(i as u32), |_, now, _, e| tally.record(now, e));
    }
    let sample_every = Duration::from_millis(500);
    engine.schedule(Time::ZERO + sample_every, ());
    let end = Time::ZERO + s.duration;
    while let Some(step) = engine.step(end) {
        let now = engine.now();
        match step {
            Step::Timeout(id) => {
                let loads: Vec<usize> = engine
                    .machines()
                    .iter()
                    .map(|n| n.store().primary_count())
                    .collect();
                let oracle = MatrixOracle {
                    m,
                    est,
                    servers: &servers,
                    loads,
                };
                let i = id.0 as usize;
                let out = engine.machines_mut()[i]
                    .run_placement(now, &mut placements[i], &oracle)
                    .map_err(|e| ExperimentError::Run(e.to_string()))?;
                if let worldmesh_node::PlacementOutcome::Migrate(d) = out {
                    for id in &d.region {
                        tally.started.insert(*id, now);
                    }
                    predicted.push((d.region.len(), d.predicted_ms));
                }
                engine.pump(id, |_, now, _, e| tally.record(now, e));
            }
            Step::Datagram(id) => engine.pump(id, |_, now, _, e| tally.record(now, e)),
            Step::Other(()) => {
                let l = latencies(engine.machines());
                series.push((now.as_secs_f64(), mean(&l), max(&l)));
                engine.schedule(now + sample_every, ());
            }
            Step::Nothing => {}
        }
    }
    let nodes = engine.machines();
    let after = latencies(nodes);
    let mut bytes = 0;
    let mut packets = 0;
    for n in nodes {
        let c = n.stats().traffic.sent[MessageClass::Migration as usize];
        bytes += c.bytes;
        packets += c.packets;
    }
    let predicted_after = if predicted.is_empty() {
        mean(&after)
    } else {
        predicted.iter().map(|(_, p)| *p).sum::<f64>() / predicted.len() as f64
    };
    Ok(RunResult {
        before,
        after,
        series,
        to_bound_ms: tally.to_bound,
        to_accept_ms: tally.to_accept,
        migrations: tally.migrations,
        migration_bytes: bytes,
        migration_packets: packets,
        objects_moved: tally.moved,
        predicted_after,
    })
}

/// Table 2: ns per invocation, direct vs through the name service with a forwarding chain
/// of `hops` hops (every node's name service in one process; the hops are map lookups, the
/// network is not included — the paper's point is the middleware's own overhead).
fn invocation_costs(iters: u64) -> Vec<(String, f64)> {
    let objects = 1024u32;
    let ids: Vec<ObjectId> = (0..objects).map(|s| ObjectId::new(NodeId(0), s)).collect();
    let direct: BTreeMap<ObjectId, Avatar> = ids
        .iter()
        .map(|id| {
            (
                *id,
                Avatar {
                    client: 0,
                    region: 0,
                    x: id.seq as f32,
                    frames: 0,
                    hits: 0,
                },
            )
        })
        .collect();
    let call = |a: &Avatar| a.position().x;
    // The best of three timed passes after an untimed warm-up pass.
    let time = |f: &mut dyn FnMut(usize) -> f32| {
        let mut best = f64::INFINITY;
        for pass in 0..4 {
            let t = Instant::now();
            let mut acc = 0.0f32;
            for k in 0..iters {
                acc += f(k as usize % ids.len());
            }
            black_box(acc);
            if pass > 0 {
                best = best.min(t.elapsed().as_secs_f64() * 1e9 / iters as f64);
            }
        }
        best
    };
    let mut out = Vec::new();
    let base = time(&mut |k| call(&direct[&black_box(ids[k])]));
    out.push(("direct call (map lookup + call)".to_string(), base));
    for hops in [0usize, 1, 3] {
        // Node 0 created the objects; they migrated 0 → 1 → … → hops.
        let lease = Duration::from_secs(5);
        let mut services: Vec<NameService> = (0..=hops as u32)
            .map(|n| NameService::new(NodeId(n), lease))
            .collect();
        for id in &ids {
            for h in 0..hops {
                let b = Binding {
                    node: NodeId(h as u32 + 1),
                    epoch: h as u32 + 1,
                };
                services[h].forward(*id, b);
                services[h + 1].bind_local(*id, b.epoch);
            }
        }
        let cost = time(&mut |k| {
            let id = black_box(ids[k]);
            let at = follow_chain(NodeId(0), id, 8, |n| services.get(n.0 as usize));
            match at {
                Some(_) => call(&direct[&id]),
                None => 0.0,
            }
        });
        out.push((format!("name service, chain of {hops}"), cost));
    }
    // Chain of 0 with the call's arguments serialized and deserialized, as a remote
    // invocation does (the network itself excluded).
    let ns0 = NameService::new(NodeId(0), Duration::from_secs(5));
    let cost = time(&mut |k| {
        let bytes = bitcode::encode(&(black_box(ids[k]), 1u32));
        let Ok((id, _w)): Result<(ObjectId, u32), _> = bitcode::decode(&bytes) else {
            return 0.0;
        };
        match follow_chain(NodeId(0), id, 8, |n| (n.0 == 0).then_some(&ns0)) {
            Some(_) => call(&direct[&id]),
            None => 0.0,
        }
    });
    out.push((
        "name service, chain of 0, + (de)serialized arguments".to_string(),
        cost,
    ));
    out
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let path = ctx
        .latency_file
        .clone()
        .unwrap_or_else(crate::shipped_planetlab_path);
    let m = LatencyMatrix::load(&path).map_err(|e| ExperimentError::Input(e.to_string()))?;
    let setup = if ctx.quick {
        Setup {
            nodes: 6,
            regions: 3,
            players: 8,
            duration: Duration::from_secs(6),
            loss: 0.01,
        }
    } else {
        Setup {
            nodes: 16,
            regions: 8,
            players: 24,
            duration: Duration::from_secs(30),
            loss: 0.01,
        }
    };
    let seeds = ctx.seeds();
    let runs = parallel(ctx.threads, &seeds, |s| simulate(&m, None, &setup, *s))?;
    let ratio = Estimate::of(
        &runs
            .iter()
            .map(|r| mean(&r.after) / mean(&r.before).max(1e-9))
            .collect::<Vec<_>>(),
    );
    let r = runs
        .into_iter()
        .next()
        .ok_or_else(|| ExperimentError::Run("no run".into()))?;
    // The same world placed with Vivaldi estimates instead of true latencies (§6.3.2:
    // estimates good enough for core selection?), measured with the true latencies.
    let vivaldi_s = if ctx.quick { 150.0 } else { 2000.0 };
    let probe = ProbeConfig {
        neighbours: 32,
        ..ProbeConfig::default()
    };
    let mut sim = ProbeSim::new(&m, VivaldiConfig::default(), probe, ctx.seed)
        .map_err(|e| ExperimentError::Run(e.to_string()))?;
    sim.run_until(&m, vivaldi_s);
    let coords = sim.coordinates();
    let rv = simulate(&m, Some(&coords), &setup, ctx.seed)?;
    let mut table = Table::new(
        "migration: players' RTT to their region's host, before/after placement (PlanetLab)",
        &["placement", "mean RTT (ms)", "max RTT (ms)", "players"],
    );
    table.push([
        "before (far-away hosts)".to_string(),
        format!("{:.1}", mean(&r.before)),
        format!("{:.1}", max(&r.before)),
        r.before.len().to_string(),
    ]);
    table.push([
        "after placement".to_string(),
        format!("{:.1}", mean(&r.after)),
        format!("{:.1}", max(&r.after)),
        r.after.len().to_string(),
    ]);
    table.push([
        format!("after placement on Vivaldi estimates ({vivaldi_s:.0} s of probing)"),
        format!("{:.1}", mean(&rv.after)),
        format!("{:.1}", max(&rv.after)),
        rv.after.len().to_string(),
    ]);
    let reduction = mean(&r.before) - mean(&r.after);
    let mut cost = Table::new(
        "migration cost",
        &[
            "migrations",
            "objects moved",
            "request to bound, mean (ms)",
            "request to bound, max (ms)",
            "request to accepted, mean (ms)",
            "migration bytes",
            "migration datagrams",
        ],
    );
    cost.push([
        r.migrations.to_string(),
        r.objects_moved.to_string(),
        format!("{:.1}", mean(&r.to_bound_ms)),
        format!("{:.1}", max(&r.to_bound_ms)),
        format!("{:.1}", mean(&r.to_accept_ms)),
        r.migration_bytes.to_string(),
        r.migration_packets.to_string(),
    ]);
    let iters = if ctx.quick { 100_000 } else { 2_000_000 };
    let inv = invocation_costs(iters);
    let base = inv.first().map_or(1.0, |(_, c)| c.max(1e-9));
    let mut t2 = Table::new(
        "cost of invocation (paper 001 Table 2 analogue; this machine, one run)",
        &["invocation", "time (ns)", "relative to a direct call"],
    );
    for (name, c) in &inv {
        t2.push([name.clone(), format!("{c:.1}"), format!("{:.2}", c / base)]);
    }
    let med_rtt = crate::locator_runs::median_rtt(&m);
    let chain = inv
        .iter()
        .find(|(n, _)| n.contains('3'))
        .or(inv.last())
        .map_or(0.0, |(_, c)| *c);
    let checks = vec![
        Check::new(
            CLOSER,
            ratio,
            format!(
                "{} server nodes, {} regions of {} players on PlanetLab rows (median RTT {med_rtt:.0} ms), 1% loss, {:.0} s; {} seeds from {}",
                setup.nodes,
                setup.regions,
                setup.players,
                setup.duration.as_secs_f64(),
                seeds.len(),
                ctx.seed
            ),
        ),
        Check::new(
            OVERHEAD,
            Estimate::exact(100.0 * (chain - base) / (med_rtt * 1e6)),
            format!(
                "{iters} invocations timed on this machine (shared, 2 cores) vs the median PlanetLab RTT {med_rtt:.0} ms"
            ),
        ),
    ];
    let plot = Plot::of(
        "paper 001 §7.4 (ours: no figure in the paper)",
        format!(
            "players' RTT to their region's host while the placement loop migrates regions (seed {})",
            ctx.seed
        ),
        "time (s)",
        "RTT to host (ms)",
    )
    .with(Series::line(
        "mean",
        r.series.iter().map(|(t, a, _)| (*t, *a)).collect(),
    ))
    .with(Series::line(
        "max",
        r.series.iter().map(|(t, _, b)| (*t, *b)).collect(),
    ));
    let cdf = Plot::of(
        "paper 001 §3.2 (ours: no figure in the paper)",
        "CDF of players' RTT to their region's host before and after placement",
        "RTT to host (ms)",
        "fraction of players",
    )
    .with(Series::cdf("before", &r.before))
    .with(Series::cdf("after", &r.after))
    .with(Series::cdf("after (Vivaldi)", &rv.after));
    let files = vec![
        ctx.out.write_csv("migration_latency.csv", &table)?,
        ctx.out.write_csv("migration_cost.csv", &cost)?,
        ctx.out.write_csv("migration_invocation.csv", &t2)?,
        ctx.out.write_plot("migration_latency.svg", &plot)?,
        ctx.out.write_plot("migration_cdf.svg", &cdf)?,
        ctx.out.write_json(
            "migration.json",
            &serde_json::json!({
                "setup": {"nodes": setup.nodes, "regions": setup.regions, "players_per_region": setup.players,
                          "duration_s": setup.duration.as_secs_f64(), "loss": setup.loss, "seed": ctx.seed,
                          "latency_file": path.display().to_string()},
                "before": {"mean_ms": mean(&r.before), "max_ms": max(&r.before)},
                "after": {"mean_ms": mean(&r.after), "max_ms": max(&r.after)},
                "mean_reduction_ms": reduction,
                "predicted_after_mean_ms": r.predicted_after,
                "vivaldi": {"probing_s": vivaldi_s, "after_mean_ms": mean(&rv.after), "after_max_ms": max(&rv.after),
                            "migrations": rv.migrations},
                "migrations": r.migrations, "objects_moved": r.objects_moved,
                "request_to_bound_ms": r.to_bound_ms, "request_to_accept_ms": r.to_accept_ms,
                "migration_bytes": r.migration_bytes, "migration_datagrams": r.migration_packets,
                "series": r.series.iter().map(|(t, a, b)| serde_json::json!([t, a, b])).collect::<Vec<_>>(),
                "invocation_ns": inv.iter().map(|(n, c)| serde_json::json!({"invocation": n, "ns": c})).collect::<Vec<_>>(),
            }),
        )?,
    ];
    let notes = vec![format!(
        "mean player→host RTT {:.1} ms → {:.1} ms after placement ({:.1} ms, {:.0} % lower); max {:.1} → {:.1} ms; {} migrations moved {} objects in {} bytes of Migration traffic",
        mean(&r.before),
        mean(&r.after),
        reduction,
        100.0 * reduction / mean(&r.before).max(1e-9),
        max(&r.before),
        max(&r.after),
        r.migrations,
        r.objects_moved,
        r.migration_bytes
    )];
    Ok(Outcome {
        tables: vec![table, cost, t2],
        files,
        notes,
        checks,
    })
}

//! `player-capacity`: how many connected players one node sustains on one core (issue 16,
//! item 6).
//!
//! For each player count N, one node (20 Hz frames, broadcast mode, no peers, the model map
//! sized for N players with its items) runs the players' session table
//! (`node::sessions::Sessions`) with N sans-IO clients (`worldmesh_client::Client`)
//! connected, each sending one input every 50 ms at its own phase: a bot-like random walk
//! (a new direction about every 0.5 s) with occasional fire (2 % of inputs hold the
//! trigger). Datagrams travel with a fixed 1 ms delay and no loss, in virtual time, on one
//! thread; there is no network and no socket.
//!
//! What is timed (wall clock, `Instant`) is the node's work only: per frame, the handling
//! of the client datagrams that arrived since the previous frame
//! (`Sessions::handle_datagram`), the node frame (`Node::handle_timeout`) and the view
//! building (`Sessions::frame`). The clients' own work is not timed. After a warm-up the
//! frame times of the measured window give p50/p99/max; a node sustains N when the p99 is
//! under the 50 ms frame budget and no client fell behind (fewer complete views than 90 %
//! of the frames, more than [`PENDING_LIMIT`] unconfirmed inputs at the end, or not
//! connected).
//!
//! Sweep points run one after the other on one thread whatever `--threads` says: they are
//! timing measurements and must not share the core. Wall time depends on the machine and
//! its other load; the notes and the JSON say which build ran and the load average.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use worldmesh_client::{Client, ClientConfig, ClientState, ConnectToken, TokenKey};
use worldmesh_core::{DetRng, NodeId, Time};
use worldmesh_game::{GameMap, ModelConfig, ModelObject, PlayerInput};
use worldmesh_node::sessions::{ConnId, SessionConfig, Sessions};
use worldmesh_node::{Mode, Node, NodeConfig};
use worldmesh_report::{Plot, Scale, Series, Table};

use crate::claim::{Check, Claim, Estimate, Expect};
use crate::stats::{mean, quantile};
use crate::{Context, ExperimentError, Outcome};

const CAPACITY: Claim = Claim {
    id: "issue16-capacity",
    paper: "issue 16",
    location: "item 6, capacity benchmark (no paper figure; anchors: naia ~1,262 concurrent users per server, Colyseus.io 1-2k connections per vCPU)",
    quote: "The most players one node sustains at 20 Hz on one core with p99 frame time under the frame budget (50 ms) and no client falling behind. Target ≥ 2,000 players per node-core",
    metric: "largest N of the sweep (250..4000) at which one node on one core has p99 frame time (datagram handling + node frame + view building, wall clock) < 50 ms and no client fell behind; release build, one run, the machine's other load included",
    unit: "players",
    expect: Expect::Above(1999.5),
};
const P99_AT_2000: Claim = Claim {
    id: "issue16-p99-2000",
    paper: "issue 16",
    location: "item 6, capacity benchmark (no paper figure)",
    quote: "with p99 frame time under the frame budget (50 ms) [...] Target ≥ 2,000 players per node-core",
    metric: "p99 over the measured frames of the node's wall-clock work per 20 Hz frame (client datagrams handled since the previous frame + Node::handle_timeout + Sessions::frame) with 2,000 connected players; release build, one run",
    unit: "ms",
    expect: Expect::Below(50.0),
};
/// Claims of `player-capacity`.
pub const CLAIMS: &[Claim] = &[CAPACITY, P99_AT_2000];

/// The frame budget at 20 Hz, ms.
pub const BUDGET_MS: f64 = 50.0;
/// A client with more unconfirmed inputs than this at the end fell behind (with a 1 ms
/// link an input is confirmed by the second view after it: normally at most 2 pending).
pub const PENDING_LIMIT: usize = 4;
/// Share of inputs that hold the trigger.
const FIRE_CHANCE: f64 = 0.02;
/// Chance per input of turning to a new random direction.
const TURN_CHANCE: f64 = 0.1;
/// Wall clock of the run: virtual time plus a fixed epoch (token expiry).
const EPOCH_MS: u64 = 1_800_000_000_000;
const FRAME: Duration = Duration::from_millis(50);
const LINK: Duration = Duration::from_millis(1);
const TICK: Duration = Duration::from_millis(1);

/// One simulated player: a client and its bot.
struct Bot {
    client: Client<ModelObject>,
    /// When its next input is due.
    next_input: Time,
    dir: (i8, i8),
    rng: DetRng,
    /// Inputs sent (counted from the start of the measured window).
    sent: u64,
}

impl Bot {
    fn input(&mut self) -> PlayerInput {
        if self.rng.chance(TURN_CHANCE) {
            self.dir = if self.rng.chance(0.1) {
                (0, 0)
            } else {
                (rand_i8(&mut self.rng), rand_i8(&mut self.rng))
            };
        }
        let fire = self
            .rng
            .chance(FIRE_CHANCE)
            .then(|| (rand_i8(&mut self.rng), rand_i8(&mut self.rng)));
        PlayerInput {
            dx: self.dir.0,
            dy: self.dir.1,
            fire,
        }
    }
}

fn rand_i8(rng: &mut DetRng) -> i8 {
    (rng.below(255) as i16 - 127) as i8
}

/// Wall time of one frame's node work, by phase, seconds.
#[derive(Clone, Copy, Debug, Default)]
struct FrameTime {
    datagrams: f64,
    node: f64,
    views: f64,
}

impl FrameTime {
    fn total(&self) -> f64 {
        self.datagrams + self.node + self.views
    }
}

/// One node, its sessions and N clients in virtual time.
struct Bench {
    now: Time,
    node: Node<ModelObject>,
    sessions: Sessions<ModelObject>,
    /// Client `k` is on connection `k + 1`.
    bots: Vec<Bot>,
    to_node: VecDeque<(Time, ConnId, Vec<u8>)>,
    to_client: VecDeque<(Time, ConnId, Vec<u8>)>,
    /// Datagram handling since the last frame, seconds.
    pending_datagrams: f64,
    frames: Vec<FrameTime>,
    measuring: bool,
}

impl Bench {
    fn new(players: usize, seed: u64) -> Result<Self, ExperimentError> {
        let map = GameMap::generate(&ModelConfig::default(), players, seed);
        let items = worldmesh_game::workload::initial_objects(&map, 1, 0, seed);
        let mut cfg = NodeConfig::new(NodeId(1), vec![], seed).with_mode(Mode::Broadcast);
        cfg.frame_interval = FRAME;
        let mut node = Node::new(cfg, Arc::new(map), Time::ZERO);
        for o in items.into_iter().flatten() {
            node.spawn(Time::ZERO, o);
        }
        let key = TokenKey::from_bytes([0x16; 32]);
        let sessions = Sessions::new(
            SessionConfig {
                max_players: players.max(1),
                ..SessionConfig::default()
            },
            key.clone(),
        );
        let rng = DetRng::new(seed).fork(0x7063_6170);
        let mut bots = Vec::with_capacity(players);
        for k in 0..players {
            let mut nonce = [0u8; 16];
            nonce[..8].copy_from_slice(&(k as u64).to_le_bytes());
            nonce[8..].copy_from_slice(&seed.to_le_bytes());
            let token = ConnectToken {
                player: k as u64 + 1,
                nodes: vec![NodeId(1)],
                expires_ms: EPOCH_MS + 3_600_000,
                nonce,
            }
            .issue(&key)
            .map_err(|e| ExperimentError::Run(e.to_string()))?;
            let mut r = rng.fork(k as u64);
            let phase = Duration::from_millis(r.below(50));
            bots.push(Bot {
                client: Client::new(ClientConfig::default(), token, Time::ZERO),
                next_input: Time::ZERO.saturating_add(phase),
                dir: (0, 0),
                rng: r,
                sent: 0,
            });
        }
        Ok(Self {
            now: Time::ZERO,
            node,
            sessions,
            bots,
            to_node: VecDeque::new(),
            to_client: VecDeque::new(),
            pending_datagrams: 0.0,
            frames: Vec::new(),
            measuring: false,
        })
    }

    fn unix_ms(&self) -> u64 {
        EPOCH_MS + self.now.0 / 1000
    }

    /// One millisecond: datagrams to the node (timed), a node frame if due (timed),
    /// datagrams to the clients, the clients' inputs and timers (not timed).
    fn step(&mut self) {
        self.now = self.now.saturating_add(TICK);
        let now = self.now;
        let unix = self.unix_ms();
        let t0 = Instant::now();
        let mut handled = false;
        while self.to_node.front().is_some_and(|f| f.0 <= now) {
            if let Some((_, conn, bytes)) = self.to_node.pop_front() {
                self.sessions
                    .handle_datagram(now, unix, conn, &bytes, &mut self.node);
                handled = true;
            }
        }
        if handled {
            self.pending_datagrams += t0.elapsed().as_secs_f64();
        }
        if self.node.poll_timeout().is_some_and(|t| t <= now) {
            let a = Instant::now();
            self.node.handle_timeout(now);
            while self.node.poll_event().is_some() {}
            while self.node.poll_transmit().is_some() {}
            let b = Instant::now();
            self.sessions.frame(now, unix, &mut self.node);
            let c = Instant::now();
            let ft = FrameTime {
                datagrams: std::mem::take(&mut self.pending_datagrams),
                node: (b - a).as_secs_f64(),
                views: (c - b).as_secs_f64(),
            };
            if self.measuring {
                self.frames.push(ft);
            }
        }
        let arrive = now.saturating_add(LINK);
        while let Some((conn, bytes)) = self.sessions.poll_transmit() {
            self.to_client.push_back((arrive, conn, bytes));
        }
        while self.to_client.front().is_some_and(|f| f.0 <= now) {
            if let Some((_, conn, bytes)) = self.to_client.pop_front()
                && let Some(b) = (conn.0 as usize)
                    .checked_sub(1)
                    .and_then(|k| self.bots.get_mut(k))
            {
                b.client.handle_datagram(now, &bytes);
            }
        }
        for (k, b) in self.bots.iter_mut().enumerate() {
            if b.next_input <= now {
                b.next_input = b.next_input.saturating_add(FRAME);
                if matches!(b.client.state(), ClientState::Connected { .. }) {
                    let input = b.input();
                    if b.client.send_input(now, &input).is_some() {
                        b.sent += 1;
                    }
                }
            }
            if b.client.poll_timeout().is_some_and(|t| t <= now) {
                b.client.handle_timeout(now);
            }
            while b.client.poll_event().is_some() {}
            while let Some(bytes) = b.client.poll_transmit() {
                self.to_node.push_back((arrive, ConnId(k as u64 + 1), bytes));
            }
        }
    }

    fn run(&mut self, d: Duration) {
        let until = self.now.saturating_add(d);
        while self.now < until {
            self.step();
        }
    }
}

/// What one sweep point measured.
#[derive(Clone, Debug, serde::Serialize)]
struct Point {
    players: usize,
    connected: usize,
    objects: usize,
    missiles: usize,
    frames: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    mean_ms: f64,
    datagrams_p50_ms: f64,
    datagrams_mean_ms: f64,
    node_p50_ms: f64,
    node_mean_ms: f64,
    views_p50_ms: f64,
    views_mean_ms: f64,
    views_p99_ms: f64,
    bytes_per_client_s: f64,
    views_per_client_s: f64,
    view_datagrams_per_client_s: f64,
    objects_per_view: f64,
    inputs_sent: u64,
    inputs_applied: u64,
    inputs_duplicated: u64,
    inputs_skipped: u64,
    behind: usize,
    behind_views: usize,
    behind_pending: usize,
    max_pending: usize,
    wall_s: f64,
}

impl Point {
    fn sustained(&self) -> bool {
        self.p99_ms < BUDGET_MS && self.behind == 0
    }
}

fn measure(players: usize, seed: u64, warmup: Duration, window: Duration) -> Result<Point, ExperimentError> {
    let started = Instant::now();
    let mut b = Bench::new(players, seed)?;
    b.run(warmup);
    let connected = b.sessions.len();
    if connected < players {
        return Err(ExperimentError::Run(format!(
            "{players} players: only {connected} connected after the warm-up"
        )));
    }
    let before = b.sessions.stats().clone();
    let views_before: Vec<u64> = b.bots.iter().map(|x| x.client.stats().views).collect();
    for bot in &mut b.bots {
        bot.sent = 0;
    }
    b.measuring = true;
    b.run(window);
    b.measuring = false;
    let after = b.sessions.stats().clone();
    let secs = window.as_secs_f64();
    let frames = b.frames.len();
    let ms = |f: fn(&FrameTime) -> f64| -> Vec<f64> { b.frames.iter().map(|t| f(t) * 1000.0).collect() };
    let total = ms(FrameTime::total);
    let dg = ms(|t| t.datagrams);
    let nd = ms(|t| t.node);
    let vw = ms(|t| t.views);
    let (mut behind, mut behind_views, mut behind_pending, mut max_pending) = (0, 0, 0, 0);
    let mut views = 0u64;
    let mut view_objects = 0usize;
    for (bot, v0) in b.bots.iter().zip(&views_before) {
        let got = bot.client.stats().views - v0;
        views += got;
        view_objects += bot.client.view().map_or(0, |v| v.objects.len());
        let pending = bot.client.pending_inputs().count();
        max_pending = max_pending.max(pending);
        let few_views = (got as f64) < 0.9 * frames as f64;
        let stuck = pending > PENDING_LIMIT;
        let gone = !matches!(bot.client.state(), ClientState::Connected { .. });
        behind_views += usize::from(few_views);
        behind_pending += usize::from(stuck);
        behind += usize::from(few_views || stuck || gone);
    }
    let n = players.max(1) as f64;
    let store = b.node.store();
    let missiles = store
        .iter()
        .filter(|(_, e)| matches!(e.object, ModelObject::Missile(_)))
        .count();
    Ok(Point {
        players,
        connected: b.sessions.len(),
        objects: store.iter().count(),
        missiles,
        frames,
        p50_ms: quantile(&total, 0.5),
        p99_ms: quantile(&total, 0.99),
        max_ms: total.iter().copied().fold(0.0, f64::max),
        mean_ms: mean(&total),
        datagrams_p50_ms: quantile(&dg, 0.5),
        datagrams_mean_ms: mean(&dg),
        node_p50_ms: quantile(&nd, 0.5),
        node_mean_ms: mean(&nd),
        views_p50_ms: quantile(&vw, 0.5),
        views_mean_ms: mean(&vw),
        views_p99_ms: quantile(&vw, 0.99),
        bytes_per_client_s: (after.bytes_out - before.bytes_out) as f64 / n / secs,
        views_per_client_s: views as f64 / n / secs,
        view_datagrams_per_client_s: (after.view_datagrams - before.view_datagrams) as f64 / n / secs,
        objects_per_view: view_objects as f64 / n,
        inputs_sent: b.bots.iter().map(|x| x.sent).sum(),
        inputs_applied: after.inputs_applied - before.inputs_applied,
        inputs_duplicated: after.inputs_duplicated - before.inputs_duplicated,
        inputs_skipped: after.inputs_skipped - before.inputs_skipped,
        behind,
        behind_views,
        behind_pending,
        max_pending,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let sizes: &[usize] = if ctx.quick {
        &[50, 200]
    } else {
        &[250, 500, 1000, 1500, 2000, 3000, 4000]
    };
    let (warmup, window) = if ctx.quick {
        (Duration::from_secs(1), Duration::from_secs(2))
    } else {
        (Duration::from_secs(2), Duration::from_secs(10))
    };
    let build = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    let cores = crate::default_threads();
    let load_before = load_average();
    let mut points = Vec::new();
    for &n in sizes {
        if ctx.progress {
            eprintln!("  {n} players: warm-up {warmup:?}, measuring {window:?}");
        }
        let p = measure(n, ctx.seed, warmup, window)?;
        if ctx.progress {
            eprintln!(
                "  {n} players: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (datagrams {:.2} + node {:.2} + views {:.2} ms mean), {} behind, {:.1} s wall",
                p.p50_ms,
                p.p99_ms,
                p.max_ms,
                p.datagrams_mean_ms,
                p.node_mean_ms,
                p.views_mean_ms,
                p.behind,
                p.wall_s
            );
        }
        points.push(p);
    }
    let load_after = load_average();
    let mut table = Table::new(
        format!(
            "players per node at 20 Hz: node work per frame (wall clock, one core, {build}), {} s measured after {} s warm-up",
            window.as_secs(),
            warmup.as_secs()
        ),
        &[
            "players",
            "objects",
            "frame p50 ms",
            "frame p99 ms",
            "frame max ms",
            "bytes/client/s",
            "views/client/s",
            "objects/view",
            "inputs applied/sent",
            "fell behind",
            "within 50 ms budget",
        ],
    );
    for p in &points {
        table.push([
            p.players.to_string(),
            p.objects.to_string(),
            format!("{:.2}", p.p50_ms),
            format!("{:.2}", p.p99_ms),
            format!("{:.2}", p.max_ms),
            format!("{:.0}", p.bytes_per_client_s),
            format!("{:.2}", p.views_per_client_s),
            format!("{:.1}", p.objects_per_view),
            format!("{}/{}", p.inputs_applied, p.inputs_sent),
            p.behind.to_string(),
            if p.sustained() { "yes" } else { "no" }.to_string(),
        ]);
    }
    let mut phases = Table::new(
        "where a frame's node work goes (mean ms per frame, share of the mean; p50 in brackets)",
        &[
            "players",
            "client datagrams (handle_datagram)",
            "node frame (handle_timeout)",
            "views (Sessions::frame)",
            "views p99 ms",
            "views share",
            "us per player per frame",
        ],
    );
    for p in &points {
        let share = p.views_mean_ms / p.mean_ms.max(1e-12) * 100.0;
        phases.push([
            p.players.to_string(),
            format!(
                "{:.2} ({:.0} %) [{:.2}]",
                p.datagrams_mean_ms,
                p.datagrams_mean_ms / p.mean_ms.max(1e-12) * 100.0,
                p.datagrams_p50_ms
            ),
            format!(
                "{:.2} ({:.0} %) [{:.2}]",
                p.node_mean_ms,
                p.node_mean_ms / p.mean_ms.max(1e-12) * 100.0,
                p.node_p50_ms
            ),
            format!("{:.2} ({share:.0} %) [{:.2}]", p.views_mean_ms, p.views_p50_ms),
            format!("{:.2}", p.views_p99_ms),
            format!("{share:.0} %"),
            format!("{:.1}", p.mean_ms * 1000.0 / p.players.max(1) as f64),
        ]);
    }
    let pts = |f: fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.players as f64, f(p))).collect()
    };
    let plot = Plot::of(
        "ours (issue 16 item 6, no paper figure)",
        "node frame time vs connected players (20 Hz, one core, broadcast mode, model game)",
        "players connected to the node",
        "node work per frame, ms (wall clock)",
    )
    .with(Series::marked("p50", pts(|p| p.p50_ms)))
    .with(Series::marked("p99", pts(|p| p.p99_ms)))
    .with_hline("frame budget: 50 ms (20 Hz)", BUDGET_MS)
    .with_vline("target: 2,000 players", 2000.0)
    .scales(Scale::Linear, Scale::Log);
    let phase_plot = Plot::of(
        "ours (issue 16 item 6, no paper figure)",
        "node work per frame by phase (mean)",
        "players connected to the node",
        "mean ms per frame (wall clock)",
    )
    .with(Series::marked(
        "client datagrams (Sessions::handle_datagram)",
        pts(|p| p.datagrams_mean_ms),
    ))
    .with(Series::marked(
        "node frame (Node::handle_timeout)",
        pts(|p| p.node_mean_ms),
    ))
    .with(Series::marked(
        "views (Sessions::frame)",
        pts(|p| p.views_mean_ms),
    ))
    .with_hline("frame budget: 50 ms (20 Hz)", BUDGET_MS)
    .scales(Scale::Linear, Scale::Log);
    let capacity = points.iter().filter(|p| p.sustained()).map(|p| p.players).max();
    let first_failing = points.iter().find(|p| !p.sustained()).map(|p| p.players);
    let mut notes = vec![match capacity {
        Some(c) => format!(
            "headline: {c} players sustained by one node on one core at 20 Hz (largest N of the sweep with p99 < 50 ms and no client behind{}); issue 16 target >= 2,000; anchors: naia ~1,262 per server, Colyseus.io 1-2k per vCPU",
            first_failing.map_or(String::new(), |f| format!("; first failing N: {f}"))
        ),
        None => "headline: no N of the sweep sustained (p99 < 50 ms and no client behind)".into(),
    }];
    notes.push(format!(
        "conditions: one node, broadcast mode, no peers, 20 Hz frames; N sans-IO clients, one input per 50 ms each (random walk, {:.0} % of inputs fire), 1 ms link, no loss; timed: Sessions::handle_datagram + Node::handle_timeout + Sessions::frame, not the clients; {build}, {cores} cores seen, sweep points run one after another on one thread; load average before {} / after {}",
        FIRE_CHANCE * 100.0,
        load_before.as_deref().unwrap_or("n/a"),
        load_after.as_deref().unwrap_or("n/a"),
    ));
    if let Some(p) = points.iter().max_by_key(|p| p.players) {
        notes.push(format!(
            "at {} players: views take {:.0} % of the frame's work, the node frame {:.0} %, client datagrams {:.0} %",
            p.players,
            p.views_mean_ms / p.mean_ms.max(1e-12) * 100.0,
            p.node_mean_ms / p.mean_ms.max(1e-12) * 100.0,
            p.datagrams_mean_ms / p.mean_ms.max(1e-12) * 100.0
        ));
    }
    let mut checks = Vec::new();
    if !ctx.quick {
        let conditions = format!(
            "one node, 20 Hz, broadcast, N in {sizes:?}, {} s measured after {} s warm-up, seed {}, one run, {build}, {cores} cores seen, load average before {}",
            window.as_secs(),
            warmup.as_secs(),
            ctx.seed,
            load_before.as_deref().unwrap_or("n/a")
        );
        checks.push(Check::new(
            CAPACITY,
            Estimate::exact(capacity.unwrap_or(0) as f64),
            conditions.clone(),
        ));
        if let Some(p) = points.iter().find(|p| p.players == 2000) {
            checks.push(Check::new(P99_AT_2000, Estimate::exact(p.p99_ms), conditions));
        }
    }
    let mut files = vec![
        ctx.out.write_csv("player_capacity.csv", &table)?,
        ctx.out.write_csv("player_capacity_phases.csv", &phases)?,
        ctx.out.write_plot("player_capacity.svg", &plot)?,
        ctx.out.write_plot("player_capacity_phases.svg", &phase_plot)?,
    ];
    files.push(ctx.out.write_json(
        "player_capacity.json",
        &serde_json::json!({
            "budget_ms": BUDGET_MS,
            "capacity": capacity,
            "first_failing": first_failing,
            "build": build,
            "cores": cores,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "warmup_s": warmup.as_secs_f64(),
            "window_s": window.as_secs_f64(),
            "seed": ctx.seed,
            "fire_chance": FIRE_CHANCE,
            "turn_chance": TURN_CHANCE,
            "link_ms": LINK.as_secs_f64() * 1000.0,
            "pending_limit": PENDING_LIMIT,
            "points": points,
        }),
    )?);
    Ok(Outcome {
        tables: vec![table, phases],
        files,
        notes,
        checks,
    })
}

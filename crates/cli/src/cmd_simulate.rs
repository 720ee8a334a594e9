//! `worldmesh simulate`: run the default scenario in the deterministic simulator.

use anyhow::Context as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use worldmesh_core::Time;
use worldmesh_game::MapKind;
use worldmesh_sim::config::Architecture;
use worldmesh_sim::{SimConfig, scenario};

use crate::duration::parse_duration;
use crate::{live, summary};

/// Arguments of `worldmesh simulate`.
#[derive(clap::Args, Debug)]
pub struct SimulateArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Write report.json (and the effective config.toml) into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print one row per node as well.
    #[arg(long)]
    per_node: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Serve the live dashboard while the simulation runs, paced at real time (or
    /// `--speed` × real time), and keep serving the final state until Ctrl-C. ADDR
    /// defaults to 127.0.0.1:8080; the URL to open is printed. The report is the same as
    /// without the dashboard.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_ADDR)]
    dashboard: Option<String>,
    /// With --dashboard: run K times faster than real time (e.g. 0.5, 4) [default: 1].
    #[arg(long, value_name = "K", requires = "dashboard")]
    speed: Option<f64>,
    /// Threads to run the nodes on, in parallel rounds of the engine [default: all
    /// cores]. The report is the same on any number. Runs with the oracle locator without
    /// a delivery delay (the default; `[locator] delay_ms` in --config gives it one),
    /// persistence or the placement loop use one (their world-wide work after each input
    /// leaves no lookahead), as does the dashboard's paced run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
}

/// Where the dashboard listens by default.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// Parses a dashboard address flag.
pub fn parse_addr(flag: &str, s: &str) -> anyhow::Result<std::net::SocketAddr> {
    s.parse().map_err(|_| {
        anyhow::anyhow!(
            "{flag} {s:?} is not an address: use IP:PORT, e.g. {DEFAULT_ADDR} (port 0 picks a free one)"
        )
    })
}

/// Checks a `--speed` value.
pub fn check_speed(k: f64) -> anyhow::Result<f64> {
    if k.is_finite() && k > 0.0 && k <= 1e6 {
        Ok(k)
    } else {
        anyhow::bail!("--speed must be a number in (0, 1e6], got {k}")
    }
}

/// The scenario flags shared by `simulate` and `dashboard`. Flags override the config file,
/// which overrides the defaults (64 nodes × 8 players of the model workload, 60 s, Colyseus
/// replication with the oracle locator, PlanetLab delays).
#[derive(clap::Args, Debug)]
pub struct ScenarioArgs {
    /// TOML config file with any subset of the settings (see README "Configuration").
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Number of nodes (servers) [default: 64].
    #[arg(long)]
    pub(crate) nodes: Option<usize>,
    /// Players per node: 1 is the paper's p2p scenario, 8 fed [default: 8].
    #[arg(long, alias = "bots-per-node")]
    pub(crate) players_per_node: Option<usize>,
    /// Architecture: colyseus (interest-driven replicas) or broadcast [default: colyseus].
    #[arg(long, value_parser = ["colyseus", "broadcast"])]
    pub(crate) arch: Option<String>,
    /// Map shape: rect or sqr [default: rect].
    #[arg(long, value_parser = ["rect", "sqr"])]
    pub(crate) map: Option<String>,
    /// Object locator: oracle (ideal global index), rangedht (Mercury-style range DHT) or
    /// dht (hashed DHT over map regions) [default: oracle].
    #[arg(long, value_parser = ["oracle", "rangedht", "dht"])]
    pub(crate) locator: Option<String>,
    /// rangedht: the naming attribute keyed on: x, y, or hilbert (the position on a
    /// Hilbert curve over the map; a subscription is a few key ranges) [default: x].
    #[arg(long, value_parser = ["x", "y", "hilbert"])]
    pub(crate) range_key: Option<String>,
    /// DHT locators: leave-and-rejoin load balancing on or off [default: off].
    #[arg(long, value_parser = ["on", "off"])]
    pub(crate) loadbal: Option<String>,
    /// DHT locators: PredTime in ms, how far ahead subscriptions are predicted [default: 1000].
    #[arg(long, value_name = "MS")]
    pub(crate) pred_time: Option<f64>,
    /// DHT locators: PubTime in ms, the discovery allowance subscriptions grow by
    /// (× top speed) [default: 100].
    #[arg(long, value_name = "MS")]
    pub(crate) pub_time: Option<f64>,
    /// Interest prediction lead in ms, any locator: areas of interest swept along their
    /// object's velocity, and positions published, this far ahead (0 = margin only)
    /// [default: 300].
    #[arg(long, value_name = "MS")]
    pub(crate) interest_lead: Option<f64>,
    /// Turn off proactive replication of missiles (attach_to).
    #[arg(long)]
    pub(crate) no_proactive: bool,
    /// Run the placement loop (paper 001 §7.4): players get homes (random latency-matrix
    /// rows) and every node migrates its region to the node they are nearest to
    /// (`[placement]` in the config for its settings).
    #[arg(long)]
    pub(crate) placement: bool,
    /// Seconds at the start excluded from the figures [default: 5].
    #[arg(long)]
    pub(crate) warmup: Option<f64>,
    /// Simulated duration, e.g. 60s, 500ms, 2m [default: 60s].
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<std::time::Duration>,
    /// Seed for every random choice; same seed ⇒ identical report [default: 1].
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Latency source: `planetlab`, `uniform:RTT_MS`, or a matrix file (whitespace or CSV)
    /// [default: planetlab].
    #[arg(long)]
    pub(crate) latency: Option<String>,
    /// Probability that a datagram is lost [default: 0].
    #[arg(long)]
    pub(crate) loss: Option<f64>,
    /// Probability that a datagram is duplicated [default: 0].
    #[arg(long)]
    pub(crate) duplicate: Option<f64>,
    /// Extra one-way delay, uniform in [0, JITTER] ms [default: 0].
    #[arg(long, value_name = "MS")]
    pub(crate) jitter_ms: Option<f64>,
    /// Frames per second on each node [default: 10].
    #[arg(long)]
    pub(crate) frame_hz: Option<f64>,
}

impl ScenarioArgs {
    /// The configuration these flags describe (validated).
    pub(crate) fn config(&self) -> anyhow::Result<SimConfig> {
        let mut c = match &self.config {
            Some(p) => SimConfig::load(p)?,
            None => SimConfig::default(),
        };
        if let Some(v) = self.nodes {
            c.nodes = v;
        }
        if let Some(v) = self.players_per_node {
            c.players_per_node = v;
        }
        if let Some(v) = &self.arch {
            c.architecture = if v == "broadcast" {
                Architecture::Broadcast
            } else {
                Architecture::Colyseus
            };
        }
        if let Some(v) = &self.map {
            c.game.map = if v == "sqr" { MapKind::Sqr } else { MapKind::Rect };
        }
        if self.no_proactive {
            c.game.proactive = false;
        }
        if let Some(v) = &self.locator {
            c.locator.kind = v.clone();
        }
        if let Some(v) = &self.range_key {
            c.locator.range_key = v.clone();
        }
        if let Some(v) = &self.loadbal {
            c.locator.loadbal = v == "on";
        }
        if let Some(v) = self.pred_time {
            c.locator.pred_time_ms = v;
        }
        if let Some(v) = self.pub_time {
            c.locator.pub_time_ms = v;
        }
        if let Some(v) = self.interest_lead {
            c.locator.interest_lead_ms = v;
        }
        if self.placement {
            c.placement.enabled = true;
        }
        if let Some(v) = self.warmup {
            c.warmup_s = v;
        }
        if let Some(v) = self.duration {
            c.duration_s = v.as_secs_f64();
        }
        if let Some(v) = self.seed {
            c.seed = v;
        }
        if let Some(v) = &self.latency {
            c.network.latency = v.clone();
        }
        if let Some(v) = self.loss {
            c.network.loss = v;
        }
        if let Some(v) = self.duplicate {
            c.network.duplicate = v;
        }
        if let Some(v) = self.jitter_ms {
            c.network.jitter_ms = v;
        }
        if let Some(v) = self.frame_hz {
            c.frame_hz = v;
        }
        c.validate()?;
        Ok(c)
    }
}

/// Runs the command.
pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let cfg = args.scenario.config()?;
    let bar = crate::progress::bar(!args.quiet, 1000, "simulating");
    let mut progress = |frac: f64| bar.set_position((frac * 1000.0) as u64);
    let started = Instant::now();
    let mut server = None;
    let threads = args
        .threads
        .map_or_else(worldmesh_experiments::default_threads, usize::from);
    let mut run_stats = None;
    let report = match &args.dashboard {
        None => {
            let (report, stats) = scenario::run_counting(&cfg, threads, &mut progress)?;
            run_stats = Some(stats);
            report
        }
        Some(addr) => {
            let addr = parse_addr("--dashboard", addr)?;
            let speed = check_speed(args.speed.unwrap_or(1.0))?;
            let mut sim = scenario::build(&cfg)?;
            let hub = live::hub_for(&cfg, &sim, speed);
            let handle = worldmesh_dashboard::spawn(addr, Arc::clone(&hub))?;
            bar.suspend(|| {
                println!(
                    "dashboard: {} (open it in a browser; {speed}x real time)",
                    handle.url()
                )
            });
            let end = Time::from_secs_f64(cfg.duration_s);
            live::run_paced(&mut sim, Some(end), speed, &hub, &mut |_| {}, &mut progress);
            hub.finish();
            server = Some(handle);
            scenario::report(&cfg, &sim)
        }
    };
    let wall = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let arch = match cfg.architecture {
        Architecture::Colyseus => format!(
            "colyseus ({} locator{}{})",
            cfg.locator.kind,
            if cfg.locator.kind == "rangedht" && cfg.locator.range_key != "x" {
                format!(", {} key", cfg.locator.range_key)
            } else {
                String::new()
            },
            if cfg.locator.loadbal && cfg.locator.kind != "oracle" {
                ", load balancing"
            } else {
                ""
            }
        ),
        Architecture::Broadcast => "broadcast".to_string(),
    };
    let title = format!(
        "worldmesh simulate: {}-{}-{:?}, {} players, {:.0} s ({:.0} s warm-up excluded), {arch}, latency {}, loss {}",
        cfg.nodes,
        if cfg.players_per_node == 1 { "p2p".to_string() } else { format!("{}pp", cfg.players_per_node) },
        cfg.game.map,
        cfg.nodes * cfg.players_per_node,
        cfg.duration_s,
        cfg.effective_warmup(),
        cfg.network.latency,
        cfg.network.loss
    )
    .to_lowercase();
    let speed = if wall > 0.0 {
        format!("{:.1}x", report.sim_seconds / wall)
    } else {
        "-".into()
    };
    let m = &report.metrics;
    let pct = |v: f64| format!("{:.2}%", v * 100.0);
    let mut extra = vec![
        ("threads", threads_used(threads, run_stats.as_ref())),
        ("objects in the world (mean)", summary::f(m.objects, 1)),
        (
            "replicas required per node (mean)",
            summary::f(m.required_per_node, 1),
        ),
        (
            "missing replicas at 0 / 100 / 400 ms grace",
            format!(
                "{} / {} / {}",
                pct(m.missing[0]),
                pct(m.missing[1]),
                pct(m.missing[2])
            ),
        ),
        (
            "missing missiles at 0 / 100 / 400 ms grace",
            format!(
                "{} / {} / {}",
                pct(m.missing_missiles[0]),
                pct(m.missing_missiles[1]),
                pct(m.missing_missiles[2])
            ),
        ),
        (
            "replica staleness mean / p50 / p95 / p99 ms",
            format!(
                "{:.1} / {:.0} / {:.0} / {:.0}",
                m.staleness_ms[0], m.staleness_ms[1], m.staleness_ms[2], m.staleness_ms[3]
            ),
        ),
        (
            "bytes per object update: in packet / state data / on wire",
            format!(
                "{:.1} / {:.1} / {:.1}",
                report.item_bytes_per_update, report.data_bytes_per_update, report.bytes_per_update
            ),
        ),
        (
            "baseline: broadcast, per-node kbps",
            summary::f(m.broadcast_per_node_kbps, 1),
        ),
        (
            "baseline: client-server, server kbps",
            summary::f(m.client_server_server_kbps, 1),
        ),
        (
            "datagrams sent / lost / partitioned / duplicated",
            format!(
                "{} / {} / {} / {}",
                report.network.sent,
                report.network.lost,
                report.network.partitioned,
                report.network.duplicated
            ),
        ),
        ("simulated time, s", summary::f(report.sim_seconds, 1)),
        ("wall time, s", summary::f(wall, 2)),
        ("simulated / wall time", speed),
    ];
    if let Some(n) = report.region_migrations {
        extra.push(("placement: region migrations (paper 001 §7.4)", n.to_string()));
    }
    if let Some(timing) = &report.membership {
        extra.extend(summary::cluster_lines(&report.nodes));
        extra.push(("membership profile (SWIM timing)", timing.to_string()));
    }
    println!("{}", summary::headline(&title, &report.summary, &extra));
    println!("{}", summary::by_class(&report.summary, report.sim_seconds));
    if args.per_node {
        println!("{}", summary::per_node(&report.nodes));
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut json: serde_json::Value = serde_json::from_str(&report.to_json())?;
        json["wall_seconds"] = serde_json::json!(wall);
        let path = dir.join("report.json");
        std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("report written to {}", path.display());
    }
    if let Some(handle) = server {
        println!(
            "dashboard: still serving the final state at {} (Ctrl-C to stop)",
            handle.url()
        );
        handle.wait()?;
    }
    Ok(())
}

/// The "threads" row: what was asked, what ran, and how much of the run the parallel
/// rounds took.
fn threads_used(asked: usize, stats: Option<&scenario::RunStats>) -> String {
    match stats {
        None => "1 (the dashboard's paced run)".into(),
        Some(s) if s.threads < asked => {
            format!(
                "1 ({asked} asked: runs with persistence, placement or the oracle locator without a delay \
                 (locator.delay_ms) use one)"
            )
        }
        Some(s) if s.threads == 1 => "1".into(),
        Some(s) => format!(
            "{} ({} rounds, {:.1}% of engine events in them; groups of {:?} nodes, window {:.1} ms{})",
            s.threads,
            s.rounds,
            100.0 * s.events_in_rounds as f64 / s.engine_events.max(1) as f64,
            s.groups,
            s.lookahead.map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            s.oracle_delay
                .map(|d| format!(", at most the oracle's delay, {:.1} ms", d.as_secs_f64() * 1000.0))
                .unwrap_or_default()
        ),
    }
}

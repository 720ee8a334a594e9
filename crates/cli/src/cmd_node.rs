//! `worldmesh node`: run one real node process — QUIC with mutual TLS, SWIM membership
//! through seeds, the model workload, graceful drain on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncBufReadExt as _;
use worldmesh::config::{
    self, FileConfig, LogFormat, NodeSettings, Overrides, TransportKind, check_backups, check_founders,
    check_frame_hz, check_loss, check_players,
};
use worldmesh::report::{EVENT_PREFIX, READY_PREFIX, STARTED_PREFIX, SUMMARY_PREFIX, event_json};
use worldmesh::{ServeOptions, Server, ServerBuilder, Space};
use worldmesh_game::{GameMap, MapKind, ModelConfig, ModelObject, workload};
use worldmesh_node::RunSummary;

use crate::duration::parse_duration;
use crate::summary;

/// Arguments of `worldmesh node`. Every setting can also come from `--config FILE`
/// (flags override the file); see `worldmesh::config` for the file format.
#[derive(clap::Args, Debug)]
pub struct NodeArgs {
    /// TOML configuration file (flags override it).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// This node's id (its certificate must name it).
    #[arg(long)]
    id: Option<u32>,
    /// UDP address to listen on, e.g. 0.0.0.0:7000 (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The address the others dial (default: the listen address).
    #[arg(long, value_name = "ADDR")]
    advertise: Option<SocketAddr>,
    /// Seed addresses founders meet at (comma-separated or repeated). A founder whose seeds
    /// are only itself starts the world and waits to be joined.
    #[arg(long, value_name = "ADDR", value_delimiter = ',')]
    seeds: Vec<SocketAddr>,
    /// Join a running world through ADDR (repeatable): the node spawns nothing.
    #[arg(long, value_name = "ADDR")]
    join: Vec<SocketAddr>,
    /// The cluster CA certificate (`ca.pem`).
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// This node's certificate chain (`node-<ID>.pem`).
    #[arg(long, value_name = "FILE")]
    cert: Option<PathBuf>,
    /// This node's private key (`node-<ID>.key`).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Node-to-node transport: `quic` (mutual TLS; default) or `udp-insecure` (plain UDP
    /// trusting source addresses: a benchmark baseline, never for production).
    #[arg(long, value_enum)]
    transport: Option<TransportKind>,
    /// World: players per founder [default: 8].
    #[arg(long, alias = "bots", value_parser = players)]
    players: Option<usize>,
    /// World: map shape, `rect` or `sqr` [default: rect].
    #[arg(long, value_parser = map_kind)]
    map: Option<MapKind>,
    /// World: seed of the map, the initial objects and every random choice [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// World: `broadcast` (every node replicates everything; default) or interest-driven
    /// replication with the distributed locator inside the node, `rangedht` or `dht`.
    #[arg(long, value_parser = ["broadcast", "rangedht", "dht"])]
    locator: Option<String>,
    /// World: with `--locator rangedht`, the key: `x`, `y` or `hilbert` [default: x].
    #[arg(long, value_parser = ["x", "y", "hilbert"])]
    range_key: Option<String>,
    /// World: nodes 0..N create the initial objects and size the map [default: 1].
    #[arg(long, value_parser = founders)]
    founders: Option<usize>,
    /// World: time origin, UNIX ms (equal on every member) [default: 2025-01-01].
    #[arg(long)]
    epoch_ms: Option<u64>,
    /// World: frames per second [default: 10].
    #[arg(long, value_parser = frame_hz)]
    frame_hz: Option<f64>,
    /// World: backups of every primary [default: 2].
    #[arg(long, value_parser = backups)]
    backups: Option<usize>,
    /// Membership timing profile: `lan` or `wan` [default: `[membership] profile`, else
    /// `wan` when --latency emulates round trips over 80 ms (the `lan` probe wait), else
    /// `lan`].
    #[arg(long, value_parser = ["lan", "wan"])]
    membership: Option<String>,
    /// Persist this node's world in DIR/store.redb (created if absent): avatars at every
    /// checkpoint, durable objects (items) and the writes to them in the frame they change;
    /// a durable write is acknowledged only once it is on disk. A node started on a store
    /// that holds a previous run recovers its objects from it instead of spawning the
    /// initial ones; with --join (rejoining a running world) they are installed only once
    /// the cluster settled, skipping those the others adopted meanwhile. Off when absent:
    /// nothing survives the process.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// With --data-dir: frames between checkpoints of avatars [default: 10, 1 s at 10 Hz].
    #[arg(long, value_parser = checkpoint_frames, value_name = "N")]
    checkpoint_frames: Option<u32>,
    /// Serve Prometheus metrics at http://ADDR/metrics (text format 0.0.4), e.g.
    /// 127.0.0.1:9100 (port 0: any free port, printed in the ready line). Served from a
    /// thread of its own, off the frame loop; off when absent. The same endpoint serves
    /// the live dashboard's feed (`GET /view`, `GET /world`: `worldmesh dashboard
    /// --cluster ADDR`).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Log format on standard error (filter with RUST_LOG).
    #[arg(long, value_enum)]
    log_format: Option<LogFormat>,
    /// Emulate WAN delay on outgoing datagrams: `planetlab`, `uniform:RTT_MS` or a file.
    #[arg(long)]
    latency: Option<String>,
    /// Emulated loss probability of outgoing datagrams.
    #[arg(long, value_parser = loss)]
    loss: Option<f64>,
    /// Give up reaching the seeds after this long [default: 30s].
    #[arg(long, value_parser = parse_duration)]
    join_timeout: Option<Duration>,
    /// A drain leaves after this long even if primaries remain [default: 30s].
    #[arg(long, value_parser = parse_duration)]
    drain_deadline: Option<Duration>,
    /// Admit players: the UDP address of the player port (QUIC, this node's certificate).
    #[arg(long, value_name = "ADDR", requires = "player_key")]
    player_listen: Option<SocketAddr>,
    /// The connect-token key players' tokens are checked with (`worldmesh token init`).
    #[arg(long, value_name = "FILE")]
    player_key: Option<PathBuf>,
    /// Most players at once [default: 4096].
    #[arg(long)]
    max_players: Option<usize>,
    /// Take part in the assignment of players to nodes (paper 002: optimal J-SA/L-SA run
    /// by the lowest live member; players are handed to the node that minimises the total
    /// delay under capacity).
    #[arg(long)]
    assign: bool,
    /// This node's capacity for the assignment, players [default: --max-players].
    #[arg(long)]
    capacity: Option<u32>,
    /// Run the placement loop (paper 001 §7.4) over the delays players report: this node's
    /// region migrates to the node they are nearest to; players follow their avatars.
    #[arg(long, conflicts_with = "assign")]
    placement: bool,
    /// Stop after this long (from the start); default: until a signal.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Start a drain this long after the start (as SIGTERM would).
    #[arg(long, value_parser = parse_duration)]
    drain_after: Option<Duration>,
    /// Print the final report as one JSON line (prefixed `WORLDMESH-SUMMARY `), and the
    /// ready and started lines, instead of a table.
    #[arg(long)]
    summary_json: bool,
    /// Print membership, adoption, drain and refusal events as JSON lines
    /// (`WORLDMESH-EVENT `) with wall-clock timestamps.
    #[arg(long)]
    events_json: bool,
    /// After the ready line, wait for a `start` line on standard input (a launcher's
    /// start barrier).
    #[arg(long)]
    wait_start: bool,
    /// Stop when standard input closes (launchers use this so nodes never outlive them).
    #[arg(long)]
    exit_on_stdin_close: bool,
}

fn players(s: &str) -> Result<usize, String> {
    let v: usize = s.parse().map_err(|e| format!("{e}"))?;
    check_players(v, "--players").map(|_| v)
}
fn founders(s: &str) -> Result<usize, String> {
    let v: usize = s.parse().map_err(|e| format!("{e}"))?;
    check_founders(v, "--founders").map(|_| v)
}
fn frame_hz(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    check_frame_hz(v, "--frame-hz").map(|_| v)
}
fn checkpoint_frames(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|e| format!("{e}"))?;
    config::check_checkpoint_frames(v, "--checkpoint-frames").map(|_| v)
}
fn backups(s: &str) -> Result<usize, String> {
    let v: usize = s.parse().map_err(|e| format!("{e}"))?;
    check_backups(v, "--backups").map(|_| v)
}
fn loss(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    check_loss(v, "--loss").map(|_| v)
}
fn map_kind(s: &str) -> Result<MapKind, String> {
    match s {
        "rect" => Ok(MapKind::Rect),
        "sqr" => Ok(MapKind::Sqr),
        _ => Err(format!("`{s}` is not a map; valid: rect, sqr")),
    }
}

impl NodeArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            id: self.id,
            listen: self.listen,
            advertise: self.advertise,
            seeds: (!self.seeds.is_empty()).then(|| self.seeds.clone()),
            join: (!self.join.is_empty()).then(|| self.join.clone()),
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            transport: self.transport,
            frame_hz: self.frame_hz,
            backups: self.backups,
            players: self.players,
            map: self.map,
            seed: self.seed,
            locator: self.locator.clone(),
            range_key: self.range_key.clone(),
            founders: self.founders,
            epoch_ms: self.epoch_ms,
            membership: self.membership.clone(),
            data_dir: self.data_dir.clone(),
            checkpoint_frames: self.checkpoint_frames,
            metrics: self.metrics,
            log_format: self.log_format,
            latency: self.latency.clone(),
            loss: self.loss,
            join_timeout: self.join_timeout,
            drain_deadline: self.drain_deadline,
            player_listen: self.player_listen,
            player_key: self.player_key.clone(),
            max_players: self.max_players,
            assign: self.assign.then_some(true),
            capacity: self.capacity,
            placement: self.placement.then_some(true),
        }
    }
}

/// How the process runs (not part of the node's configuration).
struct Run {
    duration: Option<Duration>,
    drain_after: Option<Duration>,
    summary_json: bool,
    events_json: bool,
    wait_start: bool,
    exit_on_stdin_close: bool,
}

/// Runs the command.
pub fn run(args: NodeArgs) -> anyhow::Result<()> {
    let (file, source) = match &args.config {
        Some(p) => (FileConfig::load(p)?, p.display().to_string()),
        None => (FileConfig::default(), "a --config file".to_string()),
    };
    let settings = config::resolve(file, args.overrides(), &source)?;
    crate::logging::init(settings.log_format);
    let run = Run {
        duration: args.duration,
        drain_after: args.drain_after,
        summary_json: args.summary_json,
        events_json: args.events_json,
        wait_start: args.wait_start,
        exit_on_stdin_close: args.exit_on_stdin_close,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(serve(settings, run));
    // The stdin reader sits in a blocking read; do not wait for it.
    rt.shutdown_background();
    result
}

/// The model game on the embeddable server (`worldmesh::Server`): the map every member
/// generates from the world settings, its space for the locator, each founder's share of
/// the initial objects, players, and the dashboard's map.
fn model_server(s: &NodeSettings) -> anyhow::Result<ServerBuilder<ModelObject>> {
    let w = &s.world;
    let game = ModelConfig {
        map: w.map,
        ..ModelConfig::default()
    };
    let world = Arc::new(GameMap::generate(&game, w.founders * w.players, w.seed));
    let space = Space {
        bounds: world.locator_bounds(),
        regions: (w.founders * w.players).clamp(1, 1 << 20) as u32,
        max_speed: game.player_speed,
    };
    let dashboard = crate::live::map_world(
        format!(
            "cluster: node {} of a {}-founder world, seed {}",
            s.id, w.founders, w.seed
        ),
        &world,
    );
    let (founders, players, seed) = (w.founders, w.players, w.seed);
    let map = Arc::clone(&world);
    Ok(Server::builder()
        .game::<ModelObject>(world)
        .settings(s.clone())
        .space(space)
        .players()
        .dashboard_world(serde_json::to_string(&dashboard)?)
        .initial_objects(move |me| {
            workload::initial_objects(&map, founders, players, seed)
                .into_iter()
                .nth(me.0 as usize)
                .unwrap_or_default()
        }))
}

async fn serve(s: NodeSettings, run: Run) -> anyhow::Result<()> {
    let mut running = model_server(&s)?.start().await?;
    let ready = running.ready().clone();
    if run.summary_json || run.wait_start {
        println!("{READY_PREFIX}{}", serde_json::to_string(&ready)?);
    }
    let mut stdin = stdin_lines(run.wait_start || run.exit_on_stdin_close);
    if run.wait_start {
        loop {
            match stdin.recv().await {
                Some(l) if l.trim() == "start" => break,
                Some(_) => continue,
                None => {
                    tracing::info!(node = s.id, "standard input closed before the start: stopping");
                    running.control().stop().await;
                    running.serve(ServeOptions::default(), |_| {}).await?;
                    return Ok(());
                }
            }
        }
    }
    let started = running.begin().await;
    if run.summary_json || run.wait_start {
        println!("{STARTED_PREFIX}{}", serde_json::to_string(&started)?);
    }
    if run.exit_on_stdin_close {
        let control = running.control();
        let id = s.id;
        tokio::spawn(async move {
            while stdin.recv().await.is_some() {}
            tracing::info!(node = id, "standard input closed: stopping");
            control.stop().await;
        });
    }
    let opts = ServeOptions {
        duration: run.duration,
        drain_after: run.drain_after,
        signals: true,
    };
    let events_json = run.events_json;
    let finished = running
        .serve(opts, |e| {
            if events_json && let Some(v) = event_json(e) {
                println!("{EVENT_PREFIX}{v}");
            }
        })
        .await?;
    let report = finished.report;
    if run.summary_json {
        println!("{SUMMARY_PREFIX}{}", serde_json::to_string(&report)?);
    } else {
        let rs = RunSummary::from_nodes(std::slice::from_ref(&report.node));
        let title = format!("worldmesh node {} on {}", s.id, s.advertise);
        let extra = summary::transport_lines(std::slice::from_ref(&report));
        println!("{}", summary::headline(&title, &rs, &extra));
    }
    Ok(())
}

/// Lines of standard input, read on a blocking thread (only if `enabled`; otherwise a
/// channel that never yields).
fn stdin_lines(enabled: bool) -> tokio::sync::mpsc::Receiver<String> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    if enabled {
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                if tx.send(l).await.is_err() {
                    return;
                }
            }
        });
    } else {
        // Hold the sender so the channel stays open (and silent).
        tokio::spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await
        });
    }
    rx
}

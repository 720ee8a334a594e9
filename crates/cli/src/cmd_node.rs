//! `worldmesh node`: run one real node process — QUIC with mutual TLS, SWIM membership
//! through seeds, the model workload, graceful drain on SIGTERM/SIGINT.

use anyhow::{Context as _, bail};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncBufReadExt as _;
use worldmesh_core::wire::PROTOCOL_VERSION;
use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_game::{GameMap, MapKind, ModelConfig, ModelObject, workload};
use worldmesh_locator::{Locator, LocatorSettings};
use worldmesh_net::hello::Hello;
use worldmesh_net::pki::NodeIdentity;
use worldmesh_net::quic::{QuicConfig, QuicTransport};
use worldmesh_net::transport::Transport;
use worldmesh_net::udp::UdpTransport;
use worldmesh_net::{Clock, DelayShim, DriverOptions, EventKind, JoinPolicy, NodeHandle, StopReason};
use worldmesh_node::drain::DrainConfig;
use worldmesh_node::{Event, Mode, Node, NodeConfig, PersistConfig, RunSummary};
use worldmesh_store::Store;

use crate::duration::parse_duration;
use crate::node_config::{
    self, FileConfig, LogFormat, NodeSettings, Overrides, TransportKind, check_backups, check_founders,
    check_frame_hz, check_loss, check_players,
};
use crate::node_report::{
    EVENT_PREFIX, NodeReport, PersistReport, PlayersReport, READY_PREFIX, Ready, STARTED_PREFIX,
    SUMMARY_PREFIX, Started, cpu_seconds, event_json,
};
use crate::summary;
use worldmesh_net::Players;
use worldmesh_net::metrics::SnapshotCell;
use worldmesh_net::metrics_server::{MetricsServer, MetricsServerConfig};
use worldmesh_net::players::{PlayerListener, PlayerListenerConfig};
use worldmesh_net::view::ViewCell;
use worldmesh_node::sessions::{SessionConfig, Sessions};

/// Reads a small file (a key), refusing one larger than `limit` bytes.
pub(crate) fn read_small(path: &std::path::Path, limit: u64) -> anyhow::Result<String> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("{}: cannot read", path.display()))?
        .len();
    if len > limit {
        bail!("{}: {len} bytes is too large (limit {limit})", path.display());
    }
    std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// Arguments of `worldmesh node`. Every setting can also come from `--config FILE`
/// (flags override the file); see `node_config` for the file format.
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
    /// Membership timing profile: `lan` (default) or `wan`.
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
    node_config::check_checkpoint_frames(v, "--checkpoint-frames").map(|_| v)
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

/// Largest object-update payload per datagram (frame header: 6 more bytes).
const MAX_UPDATE_PAYLOAD: usize = 1150;

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
    let settings = node_config::resolve(file, args.overrides(), &source)?;
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
    let result = rt.block_on(start(settings, run));
    // The stdin reader sits in a blocking read; do not wait for it.
    rt.shutdown_background();
    result
}

/// This process's generation: UNIX seconds at start (a restarted process is a new member).
fn generation_now() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

async fn start(s: NodeSettings, run: Run) -> anyhow::Result<()> {
    let me = NodeId(s.id);
    let generation = generation_now();
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        node: me,
        generation: u64::from(generation),
        advertise: s.advertise,
        world: s.world.hello_list(),
    };
    match s.transport {
        TransportKind::Quic => {
            let tls = s.tls.clone().context("the QUIC transport needs certificates")?;
            let identity = NodeIdentity::load(&tls.cert, &tls.key, &tls.ca, me)?;
            let players = match &s.players {
                Some(p) => {
                    let key = crate::cmd_token::load_key(&p.key)?;
                    let mut cfg = PlayerListenerConfig::new(p.listen);
                    cfg.max_connections = p.max.saturating_mul(2);
                    let listener = PlayerListener::bind(cfg, &identity)?;
                    let sc = SessionConfig {
                        max_players: p.max,
                        ..SessionConfig::default()
                    };
                    let mut sessions = Sessions::<ModelObject>::new(sc, key);
                    if p.assign {
                        let cfg = worldmesh_node::assignment::AssignmentConfig {
                            capacity: p.capacity.unwrap_or(p.max as u32),
                            ..Default::default()
                        };
                        sessions = sessions
                            .with_assignment(worldmesh_node::assignment::AssignmentAgent::new(me, cfg));
                    }
                    if p.placement {
                        sessions = sessions.with_placement(worldmesh_node::PlacementConfig::default());
                    }
                    Some(Players {
                        listener,
                        host: Box::new(sessions),
                    })
                }
                None => None,
            };
            let mut qc = QuicConfig::new(s.listen, identity, hello);
            let q = &s.quic;
            if let Some(n) = q.ack_threshold {
                qc.ack_eliciting_threshold = Some(n);
            }
            if let Some(ms) = q.max_ack_delay_ms {
                qc.max_ack_delay = Duration::from_millis(ms);
            }
            // The node never sends a datagram larger than QUIC's minimum (see `build_node`),
            // so MTU probes (full-size padded packets, repeated per connection) buy nothing
            // by default; 4-byte connection ids save 4 bytes in every packet.
            qc.mtu_discovery = q.mtu_discovery.unwrap_or(false);
            qc.cid_len = q.cid_len.unwrap_or(4);
            if let Some(ms) = q.idle_timeout_ms {
                qc.idle_timeout = Duration::from_millis(ms);
            }
            if let Some(ms) = q.keep_alive_ms {
                qc.keep_alive = Duration::from_millis(ms);
            }
            let t = QuicTransport::bind(qc)?;
            serve(s, run, generation, t, players).await
        }
        TransportKind::UdpInsecure => {
            tracing::warn!(
                "INSECURE transport udp-insecure: datagrams are trusted by source address, unauthenticated \
                 and unencrypted; a benchmark baseline only"
            );
            let t = UdpTransport::bind_with_hello(s.listen, hello).await?;
            serve(s, run, generation, t, None).await
        }
    }
}

/// The model world every member builds from the world settings.
fn build_node(
    s: &NodeSettings,
    generation: u32,
    advertise: SocketAddr,
    now: Time,
) -> anyhow::Result<Node<ModelObject>> {
    let me = NodeId(s.id);
    let w = &s.world;
    let mut cfg = NodeConfig::new(me, Vec::new(), w.seed);
    cfg.frame_interval = Duration::from_secs_f64(1.0 / w.frame_hz);
    cfg.generation = generation;
    cfg.membership = Some(s.membership.clone());
    cfg.address = Some(advertise);
    cfg.replica.backups = w.backups;
    if s.data_dir.is_some() {
        cfg.persist = Some(PersistConfig {
            checkpoint_every: s.checkpoint_frames,
        });
    }
    // Object-update datagrams fit one QUIC DATAGRAM frame at QUIC's minimum MTU (1200-byte
    // packets leave 1162 bytes for a datagram with 4- to 8-byte connection ids): larger
    // ones would ride the reliable stream.
    cfg.replica.max_payload = MAX_UPDATE_PAYLOAD;
    cfg.drain = DrainConfig {
        deadline: s.drain_deadline,
        ..DrainConfig::default()
    };
    let loc = LocatorSettings {
        kind: if w.locator == "broadcast" {
            "oracle".into()
        } else {
            w.locator.clone()
        },
        range_key: w.range_key.clone(),
        ..LocatorSettings::default()
    };
    loc.validate().map_err(anyhow::Error::msg)?;
    if w.locator != "broadcast" {
        cfg = cfg.with_mode(Mode::Interest);
        cfg.replica.interest_margin = loc.interest_margin;
        cfg.replica.interest_lead = loc.interest_lead();
    }
    let game = ModelConfig {
        map: w.map,
        ..ModelConfig::default()
    };
    let world = Arc::new(GameMap::generate(&game, w.founders * w.players, w.seed));
    let mut node: Node<ModelObject> = Node::new(cfg, Arc::clone(&world), now);
    let regions = (w.founders * w.players).clamp(1, 1 << 20) as u32;
    if let Some(mut kc) = loc.build(world.locator_bounds(), regions, game.player_speed) {
        // Every member computes the same ring geometry: the founders form the initial ring
        // (evenly placed, without messages); a joiner starts outside and joins through its
        // seed. Key ranges are cut into pieces sized for the founders on every node, so
        // lookups are split alike everywhere.
        kc.chunk_members = w.founders;
        let founders: Vec<NodeId> = (0..w.founders as u32).map(NodeId).collect();
        let mut members = founders.clone();
        if !s.is_founder() {
            members.push(me);
        }
        let ring: &[NodeId] = if s.is_founder() { &founders } else { &[] };
        let l = Locator::new(me, kc, &members, ring, w.seed, now).context("locator")?;
        node.attach_locator(l);
    }
    Ok(node)
}

async fn serve<T: Transport + 'static>(
    s: NodeSettings,
    run: Run,
    generation: u32,
    transport: T,
    players: Option<Players<ModelObject>>,
) -> anyhow::Result<()> {
    let me = NodeId(s.id);
    let player_addr = players.as_ref().map(|p| p.listener.local_addr());
    let local = transport.local_addr();
    let mut advertise = s.advertise;
    if advertise.port() == 0 {
        advertise.set_port(local.port());
    }
    let clock = Clock::new(s.world.epoch_ms);
    let mut node = build_node(&s, generation, advertise, clock.now())?;
    // Persistence: the store in --data-dir; a store holding a previous run is recovered
    // (and the initial objects are not spawned again).
    let (store, recovered) = open_store(&s, &mut node, clock.now())?;
    let shim = match (&s.shim_latency, s.shim_loss) {
        (None, 0.0) => None,
        (spec, l) => {
            let matrix = match spec {
                Some(spec) => worldmesh_core::latency::load_spec(spec)?,
                None => worldmesh_core::LatencyMatrix::uniform(1, 0.0),
            };
            // Rows for every founder, and spare ones for joiners, mapped the same way on
            // every member (ids beyond the mapped rows get no delay).
            Some(DelayShim::new(
                matrix,
                s.world.founders.max(256),
                me,
                s.world.seed,
                l,
            ))
        }
    };
    let mut opts = DriverOptions::new(clock);
    opts.store = store;
    opts.shim = shim;
    opts.seeds = s.contacts().to_vec();
    opts.join = JoinPolicy {
        timeout: s.join_timeout,
        ..JoinPolicy::default()
    };
    let dials = opts.seeds.iter().any(|a| *a != local && *a != advertise);
    tracing::info!(
        node = s.id,
        listen = %local,
        advertise = %advertise,
        version = env!("CARGO_PKG_VERSION"),
        protocol = PROTOCOL_VERSION,
        digest = %s.digest(),
        transport = s.transport.name(),
        generation,
        founder = s.is_founder(),
        locator = %s.world.locator,
        founders = s.world.founders,
        membership = %s.membership_profile,
        data_dir = ?s.data_dir,
        metrics = ?s.metrics,
        "worldmesh node starting"
    );
    if let Some(a) = player_addr {
        tracing::info!(node = s.id, players = %a, "player port open");
    }
    // The metrics endpoint, bound before the run so a taken address fails the start.
    let metrics_server = match s.metrics {
        Some(addr) => {
            let cell = SnapshotCell::new();
            // The live dashboard's feed (`worldmesh dashboard --cluster`) on the same
            // endpoint: views built only while someone asks, at most 10 a second.
            let world = crate::live::map_world(
                format!(
                    "cluster: node {} of a {}-founder world, seed {}",
                    s.id, s.world.founders, s.world.seed
                ),
                node.world(),
            );
            let view = ViewCell::new(serde_json::to_string(&world)?, Duration::from_millis(100));
            opts.view = Some(view.clone());
            let srv =
                MetricsServer::start_with_view(MetricsServerConfig::new(addr), cell.clone(), Some(view))?;
            tracing::info!(node = s.id, addr = %srv.local_addr(), "metrics at http://{}/metrics", srv.local_addr());
            opts.metrics = Some(cell);
            Some(srv)
        }
        None => None,
    };
    let metrics_addr = metrics_server.as_ref().map(MetricsServer::local_addr);
    let (mut handle, driver) = worldmesh_net::start_with_players(node, transport, opts, players);
    let mut task = tokio::spawn(driver);
    let mut stdin = stdin_lines(run.wait_start || run.exit_on_stdin_close);

    // Ready: bound, and joined if there was anyone to join.
    if dials {
        let deadline = tokio::time::Instant::now() + s.join_timeout + Duration::from_secs(5);
        loop {
            tokio::select! {
                e = handle.events.recv() => match e {
                    Some(e) => {
                        print_event(&run, &e);
                        if matches!(e.kind, EventKind::Node(Event::Joined)) {
                            break;
                        }
                    }
                    None => break,
                },
                r = &mut task => {
                    return match r {
                        Ok(Err(e)) => Err(e.into()),
                        Ok(Ok(_)) => bail!("the node stopped before it joined"),
                        Err(e) => Err(e.into()),
                    };
                }
                _ = tokio::time::sleep_until(deadline) => {
                    bail!("reached the seeds but did not join the cluster within {:?}", s.join_timeout + Duration::from_secs(5));
                }
            }
        }
    }
    let members = handle.snapshot(None).await.map_or(1, |sn| sn.members.len() + 1);
    tracing::info!(node = s.id, members, "ready");
    if run.summary_json || run.wait_start {
        let r = Ready {
            node: me,
            addr: advertise,
            generation,
            members,
            players: player_addr,
            metrics: metrics_addr,
        };
        println!("{READY_PREFIX}{}", serde_json::to_string(&r)?);
    }
    if run.wait_start {
        loop {
            match stdin.recv().await {
                Some(l) if l.trim() == "start" => break,
                Some(_) => continue,
                None => {
                    tracing::info!(node = s.id, "standard input closed before the start: stopping");
                    handle.stop().await;
                    let _ = task.await;
                    return Ok(());
                }
            }
        }
    }

    // The run.
    let started_at = handle.snapshot(None).await.map_or(Time::ZERO, |sn| sn.at);
    let started_unix = worldmesh_net::driver::unix_ms();
    let cpu0 = cpu_seconds().unwrap_or(0.0);
    let mut primaries: Vec<ObjectId> = Vec::new();
    if s.is_founder() && recovered.is_none() {
        let game = ModelConfig {
            map: s.world.map,
            ..ModelConfig::default()
        };
        let world = GameMap::generate(&game, s.world.founders * s.world.players, s.world.seed);
        let mine = workload::initial_objects(&world, s.world.founders, s.world.players, s.world.seed)
            .into_iter()
            .nth(s.id as usize)
            .unwrap_or_default();
        for o in mine {
            if let Some(id) = handle.spawn(o).await {
                primaries.push(id);
            }
        }
    }
    tracing::info!(node = s.id, spawned = primaries.len(), "run started");
    if run.summary_json || run.wait_start {
        let st = Started {
            node: me,
            unix_ms: started_unix,
            primaries,
            recovered: recovered.clone().unwrap_or_default(),
        };
        println!("{STARTED_PREFIX}{}", serde_json::to_string(&st)?);
    }

    let end = run.duration.map(|d| tokio::time::Instant::now() + d);
    let drain_at = run.drain_after.map(|d| tokio::time::Instant::now() + d);
    let mut draining: Option<tokio::time::Instant> = None;
    let mut signals = Signals::new()?;
    loop {
        let drain_deadline = draining.map(|t| t + s.drain_deadline + Duration::from_secs(5));
        tokio::select! {
            e = handle.events.recv() => match e {
                Some(e) => print_event(&run, &e),
                None => break,
            },
            _ = sleep_opt(end) => {
                handle.stop().await;
                break;
            }
            _ = sleep_opt(drain_at), if draining.is_none() => {
                start_drain(&handle, &mut draining, "--drain-after").await;
            }
            sig = signals.next() => {
                if sig == "SIGQUIT" {
                    // Stop without draining: the objects stay here (and, with a store, in
                    // it: a last checkpoint is taken), for a whole-cluster restart.
                    tracing::info!(node = s.id, "SIGQUIT: stopping without a drain");
                    handle.stop().await;
                    break;
                }
                if draining.is_none() {
                    start_drain(&handle, &mut draining, sig).await;
                } else {
                    tracing::warn!(node = s.id, signal = sig, "second signal: stopping without finishing the drain");
                    handle.stop().await;
                    break;
                }
            }
            _ = sleep_opt(drain_deadline) => {
                tracing::warn!(node = s.id, "the drain did not finish in time: stopping");
                handle.stop().await;
                break;
            }
            l = stdin.recv(), if run.exit_on_stdin_close => {
                if l.is_none() {
                    tracing::info!(node = s.id, "standard input closed: stopping");
                    handle.stop().await;
                    break;
                }
            }
            r = &mut task => {
                return finish(&s, &run, r?, started_at, started_unix, cpu0, generation).await;
            }
        }
    }
    // Events still queued.
    while let Ok(e) = handle.events.try_recv() {
        print_event(&run, &e);
    }
    let out = task.await?;
    finish(&s, &run, out, started_at, started_unix, cpu0, generation).await
}

/// Opens the store in `--data-dir` (if set) and recovers `node` from it when it holds a
/// previous run. Returns the store for the driver and the recovered primaries (`None`:
/// a fresh store, or no persistence).
fn open_store(
    s: &NodeSettings,
    node: &mut Node<ModelObject>,
    now: Time,
) -> anyhow::Result<(Option<Store>, Option<Vec<ObjectId>>)> {
    let Some(dir) = &s.data_dir else {
        return Ok((None, None));
    };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    let store = Store::open(dir)?;
    let rec = store.load()?;
    if rec.is_empty() {
        tracing::info!(node = s.id, store = %store.path().display(), "new store");
        return Ok((Some(store), None));
    }
    // A node that joins a running world (`--join`) installs what it kept only once the
    // others had time to tell it what they adopted while it was down; founders (a whole
    // world restarting) install it at once.
    let report = if s.join.is_empty() {
        node.recover(now, rec)
    } else {
        node.recover_after_join(
            now,
            rec,
            s.membership.suspect_to_down_after + Duration::from_secs(1),
        )
    }
    .with_context(|| format!("cannot recover from {}", store.path().display()))?;
    let ids = node.store().primary_ids();
    tracing::info!(
        node = s.id,
        store = %store.path().display(),
        durable = report.durable,
        checkpointed = report.checkpointed,
        log_entries = report.log_entries,
        last_checkpoint_frame = report.last_checkpoint.map(|c| c.frame),
        "recovered from the store"
    );
    Ok((Some(store), Some(ids)))
}

async fn start_drain(
    handle: &NodeHandle<ModelObject>,
    draining: &mut Option<tokio::time::Instant>,
    why: &str,
) {
    tracing::info!(reason = why, "starting a graceful drain");
    handle.drain().await;
    *draining = Some(tokio::time::Instant::now());
}

#[allow(clippy::too_many_arguments)]
async fn finish<T: Transport>(
    s: &NodeSettings,
    run: &Run,
    out: Result<worldmesh_net::RunOutcome<ModelObject, T>, worldmesh_net::NetError>,
    started_at: Time,
    started_unix: u64,
    cpu0: f64,
    generation: u32,
) -> anyhow::Result<()> {
    let out = out?;
    let cpu = cpu_seconds().map_or(0.0, |c| c - cpu0);
    let node = &out.node;
    let origin = node.stats().origin;
    let from_s = started_at.saturating_since(origin).as_secs_f64();
    let to_s = out
        .ended
        .saturating_since(origin)
        .as_secs_f64()
        .max(from_s + 1e-3);
    let summary = node.summary_window(out.ended, from_s, to_s);
    let (stop, left_behind) = match out.reason {
        StopReason::Stopped => ("stopped", 0),
        StopReason::HandleDropped => ("handle_dropped", 0),
        StopReason::Drained { left_behind } => ("drained", left_behind),
    };
    let (transport_refusals, node_rejections, unknown_senders) =
        NodeReport::labels(&out.transport_stats, &summary.rejections);
    let report = NodeReport {
        transport_refusals,
        node_rejections,
        unknown_senders,
        node: summary,
        transport_kind: s.transport.name().into(),
        transport_overhead_bytes: out.transport_stats.overhead_sent_bytes(),
        transport: out.transport_stats.clone(),
        driver: out.driver.clone(),
        primary_ids: node.store().primary_ids(),
        members: node.members().to_vec(),
        generation,
        started_unix_ms: started_unix,
        ended_unix_ms: worldmesh_net::driver::unix_ms(),
        cpu_seconds: cpu,
        stop: stop.into(),
        left_behind,
        frame_time: out.frame_times.clone(),
        players: out.players.clone().map(|p| PlayersReport {
            sessions: p.sessions,
            port: p.port,
            assignment: p.assignment,
        }),
        persist: node.persist_stats().map(|st| PersistReport {
            node: st.clone(),
            store: out.persist.clone().unwrap_or_default(),
        }),
    };
    tracing::info!(
        node = s.id,
        stop,
        left_behind,
        primaries = report.node.primaries,
        replicas = report.node.replicas,
        members = report.members.len() + 1,
        "stopped"
    );
    out.transport.close().await;
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

fn print_event(run: &Run, e: &worldmesh_net::NodeEvent) {
    if run.events_json
        && let Some(v) = event_json(e)
    {
        println!("{EVENT_PREFIX}{v}");
    }
}

async fn sleep_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
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

/// SIGTERM and SIGINT (drain), SIGQUIT (stop without a drain).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
            quit: signal(SignalKind::quit()).context("cannot watch SIGQUIT")?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.quit.recv() => "SIGQUIT",
        }
    }
}

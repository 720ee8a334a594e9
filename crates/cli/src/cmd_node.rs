//! `worldmesh node`: run one real node over UDP.

use anyhow::{Context as _, bail};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::AsyncReadExt as _;
use worldmesh_core::{NodeId, Time};
use worldmesh_game::{GameMap, ModelConfig, ModelObject, workload};
use worldmesh_locator::Locator;
use worldmesh_net::{Clock, DelayShim, PeerTable, RunOptions, run_node};
use worldmesh_node::{Mode, Node, NodeConfig, RunSummary};
use worldmesh_sim::config::SimConfig;
use worldmesh_sim::scenario;

use crate::duration::parse_duration;
use crate::summary;

/// Prefix of the machine-readable summary line printed with `--summary-json`.
pub const SUMMARY_PREFIX: &str = "WORLDMESH-SUMMARY ";

/// Arguments of `worldmesh node`.
#[derive(clap::Args, Debug)]
pub struct NodeArgs {
    /// This node's id (0-based; ids index the latency matrix rows of the WAN shim).
    #[arg(long)]
    id: u32,
    /// Cluster file (TOML: `[[node]]` tables with `id` and `addr`); this node listens on
    /// its own entry's address. Alternative to --listen/--peer.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["listen", "peer"])]
    cluster: Option<PathBuf>,
    /// UDP address to listen on, e.g. 127.0.0.1:7000.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Another member, as ID=HOST:PORT (repeat for each peer).
    #[arg(long, value_name = "ID=ADDR")]
    peer: Vec<String>,
    /// Players of the model workload whose primaries this node holds. The map is sized for
    /// players × members, so every node must be given the same value.
    #[arg(long, alias = "bots", default_value_t = 8)]
    players: usize,
    /// Stop after this long (e.g. 10s); default: run until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// Seed of the node's random stream and of the WAN shim's node-to-row mapping.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Shared epoch (UNIX ms) so timestamps agree across processes; 0 = start of this process.
    #[arg(long, default_value_t = 0)]
    epoch_ms: u64,
    /// Emulate WAN delay on outgoing datagrams: `planetlab`, `uniform:RTT_MS` or a matrix file.
    #[arg(long)]
    latency: Option<String>,
    /// Emulated loss probability for outgoing datagrams (needs no --latency).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Frames per second.
    #[arg(long, default_value_t = 10.0)]
    frame_hz: f64,
    /// Interest-driven replication with the distributed object locator running inside the
    /// node (paper `000` §3, §6): `rangedht` or `dht`. Without it every node replicates
    /// every object (broadcast). Every member must use the same value.
    #[arg(long, value_parser = ["rangedht", "dht"])]
    pub locator: Option<String>,
    /// With `--locator rangedht`: the naming attribute keyed on, `x`, `y` or `hilbert`
    /// [default: x]. Every member must use the same value.
    #[arg(long, value_parser = ["x", "y", "hilbert"])]
    pub range_key: Option<String>,
    /// Print the final summary as one JSON line (prefixed `WORLDMESH-SUMMARY `) instead of a table.
    #[arg(long)]
    summary_json: bool,
    /// Stop when standard input closes (the cluster launcher uses this so that nodes never
    /// outlive it).
    #[arg(long)]
    exit_on_stdin_close: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    node: Vec<ClusterEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterEntry {
    id: u32,
    addr: SocketAddr,
}

/// Writes a cluster file for `addrs` (node i at `addrs[i]`).
pub fn cluster_file_text(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("[[node]]\nid = {i}\naddr = \"{a}\"\n\n"))
        .collect()
}

impl NodeArgs {
    fn membership(&self) -> anyhow::Result<(SocketAddr, PeerTable)> {
        let me = NodeId(self.id);
        let mut table = PeerTable::new();
        let listen = if let Some(path) = &self.cluster {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let file: ClusterFile =
                toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let mut listen = None;
            for e in file.node {
                if e.id == self.id {
                    listen = Some(e.addr);
                } else {
                    table
                        .insert(NodeId(e.id), e.addr)
                        .with_context(|| format!("in {}", path.display()))?;
                }
            }
            match listen {
                Some(a) => a,
                None => bail!("{}: no [[node]] entry with id = {}", path.display(), self.id),
            }
        } else {
            for p in &self.peer {
                let (id, addr) = PeerTable::parse_entry(p)?;
                if id == me {
                    bail!("--peer {p}: that is this node's own id");
                }
                table.insert(id, addr)?;
            }
            match self.listen {
                Some(a) => a,
                None => bail!("give --listen ADDR (with --peer ID=ADDR for each peer) or --cluster FILE"),
            }
        };
        Ok((listen, table))
    }
}

/// Runs the command.
pub fn run(args: NodeArgs) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&args.loss) {
        bail!("--loss must be a probability in [0, 1], got {}", args.loss);
    }
    if !(args.frame_hz.is_finite() && args.frame_hz > 0.0 && args.frame_hz <= 1000.0) {
        bail!("--frame-hz must be in (0, 1000], got {}", args.frame_hz);
    }
    if args.players > 100_000 {
        bail!("--players must be at most 100000, got {}", args.players);
    }
    let (listen, peers) = args.membership()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        let socket = tokio::net::UdpSocket::bind(listen)
            .await
            .with_context(|| format!("cannot bind {listen}"))?;
        let me = NodeId(args.id);
        let nodes = peers.len() + 1;
        let clock = Clock::new(args.epoch_ms);
        let shim = if args.latency.is_some() || args.loss > 0.0 {
            let matrix = match &args.latency {
                Some(spec) => worldmesh_sim::config::load_latency(spec)?,
                None => worldmesh_core::LatencyMatrix::uniform(nodes, 0.0),
            };
            Some(DelayShim::new(matrix, nodes, me, args.seed, args.loss))
        } else {
            None
        };
        let mut cfg = NodeConfig::new(me, peers.ids(), args.seed);
        cfg.frame_interval = std::time::Duration::from_secs_f64(1.0 / args.frame_hz);
        // The simulator's settings for this membership: the locator and interest prediction.
        let sim_cfg = SimConfig {
            nodes,
            players_per_node: args.players,
            seed: args.seed,
            locator: worldmesh_sim::config::LocatorConfig {
                kind: args.locator.clone().unwrap_or_default(),
                range_key: args.range_key.clone().unwrap_or_else(|| "x".into()),
                ..Default::default()
            },
            ..SimConfig::default()
        };
        if args.locator.is_some() {
            cfg = cfg.with_mode(Mode::Interest);
            cfg.replica.interest_margin = sim_cfg.locator.interest_margin;
            cfg.replica.interest_lead =
                std::time::Duration::from_secs_f64(sim_cfg.locator.interest_lead_ms / 1000.0);
        }
        // Every member builds the same map and the same initial objects from the seed.
        let world = Arc::new(GameMap::generate(
            &ModelConfig::default(),
            nodes * args.players,
            args.seed,
        ));
        let now: Time = clock.now();
        let mut node: Node<ModelObject> = Node::new(cfg, Arc::clone(&world), now);
        if let Some(kc) = scenario::locator_config(&sim_cfg, &world) {
            let mut ids = peers.ids();
            ids.push(me);
            ids.sort_unstable();
            let loc = Locator::new(me, kc, &ids, &ids, args.seed, now).context("locator")?;
            node.attach_locator(loc);
        }
        let mine = workload::initial_objects(&world, nodes, args.players, args.seed)
            .into_iter()
            .nth(args.id as usize)
            .unwrap_or_default();
        for o in mine {
            node.spawn(now, o);
        }
        let watch_stdin = args.exit_on_stdin_close;
        let shutdown = async move {
            let stdin_closed = async {
                if watch_stdin {
                    let mut buf = [0u8; 64];
                    let mut stdin = tokio::io::stdin();
                    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = stdin_closed => {}
            }
        };
        let opts = RunOptions {
            duration: args.duration,
            clock,
            shim,
        };
        let (summary, dstats, _) = run_node(node, socket, peers, opts, shutdown).await?;
        if args.summary_json {
            println!("{SUMMARY_PREFIX}{}", serde_json::to_string(&summary)?);
        } else {
            let run = RunSummary::from_nodes(std::slice::from_ref(&summary));
            let extra = [(
                "datagrams from unknown senders",
                dstats.unknown_sender.to_string(),
            )];
            println!(
                "{}",
                summary::headline(&format!("worldmesh node {me} on {listen}"), &run, &extra)
            );
        }
        Ok(())
    });
    // The stdin watcher sits in a blocking read; do not wait for it.
    rt.shutdown_background();
    result
}

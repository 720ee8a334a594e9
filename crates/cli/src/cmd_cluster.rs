//! `worldmesh cluster`: spawn real node processes on loopback — QUIC with mutual TLS under
//! a throwaway CA by default — start them together, run them, summarize.
//!
//! Node 0 starts first and founds the world; the others are started at once with node
//! 0's address as their seed. Every node prints a ready line once bound and joined; when
//! all are ready the launcher releases them together (a `start` line on each one's
//! standard input), so the runs overlap. A run whose nodes did not overlap for at least
//! 90 % of the duration, or in which some node did not see every other member, is
//! reported as invalid.

use anyhow::{Context as _, bail};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use worldmesh_core::NodeId;
use worldmesh_net::pki;
use worldmesh_node::RunSummary;

use crate::duration::parse_duration;
use crate::summary;
use worldmesh::config::TransportKind;
use worldmesh::report::{NodeReport, READY_PREFIX, Ready, SUMMARY_PREFIX};

/// Arguments of `worldmesh cluster`.
#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// Number of node processes to start (all founders of the world).
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// How long the nodes run after the start barrier, e.g. 10s.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    duration: Duration,
    /// Players of the model workload per node.
    #[arg(long, alias = "bots-per-node", default_value_t = 8)]
    players_per_node: usize,
    /// Seed for every node (and the WAN shim's node-to-row mapping).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Emulate WAN delay between nodes: `planetlab`, `uniform:RTT_MS` or a matrix file.
    #[arg(long)]
    latency: Option<String>,
    /// Emulated loss probability on every outgoing datagram.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Interest-driven replication with the distributed locator inside every node:
    /// `rangedht` or `dht` (default: broadcast replication).
    #[arg(long, value_parser = ["rangedht", "dht"])]
    locator: Option<String>,
    /// With `--locator rangedht`: the naming attribute keyed on, `x`, `y` or `hilbert`
    /// (passed on to every node) [default: x].
    #[arg(long, value_parser = ["x", "y", "hilbert"])]
    range_key: Option<String>,
    /// Node-to-node transport: `quic` (mutual TLS with a throwaway CA made for this run)
    /// or `udp-insecure` (plain UDP trusting source addresses: the benchmark baseline).
    #[arg(long, value_enum, default_value = "quic")]
    transport: TransportKind,
    /// Membership profile passed to every node: `lan` or `wan` [default: the nodes choose:
    /// `wan` when --latency emulates round trips longer than `lan` waits for a probe's
    /// answer (80 ms), else `lan`, unless --node-config names one].
    #[arg(long, value_parser = ["lan", "wan"])]
    membership: Option<String>,
    /// A node config file (`worldmesh node --config`) every node reads, e.g. for `[quic]`
    /// or `[membership]` tuning; the launcher's own flags override it.
    #[arg(long, value_name = "FILE")]
    node_config: Option<PathBuf>,
    /// Players on their own clients: this many headless bot clients (`worldmesh bots`, in
    /// this process) connect to the nodes' player ports, spread evenly, with connect tokens
    /// from a throwaway key; per-node and per-client figures follow the report (QUIC only).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=20_000))]
    clients: u32,
    /// With --clients: the nodes assign players to nodes (paper 002, optimal J-SA/L-SA run
    /// by the lowest live member) and hand them over; each node's capacity is
    /// `--node-capacity`.
    #[arg(long, requires = "clients")]
    assign: bool,
    /// With --clients: every node runs the placement loop (paper 001 §7.4) over its players'
    /// reported delays and migrates its region to the node they are nearest to.
    #[arg(long, requires = "clients", conflicts_with = "assign")]
    placement: bool,
    /// With --assign: players per node the assignment may place.
    #[arg(long)]
    node_capacity: Option<u32>,
    /// Emulated client-to-node delays (`planetlab`, `uniform:RTT_MS` or a file): the bot
    /// clients add them to the RTTs they report for the assignment and hold their datagrams
    /// for half of them each way; without it every node is equally near on loopback.
    #[arg(long)]
    client_latency: Option<String>,
    /// With --clients: the bot clients come and go over the run (joins and leaves
    /// interleave) instead of all playing to the end.
    #[arg(long, requires = "clients")]
    churn: bool,
    /// Inputs per second of each bot client.
    #[arg(long, default_value_t = 20.0)]
    client_input_hz: f64,
    /// Serve the live dashboard of the running cluster at this address (port 0: any free
    /// port; the URL is printed): every node serves its view on a metrics endpoint of its
    /// own (`--metrics 127.0.0.1:0`) and the dashboard polls them
    /// (`worldmesh dashboard --cluster`). Use a long --duration to watch.
    #[arg(long, value_name = "ADDR")]
    dashboard: Option<SocketAddr>,
    /// Print one row per node as well.
    #[arg(long)]
    per_node: bool,
    /// Write report.json with every node's report into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Persist the world: node I keeps its store in DIR/node-I. A second run on the same
    /// DIR brings the world back from the stores (every avatar as of its last checkpoint,
    /// every item) instead of creating a new one.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 256 {
        bail!("--nodes must be in 1..=256 on one machine, got {}", args.nodes);
    }
    if !(0.0..=1.0).contains(&args.loss) {
        bail!("--loss must be a probability in [0, 1], got {}", args.loss);
    }
    if args.transport == TransportKind::UdpInsecure {
        eprintln!(
            "WARNING: --transport udp-insecure: plain UDP that trusts source addresses, no authentication, \
             no encryption. A benchmark baseline only."
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(args))
}

/// What a node's output reader reports.
enum Line {
    Ready(usize, Ready),
    Summary(usize, Box<NodeReport>),
    Exited(usize, String),
}

/// A started node process.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
}

async fn run_async(args: ClusterArgs) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("worldmesh-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let r = run_in(&args, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

async fn run_in(args: &ClusterArgs, dir: &Path) -> anyhow::Result<()> {
    let ids: Vec<NodeId> = (0..args.nodes as u32).map(NodeId).collect();
    let certs = match args.transport {
        TransportKind::Quic => {
            let (ca, nodes) = pki::throwaway(dir, ids.iter().copied()).context("throwaway CA")?;
            Some((ca, nodes))
        }
        TransportKind::UdpInsecure => None,
    };
    if args.clients > 0 && certs.is_none() {
        bail!("--clients needs the QUIC transport (players connect with TLS to the nodes' certificates)");
    }
    let player_key = dir.join("client.key");
    // Player ports for the bot clients, and for the dashboard's Join button.
    let player_ports = args.clients > 0 || (args.dashboard.is_some() && certs.is_some());
    if player_ports {
        let key = worldmesh_client::TokenKey::generate()?;
        std::fs::write(&player_key, key.to_hex()).context("cannot write the throwaway player key")?;
    }
    let exe = std::env::current_exe().context("cannot find the worldmesh executable")?;
    let (tx, mut rx) = mpsc::channel::<Line>(4 * args.nodes + 16);
    let mut procs: Vec<Proc> = Vec::new();
    let setup_limit = Duration::from_secs(30 + args.nodes as u64 / 2);

    let command = |i: usize, seed: Option<SocketAddr>| {
        let mut cmd = Command::new(&exe);
        cmd.arg("node")
            .args(["--id", &i.to_string()])
            .args(["--listen", "127.0.0.1:0"])
            .args(["--founders", &args.nodes.to_string()])
            .args(["--players", &args.players_per_node.to_string()])
            .args(["--duration", &format!("{}ms", args.duration.as_millis())])
            .args(["--seed", &args.seed.to_string()])
            .args(["--transport", args.transport.name()])
            .arg("--summary-json")
            .arg("--wait-start")
            .arg("--exit-on-stdin-close")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some((ca, nodes)) = &certs {
            cmd.arg("--ca").arg(&ca.cert);
            cmd.arg("--cert").arg(&nodes[i].cert);
            cmd.arg("--key").arg(&nodes[i].key);
        }
        if let Some(s) = seed {
            cmd.args(["--seeds", &s.to_string()]);
        }
        if let Some(f) = &args.node_config {
            cmd.arg("--config").arg(f);
        }
        if args.loss > 0.0 {
            cmd.args(["--loss", &args.loss.to_string()]);
        }
        if let Some(l) = &args.latency {
            cmd.args(["--latency", l]);
        }
        if let Some(m) = &args.membership {
            cmd.args(["--membership", m]);
        }
        if let Some(l) = &args.locator {
            cmd.args(["--locator", l]);
        }
        if let Some(k) = &args.range_key {
            cmd.args(["--range-key", k]);
        }
        if player_ports {
            cmd.args(["--player-listen", "127.0.0.1:0"]);
            cmd.arg("--player-key").arg(&player_key);
            let browsers = if args.dashboard.is_some() {
                worldmesh_dashboard::PlayConfig::default().max_sessions as u32
            } else {
                0
            };
            cmd.args(["--max-players", &(args.clients + browsers).max(1).to_string()]);
        }
        if args.assign {
            cmd.arg("--assign");
        }
        if args.placement {
            cmd.arg("--placement");
        }
        if args.dashboard.is_some() {
            cmd.args(["--metrics", "127.0.0.1:0"]);
        }
        if let Some(d) = &args.data_dir {
            cmd.arg("--data-dir").arg(d.join(format!("node-{i}")));
        }
        if let Some(c) = args.node_capacity {
            cmd.args(["--capacity", &c.min(args.clients.max(1)).to_string()]);
        }
        cmd
    };

    let outcome = async {
        // Node 0 founds the world; the others join it.
        procs.push(launch(command(0, None), 0, &tx)?);
        let first = wait_ready(&mut rx, 1, setup_limit).await?;
        let seed = first[0].1.addr;
        for i in 1..args.nodes {
            procs.push(launch(command(i, Some(seed)), i, &tx)?);
        }
        let mut ready = first;
        ready.extend(wait_ready(&mut rx, args.nodes - 1, setup_limit).await?);
        eprintln!(
            "{} node processes ready ({}), releasing them together",
            args.nodes,
            args.transport.name()
        );
        // The start barrier.
        for p in procs.iter_mut() {
            if let Some(s) = p.stdin.as_mut() {
                s.write_all(b"start\n").await.context("cannot release a node")?;
                s.flush().await?;
            }
        }
        let released = Instant::now();
        let dashboard = match args.dashboard {
            Some(addr) => {
                let metrics: Vec<SocketAddr> = ready.iter().filter_map(|(_, r)| r.metrics).collect();
                let join = match &certs {
                    Some((ca, _)) if player_ports => Some(crate::cmd_dashboard::JoinSetup {
                        ca: ca.cert.clone(),
                        player_key: player_key.clone(),
                        ports: {
                            let mut p: Vec<(u32, SocketAddr)> =
                                ready.iter().filter_map(|(i, r)| Some((*i as u32, r.players?))).collect();
                            p.sort_unstable();
                            p
                        },
                    }),
                    _ => None,
                };
                let d = crate::cmd_dashboard::start_cluster(addr, &metrics, join).await?;
                println!(
                    "dashboard: {} (open it in a browser; it shows the cluster until the run ends)",
                    d.server.url()
                );
                Some(d)
            }
            None => None,
        };
        let bots = match &certs {
            Some((ca, _)) if args.clients > 0 => Some(tokio::spawn(run_bots(
                BotPlan {
                    clients: args.clients,
                    input_hz: args.client_input_hz,
                    duration: args.duration,
                    latency: args.client_latency.clone(),
                    churn: args.churn,
                },
                ready.iter().filter_map(|(i, r)| Some((*i as u32, r.players?))).collect(),
                ca.cert.clone(),
                player_key.clone(),
            ))),
            _ => None,
        };
        let bar = crate::progress::bar(args.clients == 0, args.duration.as_millis() as u64, "cluster");
        let mut reports: Vec<Option<NodeReport>> = vec![None; args.nodes];
        let limit = tokio::time::Instant::now() + args.duration + Duration::from_secs(30);
        let mut ticker = tokio::time::interval(Duration::from_millis(200));
        while reports.iter().any(Option::is_none) {
            tokio::select! {
                l = rx.recv() => match l {
                    Some(Line::Summary(i, r)) => reports[i] = Some(*r),
                    Some(Line::Exited(i, err)) if reports[i].is_none() => {
                        bar.finish_and_clear();
                        bail!("node {i} exited without a report: {err}");
                    }
                    Some(_) => {}
                    None => bail!("lost the nodes' output"),
                },
                _ = ticker.tick() => bar.set_position(released.elapsed().as_millis() as u64),
                _ = tokio::signal::ctrl_c() => bail!("interrupted"),
                _ = tokio::time::sleep_until(limit) => bail!("nodes did not finish within {} s", (args.duration + Duration::from_secs(30)).as_secs()),
            }
        }
        bar.finish_and_clear();
        drop(dashboard);
        let wall = released.elapsed().as_secs_f64();
        let reports: Vec<NodeReport> = reports.into_iter().flatten().collect();
        let bots = match bots {
            Some(b) => Some(b.await.context("the bot clients failed")??),
            None => None,
        };
        anyhow::Ok((reports, wall, bots))
    }
    .await;
    stop_all(&mut procs).await;
    let (mut reports, wall, bots) = outcome?;
    reports.sort_by_key(|r| r.node.node);
    print_report(args, &reports, wall)?;
    if let Some(bots) = bots {
        println!(
            "players: {} bot clients (worldmesh bots), per entry node",
            args.clients
        );
        for (node, addr, r) in &bots {
            crate::cmd_bots::print_report_for(*node, *addr, args.duration, r);
        }
    }
    Ok(())
}

/// Runs `clients` bot clients spread over the nodes' player ports (`(node, addr)`), for a
/// little less than the nodes run; returns each entry node's report.
/// What the launcher's bot clients do.
struct BotPlan {
    clients: u32,
    input_hz: f64,
    duration: Duration,
    latency: Option<String>,
    churn: bool,
}

async fn run_bots(
    plan: BotPlan,
    ports: Vec<(u32, SocketAddr)>,
    ca: std::path::PathBuf,
    key: std::path::PathBuf,
) -> anyhow::Result<Vec<(u32, SocketAddr, crate::cmd_bots::BotsReport)>> {
    let BotPlan {
        clients,
        input_hz,
        duration,
        latency,
        churn,
    } = plan;
    if ports.is_empty() {
        bail!("no node opened a player port");
    }
    let ca_cert = worldmesh_net::pki::load_ca_cert(&ca)?;
    let token_key = crate::cmd_token::load_key(&key)?;
    let per = clients.div_ceil(ports.len() as u32);
    let play_for = duration
        .saturating_sub(Duration::from_secs(2))
        .max(Duration::from_secs(1));
    let mut tasks = tokio::task::JoinSet::new();
    let mut first = 1_000_000u64;
    let mut left = clients;
    for (node, addr) in &ports {
        let n = per.min(left);
        if n == 0 {
            break;
        }
        left -= n;
        let args = crate::cmd_bots::BotsArgs {
            clients: n,
            server: *addr,
            node: *node,
            ca: ca.clone(),
            player_key: key.clone(),
            duration: play_for,
            input_hz,
            first_player: first,
            seed: u64::from(*node) + 1,
            ramp: Duration::from_secs(1),
            directory: ports.clone(),
            wan: latency.is_some(),
            churn,
            latency: latency.clone(),
            json: false,
        };
        first += u64::from(n);
        let (ca_cert, token_key, node, addr) = (ca_cert.clone(), token_key.clone(), *node, *addr);
        tasks.spawn(async move {
            crate::cmd_bots::play(&args, ca_cert, token_key)
                .await
                .map(|r| (node, addr, r))
        });
    }
    let mut out = Vec::new();
    while let Some(r) = tasks.join_next().await {
        out.push(r.context("a bot task failed")??);
    }
    out.sort_by_key(|r| r.0);
    Ok(out)
}

fn print_report(args: &ClusterArgs, reports: &[NodeReport], wall: f64) -> anyhow::Result<()> {
    let summaries: Vec<_> = reports.iter().map(|r| r.node.clone()).collect();
    let run = RunSummary::from_nodes(&summaries);
    let validity = validity(reports, args.duration);
    let title = format!(
        "worldmesh cluster: {} real node processes on 127.0.0.1 x {} players (model workload), {:.0} s, {}{}",
        args.nodes,
        args.players_per_node,
        args.duration.as_secs_f64(),
        args.locator
            .as_ref()
            .map_or("broadcast replication".to_string(), |l| format!(
                "interest-driven replication ({l} locator{})",
                match &args.range_key {
                    Some(k) if l == "rangedht" && k != "x" => format!(", {k} key"),
                    _ => String::new(),
                }
            )),
        args.latency
            .as_ref()
            .map(|l| format!(", emulated latency {l}"))
            .unwrap_or_default()
    );
    let mut extra = vec![
        (
            "run time, s".to_string(),
            summary::f(args.duration.as_secs_f64(), 1),
        ),
        ("wall time, s".to_string(), summary::f(wall, 2)),
    ];
    extra.extend(summary::transport_lines(reports));
    extra.push(("membership profile (SWIM timing)".into(), profiles(reports)));
    extra.push((
        "run validity (nodes overlapped and saw every member)".into(),
        match &validity {
            Ok(overlap) => format!("valid (overlap {overlap:.2} s)"),
            Err(why) => format!("INVALID: {why}"),
        },
    ));
    println!("{}", summary::headline(&title, &run, &extra));
    println!("{}", summary::by_class(&run, args.duration.as_secs_f64()));
    if args.per_node {
        println!("{}", summary::per_node(&summaries));
    }
    if let Err(why) = &validity {
        eprintln!("warning: this run is INVALID: {why}");
    }
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        let path = out.join("report.json");
        let json = serde_json::json!({
            "summary": run,
            "nodes": reports,
            "wall_seconds": wall,
            "valid": validity.is_ok(),
            "invalid_reason": validity.as_ref().err(),
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
        println!("report written to {}", path.display());
    }
    Ok(())
}

/// The nodes' membership profiles: one, or each distinct one with its nodes.
fn profiles(reports: &[NodeReport]) -> String {
    let mut by: std::collections::BTreeMap<&str, Vec<u32>> = Default::default();
    for r in reports {
        by.entry(r.membership_profile.as_str())
            .or_default()
            .push(r.node.node.0);
    }
    if by.len() == 1 {
        return by.into_keys().next().unwrap_or_default().to_owned();
    }
    by.into_iter()
        .map(|(p, nodes)| format!("{p} on nodes {nodes:?}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Ok(overlap in seconds) if every node ran for (nearly) the same interval and saw every
/// other member at the end; otherwise why not.
fn validity(reports: &[NodeReport], duration: Duration) -> Result<f64, String> {
    let start = reports.iter().map(|r| r.started_unix_ms).max().unwrap_or(0);
    let end = reports.iter().map(|r| r.ended_unix_ms).min().unwrap_or(0);
    let overlap = end.saturating_sub(start) as f64 / 1000.0;
    let need = duration.as_secs_f64() * 0.9;
    if overlap < need {
        let first = reports.iter().map(|r| r.started_unix_ms).min().unwrap_or(0);
        return Err(format!(
            "the nodes ran together for {overlap:.2} s of {:.2} s (starts spread over {:.2} s)",
            duration.as_secs_f64(),
            start.saturating_sub(first) as f64 / 1000.0
        ));
    }
    let n = reports.len();
    if let Some(r) = reports.iter().find(|r| r.members.len() + 1 < n) {
        return Err(format!(
            "node {} saw only {} of {n} members at the end",
            r.node.node,
            r.members.len() + 1
        ));
    }
    Ok(overlap)
}

/// Starts one node and a task that reads its output.
fn launch(mut cmd: Command, i: usize, tx: &mpsc::Sender<Line>) -> anyhow::Result<Proc> {
    let mut child = cmd.spawn().with_context(|| format!("cannot start node {i}"))?;
    let stdout = child.stdout.take().context("child stdout")?;
    let stderr = child.stderr.take().context("child stderr")?;
    let stdin = child.stdin.take();
    let tx = tx.clone();
    tokio::spawn(async move {
        // The last lines of the log, for an error message.
        let err_tail = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut tail: std::collections::VecDeque<String> = Default::default();
            while let Ok(Some(l)) = lines.next_line().await {
                if tail.len() == 5 {
                    tail.pop_front();
                }
                tail.push_back(l);
            }
            tail.into_iter().collect::<Vec<_>>().join("\n")
        });
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(j) = line.strip_prefix(READY_PREFIX)
                && let Ok(r) = serde_json::from_str::<Ready>(j)
            {
                let _ = tx.send(Line::Ready(i, r)).await;
            } else if let Some(j) = line.strip_prefix(SUMMARY_PREFIX) {
                match serde_json::from_str::<NodeReport>(j) {
                    Ok(r) => {
                        let _ = tx.send(Line::Summary(i, Box::new(r))).await;
                    }
                    Err(e) => {
                        let _ = tx.send(Line::Exited(i, format!("bad report: {e}"))).await;
                    }
                }
            }
        }
        let err = err_tail.await.unwrap_or_default();
        let _ = tx.send(Line::Exited(i, err)).await;
    });
    Ok(Proc { child, stdin })
}

/// Waits for `n` ready lines.
async fn wait_ready(
    rx: &mut mpsc::Receiver<Line>,
    n: usize,
    limit: Duration,
) -> anyhow::Result<Vec<(usize, Ready)>> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut out = Vec::new();
    while out.len() < n {
        tokio::select! {
            l = rx.recv() => match l {
                Some(Line::Ready(i, r)) => out.push((i, r)),
                Some(Line::Exited(i, err)) => bail!("node {i} exited before it was ready: {err}"),
                Some(Line::Summary(..)) => {}
                None => bail!("lost the nodes' output"),
            },
            _ = tokio::time::sleep_until(deadline) => bail!("{} of {n} nodes were not ready within {} s", n - out.len(), limit.as_secs()),
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    }
    Ok(out)
}

async fn stop_all(procs: &mut [Proc]) {
    for p in procs.iter_mut() {
        // Closing stdin asks the node to stop; kill is the backstop.
        drop(p.stdin.take());
    }
    for p in procs.iter_mut() {
        if tokio::time::timeout(Duration::from_secs(3), p.child.wait())
            .await
            .is_err()
        {
            let _ = p.child.kill().await;
        }
    }
}

//! `worldmesh cluster`: spawn real node processes on loopback, run them, summarize.

use anyhow::{Context as _, bail};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};
use worldmesh_node::{NodeSummary, RunSummary};

use crate::cmd_node::{SUMMARY_PREFIX, cluster_file_text};
use crate::duration::parse_duration;
use crate::summary;

/// Arguments of `worldmesh cluster`.
#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// Number of node processes to start.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// How long the nodes run, e.g. 10s.
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
    /// Print one row per node as well.
    #[arg(long)]
    per_node: bool,
    /// Write report.json with every node's summary into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 256 {
        bail!("--nodes must be in 1..=256 on one machine, got {}", args.nodes);
    }
    if !(0.0..=1.0).contains(&args.loss) {
        bail!("--loss must be a probability in [0, 1], got {}", args.loss);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(args))
}

/// Free loopback UDP ports, found by binding port 0 and releasing.
fn free_addrs(n: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let socks: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("cannot bind a loopback port")?;
    socks.iter().map(|s| s.local_addr().map_err(Into::into)).collect()
}

async fn run_async(args: ClusterArgs) -> anyhow::Result<()> {
    let addrs = free_addrs(args.nodes)?;
    let dir = std::env::temp_dir().join(format!("worldmesh-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cluster_file = dir.join("cluster.toml");
    std::fs::write(&cluster_file, cluster_file_text(&addrs))?;
    let exe = std::env::current_exe().context("cannot find the worldmesh executable")?;
    let epoch_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);

    let mut children: Vec<Child> = Vec::new();
    for i in 0..args.nodes {
        let mut cmd = Command::new(&exe);
        cmd.arg("node")
            .args(["--id", &i.to_string()])
            .arg("--cluster")
            .arg(&cluster_file)
            .args(["--players", &args.players_per_node.to_string()])
            .args(["--duration", &format!("{}ms", args.duration.as_millis())])
            .args(["--seed", &args.seed.to_string()])
            .args(["--epoch-ms", &epoch_ms.to_string()])
            .args(["--loss", &args.loss.to_string()])
            .arg("--summary-json")
            .arg("--exit-on-stdin-close")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(l) = &args.latency {
            cmd.args(["--latency", l]);
        }
        if let Some(l) = &args.locator {
            cmd.args(["--locator", l]);
        }
        if let Some(k) = &args.range_key {
            cmd.args(["--range-key", k]);
        }
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                kill_all(&mut children).await;
                bail!("cannot start node {i}: {e}");
            }
        }
    }
    eprintln!(
        "started {} node processes on {}",
        args.nodes,
        addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
    );
    let bar = crate::progress::bar(true, args.duration.as_millis() as u64, "cluster");
    let started = Instant::now();
    let outcome = {
        let collect = collect_all(&mut children);
        tokio::pin!(collect);
        let ticker = async {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                bar.set_position(started.elapsed().as_millis() as u64);
            }
        };
        let limit = args.duration + Duration::from_secs(30);
        tokio::select! {
            r = &mut collect => r,
            _ = ticker => unreachable!("the ticker never ends"),
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
            _ = tokio::time::sleep(limit) => Err(anyhow::anyhow!("nodes did not finish within {} s", limit.as_secs())),
        }
    };
    bar.finish_and_clear();
    kill_all(&mut children).await;
    let _ = std::fs::remove_dir_all(&dir);
    let summaries = outcome?;
    let wall = started.elapsed().as_secs_f64();
    let run = RunSummary::from_nodes(&summaries);
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
    let extra = [
        ("run time, s", summary::f(args.duration.as_secs_f64(), 1)),
        ("wall time, s", summary::f(wall, 2)),
    ];
    println!("{}", summary::headline(&title, &run, &extra));
    println!("{}", summary::by_class(&run, args.duration.as_secs_f64()));
    if args.per_node {
        println!("{}", summary::per_node(&summaries));
    }
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        let path = out.join("report.json");
        let json = serde_json::json!({ "summary": run, "nodes": summaries, "wall_seconds": wall });
        std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
        println!("report written to {}", path.display());
    }
    Ok(())
}

/// Waits for every child and parses its summary line. Fails on the first child that
/// exits badly (the caller then kills the rest).
async fn collect_all(children: &mut [Child]) -> anyhow::Result<Vec<NodeSummary>> {
    let mut readers = Vec::new();
    for (i, c) in children.iter_mut().enumerate() {
        let stdout = c.stdout.take().context("child stdout")?;
        let mut stderr = c.stderr.take().context("child stderr")?;
        readers.push(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut summary = None;
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(json) = line.strip_prefix(SUMMARY_PREFIX) {
                    summary = Some(
                        serde_json::from_str::<NodeSummary>(json)
                            .with_context(|| format!("node {i}: bad summary"))?,
                    );
                }
            }
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err).await;
            summary.ok_or_else(|| anyhow::anyhow!("node {i} exited without a summary: {}", err.trim()))
        });
    }
    let mut out = Vec::new();
    for r in readers {
        out.push(r.await?);
    }
    for (i, c) in children.iter_mut().enumerate() {
        let status = c.wait().await?;
        if !status.success() {
            bail!("node {i} exited with {status}");
        }
    }
    out.sort_by_key(|s| s.node);
    Ok(out)
}

async fn kill_all(children: &mut [Child]) {
    for c in children.iter_mut() {
        // Closing stdin asks the node to stop; kill is the backstop.
        drop(c.stdin.take());
        if tokio::time::timeout(Duration::from_secs(2), c.wait())
            .await
            .is_err()
        {
            let _ = c.kill().await;
        }
    }
}

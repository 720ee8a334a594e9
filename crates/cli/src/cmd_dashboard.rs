//! `worldmesh dashboard`: serve the live dashboard on a simulation it runs itself (the
//! model workload, paced at real time), on a synthetic feed of many objects, or on a
//! running real cluster (`--cluster`: it scrapes every node's view from the node's
//! metrics endpoint, [`worldmesh_dashboard::cluster`]); the page and its protocol are the
//! same for all three.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use worldmesh_core::Time;
use worldmesh_dashboard::{
    ClusterConfig, ClusterFeed, ClusterGateway, Hub, HubConfig, Play, PlayConfig, SyntheticFeed,
};
use worldmesh_game::{ModelObject, PlayerInput};
use worldmesh_sim::scenario;

use crate::cmd_simulate::{DEFAULT_ADDR, ScenarioArgs, check_speed, parse_addr};
use crate::duration::parse_duration;
use crate::live::{self, DemoMigrations, TICK};

/// Arguments of `worldmesh dashboard`.
#[derive(clap::Args, Debug)]
pub struct DashboardArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Address to serve on (port 0 picks a free one; the URL is printed).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ADDR)]
    addr: String,
    /// Run K times faster than real time (e.g. 0.5, 4) [default: 1].
    #[arg(long, value_name = "K")]
    speed: Option<f64>,
    /// Every this much simulated time one node moves all its players to another node
    /// (region migration, paper 001 §3.2), so migrations show on the map; `off` for
    /// none [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_every)]
    migrate_every: Option<Every>,
    /// Serve a synthetic feed of N objects (cheap: for looking at, or measuring, the page
    /// at thousands of objects) instead of a simulation. Nodes: --nodes [default: 512].
    #[arg(long, value_name = "N", conflicts_with = "cluster")]
    synthetic: Option<usize>,
    /// Show a running real cluster instead of a simulation: the nodes' metrics endpoints
    /// (`worldmesh node --metrics ADDR`), comma-separated. The dashboard polls each
    /// node's `GET /view` ten times a second and draws their primaries, coloured by node;
    /// a node that stops answering is shown down within 2 s.
    #[arg(long, value_name = "ADDR[,ADDR...]", value_delimiter = ',')]
    cluster: Vec<std::net::SocketAddr>,
    /// With --cluster: the nodes' player ports, `ID=ADDR` (comma-separated), for the Join
    /// button: the dashboard runs a real client session for each browser player, to these
    /// nodes in turn (needs --ca and --player-key).
    #[arg(long, value_name = "ID=ADDR", value_delimiter = ',', value_parser = crate::cmd_bots::directory_entry, requires_all = ["cluster", "ca", "player_key"])]
    player_ports: Vec<(u32, std::net::SocketAddr)>,
    /// With --player-ports: the cluster CA certificate the nodes' certificates chain to.
    #[arg(long, value_name = "FILE", requires = "player_ports")]
    ca: Option<std::path::PathBuf>,
    /// With --player-ports: the connect-token key (`worldmesh token init`); the dashboard
    /// issues each browser player's token with it, as a login service would.
    #[arg(long, value_name = "FILE", requires = "player_ports")]
    player_key: Option<std::path::PathBuf>,
}

/// `--migrate-every`: a period or off.
#[derive(Clone, Copy, Debug)]
pub struct Every(Option<Duration>);

fn parse_every(s: &str) -> Result<Every, String> {
    if s == "off" || s == "0" {
        Ok(Every(None))
    } else {
        parse_duration(s).map(|d| Every(Some(d)))
    }
}

/// Runs the command.
pub fn run(args: DashboardArgs) -> anyhow::Result<()> {
    let speed = check_speed(args.speed.unwrap_or(1.0))?;
    let addr = parse_addr("--addr", &args.addr)?;
    let every = args.migrate_every.map_or(Some(Duration::from_secs(10)), |e| e.0);
    if let Some(n) = args.synthetic {
        return run_synthetic(&args, n, addr, speed, every);
    }
    if !args.cluster.is_empty() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let join = match (&args.ca, &args.player_key) {
            (Some(ca), Some(key)) if !args.player_ports.is_empty() => Some(JoinSetup {
                ca: ca.clone(),
                player_key: key.clone(),
                ports: args.player_ports.clone(),
            }),
            _ => None,
        };
        return rt.block_on(run_cluster(addr, &args.cluster, join));
    }
    let mut cfg = args.scenario.config()?;
    // Without --duration the simulation runs until Ctrl-C.
    let end = args
        .scenario
        .duration
        .map(|_| Time::from_secs_f64(cfg.duration_s));
    if end.is_none() {
        cfg.duration_s = 1e7;
    }
    let mut sim = scenario::build(&cfg)?;
    let hub = live::hub_for(&cfg, &sim, speed);
    let handle = worldmesh_dashboard::spawn(addr, Arc::clone(&hub))?;
    println!(
        "dashboard: {} (open it in a browser; Ctrl-C to stop)",
        handle.url()
    );
    println!(
        "simulating {} nodes x {} players at {speed}x real time{}",
        cfg.nodes,
        cfg.players_per_node,
        match end {
            Some(e) => format!(" for {:.1} s", e.as_secs_f64()),
            None => String::new(),
        }
    );
    let mut demo = every.map(|d| DemoMigrations::new(d, cfg.seed));
    let paced = live::run_paced(
        &mut sim,
        end,
        speed,
        &hub,
        &mut |sim| {
            if let Some(d) = demo.as_mut() {
                d.step(sim);
            }
        },
        &mut |_| {},
    );
    hub.finish();
    let objects: usize = sim.nodes().iter().map(|n| n.store().primary_count()).sum();
    println!(
        "simulation finished at {:.1} s: {objects} objects on {} nodes ({} of {} ticks late)",
        sim.now().as_secs_f64(),
        cfg.nodes,
        paced.late,
        paced.ticks
    );
    println!(
        "dashboard: still serving the final state at {} (Ctrl-C to stop)",
        handle.url()
    );
    handle.wait()?;
    Ok(())
}

fn run_synthetic(
    args: &DashboardArgs,
    objects: usize,
    addr: std::net::SocketAddr,
    speed: f64,
    every: Option<Duration>,
) -> anyhow::Result<()> {
    if objects == 0 || objects > 1 << 20 {
        anyhow::bail!("--synthetic must be in 1..=1048576, got {objects}");
    }
    let nodes = args.scenario.nodes.unwrap_or(512);
    let seed = args.scenario.seed.unwrap_or(1);
    let mut feed = SyntheticFeed::new(objects, nodes, every.map_or(0.0, |d| d.as_secs_f64()), seed);
    let hub = Hub::new(
        feed.world(),
        HubConfig {
            tick_hz: 1.0 / TICK.as_secs_f64(),
            ..HubConfig::default()
        },
    );
    let handle = worldmesh_dashboard::spawn(addr, Arc::clone(&hub))?;
    println!(
        "dashboard: {} (open it in a browser; Ctrl-C to stop)",
        handle.url()
    );
    println!("synthetic feed: {objects} objects on {nodes} nodes at {speed}x");
    let end = args.scenario.duration;
    let start = std::time::Instant::now();
    let mut k = 0u32;
    hub.publish(feed.step(0.0));
    loop {
        k += 1;
        hub.publish(feed.step(TICK.as_secs_f64() * speed));
        if end.is_some_and(|e| TICK.mul_f64(speed) * k >= e) {
            break;
        }
        let due = start + TICK * k;
        let now = std::time::Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
    hub.finish();
    println!("synthetic feed finished: {objects} objects");
    println!(
        "dashboard: still serving the final state at {} (Ctrl-C to stop)",
        handle.url()
    );
    handle.wait()?;
    Ok(())
}

/// A dashboard serving a real cluster: the server on its own thread, the feed on the
/// caller's runtime (both stop when dropped).
pub struct ClusterDashboard {
    /// The HTTP server.
    pub server: worldmesh_dashboard::ServerHandle,
    /// The feed polling the nodes.
    pub feed: ClusterFeed,
    /// The hub between them.
    pub hub: Arc<Hub>,
}

/// What the Join button needs to play on a real cluster.
#[derive(Clone, Debug)]
pub struct JoinSetup {
    /// The cluster CA certificate.
    pub ca: std::path::PathBuf,
    /// The connect-token key.
    pub player_key: std::path::PathBuf,
    /// Player ports by node id.
    pub ports: Vec<(u32, std::net::SocketAddr)>,
}

/// Reads the world from the nodes at `metrics` (their metrics endpoints), serves the
/// dashboard at `addr` and starts polling them; with `join`, the Join button plays on
/// the cluster (call within the tokio runtime that will keep running).
pub async fn start_cluster(
    addr: std::net::SocketAddr,
    metrics: &[std::net::SocketAddr],
    join: Option<JoinSetup>,
) -> anyhow::Result<ClusterDashboard> {
    let play = match join {
        Some(j) => {
            let ca = worldmesh_net::pki::load_ca_cert(&j.ca)?;
            let key = crate::cmd_token::load_key(&j.player_key)?;
            let ports = j
                .ports
                .iter()
                .map(|(id, a)| (worldmesh_core::NodeId(*id), *a))
                .collect();
            let gateway = ClusterGateway::<ModelObject>::new(ca, key, ports, |dx, dy| PlayerInput {
                dx,
                dy,
                fire: None,
            })
            .map_err(|e| anyhow::anyhow!("the Join button: {e}"))?;
            Some(Play::new(Arc::new(gateway), PlayConfig::default()))
        }
        None => None,
    };
    let cfg = ClusterConfig::default();
    let mut world = worldmesh_dashboard::cluster::fetch_world(metrics, Duration::from_secs(5))
        .await
        .context(
            "cannot read the world from the nodes' metrics endpoints (is `worldmesh node --metrics` on?)",
        )?;
    world.title = format!(
        "real cluster: {} node endpoint{} ({})",
        metrics.len(),
        if metrics.len() == 1 { "" } else { "s" },
        world.title
    );
    let hub = Hub::new(
        world,
        HubConfig {
            tick_hz: 1.0 / cfg.period.as_secs_f64(),
            ..HubConfig::default()
        },
    );
    let server = worldmesh_dashboard::spawn_with_play(addr, Arc::clone(&hub), play)?;
    let feed = ClusterFeed::start(Arc::clone(&hub), metrics, cfg);
    Ok(ClusterDashboard { server, feed, hub })
}

async fn run_cluster(
    addr: std::net::SocketAddr,
    metrics: &[std::net::SocketAddr],
    join: Option<JoinSetup>,
) -> anyhow::Result<()> {
    let joinable = join.is_some();
    let d = start_cluster(addr, metrics, join).await?;
    println!(
        "dashboard: {} (open it in a browser; Ctrl-C to stop)",
        d.server.url()
    );
    println!(
        "showing the cluster at {} node endpoint(s); the Join button {}",
        metrics.len(),
        if joinable {
            "plays on it"
        } else {
            "is off (--player-ports, --ca, --player-key)"
        }
    );
    let mut reported: std::collections::BTreeMap<std::net::SocketAddr, u64> = Default::default();
    let mut every = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = every.tick() => {
                for (a, (n, e)) in d.feed.errors() {
                    if reported.get(&a) != Some(&n) {
                        println!("node endpoint {a}: {n} failed scrapes, last: {e}");
                        reported.insert(a, n);
                    }
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    let s = d.hub.stats();
    println!(
        "dashboard stopped: {} ticks, {} objects in the last",
        s.ticks, s.objects
    );
    Ok(())
}

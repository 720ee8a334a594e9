//! `frontier`: the space game on the simulator, on real nodes, and as bot players.
//!
//! ```sh
//! cargo run --release -p frontier -- simulate --nodes 9 --duration 120s --crash 4
//! cargo run --release -p frontier -- node examples/frontier/node-0.toml
//! cargo run --release -p frontier -- bots --server 127.0.0.1:7300 --node 0 \
//!     --ca out/ca/ca.pem --key out/player.key --count 20 --duration 30s
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use frontier::{Body, Census, SHIP_SPEED, Sector, founders_share};
use worldmesh::config::{FileConfig, Overrides};
use worldmesh::sim::Sim;
use worldmesh::{NodeId, Role, ServeOptions, Server, Space};

#[derive(Parser)]
#[command(about = "Frontier, a space game on worldmesh")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a world on the deterministic simulator and print what happened in it.
    Simulate {
        /// Nodes (each founds its share of the world).
        #[arg(long, default_value_t = 9)]
        nodes: usize,
        /// Simulated time, seconds.
        #[arg(long, default_value_t = 120.0)]
        duration: f64,
        /// Seed of every random choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Crash this node at half time (its objects are adopted by the others).
        #[arg(long)]
        crash: Option<u32>,
        /// Latency between nodes: `uniform:RTT_MS`, `planetlab` or a matrix file.
        #[arg(long, default_value = "uniform:30")]
        latency: String,
    },
    /// Run one real node (QUIC, membership, persistence and players as its config says).
    Node {
        /// The node's TOML configuration.
        config: PathBuf,
    },
    /// Connect bot players to a node and fly them around.
    Bots(frontier_bots::BotArgs),
}

mod frontier_bots;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Cmd::Simulate {
            nodes,
            duration,
            seed,
            crash,
            latency,
        } => simulate(nodes, Duration::from_secs_f64(duration), seed, crash, &latency),
        Cmd::Node { config } => node(&config),
        Cmd::Bots(args) => frontier_bots::run(&args),
    }
}

/// The census of every live primary.
fn census(sim: &worldmesh::sim::Simulation<Body>) -> Census {
    Census::of(frontier::live_primaries(sim).into_iter().map(|(_, b)| b))
}

fn simulate(
    nodes: usize,
    duration: Duration,
    seed: u64,
    crash: Option<u32>,
    latency: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let sector = Sector::new(nodes);
    let mut builder = Sim::builder()
        .game::<Body>(Arc::new(sector.clone()))
        .nodes(nodes)
        .seed(seed)
        .latency(latency)
        .interest()
        .initial_objects({
            let sector = sector.clone();
            move |node| founders_share(node, &sector)
        });
    if crash.is_some() {
        builder = builder.membership(1);
    }
    let mut sim = builder.build()?;
    let wall = Instant::now();
    let start = census(&sim);
    // Drones' region crossings, sampled every second.
    let mut regions: std::collections::BTreeMap<worldmesh::ObjectId, u32> = Default::default();
    let mut crossings = 0u64;
    let mut before_crash = None;
    let secs = duration.as_secs().max(1);
    for s in 1..=secs {
        sim.run_for(Duration::from_secs(1));
        for n in sim.nodes().iter().filter(|n| sim.is_up(n.id())) {
            for (id, e) in n.store().iter() {
                if let (Role::Primary, Body::Drone { pos, .. }) = (e.role, &e.object) {
                    let r = sector.region_of(*pos);
                    if regions.insert(id, r).is_some_and(|old| old != r) {
                        crossings += 1;
                    }
                }
            }
        }
        if let Some(victim) = crash
            && s == secs / 2
        {
            before_crash = Some(frontier::outposts(frontier::live_primaries(&sim)));
            sim.crash(NodeId(victim));
        }
    }
    let end = census(&sim);
    let sums = sim.summaries(0.0, duration.as_secs_f64());
    let kbps = sums.iter().map(|s| s.out_kbps_mean).sum::<f64>() / sums.len().max(1) as f64;
    println!(
        "frontier: {nodes} nodes, {:.0} s simulated in {:.1} s ({:.0}x real time), seed {seed}",
        duration.as_secs_f64(),
        wall.elapsed().as_secs_f64(),
        duration.as_secs_f64() / wall.elapsed().as_secs_f64().max(1e-9)
    );
    println!(
        "  ships {}  drones {}  asteroids {} (ore {} of {})",
        end.ships, end.drones, end.asteroids.0, end.asteroids.1, start.asteroids.1
    );
    println!(
        "  outposts {} standing, {} wrecked; ore stocked {}",
        end.outposts.0, end.outposts.1, end.outposts.2
    );
    println!("  drone swarms crossed regions {crossings} times");
    println!("  bandwidth out {kbps:.1} kbit/s per node (mean)");
    if let (Some(victim), Some(before)) = (crash, before_crash) {
        let after = frontier::outposts(frontier::live_primaries(&sim));
        let kept = before.intersection(&after).count();
        println!(
            "  node {victim} crashed at {:.0} s: {kept} of the {} outposts built before it are still there",
            duration.as_secs_f64() / 2.0,
            before.len()
        );
    }
    Ok(())
}

fn node(config: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let settings = worldmesh::config::resolve(
        FileConfig::load(config)?,
        Overrides::default(),
        &config.display().to_string(),
    )?;
    let sector = Sector::new(settings.world.founders);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let share = sector.clone();
        let mut builder = Server::builder()
            .game::<Body>(Arc::new(sector.clone()))
            .space(Space {
                bounds: sector.bounds(),
                regions: sector.regions * sector.regions * 8,
                max_speed: SHIP_SPEED,
            })
            .initial_objects(move |me| founders_share(me, &share));
        if settings.players.is_some() {
            builder = builder.players();
        }
        let mut node = builder.settings(settings).start().await?;
        let me = node.ready().node.0;
        println!("node {me}: listening on {}", node.ready().addr);
        if let Some(p) = node.ready().players {
            println!("node {me}: players connect to {p}");
        }
        node.begin().await;
        let control = node.control();
        tokio::spawn(async move {
            while let Some(s) = control.snapshot(None).await {
                let players = s.players.map_or(0, |p| p.sessions.connected);
                println!(
                    "node {me}: {} members, {} primaries, {} replicas, {players} players connected so far",
                    s.members.len() + 1,
                    s.summary.primaries,
                    s.summary.replicas,
                );
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        let done = node.serve(ServeOptions::default(), |_| {}).await?;
        let c = Census::of(
            done.node
                .store()
                .iter()
                .filter(|(_, e)| e.role == Role::Primary)
                .map(|(_, e)| &e.object),
        );
        println!(
            "node {me}: stopped holding {} ships, {} drones, {} asteroids, {} outposts ({} ore stocked)",
            c.ships,
            c.drones,
            c.asteroids.0,
            c.outposts.0 + c.outposts.1,
            c.outposts.2
        );
        Ok(())
    })
}

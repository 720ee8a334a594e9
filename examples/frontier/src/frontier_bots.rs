//! `frontier bots`: bot players flying ships on a real node — each steers a random course
//! (a new one every two seconds) and orders an outpost built whenever its hold has the ore.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use frontier::{BUILD_COST, Body, Helm};
use worldmesh::NodeId;
use worldmesh::player::{self, PlayOutcome, PlayerOptions};

/// Arguments of `frontier bots`.
#[derive(clap::Args)]
pub struct BotArgs {
    /// The node's player port.
    #[arg(long)]
    server: SocketAddr,
    /// The node's id.
    #[arg(long)]
    node: u32,
    /// The cluster CA certificate (`ca.pem`).
    #[arg(long)]
    ca: PathBuf,
    /// The connect-token key (`worldmesh token init`).
    #[arg(long)]
    key: PathBuf,
    /// Bot players.
    #[arg(long, default_value_t = 10)]
    count: u32,
    /// Seconds to play.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// The first bot's player id (the others follow).
    #[arg(long, default_value_t = 1)]
    first_player: u64,
    /// Player ports of the other nodes, `ID=ADDR` (for hand-offs), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = directory_entry)]
    directory: Vec<(NodeId, SocketAddr)>,
}

fn directory_entry(s: &str) -> Result<(NodeId, SocketAddr), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected ID=ADDR"))?;
    Ok((
        NodeId(id.parse().map_err(|e| format!("`{id}`: {e}"))?),
        addr.parse().map_err(|e| format!("`{addr}`: {e}"))?,
    ))
}

/// Runs the bots and prints what they saw.
pub fn run(args: &BotArgs) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.duration > 0.0 && args.duration <= 86_400.0) {
        return Err(format!("--duration {} must be in (0, 86400] seconds", args.duration).into());
    }
    let key = worldmesh::server::load_token_key(&args.key)?;
    let duration = Duration::from_secs_f64(args.duration);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcomes: Vec<PlayOutcome> = rt.block_on(async {
        let ep = player::endpoint(&args.ca)?;
        let mut nodes: Vec<NodeId> = vec![NodeId(args.node)];
        nodes.extend(args.directory.iter().map(|(n, _)| *n));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..args.count {
            let id = args.first_player + u64::from(i);
            let opts = PlayerOptions {
                server: args.server,
                node: NodeId(args.node),
                token: player::token(&key, id, nodes.clone(), duration + Duration::from_secs(60))?,
                directory: args.directory.clone(),
                input_hz: 10.0,
                duration,
            };
            let ep = ep.clone();
            tasks.spawn(async move {
                let mut course = (1i8, 0i8);
                let mut n = 0u64;
                player::play::<Body>(&ep, opts, move |ship| {
                    n += 1;
                    if n.is_multiple_of(20) {
                        let h = (id ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
                        course = ((h % 3) as i8 - 1, ((h / 3) % 3) as i8 - 1);
                    }
                    let build = matches!(ship, Some(Body::Ship { cargo, .. }) if *cargo >= BUILD_COST);
                    Helm {
                        thrust: course,
                        build,
                    }
                })
                .await
            });
        }
        let mut v = Vec::new();
        while let Some(r) = tasks.join_next().await {
            v.push(r?);
        }
        Ok::<_, Box<dyn std::error::Error>>(v)
    })?;
    let connected = outcomes.iter().filter(|o| o.connected).count();
    let views: u64 = outcomes.iter().map(|o| o.views).sum();
    let inputs: u64 = outcomes.iter().map(|o| o.inputs).sum();
    let handoffs: u32 = outcomes.iter().map(|o| o.handoffs).sum();
    println!(
        "frontier bots: {connected} of {} connected to node {}; {inputs} inputs, {views} views, {handoffs} hand-offs",
        args.count, args.node
    );
    for o in outcomes.iter().filter(|o| o.ended.is_some()).take(5) {
        println!("  ended early: {}", o.ended.as_deref().unwrap_or_default());
    }
    Ok(())
}

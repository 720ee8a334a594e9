//! `worldmesh play`: one native client (the client SDK over QUIC) connecting to a node's
//! player port with a connect token, walking a square and printing what it sees once a
//! second. The smallest complete example of a game client.

use anyhow::{Context as _, bail};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;
use worldmesh_client::{Client, ClientConfig, ClientEvent, ClientState};
use worldmesh_core::{NodeId, Time};
use worldmesh_game::{ModelObject, PlayerInput};
use worldmesh_net::players::PlayerEndpoint;
use worldmesh_replica::GameObject;

use crate::duration::parse_duration;

/// Arguments of `worldmesh play`.
#[derive(clap::Args, Debug)]
pub struct PlayArgs {
    /// The node's player port.
    #[arg(long, value_name = "ADDR")]
    server: SocketAddr,
    /// The node's id (its certificate must name it).
    #[arg(long)]
    node: u32,
    /// The cluster CA certificate the node's certificate must chain to.
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// The connect token, hex (`worldmesh token issue`).
    #[arg(long)]
    token: String,
    /// How long to play.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
}

/// Runs the command.
pub fn run(args: PlayArgs) -> anyhow::Result<()> {
    let token = worldmesh_client::token::from_hex(&args.token, worldmesh_client::token::MAX_TOKEN_BYTES)
        .map_err(|e| anyhow::anyhow!("--token: {e}"))?;
    let ca = worldmesh_net::pki::load_ca_cert(&args.ca)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(play(args, ca, token))
}

async fn play(
    args: PlayArgs,
    ca: worldmesh_net::players::CertificateDer<'static>,
    token: Vec<u8>,
) -> anyhow::Result<()> {
    let ep = PlayerEndpoint::new("0.0.0.0:0".parse().context("bind address")?, ca)?;
    let node = NodeId(args.node);
    let link = ep.connect(args.server, node).await?;
    let origin = Instant::now();
    let t = |i: Instant| Time::from_micros(i.saturating_duration_since(origin).as_micros() as u64);
    let mut client: Client<ModelObject> = Client::new(ClientConfig::default(), token, t(origin));
    client.handle_timeout(t(origin));
    let end = origin + args.duration;
    let mut next_input = origin;
    let mut next_print = origin + Duration::from_secs(1);
    let square = [(127i8, 0i8), (0, 127), (-127, 0), (0, -127)];
    loop {
        while let Some(b) = client.poll_transmit() {
            link.send(b);
        }
        while let Some(e) = client.poll_event() {
            match e {
                ClientEvent::Connected { player, avatar } => {
                    println!(
                        "connected to node {} as player {player}, avatar #{} of node {} (generation {})",
                        node.0,
                        avatar.counter(),
                        avatar.origin.0,
                        avatar.generation()
                    );
                }
                ClientEvent::Refused(r) => bail!("node {} refused the token: {r:?}", node.0),
                ClientEvent::Disconnected(r) => bail!("node {} ended the session: {r:?}", node.0),
                ClientEvent::TimedOut => bail!("no answer from node {} at {}", node.0, args.server),
                ClientEvent::HandOff { node, .. } => {
                    println!(
                        "handed off to node {} (follow it with `worldmesh bots --directory`)",
                        node.0
                    );
                    return Ok(());
                }
                ClientEvent::View { .. } => {}
            }
        }
        let now = Instant::now();
        if now >= end {
            client.disconnect(t(now));
            while let Some(b) = client.poll_transmit() {
                link.send(b);
            }
            link.close();
            // Let the close reach the node (it ends the session at once) before exiting.
            let _ = tokio::time::timeout(Duration::from_secs(1), ep.wait_idle()).await;
            let s = client.stats();
            println!(
                "left after {:.1} s: {} views, {} bytes received, {} sent",
                args.duration.as_secs_f64(),
                s.views,
                s.bytes_in,
                s.bytes_out
            );
            return Ok(());
        }
        if now >= next_print {
            next_print += Duration::from_secs(1);
            if let (Some(v), Some(a)) = (client.view(), client.avatar()) {
                let players = v
                    .objects
                    .values()
                    .filter(|o| o.kind() == worldmesh_game::model::PLAYER)
                    .count();
                let p = a.position();
                let noun = if players == 1 { "player" } else { "players" };
                println!(
                    "t={:>4.1}s  view {:>3} objects ({players} {noun})  avatar at ({:.0}, {:.0})  inputs applied up to #{}  rtt {:.1} ms",
                    now.duration_since(origin).as_secs_f64(),
                    v.objects.len(),
                    p.x,
                    p.y,
                    v.last_input.unwrap_or(0),
                    link.rtt().as_secs_f64() * 1000.0
                );
            }
        }
        let timer = client
            .poll_timeout()
            .map_or(end, |x| origin + Duration::from_micros(x.0))
            .min(end);
        let connected = matches!(client.state(), ClientState::Connected { .. });
        tokio::select! {
            d = link.recv() => match d {
                Some(b) => client.handle_datagram(t(Instant::now()), &b),
                None => bail!("node {} closed the connection", node.0),
            },
            _ = tokio::time::sleep_until(next_input), if connected => {
                let k = (now.duration_since(origin).as_secs() / 2) as usize % 4;
                let (dx, dy) = square[k];
                client.send_input(t(Instant::now()), &PlayerInput { dx, dy, fire: None });
                next_input += Duration::from_millis(50);
            }
            _ = tokio::time::sleep_until(timer.min(next_print)) => client.handle_timeout(t(Instant::now())),
        }
    }
}

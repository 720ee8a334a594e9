//! A player over the real network, for a game's bots and load tests: connect to a node's
//! player port (QUIC, the cluster CA's certificate checked), send inputs a `brain` picks,
//! receive views, follow hand-offs to other nodes, and disconnect at the end.
//!
//! The client protocol itself is the sans-IO `worldmesh_client::Client` (what a game's own
//! client embeds); this module only drives it over a [`PlayerEndpoint`] in real time.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;
use worldmesh_client::{Client, ClientConfig, ClientEvent, ConnectToken, Playable, TokenKey};
use worldmesh_core::{NodeId, Time};
pub use worldmesh_net::players::PlayerEndpoint;

use crate::ServerError;

/// Where and how long one player plays.
#[derive(Clone, Debug)]
pub struct PlayerOptions {
    /// The player port of the node it enters through.
    pub server: SocketAddr,
    /// That node's id (its certificate must name it).
    pub node: NodeId,
    /// The connect token (see [`token`]).
    pub token: Vec<u8>,
    /// Player ports of the other nodes, for hand-offs.
    pub directory: Vec<(NodeId, SocketAddr)>,
    /// Inputs per second.
    pub input_hz: f64,
    /// How long to play.
    pub duration: Duration,
}

/// What one player saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlayOutcome {
    /// The node admitted it.
    pub connected: bool,
    /// Inputs sent.
    pub inputs: u64,
    /// Views received.
    pub views: u64,
    /// Hand-offs to other nodes followed.
    pub handoffs: u32,
    /// Why it ended before its time (refused, disconnected, timed out, connection lost).
    pub ended: Option<String>,
    /// Bytes received and sent.
    pub bytes: (u64, u64),
}

/// An endpoint for players, trusting the cluster CA in `ca` (a `ca.pem`).
///
/// # Errors
/// The CA certificate cannot be read, or the socket cannot be bound.
pub fn endpoint(ca: &Path) -> Result<PlayerEndpoint, ServerError> {
    let cert = worldmesh_net::pki::load_ca_cert(ca)?;
    let any: SocketAddr = ([0, 0, 0, 0], 0).into();
    Ok(PlayerEndpoint::new(any, cert)?)
}

/// A connect token for `player`, valid on `nodes` for `lifetime`, signed with `key` (the
/// login service's job in production).
///
/// # Errors
/// The token cannot be built (no nodes, a lifetime out of range).
pub fn token(
    key: &TokenKey,
    player: u64,
    nodes: Vec<NodeId>,
    lifetime: Duration,
) -> Result<Vec<u8>, ServerError> {
    let bad = |e: worldmesh_client::TokenError| ServerError::Runtime(format!("connect token: {e}"));
    ConnectToken::new(
        player,
        nodes,
        worldmesh_net::driver::unix_ms(),
        u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX),
    )
    .map_err(bad)?
    .issue(key)
    .map_err(bad)
}

/// Plays one player: `brain` picks each input from the player's avatar as the client last
/// saw it (`None` before the first view).
pub async fn play<O: Playable>(
    ep: &PlayerEndpoint,
    opts: PlayerOptions,
    mut brain: impl FnMut(Option<&O>) -> O::Input,
) -> PlayOutcome {
    let mut out = PlayOutcome::default();
    let mut link = match ep.connect(opts.server, opts.node).await {
        Ok(l) => l,
        Err(e) => {
            out.ended = Some(format!("connect: {e}"));
            return out;
        }
    };
    let origin = Instant::now();
    let end = origin + opts.duration;
    let t = |i: Instant| Time::from_micros(i.saturating_duration_since(origin).as_micros() as u64);
    let mut client: Client<O> = Client::new(ClientConfig::default(), opts.token, t(origin));
    client.handle_timeout(t(origin));
    let period = Duration::from_secs_f64(1.0 / opts.input_hz.clamp(0.1, 240.0));
    let mut next_input = origin;
    loop {
        let now = Instant::now();
        while let Some(b) = client.poll_transmit() {
            link.send(b);
        }
        let mut stop = false;
        while let Some(e) = client.poll_event() {
            match e {
                ClientEvent::Connected { .. } => out.connected = true,
                ClientEvent::View { .. } => out.views += 1,
                ClientEvent::HandOff { node, token } => {
                    let Some(&(_, addr)) = opts.directory.iter().find(|(n, _)| *n == node) else {
                        out.ended = Some(format!("hand-off to node {} not in the directory", node.0));
                        stop = true;
                        continue;
                    };
                    link.close();
                    match ep.connect(addr, node).await {
                        Ok(l) => link = l,
                        Err(e) => {
                            out.ended = Some(format!("hand-off connect: {e}"));
                            stop = true;
                            continue;
                        }
                    }
                    out.handoffs += 1;
                    client.hand_over(t(Instant::now()), token);
                }
                ClientEvent::Refused(r) => {
                    out.ended = Some(format!("refused: {r:?}"));
                    stop = true;
                }
                ClientEvent::Disconnected(r) => {
                    out.ended = Some(format!("disconnected: {r:?}"));
                    stop = true;
                }
                ClientEvent::TimedOut => {
                    out.ended = Some("timed out".into());
                    stop = true;
                }
            }
        }
        if stop {
            break;
        }
        if now >= end {
            client.disconnect(t(now));
            while let Some(b) = client.poll_transmit() {
                link.send(b);
            }
            break;
        }
        let timer = client
            .poll_timeout()
            .map_or(end, |x| origin + Duration::from_micros(x.as_micros()))
            .min(end);
        let input_due = out.connected.then_some(next_input);
        tokio::select! {
            d = link.recv() => match d {
                Some(b) => client.handle_datagram(t(Instant::now()), &b),
                None => {
                    out.ended = Some("connection closed".into());
                    break;
                }
            },
            () = tokio::time::sleep_until(input_due.unwrap_or(end)), if input_due.is_some() => {
                let now = Instant::now();
                let input = brain(client.avatar());
                if client.send_input(t(now), &input).is_some() {
                    out.inputs += 1;
                }
                next_input = (next_input + period).max(now);
            }
            () = tokio::time::sleep_until(timer) => client.handle_timeout(t(Instant::now())),
        }
    }
    link.close();
    let s = client.stats();
    out.bytes = (s.bytes_in, s.bytes_out);
    out
}

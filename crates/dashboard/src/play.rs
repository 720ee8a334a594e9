//! Playing from the browser (issue 17 item 3): the dashboard is a gateway. The page opens
//! `GET /play` (a WebSocket, one player per socket) and sends the keys held; the dashboard
//! runs a real [`worldmesh_client::Client`] session — the same sans-IO client the bots use
//! — to a node's player port over QUIC ([`worldmesh_net::players::PlayerEndpoint`]), with a
//! connect token it issues itself from the cluster's player key, follows hand-offs, and
//! sends the avatar's id and position back so the page highlights it on the map.
//!
//! Browser → dashboard (JSON text, at most [`MAX_PLAY_MESSAGE`] bytes):
//! `{"type":"keys","dx":-1|0|1,"dy":-1|0|1}` (the direction held; the session sends it to
//! the node as inputs 20 times a second) and `{"type":"leave"}`.
//! Dashboard → browser (JSON text): `joined {node, player, avatar, key}` (`key`: the
//! avatar's [`crate::wire::object_key`], as the map knows it), `at {node, x, y, seen}` up
//! to 10 times a second, `handoff {from, to}`, `ended {reason}`, `error {error}`.
//!
//! Bounds: at most [`PlayConfig::max_sessions`] players at once (503 beyond), key messages
//! beyond [`PlayConfig::max_messages_per_s`] dropped and counted (token bucket,
//! [`RateLimit`]), a bounded queue each way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;
use worldmesh_client::{Client, ClientConfig, ClientEvent, ClientState, ConnectToken, Playable, TokenKey};
use worldmesh_core::{NodeId, Time};
use worldmesh_net::players::{CertificateDer, PlayerEndpoint};

/// Longest message a page may send on `/play`, bytes.
pub const MAX_PLAY_MESSAGE: usize = 256;

/// What the page asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlayMsg {
    /// The direction held now (each -1, 0 or 1).
    Keys {
        /// Left/right.
        dx: i8,
        /// Up/down (screen: down is +y).
        dy: i8,
    },
    /// Leave the game.
    Leave,
}

/// Why a page's message was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlayMsgError {
    /// Longer than [`MAX_PLAY_MESSAGE`].
    #[error("message of {0} bytes exceeds the limit of {MAX_PLAY_MESSAGE}")]
    TooLong(usize),
    /// Not one of the accepted shapes.
    #[error("bad message: {0}")]
    Malformed(String),
}

impl PlayMsg {
    /// Parses one message.
    pub fn parse(text: &str) -> Result<Self, PlayMsgError> {
        if text.len() > MAX_PLAY_MESSAGE {
            return Err(PlayMsgError::TooLong(text.len()));
        }
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| PlayMsgError::Malformed(e.to_string()))?;
        let axis = |k: &str| -> Result<i8, PlayMsgError> {
            match v.get(k).and_then(serde_json::Value::as_i64) {
                Some(d @ -1..=1) => Ok(d as i8),
                _ => Err(PlayMsgError::Malformed(format!("{k} must be -1, 0 or 1"))),
            }
        };
        match v.get("type").and_then(serde_json::Value::as_str) {
            Some("keys") => Ok(Self::Keys {
                dx: axis("dx")?,
                dy: axis("dy")?,
            }),
            Some("leave") => Ok(Self::Leave),
            _ => Err(PlayMsgError::Malformed(
                "expected {\"type\":\"keys\",\"dx\":..,\"dy\":..} or {\"type\":\"leave\"}".into(),
            )),
        }
    }
}

/// A token bucket (sans-IO: times are given, in seconds).
#[derive(Clone, Debug)]
pub struct RateLimit {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: f64,
}

impl RateLimit {
    /// `rate` messages a second, bursts of `burst`.
    pub fn new(rate: f64, burst: f64, now: f64) -> Self {
        Self {
            rate,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// True if a message at `now` is within the limit (and counts it).
    pub fn allow(&mut self, now: f64) -> bool {
        self.tokens = (self.tokens + (now - self.at).max(0.0) * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What the session tells the page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PlayUpdate {
    /// Connected.
    Joined {
        /// The node holding the avatar.
        node: u32,
        /// The player id.
        player: u64,
        /// The avatar, `n<origin>.<counter>` of generation `g`.
        avatar: String,
        /// The avatar's key on the map ([`crate::wire::object_key`]), as a string (exact).
        key: String,
    },
    /// Where the avatar is, as the client sees it.
    At {
        /// The node the client is connected to.
        node: u32,
        /// Position x.
        x: f32,
        /// Position y.
        y: f32,
        /// Objects in the client's view.
        seen: usize,
    },
    /// The avatar moved to another node; the session followed it.
    Handoff {
        /// From.
        from: u32,
        /// To.
        to: u32,
    },
    /// The session ended.
    Ended {
        /// Why.
        reason: String,
    },
}

/// The page's end of a session: keys in, updates out. Dropping it ends the session (the
/// player leaves).
pub struct PlaySession {
    /// The direction held.
    pub keys: mpsc::Sender<(i8, i8)>,
    /// What happened.
    pub updates: mpsc::Receiver<PlayUpdate>,
}

/// Something that can start a player session for a page (a real cluster: [`ClusterGateway`]).
pub trait Gateway: Send + Sync + 'static {
    /// Starts a session (on the current tokio runtime).
    fn open(&self) -> Result<PlaySession, String>;
    /// One line saying where players go (shown by the page).
    fn describe(&self) -> String;
}

/// Limits of `/play`.
#[derive(Clone, Debug)]
pub struct PlayConfig {
    /// Players at once.
    pub max_sessions: usize,
    /// Key messages per second a page may send (more are dropped and counted).
    pub max_messages_per_s: f64,
}

impl Default for PlayConfig {
    /// 8 players, 30 messages a second.
    fn default() -> Self {
        Self {
            max_sessions: 8,
            max_messages_per_s: 30.0,
        }
    }
}

/// `/play` as the server runs it: a gateway and its limits.
#[derive(Clone)]
pub struct Play {
    /// Where sessions come from.
    pub gateway: Arc<dyn Gateway>,
    /// Limits.
    pub config: PlayConfig,
    /// Sessions open now.
    pub(crate) sessions: Arc<tokio::sync::Semaphore>,
    /// Key messages dropped by the rate limit.
    pub(crate) dropped: Arc<AtomicU64>,
}

impl Play {
    /// `/play` through `gateway` with `config`.
    pub fn new(gateway: Arc<dyn Gateway>, config: PlayConfig) -> Self {
        Self {
            sessions: Arc::new(tokio::sync::Semaphore::new(config.max_sessions)),
            gateway,
            config,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Key messages dropped so far by the rate limit.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A gateway into a real cluster: tokens from the cluster's player key, QUIC to the
/// nodes' player ports, certificates checked against the cluster CA.
pub struct ClusterGateway<O: Playable> {
    endpoint: PlayerEndpoint,
    key: TokenKey,
    /// Player ports, by node id.
    nodes: Vec<(NodeId, SocketAddr)>,
    next: AtomicU64,
    input: fn(i8, i8) -> O::Input,
}

impl<O: Playable> ClusterGateway<O> {
    /// Players join `nodes` (taken in turn) with tokens from `key`; `input` turns the
    /// direction held into the game's input. Binds a local UDP port (call within a tokio
    /// runtime).
    pub fn new(
        ca: CertificateDer<'static>,
        key: TokenKey,
        nodes: Vec<(NodeId, SocketAddr)>,
        input: fn(i8, i8) -> O::Input,
    ) -> Result<Self, String> {
        if nodes.is_empty() {
            return Err("no player port to join".into());
        }
        let endpoint =
            PlayerEndpoint::new(SocketAddr::from(([0, 0, 0, 0], 0)), ca).map_err(|e| e.to_string())?;
        Ok(Self {
            endpoint,
            key,
            nodes,
            next: AtomicU64::new(0),
            input,
        })
    }
}

impl<O: Playable> Gateway for ClusterGateway<O> {
    fn open(&self) -> Result<PlaySession, String> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (node, addr) = self.nodes[(n % self.nodes.len() as u64) as usize];
        // Player ids of browser players: high, and distinct per dashboard process.
        let player = 0x4000_0000_0000 | (u64::from(std::process::id()) << 20) | (n & 0xf_ffff);
        let token = ConnectToken::new(
            player,
            vec![node],
            worldmesh_net::driver::unix_ms(),
            24 * 3_600_000,
        )
        .and_then(|t| t.issue(&self.key))
        .map_err(|e| e.to_string())?;
        let (keys_tx, keys_rx) = mpsc::channel(8);
        let (up_tx, up_rx) = mpsc::channel(32);
        let s = SessionTask::<O> {
            endpoint: self.endpoint.clone(),
            directory: self.nodes.clone(),
            node,
            addr,
            player,
            token,
            input: self.input,
        };
        tokio::spawn(async move {
            let reason = s.run(keys_rx, &up_tx).await;
            let _ = up_tx.send(PlayUpdate::Ended { reason }).await;
        });
        Ok(PlaySession {
            keys: keys_tx,
            updates: up_rx,
        })
    }

    fn describe(&self) -> String {
        let ids: Vec<String> = self.nodes.iter().map(|(n, _)| n.0.to_string()).collect();
        format!(
            "players join nodes {} in turn (real client sessions over QUIC)",
            ids.join(", ")
        )
    }
}

struct SessionTask<O: Playable> {
    endpoint: PlayerEndpoint,
    directory: Vec<(NodeId, SocketAddr)>,
    node: NodeId,
    addr: SocketAddr,
    player: u64,
    token: Vec<u8>,
    input: fn(i8, i8) -> O::Input,
}

impl<O: Playable> SessionTask<O> {
    /// Runs the session until the page leaves or the node ends it; returns why it ended.
    async fn run(self, mut keys: mpsc::Receiver<(i8, i8)>, up: &mpsc::Sender<PlayUpdate>) -> String {
        let mut node = self.node;
        let mut link = match self.endpoint.connect(self.addr, node).await {
            Ok(l) => l,
            Err(e) => return format!("cannot reach node {}: {e}", node.0),
        };
        let origin = Instant::now();
        let t = |i: Instant| Time::from_micros(i.saturating_duration_since(origin).as_micros() as u64);
        let mut client: Client<O> = Client::new(ClientConfig::default(), self.token, t(origin));
        client.handle_timeout(t(origin));
        let mut held = (0i8, 0i8);
        let mut next_input = origin;
        let mut next_report = origin;
        let input_every = Duration::from_millis(50);
        let report_every = Duration::from_millis(100);
        loop {
            while let Some(b) = client.poll_transmit() {
                link.send(b);
            }
            while let Some(e) = client.poll_event() {
                match e {
                    ClientEvent::Connected { player, avatar } => {
                        let u = PlayUpdate::Joined {
                            node: node.0,
                            player,
                            avatar: format!(
                                "n{}.{} of generation {}",
                                avatar.origin.0,
                                avatar.counter(),
                                avatar.generation()
                            ),
                            key: crate::wire::object_key(avatar).to_string(),
                        };
                        if up.send(u).await.is_err() {
                            return "the page left".into();
                        }
                    }
                    ClientEvent::HandOff { node: to, token } => {
                        let Some(&(_, addr)) = self.directory.iter().find(|(id, _)| *id == to) else {
                            return format!("handed off to node {}, whose player port is unknown", to.0);
                        };
                        link.close();
                        link = match self.endpoint.connect(addr, to).await {
                            Ok(l) => l,
                            Err(e) => return format!("hand-off to node {}: {e}", to.0),
                        };
                        client.hand_over(t(Instant::now()), token);
                        let _ = up
                            .send(PlayUpdate::Handoff {
                                from: node.0,
                                to: to.0,
                            })
                            .await;
                        node = to;
                    }
                    ClientEvent::Refused(r) => return format!("node {} refused the token: {r:?}", node.0),
                    ClientEvent::Disconnected(r) => {
                        return format!("node {} ended the session: {r:?}", node.0);
                    }
                    ClientEvent::TimedOut => return format!("no answer from node {}", node.0),
                    ClientEvent::View { .. } => {}
                }
            }
            let now = Instant::now();
            let connected = matches!(client.state(), ClientState::Connected { .. });
            if now >= next_report {
                next_report = now + report_every;
                if let (Some(v), Some(a)) = (client.view(), client.avatar()) {
                    let p = a.position();
                    // Dropped when the page is behind: the next one will do.
                    let _ = up.try_send(PlayUpdate::At {
                        node: node.0,
                        x: p.x,
                        y: p.y,
                        seen: v.objects.len(),
                    });
                }
            }
            let timer = client.poll_timeout().map_or(now + Duration::from_secs(1), |x| {
                origin + Duration::from_micros(x.0)
            });
            tokio::select! {
                d = link.recv() => match d {
                    Some(b) => client.handle_datagram(t(Instant::now()), &b),
                    None => return format!("node {} closed the connection", node.0),
                },
                k = keys.recv() => match k {
                    Some(k) => held = k,
                    None => {
                        client.disconnect(t(Instant::now()));
                        while let Some(b) = client.poll_transmit() {
                            link.send(b);
                        }
                        link.close();
                        return "left".into();
                    }
                },
                _ = tokio::time::sleep_until(next_input), if connected => {
                    client.send_input(t(Instant::now()), &(self.input)(held.0.saturating_mul(127), held.1.saturating_mul(127)));
                    next_input = Instant::now() + input_every;
                }
                _ = tokio::time::sleep_until(timer.min(next_report)) => client.handle_timeout(t(Instant::now())),
            }
        }
    }
}

impl<O: Playable> std::fmt::Debug for SessionTask<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "session of player {} at node {}", self.player, self.node.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_messages_parse_or_are_refused() {
        assert_eq!(
            PlayMsg::parse(r#"{"type":"keys","dx":-1,"dy":1}"#),
            Ok(PlayMsg::Keys { dx: -1, dy: 1 })
        );
        assert_eq!(PlayMsg::parse(r#"{"type":"leave"}"#), Ok(PlayMsg::Leave));
        for bad in [
            r#"{"type":"keys","dx":2,"dy":0}"#,
            r#"{"type":"keys","dx":0}"#,
            r#"{"type":"fly"}"#,
            "not json",
        ] {
            assert!(
                matches!(PlayMsg::parse(bad), Err(PlayMsgError::Malformed(_))),
                "{bad}"
            );
        }
        let long = format!(r#"{{"type":"leave","pad":"{}"}}"#, "x".repeat(300));
        assert!(matches!(PlayMsg::parse(&long), Err(PlayMsgError::TooLong(_))));
    }

    #[test]
    fn the_rate_limit_allows_bursts_then_the_rate() {
        let mut r = RateLimit::new(10.0, 5.0, 0.0);
        assert_eq!((0..8).filter(|_| r.allow(0.0)).count(), 5);
        assert!(!r.allow(0.05));
        assert!(r.allow(0.1));
        assert_eq!(
            (0..20).filter(|_| r.allow(1.1)).count(),
            5,
            "refilled to the burst, no more"
        );
    }

    #[test]
    fn updates_serialize_with_their_type() {
        let j = serde_json::to_string(&PlayUpdate::Handoff { from: 1, to: 2 }).unwrap();
        assert_eq!(j, r#"{"type":"handoff","from":1,"to":2}"#);
    }
}

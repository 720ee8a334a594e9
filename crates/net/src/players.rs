//! Players' connections: QUIC with server-authenticated TLS, client-protocol datagrams.
//!
//! A node that admits players listens on a second UDP port ([`PlayerListener`]). Players
//! hold no certificate: they check the node's (issued by the cluster CA, naming
//! `node-<ID>.worldmesh`) and prove who they are with a connect token inside the client
//! protocol (`worldmesh_client::token`), so a player cannot pose as a node and a node
//! cannot be impersonated to a player. Everything a player sends rides QUIC DATAGRAM
//! frames (RFC 9221), each one client-protocol message; QUIC encrypts and
//! integrity-protects them and never accepts a packet twice.
//!
//! [`PlayerLink`] is the client side: one connection to one node, used by the bot load
//! tester and by native clients. Many links can share one [`PlayerEndpoint`] (one UDP
//! socket).
//!
//! Bounds: connections beyond [`PlayerListenerConfig::max_connections`] are refused at
//! the handshake; each connection buffers at most 64 KiB of datagrams each way; events
//! beyond [`PlayerListenerConfig::event_queue`] are dropped and counted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, IdleTimeout, TransportConfig};
use rustls::RootCertStore;
pub use rustls::pki_types::CertificateDer;
use tokio::sync::mpsc;
use worldmesh_core::NodeId;

use worldmesh_client::Playable;
use worldmesh_core::Time;
use worldmesh_node::Node;
use worldmesh_node::sessions::{ConnId, SessionEvent, SessionStats, Sessions};
use worldmesh_replica::GameObject;

use crate::pki::{NodeIdentity, node_name};
use crate::quic::lock;
use crate::transport::TransportError;

/// ALPN of the client protocol.
pub const PLAYER_ALPN: &[u8] = b"worldmesh-player/1";
/// The QUIC application close code of a player who left on purpose (any other close keeps
/// the session resumable until it times out).
pub const CLOSE_LEFT: u32 = 1;
/// Datagram buffer per player connection, each way.
const DATAGRAM_BUFFER: usize = 64 * 1024;

/// How a [`PlayerListener`] is set up.
#[derive(Clone, Debug)]
pub struct PlayerListenerConfig {
    /// UDP address players connect to.
    pub listen: SocketAddr,
    /// Most player connections at once.
    pub max_connections: usize,
    /// Events waiting for [`PlayerListener::recv`].
    pub event_queue: usize,
    /// A connection with no packet for this long is closed.
    pub idle_timeout: Duration,
}

impl PlayerListenerConfig {
    /// Defaults: 8,192 connections, 64 Ki queued events, 10 s idle timeout.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            max_connections: 8192,
            event_queue: 64 * 1024,
            idle_timeout: Duration::from_secs(10),
        }
    }
}

/// Something that happened on the player port.
#[derive(Debug)]
pub enum PlayerEvent {
    /// A datagram from connection `conn`.
    Datagram {
        /// The connection (numbered by the listener).
        conn: u64,
        /// The bytes.
        bytes: Bytes,
    },
    /// Connection `conn` closed.
    Closed {
        /// The connection.
        conn: u64,
        /// The player closed it with [`CLOSE_LEFT`]: it left on purpose.
        left: bool,
    },
}

/// Counters of the player port.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlayerPortStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Handshakes refused (over the connection limit) or failed.
    pub refused: u64,
    /// Events dropped because the driver was behind.
    pub events_dropped: u64,
    /// Datagrams that could not be sent (connection gone, too large, buffer full).
    pub send_failed: u64,
}

struct ListenerShared {
    conns: Mutex<HashMap<u64, quinn::Connection>>,
    stats: Mutex<PlayerPortStats>,
    next: AtomicU64,
    max: usize,
}

/// The player port of a node.
pub struct PlayerListener {
    shared: Arc<ListenerShared>,
    endpoint: Endpoint,
    events: mpsc::Receiver<PlayerEvent>,
    local: SocketAddr,
}

fn transport(idle: Duration) -> Result<Arc<TransportConfig>, TransportError> {
    let mut t = TransportConfig::default();
    let idle =
        IdleTimeout::try_from(idle).map_err(|e| TransportError::Config(format!("idle_timeout: {e}")))?;
    t.max_idle_timeout(Some(idle))
        .keep_alive_interval(Some(Duration::from_secs(1)))
        .datagram_receive_buffer_size(Some(DATAGRAM_BUFFER))
        .datagram_send_buffer_size(DATAGRAM_BUFFER)
        .max_concurrent_bidi_streams(0u32.into())
        .max_concurrent_uni_streams(0u32.into());
    Ok(Arc::new(t))
}

impl PlayerListener {
    /// Binds the player port with the node's certificate. Needs a tokio runtime.
    pub fn bind(cfg: PlayerListenerConfig, identity: &NodeIdentity) -> Result<Self, TransportError> {
        let err = |e: &dyn std::fmt::Display| TransportError::Config(format!("player TLS: {e}"));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| err(&e))?
            .with_no_client_auth()
            .with_single_cert(identity.chain().to_vec(), identity.key().clone_key())
            .map_err(|e| err(&e))?;
        tls.alpn_protocols = vec![PLAYER_ALPN.to_vec()];
        tls.max_early_data_size = 0;
        let mut server =
            quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).map_err(|e| err(&e))?));
        server.transport_config(transport(cfg.idle_timeout)?);
        server.max_incoming(1024);
        let endpoint = Endpoint::server(server, cfg.listen)
            .map_err(|io| TransportError::Bind { addr: cfg.listen, io })?;
        let local = endpoint
            .local_addr()
            .map_err(|io| TransportError::Bind { addr: cfg.listen, io })?;
        let (tx, rx) = mpsc::channel(cfg.event_queue.max(1));
        let shared = Arc::new(ListenerShared {
            conns: Mutex::new(HashMap::new()),
            stats: Mutex::new(PlayerPortStats::default()),
            next: AtomicU64::new(1),
            max: cfg.max_connections,
        });
        tokio::spawn(accept_loop(endpoint.clone(), Arc::clone(&shared), tx));
        Ok(Self {
            shared,
            endpoint,
            events: rx,
            local,
        })
    }

    /// The address players connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next event (pending forever once the endpoint is closed).
    pub async fn recv(&mut self) -> PlayerEvent {
        match self.events.recv().await {
            Some(e) => e,
            None => std::future::pending().await,
        }
    }

    /// Sends one datagram to connection `conn` (dropped and counted if it cannot go).
    pub fn send(&self, conn: u64, bytes: Vec<u8>) {
        let c = lock(&self.shared.conns).get(&conn).cloned();
        let ok = c.is_some_and(|c| c.send_datagram(Bytes::from(bytes)).is_ok());
        if !ok {
            lock(&self.shared.stats).send_failed += 1;
        }
    }

    /// Closes connection `conn` (after the session ended).
    pub fn close(&self, conn: u64, reason: &str) {
        if let Some(c) = lock(&self.shared.conns).remove(&conn) {
            c.close(0u32.into(), reason.as_bytes());
        }
    }

    /// Counters.
    pub fn stats(&self) -> PlayerPortStats {
        lock(&self.shared.stats).clone()
    }

    /// Closes every connection and the endpoint.
    pub fn shutdown(&self) {
        self.endpoint.close(0u32.into(), b"node stopping");
    }
}

async fn accept_loop(endpoint: Endpoint, shared: Arc<ListenerShared>, tx: mpsc::Sender<PlayerEvent>) {
    while let Some(incoming) = endpoint.accept().await {
        if lock(&shared.conns).len() >= shared.max {
            lock(&shared.stats).refused += 1;
            incoming.refuse();
            continue;
        }
        let shared = Arc::clone(&shared);
        let tx = tx.clone();
        tokio::spawn(async move {
            let conn = match tokio::time::timeout(Duration::from_secs(5), incoming).await {
                Ok(Ok(c)) => c,
                _ => {
                    lock(&shared.stats).refused += 1;
                    return;
                }
            };
            let id = shared.next.fetch_add(1, Ordering::Relaxed);
            lock(&shared.conns).insert(id, conn.clone());
            lock(&shared.stats).accepted += 1;
            let left = loop {
                match conn.read_datagram().await {
                    Ok(bytes) => {
                        if tx.try_send(PlayerEvent::Datagram { conn: id, bytes }).is_err() {
                            lock(&shared.stats).events_dropped += 1;
                        }
                    }
                    Err(quinn::ConnectionError::ApplicationClosed(c)) => {
                        break c.error_code == quinn::VarInt::from_u32(CLOSE_LEFT);
                    }
                    Err(_) => break false,
                }
            };
            lock(&shared.conns).remove(&id);
            // Must arrive: the session table keeps the avatar for a resume otherwise.
            let _ = tx.send(PlayerEvent::Closed { conn: id, left }).await;
        });
    }
}

/// A client-side QUIC endpoint (one UDP socket) that trusts the cluster CA.
#[derive(Clone)]
pub struct PlayerEndpoint {
    endpoint: Endpoint,
}

impl PlayerEndpoint {
    /// Binds an ephemeral local port; node certificates must chain to `ca`.
    pub fn new(bind: SocketAddr, ca: CertificateDer<'static>) -> Result<Self, TransportError> {
        let err = |e: &dyn std::fmt::Display| TransportError::Config(format!("player TLS: {e}"));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(ca).map_err(|e| err(&e))?;
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| err(&e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![PLAYER_ALPN.to_vec()];
        let mut client =
            quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).map_err(|e| err(&e))?));
        client.transport_config(transport(Duration::from_secs(10))?);
        let mut endpoint = Endpoint::client(bind).map_err(|io| TransportError::Bind { addr: bind, io })?;
        endpoint.set_default_client_config(client);
        Ok(Self { endpoint })
    }

    /// Connects to node `node`'s player port at `addr` (its certificate must name it).
    pub async fn connect(&self, addr: SocketAddr, node: NodeId) -> Result<PlayerLink, TransportError> {
        let name = node_name(node);
        let connecting = self
            .endpoint
            .connect(addr, &name)
            .map_err(|e| TransportError::Config(format!("connect to {addr}: {e}")))?;
        let conn = tokio::time::timeout(Duration::from_secs(5), connecting)
            .await
            .map_err(|_| TransportError::Config(format!("connect to {addr}: no handshake within 5 s")))?
            .map_err(|e| TransportError::Config(format!("connect to {addr}: {e}")))?;
        Ok(PlayerLink { conn })
    }

    /// Waits until every connection of this endpoint is closed.
    pub async fn wait_idle(&self) {
        self.endpoint.wait_idle().await;
    }
}

/// One player's connection to a node.
pub struct PlayerLink {
    conn: quinn::Connection,
}

impl PlayerLink {
    /// Sends one client-protocol datagram (false if it could not go).
    pub fn send(&self, bytes: Vec<u8>) -> bool {
        self.conn.send_datagram(Bytes::from(bytes)).is_ok()
    }

    /// The next datagram from the node; `None` once the connection is closed.
    pub async fn recv(&self) -> Option<Bytes> {
        self.conn.read_datagram().await.ok()
    }

    /// Round-trip time QUIC measures on this connection.
    pub fn rtt(&self) -> Duration {
        self.conn.rtt()
    }

    /// Closes the connection: the player leaves (the node ends the session at once).
    pub fn close(&self) {
        self.conn.close(CLOSE_LEFT.into(), b"left");
    }
}

/// What the driver needs from a node's player sessions: implemented by
/// [`Sessions`] for every playable game, so the driver itself stays generic over any game.
pub trait PlayerHost<O: GameObject>: Send {
    /// A datagram from connection `conn`.
    fn datagram(&mut self, now: Time, unix_ms: u64, conn: u64, bytes: &[u8], node: &mut Node<O>);
    /// Connection `conn` closed; `left`: on purpose ([`CLOSE_LEFT`]).
    fn closed(&mut self, now: Time, conn: u64, left: bool, node: &mut Node<O>);
    /// After a node frame: views, timeouts, hand-offs.
    fn frame(&mut self, now: Time, unix_ms: u64, node: &mut Node<O>);
    /// The next datagram to send.
    fn poll_transmit(&mut self) -> Option<(u64, Vec<u8>)>;
    /// The next line worth logging (connects, refusals, disconnects).
    fn poll_log(&mut self) -> Option<String>;
    /// Ends every session (the node is stopping).
    fn shutdown(&mut self, now: Time, node: &mut Node<O>);
    /// Counters.
    fn stats(&self) -> SessionStats;
    /// Players connected now.
    fn players(&self) -> usize;
    /// Players the node takes (its assignment capacity, or its session limit).
    fn capacity(&self) -> usize;
    /// A players'-layer message from another member (`Event::Players`).
    fn node_message(&mut self, now: Time, from: worldmesh_core::NodeId, payload: &[u8], node: &mut Node<O>);
    /// The assignment agent's counters, if the node takes part.
    fn assignment_stats(&self) -> Option<worldmesh_node::assignment::AssignmentStats>;
}

impl<O: Playable> PlayerHost<O> for Sessions<O> {
    fn datagram(&mut self, now: Time, unix_ms: u64, conn: u64, bytes: &[u8], node: &mut Node<O>) {
        self.handle_datagram(now, unix_ms, ConnId(conn), bytes, node);
    }

    fn closed(&mut self, now: Time, conn: u64, left: bool, node: &mut Node<O>) {
        if left {
            self.leave(now, ConnId(conn), node);
        } else {
            Sessions::closed(self, ConnId(conn));
        }
    }

    fn frame(&mut self, now: Time, unix_ms: u64, node: &mut Node<O>) {
        Sessions::frame(self, now, unix_ms, node);
    }

    fn poll_transmit(&mut self) -> Option<(u64, Vec<u8>)> {
        Sessions::poll_transmit(self).map(|(c, b)| (c.0, b))
    }

    fn poll_log(&mut self) -> Option<String> {
        self.poll_event().map(|e| match e {
            SessionEvent::Connected {
                conn,
                player,
                avatar,
                resumed,
            } => format!(
                "player {player} connected (connection {}, avatar {}:{}{})",
                conn.0,
                avatar.origin.0,
                avatar.seq,
                if resumed { ", resumed" } else { "" }
            ),
            SessionEvent::Refused { conn, reason } => {
                format!("player connection {} refused: {reason:?}", conn.0)
            }
            SessionEvent::Disconnected { conn, player, reason } => {
                format!("player {player} disconnected (connection {}): {reason:?}", conn.0)
            }
        })
    }

    fn shutdown(&mut self, now: Time, node: &mut Node<O>) {
        Sessions::shutdown(self, now, node);
    }

    fn stats(&self) -> SessionStats {
        Sessions::stats(self).clone()
    }

    fn players(&self) -> usize {
        Sessions::len(self)
    }

    fn capacity(&self) -> usize {
        Sessions::capacity(self)
    }

    fn node_message(&mut self, now: Time, from: worldmesh_core::NodeId, payload: &[u8], node: &mut Node<O>) {
        self.handle_node_message(now, from, payload, node);
    }

    fn assignment_stats(&self) -> Option<worldmesh_node::assignment::AssignmentStats> {
        self.assignment().map(|a| a.stats().clone())
    }
}

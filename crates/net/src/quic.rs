//! Node-to-node transport over QUIC with mutual TLS (issue 13, items 1 and 2).
//!
//! # Security model
//! - **Who may connect.** Every endpoint presents its node certificate and requires one
//!   from the peer (client authentication is mandatory); both chains must verify to the
//!   cluster CA ([`crate::pki`]). TLS 1.3 only, ring crypto, no 0-RTT (replayable), no
//!   session resumption (every connection re-presents and re-checks certificates).
//! - **Who a peer is.** The server name cannot be checked against an address, so the
//!   client verifies the chain to the CA without a name, and both sides then bind the
//!   identity at the application level: the peer's [`Hello`] names a node id, and the
//!   peer is accepted only if its certificate is valid for `node-<ID>.worldmesh`. A member
//!   with a valid certificate claiming another member's id is refused (`identity`).
//! - **What must agree.** Protocol version and world settings (compared key by key; a
//!   refusal names the differing setting and both values).
//! - **What a packet can do.** Every QUIC packet is authenticated and decrypted with the
//!   connection's keys, and packet numbers are never accepted twice, so forged or replayed
//!   datagrams are dropped by QUIC before the node sees them. Packets from outside get no
//!   reply: unknown connection ids never trigger a stateless reset (our connection-id
//!   generator rejects every unknown id — a restarted process could not produce a valid
//!   reset token anyway), version negotiation is withheld by the socket, and new clients
//!   must first prove their address with a Retry (no handshake flight is ever sent to an
//!   unvalidated source).
//!
//! # Carrying datagrams
//! A node's datagram rides a QUIC DATAGRAM frame (RFC 9221) when it fits the connection's
//! [`quinn::Connection::max_datagram_size`], else one long-lived unidirectional stream per
//! connection (reliable, ordered; each message prefixed by its `u32` length, bounded by
//! `max_message` on receipt). The bytes are the node's own frames, unchanged.
//!
//! # Connections
//! Dials are lazy: [`QuicTransport::send`] to a member without a connection queues the
//! message (bounded) and dials the address [`QuicTransport::set_addr`] recorded. Both
//! members may dial each other at once; both connections are kept, and both ends send on
//! the one dialed by the lower node id (a deterministic choice both ends agree on).
//! A dead peer's connection goes away after `idle_timeout` (keep-alives every
//! `keep_alive`). A hello with a larger generation replaces the member's old connections
//! (a restart); one with a smaller generation is refused (`stale_generation`), and one with
//! the generation [`QuicTransport::forget`] declared dead too (`declared_down`). The latter
//! closes with a code of its own, and its reason starts with how the refuser sees the
//! cluster ([`QuicTransport::set_view`]): the dialer learns that the cluster holds its
//! generation down ([`TransportEvent::DeclaredDown`]) — a node stalled past the suspicion
//! timeout, or cut off until both sides declared the other failed, hears it no other
//! way, since no SWIM message crosses a refused connection — and its node renews its
//! generation (unless its own side of a split wins), which the next dials carry.
//!
//! Only the accepting end refuses a generation declared dead: a node dials a member it
//! holds dead on purpose (SWIM's announcements to down members, which are how two sides
//! of a healed partition meet again), so [`QuicTransport::forget`] keeps the address.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::udp::{RecvMeta, Transmit};
use quinn::{
    AsyncUdpSocket, ConnectionError, ConnectionId, ConnectionIdGenerator, Endpoint, EndpointConfig,
    IdleTimeout, Runtime as _, TransportConfig, UdpPoller, VarInt,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::sync::mpsc;
use worldmesh_core::NodeId;
use worldmesh_core::traffic::{MessageClass, UDP_IPV4_OVERHEAD};
use worldmesh_core::wire::{HEADER_LEN, MAX_PAYLOAD};
use worldmesh_node::membership::View;

use crate::hello::{HELLO_HEADER_LEN, Hello, PeerHello};
use crate::pki::{NodeIdentity, node_name, node_of_name};
use crate::transport::{Dialer, RefusalReason, Transport, TransportError, TransportEvent, TransportStats};

/// ALPN protocol id of worldmesh node-to-node connections.
pub const ALPN: &[u8] = b"worldmesh";
/// The TLS server name clients send (never checked: identity is bound by the hello).
const SERVER_NAME: &str = "cluster.worldmesh";
/// Close code: normal shutdown.
const CLOSE_NORMAL: u32 = 0;
/// Close code: we dialed twice; the older connection stays.
const CLOSE_DUPLICATE: u32 = 1;
/// Close code: the member restarted (a newer generation connected).
const CLOSE_SUPERSEDED: u32 = 2;
/// Close code: membership declared the member dead.
const CLOSE_FORGOTTEN: u32 = 3;
/// Stop code: a stream message over the size limit.
const STOP_OVERSIZE: u32 = 0x200;
/// Verdict byte: the hello was accepted.
const ACCEPT: u8 = 1;
/// Longest close reason sent to a peer, in bytes.
const MAX_REASON: usize = 200;

/// How a [`QuicTransport`] is set up. [`QuicConfig::new`] gives game-traffic defaults.
#[derive(Clone, Debug)]
pub struct QuicConfig {
    /// UDP address to listen on (and dial from).
    pub listen: SocketAddr,
    /// This node's certificate, key and cluster CA.
    pub identity: NodeIdentity,
    /// What we tell peers (its `node` must be the identity's). An advertise address with
    /// port 0 takes the bound port, an unspecified IP the bound IP.
    pub hello: Hello,
    /// Longest a dial or accept may take, TLS handshake and hello exchange together.
    pub handshake_timeout: Duration,
    /// A connection with no packet from the peer for this long is dead.
    pub idle_timeout: Duration,
    /// Keep-alive interval (well under `idle_timeout`).
    pub keep_alive: Duration,
    /// Messages held per member while its connection is being set up.
    pub peer_queue: usize,
    /// Stream messages (too large for a datagram) waiting per connection.
    pub stream_queue: usize,
    /// Events waiting for [`QuicTransport::recv`]; datagrams beyond it are dropped.
    pub event_queue: usize,
    /// Largest message sent or accepted on a stream.
    pub max_message: usize,
    /// Bytes of received DATAGRAM frames QUIC buffers per connection.
    pub datagram_receive_buffer: usize,
    /// Bytes of outgoing DATAGRAM frames QUIC buffers per connection (oldest dropped).
    pub datagram_send_buffer: usize,
    /// First wait before re-dialing a member whose dial failed (doubles up to the max).
    pub redial_backoff_min: Duration,
    /// Longest wait between dials.
    pub redial_backoff_max: Duration,
    /// UDP payload size QUIC starts with (1200 is safe on any path).
    pub initial_mtu: u16,
    /// Probe for a larger path MTU (more node datagrams fit a DATAGRAM frame).
    pub mtu_discovery: bool,
    /// Ask the peer to acknowledge only every this many ack-eliciting packets
    /// (QUIC ack-frequency extension; None: QUIC's default of every second packet).
    pub ack_eliciting_threshold: Option<u32>,
    /// Longest the peer may delay an acknowledgement when `ack_eliciting_threshold` is set.
    pub max_ack_delay: Duration,
    /// Length of our connection ids in bytes (4..=20; shorter saves bytes per packet).
    pub cid_len: usize,
    /// Require new clients to prove their address with a Retry before any handshake
    /// flight is sent to them (anti-reflection; costs one round trip per connection).
    pub validate_addresses: bool,
}

impl QuicConfig {
    /// Defaults tuned for game traffic: 5 s handshake, 3 s idle timeout with 1 s
    /// keep-alives, 1 MiB datagram buffers, MTU discovery on.
    pub fn new(listen: SocketAddr, identity: NodeIdentity, hello: Hello) -> Self {
        Self {
            listen,
            identity,
            hello,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(3),
            keep_alive: Duration::from_secs(1),
            peer_queue: 1024,
            stream_queue: 1024,
            event_queue: 16 * 1024,
            max_message: HEADER_LEN + MAX_PAYLOAD,
            datagram_receive_buffer: 1 << 20,
            datagram_send_buffer: 1 << 20,
            redial_backoff_min: Duration::from_millis(250),
            redial_backoff_max: Duration::from_secs(5),
            initial_mtu: 1200,
            mtu_discovery: true,
            ack_eliciting_threshold: None,
            max_ack_delay: Duration::from_millis(25),
            cid_len: 8,
            validate_addresses: true,
        }
    }
}

/// Locks a mutex, ignoring poisoning (counters and tables stay usable after a panic
/// elsewhere; nothing here panics while holding a lock).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Node-to-node transport over QUIC with mutual TLS. See the module documentation.
pub struct QuicTransport {
    shared: Arc<Shared>,
    events: mpsc::Receiver<TransportEvent>,
}

impl fmt::Debug for QuicTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuicTransport")
            .field("node", &self.shared.me)
            .field("local", &self.shared.local)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy)]
struct Limits {
    handshake_timeout: Duration,
    peer_queue: usize,
    stream_queue: usize,
    max_message: usize,
    backoff_min: Duration,
    backoff_max: Duration,
    validate_addresses: bool,
}

struct Shared {
    me: NodeId,
    local: SocketAddr,
    hello: Hello,
    /// The encoded hello and the generation it carries (re-encoded when the generation
    /// changes).
    hello_frame: Mutex<(u64, Vec<u8>)>,
    limits: Limits,
    endpoint: Endpoint,
    client: quinn::ClientConfig,
    rt: tokio::runtime::Handle,
    state: Mutex<State>,
    stats: Mutex<TransportStats>,
    wire: Arc<WireCounters>,
    events: mpsc::Sender<TransportEvent>,
    next_link: AtomicU64,
    /// What this node's membership sees ([`QuicTransport::set_view`]), for refusals.
    view: Mutex<Option<View>>,
}

#[derive(Default)]
struct State {
    peers: HashMap<NodeId, Peer>,
}

#[derive(Default)]
struct Peer {
    addr: Option<SocketAddr>,
    links: Vec<Link>,
    /// Generation of the live links.
    generation: Option<u64>,
    /// Generation declared dead by `forget`: that one and older are refused when they
    /// dial us (our own dials to them are not: see `stale`).
    dead: Option<u64>,
    queue: VecDeque<(MessageClass, Bytes)>,
    dialing: bool,
    backoff: Duration,
    next_dial: Option<Instant>,
}

struct Link {
    id: u64,
    conn: quinn::Connection,
    outbound: bool,
    streams: mpsc::Sender<Bytes>,
}

impl Peer {
    /// The link to send on: the one dialed by the lower node id if it exists (both ends
    /// agree on it), else the oldest.
    fn best(&self, me: NodeId, node: NodeId) -> Option<&Link> {
        let lower_dialed = me < node;
        self.links
            .iter()
            .find(|l| l.outbound == lower_dialed)
            .or_else(|| self.links.first())
    }
}

/// Why a handshake did not produce a member.
enum Failure {
    Refused {
        reason: RefusalReason,
        detail: String,
        node: Option<NodeId>,
    },
    /// The peer refused us because it holds our generation declared down (its close
    /// code), seeing the cluster as `view` if its reason said. `by` is the node its
    /// certificate names ([`certified_node`]), once the handshake got that far.
    DeclaredDown {
        detail: String,
        view: Option<View>,
        by: Option<NodeId>,
    },
    Unreachable(String),
    Closed,
}

fn refused(reason: RefusalReason, detail: impl Into<String>, node: Option<NodeId>) -> Failure {
    Failure::Refused {
        reason,
        detail: detail.into(),
        node,
    }
}

fn classify(e: &ConnectionError) -> Failure {
    match e {
        ConnectionError::TransportError(te) => {
            refused(RefusalReason::Tls, format!("handshake failed: {te}"), None)
        }
        ConnectionError::ConnectionClosed(c) => refused(
            RefusalReason::Tls,
            format!("peer rejected the handshake: {c}"),
            None,
        ),
        ConnectionError::ApplicationClosed(a) => {
            let reason = String::from_utf8_lossy(&a.reason[..a.reason.len().min(MAX_REASON)]).into_owned();
            // The peer holds our generation declared down: said by its close code, so the
            // node can renew; its view leads the reason.
            if a.error_code.into_inner() == u64::from(RefusalReason::DeclaredDown.close_code()) {
                return Failure::DeclaredDown {
                    view: parse_view(&a.reason),
                    by: None,
                    detail: format!("peer refused: {reason}"),
                };
            }
            refused(
                RefusalReason::RefusedByPeer,
                format!("peer refused: {reason}"),
                None,
            )
        }
        ConnectionError::VersionMismatch => refused(RefusalReason::Version, "QUIC version mismatch", None),
        ConnectionError::TimedOut => Failure::Unreachable("timed out".into()),
        ConnectionError::Reset => Failure::Unreachable("reset by peer".into()),
        ConnectionError::CidsExhausted => Failure::Unreachable("connection ids exhausted".into()),
        ConnectionError::LocallyClosed => Failure::Closed,
    }
}

/// The node the peer's certificate names, verified against the cluster's CA by the TLS
/// handshake (`node-<ID>.worldmesh`, [`node_name`]); `None` before the handshake gave a
/// certificate, or if it names no node or more than one.
fn certified_node(conn: &quinn::Connection) -> Option<NodeId> {
    let certs = conn
        .peer_identity()
        .and_then(|b| b.downcast::<Vec<CertificateDer<'static>>>().ok())?;
    let ee = webpki::EndEntityCert::try_from(certs.first()?).ok()?;
    let mut nodes = ee.valid_dns_names().filter_map(node_of_name);
    let node = nodes.next()?;
    nodes.next().is_none().then_some(node)
}

fn read_failure(e: quinn::ReadExactError) -> Failure {
    match e {
        quinn::ReadExactError::FinishedEarly(_) => {
            refused(RefusalReason::MalformedHello, "hello stream ended early", None)
        }
        quinn::ReadExactError::ReadError(quinn::ReadError::ConnectionLost(c)) => classify(&c),
        quinn::ReadExactError::ReadError(other) => refused(
            RefusalReason::MalformedHello,
            format!("hello stream failed: {other}"),
            None,
        ),
    }
}

fn write_failure(e: quinn::WriteError) -> Failure {
    match e {
        quinn::WriteError::ConnectionLost(c) => classify(&c),
        other => refused(
            RefusalReason::MalformedHello,
            format!("hello stream failed: {other}"),
            None,
        ),
    }
}

fn describe_close(e: &ConnectionError) -> String {
    match e {
        ConnectionError::TimedOut => "idle timeout".into(),
        ConnectionError::ApplicationClosed(a) => match a.error_code.into_inner() as u32 {
            CLOSE_NORMAL => "closed by peer".into(),
            CLOSE_SUPERSEDED => "superseded by a newer generation".into(),
            CLOSE_FORGOTTEN => "peer declared us dead".into(),
            _ => format!("closed by peer: {}", String::from_utf8_lossy(&a.reason)),
        },
        ConnectionError::LocallyClosed => "closed locally".into(),
        other => other.to_string(),
    }
}

impl QuicTransport {
    /// Binds `config.listen` and starts accepting members. Must be called inside a tokio
    /// runtime (it spawns the endpoint's tasks there).
    pub fn bind(config: QuicConfig) -> Result<Self, TransportError> {
        let cfg_err = |e: &dyn fmt::Display| TransportError::Config(e.to_string());
        if config.hello.node != config.identity.node() {
            return Err(TransportError::Config(format!(
                "hello says node {} but the certificate is for node {}",
                config.hello.node.0,
                config.identity.node().0
            )));
        }
        if !(4..=20).contains(&config.cid_len) {
            return Err(TransportError::Config(format!(
                "cid_len must be 4..=20, got {}",
                config.cid_len
            )));
        }
        config.hello.encode().map_err(|e| cfg_err(&e))?;
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| TransportError::Config("QuicTransport::bind needs a tokio runtime".into()))?;
        let bind_err = |io| TransportError::Bind {
            addr: config.listen,
            io,
        };
        let socket = std::net::UdpSocket::bind(config.listen).map_err(bind_err)?;
        let runtime = Arc::new(quinn::TokioRuntime);
        let wire = Arc::new(WireCounters::default());
        let socket: Arc<dyn AsyncUdpSocket> = Arc::new(CountingSocket {
            inner: runtime.wrap_udp_socket(socket).map_err(bind_err)?,
            wire: Arc::clone(&wire),
        });

        let (client_tls, server_tls) = tls_configs(&config.identity)?;
        let transport = Arc::new(transport_config(&config)?);
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(
            QuicServerConfig::try_from(server_tls).map_err(|e| cfg_err(&e))?,
        ));
        server.transport_config(Arc::clone(&transport));
        server.max_incoming(256);
        let mut client = quinn::ClientConfig::new(Arc::new(
            QuicClientConfig::try_from(client_tls).map_err(|e| cfg_err(&e))?,
        ));
        client.transport_config(transport);

        let mut endpoint_config = EndpointConfig::default();
        let cid_len = config.cid_len;
        endpoint_config.cid_generator(move || Box::new(NoResetCids { len: cid_len }));
        let endpoint = Endpoint::new_with_abstract_socket(endpoint_config, Some(server), socket, runtime)
            .map_err(bind_err)?;
        let local = endpoint.local_addr().map_err(bind_err)?;
        let mut hello = config.hello;
        if hello.advertise.port() == 0 {
            hello.advertise.set_port(local.port());
        }
        if hello.advertise.ip().is_unspecified() {
            hello.advertise.set_ip(local.ip());
        }
        let generation = hello.generation;
        let hello_frame = hello.encode().map_err(|e| cfg_err(&e))?;
        let (tx, rx) = mpsc::channel(config.event_queue.max(1));
        let shared = Arc::new(Shared {
            me: config.identity.node(),
            local,
            hello,
            hello_frame: Mutex::new((generation, hello_frame)),
            limits: Limits {
                handshake_timeout: config.handshake_timeout,
                peer_queue: config.peer_queue,
                stream_queue: config.stream_queue.max(1),
                max_message: config.max_message,
                backoff_min: config.redial_backoff_min,
                backoff_max: config.redial_backoff_max,
                validate_addresses: config.validate_addresses,
            },
            endpoint,
            client,
            rt: rt.clone(),
            state: Mutex::new(State::default()),
            stats: Mutex::new(TransportStats::default()),
            wire,
            events: tx,
            next_link: AtomicU64::new(0),
            view: Mutex::new(None),
        });
        rt.spawn(Arc::clone(&shared).accept_loop());
        Ok(Self { shared, events: rx })
    }

    /// The UDP address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// This node's id.
    pub fn node(&self) -> NodeId {
        self.shared.me
    }

    /// Dials `addr` (e.g. a seed whose node id is not known yet) and returns the peer's
    /// verified hello. The connection stays up and is used for sending to that member;
    /// a [`TransportEvent::PeerUp`] is reported too if it is the member's first.
    pub async fn dial(&self, addr: SocketAddr) -> Result<PeerHello, TransportError> {
        self.shared.connect(addr, None).await
    }

    /// A handle that dials addresses while the transport is busy receiving (see
    /// [`QuicTransport::dial`]).
    pub fn dialer(&self) -> Dialer {
        let shared = Arc::clone(&self.shared);
        Dialer::new(move |addr| {
            let s = Arc::clone(&shared);
            Box::pin(async move { s.connect(addr, None).await })
        })
    }

    /// Later handshakes announce `generation` (this node came back as a new generation
    /// after the cluster declared it dead), and members dial again at once, without the
    /// backoff earlier refusals left. Connections already up keep theirs. Generations
    /// this node's old membership declared dead are accepted again: the new generation's
    /// membership decides anew (a node that yielded after a partition would otherwise
    /// refuse the winning side, whose members would then renew in turn).
    pub fn set_generation(&self, generation: u64) {
        for p in lock(&self.shared.state).peers.values_mut() {
            p.next_dial = None;
            p.backoff = Duration::ZERO;
            p.dead = None;
        }
        let mut hello = self.shared.hello.clone();
        hello.generation = generation;
        hello.advertise = self.shared.hello.advertise;
        // Our own hello was encodable at bind; only the generation changed.
        if let Ok(frame) = hello.encode() {
            *lock(&self.shared.hello_frame) = (generation, frame);
        }
    }

    /// What this node's membership sees of the cluster now (the driver keeps it current):
    /// a refusal of a member declared down says it, so that after a partition only the
    /// losing side yields (`worldmesh_node::membership::Membership::declared_down`).
    pub fn set_view(&self, view: View) {
        *lock(&self.shared.view) = Some(view);
    }

    /// Records where `node` can be reached (fed by membership), and lifts a
    /// [`QuicTransport::forget`] of it.
    pub fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        let mut st = lock(&self.shared.state);
        let p = st.peers.entry(node).or_default();
        p.addr = Some(addr);
        p.dead = None;
        p.next_dial = None;
        p.backoff = Duration::ZERO;
    }

    /// Member `node`'s incarnation `generation` is dead (membership says so): closes its
    /// connections, drops what is queued for it, and refuses that generation and older
    /// ones from now on (a restart with a larger generation is accepted). The address
    /// stays: SWIM still sends to members it holds down now and then (its announcements
    /// to them), and those dials are how two sides of a healed partition meet again. If a
    /// newer generation of `node` is already connected (a restart that reached us before
    /// the old one was declared dead), that connection stays. No
    /// [`TransportEvent::PeerLost`] is reported for it.
    pub fn forget(&self, node: NodeId, generation: u64) {
        let mut st = lock(&self.shared.state);
        let Some(p) = st.peers.get_mut(&node) else {
            return;
        };
        p.dead = p.dead.max(Some(generation));
        if p.generation.is_some_and(|g| g > generation) && !p.links.is_empty() {
            return;
        }
        p.dead = p.dead.max(p.generation);
        let dropped = p.queue.len() as u64;
        p.queue.clear();
        for l in p.links.drain(..) {
            l.conn
                .close(VarInt::from_u32(CLOSE_FORGOTTEN), b"declared dead by membership");
        }
        drop(st);
        lock(&self.shared.stats).undeliverable += dropped;
    }

    /// Sends one datagram to `dst`; never blocks. Dials lazily if there is no connection
    /// (the message waits in a bounded queue); uses a QUIC DATAGRAM frame if it fits,
    /// else the connection's stream. What cannot be sent is dropped and counted.
    pub fn send(&self, dst: NodeId, class: MessageClass, datagram: Vec<u8>) {
        self.shared.send(dst, class, Bytes::from(datagram));
    }

    /// The next event. Cancel-safe.
    pub async fn recv(&mut self) -> TransportEvent {
        match self.events.recv().await {
            Some(e) => e,
            // The sender lives in `shared`, which we hold: never reached.
            None => std::future::pending().await,
        }
    }

    /// The largest node datagram that fits a DATAGRAM frame to `node` now (larger ones
    /// go on the stream), if connected.
    pub fn max_datagram_size(&self, node: NodeId) -> Option<usize> {
        let st = lock(&self.shared.state);
        let p = st.peers.get(&node)?;
        p.best(self.shared.me, node)?.conn.max_datagram_size()
    }

    /// Members with a live connection and their generations, ascending by id.
    pub fn connected(&self) -> Vec<(NodeId, u64)> {
        let st = lock(&self.shared.state);
        let mut v: Vec<_> = st
            .peers
            .iter()
            .filter(|(_, p)| !p.links.is_empty())
            .filter_map(|(n, p)| Some((*n, p.generation?)))
            .collect();
        v.sort_unstable();
        v
    }

    /// The counters so far.
    pub fn stats(&self) -> TransportStats {
        let mut s = lock(&self.shared.stats).clone();
        self.shared.wire.add_to(&mut s);
        s
    }

    /// Closes every connection and the socket, waiting (at most a second) for the close
    /// to reach the peers.
    pub async fn close(self) {
        self.shared
            .endpoint
            .close(VarInt::from_u32(CLOSE_NORMAL), b"shutting down");
        lock(&self.shared.state).peers.clear();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.shared.endpoint.wait_idle()).await;
    }
}

impl Drop for QuicTransport {
    fn drop(&mut self) {
        self.shared
            .endpoint
            .close(VarInt::from_u32(CLOSE_NORMAL), b"shutting down");
        lock(&self.shared.state).peers.clear();
    }
}

impl Transport for QuicTransport {
    fn local_addr(&self) -> SocketAddr {
        QuicTransport::local_addr(self)
    }
    fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        QuicTransport::set_addr(self, node, addr)
    }
    fn forget(&self, node: NodeId, generation: u64) {
        QuicTransport::forget(self, node, generation)
    }
    fn send(&self, dst: NodeId, class: MessageClass, datagram: Vec<u8>) {
        QuicTransport::send(self, dst, class, datagram)
    }
    async fn recv(&mut self) -> TransportEvent {
        QuicTransport::recv(self).await
    }
    fn stats(&self) -> TransportStats {
        QuicTransport::stats(self)
    }
    fn dialer(&self) -> Dialer {
        QuicTransport::dialer(self)
    }
    fn set_generation(&self, generation: u64) {
        QuicTransport::set_generation(self, generation)
    }
    fn set_view(&self, view: View) {
        QuicTransport::set_view(self, view)
    }
    async fn close(self) {
        QuicTransport::close(self).await
    }
}

impl Shared {
    fn send(self: &Arc<Self>, dst: NodeId, class: MessageClass, bytes: Bytes) {
        if bytes.len() > self.limits.max_message {
            lock(&self.stats).oversize += 1;
            return;
        }
        let mut st = lock(&self.state);
        let Some(p) = st.peers.get_mut(&dst) else {
            drop(st);
            lock(&self.stats).undeliverable += 1;
            return;
        };
        if let Some(link) = p.best(self.me, dst) {
            let mut stats = lock(&self.stats);
            transmit(link, class, bytes, &mut stats);
            return;
        }
        let Some(addr) = p.addr else {
            drop(st);
            lock(&self.stats).undeliverable += 1;
            return;
        };
        if p.queue.len() >= self.limits.peer_queue {
            drop(st);
            lock(&self.stats).classes[class as usize].queue_drops += 1;
            return;
        }
        p.queue.push_back((class, bytes));
        let now = Instant::now();
        if !p.dialing && p.next_dial.is_none_or(|t| t <= now) {
            p.dialing = true;
            let me = Arc::clone(self);
            self.rt.spawn(async move { me.dial_lazy(dst, addr).await });
        }
    }

    async fn dial_lazy(self: Arc<Self>, node: NodeId, addr: SocketAddr) {
        let ok = self.connect(addr, Some(node)).await.is_ok();
        let mut st = lock(&self.state);
        let Some(p) = st.peers.get_mut(&node) else {
            return;
        };
        p.dialing = false;
        if ok && !p.links.is_empty() {
            return;
        }
        let dropped = p.queue.len() as u64;
        p.queue.clear();
        p.backoff = (p.backoff * 2).clamp(
            self.limits.backoff_min,
            self.limits.backoff_max.max(self.limits.backoff_min),
        );
        p.next_dial = Some(Instant::now() + p.backoff);
        drop(st);
        lock(&self.stats).undeliverable += dropped;
    }

    async fn connect(
        self: &Arc<Self>,
        addr: SocketAddr,
        expected: Option<NodeId>,
    ) -> Result<PeerHello, TransportError> {
        let connecting = self
            .endpoint
            .connect_with(self.client.clone(), addr, SERVER_NAME)
            .map_err(|e| TransportError::Connect {
                addr,
                reason: e.to_string(),
            })?;
        // The generation this dial announces, with its hello: a refusal names that one.
        let (generation, frame) = lock(&self.hello_frame).clone();
        let r = tokio::time::timeout(self.limits.handshake_timeout, async {
            let conn = connecting.await.map_err(|e| classify(&e))?;
            let h = async {
                let (send, recv) = conn.open_bi().await.map_err(|e| classify(&e))?;
                self.exchange(&conn, send, recv, expected, &frame, true).await
            }
            .await
            .map_err(|f| match f {
                Failure::DeclaredDown { detail, view, .. } => Failure::DeclaredDown {
                    detail,
                    view,
                    by: certified_node(&conn),
                },
                other => other,
            })?;
            Ok((conn, h))
        })
        .await
        .unwrap_or_else(|_| {
            Err(refused(
                RefusalReason::HelloTimeout,
                format!("no verified hello within {:?}", self.limits.handshake_timeout),
                expected,
            ))
        });
        match r {
            Ok((conn, h)) => self
                .register(conn, h, true)
                .await
                .map_err(|f| self.failed(addr, f)),
            Err(f) => {
                if let Failure::DeclaredDown { view, by, .. } = &f {
                    // Never dropped for a full queue: the node must learn it (a flood of
                    // refusals cannot cause these, only our own dials do). Who refused is
                    // who the refuser's certificate names, not whom this dial expected
                    // (another member may answer at an address).
                    let ev = TransportEvent::DeclaredDown {
                        by: *by,
                        addr,
                        generation,
                        view: *view,
                    };
                    let events = self.events.clone();
                    self.rt.spawn(async move {
                        let _ = events.send(ev).await;
                    });
                }
                Err(self.failed(addr, f))
            }
        }
    }

    /// Counts and reports a failed handshake, and turns it into the caller's error.
    fn failed(&self, addr: SocketAddr, f: Failure) -> TransportError {
        match f {
            Failure::Refused { reason, detail, node } => {
                self.record_refusal(addr, node, reason, detail.clone());
                TransportError::Refused { addr, reason, detail }
            }
            Failure::DeclaredDown { detail, .. } => {
                let reason = RefusalReason::DeclaredDown;
                self.record_refusal(addr, None, reason, detail.clone());
                TransportError::Refused { addr, reason, detail }
            }
            Failure::Unreachable(reason) => {
                lock(&self.stats).dial_failures += 1;
                TransportError::Unreachable { addr, reason }
            }
            Failure::Closed => TransportError::Connect {
                addr,
                reason: "the transport is closing".into(),
            },
        }
    }

    fn record_refusal(&self, addr: SocketAddr, node: Option<NodeId>, reason: RefusalReason, detail: String) {
        lock(&self.stats).refusals[reason as usize] += 1;
        // A flood of refusals must not crowd out datagrams: dropped when the queue is full
        // (still counted above).
        let _ = self.events.try_send(TransportEvent::Refused {
            addr,
            node,
            reason,
            detail,
        });
    }

    async fn accept_loop(self: Arc<Self>) {
        while let Some(incoming) = self.endpoint.accept().await {
            if self.limits.validate_addresses && !incoming.remote_address_validated() && incoming.may_retry()
            {
                if let Err(e) = incoming.retry() {
                    e.into_incoming().ignore();
                }
                continue;
            }
            let me = Arc::clone(&self);
            self.rt.spawn(async move { me.accept_one(incoming).await });
        }
    }

    async fn accept_one(self: Arc<Self>, incoming: quinn::Incoming) {
        let addr = incoming.remote_address();
        let r = tokio::time::timeout(self.limits.handshake_timeout, async {
            let conn = incoming.await.map_err(|e| classify(&e))?;
            let (send, recv) = conn.accept_bi().await.map_err(|e| classify(&e))?;
            let frame = lock(&self.hello_frame).1.clone();
            let h = self.exchange(&conn, send, recv, None, &frame, false).await?;
            Ok((conn, h))
        })
        .await
        .unwrap_or_else(|_| {
            Err(refused(
                RefusalReason::HelloTimeout,
                format!("no verified hello within {:?}", self.limits.handshake_timeout),
                None,
            ))
        });
        let r = match r {
            Ok((conn, h)) => self.register(conn, h, false).await.map(|_| ()),
            Err(f) => Err(f),
        };
        match r {
            Ok(()) | Err(Failure::Closed) => {}
            // A client that went away mid-handshake: nothing to refuse.
            Err(Failure::Unreachable(_)) => {}
            Err(Failure::Refused { reason, detail, node }) => self.record_refusal(addr, node, reason, detail),
            // Only a dialer reads the peer's refusal.
            Err(Failure::DeclaredDown { detail, .. }) => {
                self.record_refusal(addr, None, RefusalReason::DeclaredDown, detail)
            }
        }
    }

    /// Both sides send their hello at once, check the other's, then send a verdict byte.
    async fn exchange(
        &self,
        conn: &quinn::Connection,
        mut send: quinn::SendStream,
        mut recv: quinn::RecvStream,
        expected: Option<NodeId>,
        frame: &[u8],
        outbound: bool,
    ) -> Result<PeerHello, Failure> {
        send.write_all(frame).await.map_err(write_failure)?;
        let mut header = [0u8; HELLO_HEADER_LEN];
        recv.read_exact(&mut header).await.map_err(read_failure)?;
        let len = match Hello::payload_len(&header) {
            Ok(n) => n,
            Err(e) => {
                let reason = if e.is_version() {
                    RefusalReason::Version
                } else {
                    RefusalReason::MalformedHello
                };
                return Err(refuse(conn, reason, e.to_string(), None));
            }
        };
        let mut payload = vec![0u8; len];
        recv.read_exact(&mut payload).await.map_err(read_failure)?;
        let peer = Hello::decode_payload(&payload)
            .map_err(|e| refuse(conn, RefusalReason::MalformedHello, e.to_string(), None))?;
        if let Err((reason, detail)) = self.check_peer(conn, &peer, expected, outbound) {
            return Err(refuse(conn, reason, detail, Some(peer.node)));
        }
        send.write_all(&[ACCEPT]).await.map_err(write_failure)?;
        let _ = send.finish();
        let mut verdict = [0u8; 1];
        recv.read_exact(&mut verdict).await.map_err(read_failure)?;
        if verdict[0] != ACCEPT {
            return Err(refuse(
                conn,
                RefusalReason::MalformedHello,
                format!("bad verdict byte {}", verdict[0]),
                Some(peer.node),
            ));
        }
        Ok(PeerHello {
            hello: peer,
            remote: conn.remote_address(),
        })
    }

    fn check_peer(
        &self,
        conn: &quinn::Connection,
        peer: &Hello,
        expected: Option<NodeId>,
        outbound: bool,
    ) -> Result<(), (RefusalReason, String)> {
        if peer.protocol != self.hello.protocol {
            return Err((
                RefusalReason::Version,
                format!(
                    "protocol version {} (this node speaks {})",
                    peer.protocol, self.hello.protocol
                ),
            ));
        }
        let certs = conn
            .peer_identity()
            .and_then(|b| b.downcast::<Vec<CertificateDer<'static>>>().ok())
            .ok_or((RefusalReason::Tls, "no peer certificate".to_string()))?;
        let leaf = certs
            .first()
            .ok_or((RefusalReason::Tls, "empty peer certificate chain".to_string()))?;
        let ee = webpki::EndEntityCert::try_from(leaf).map_err(|e| (RefusalReason::Tls, e.to_string()))?;
        let name = node_name(peer.node);
        let valid = ServerName::try_from(name.as_str())
            .ok()
            .is_some_and(|sn| ee.verify_is_valid_for_subject_name(&sn).is_ok());
        if !valid {
            let names: Vec<&str> = ee.valid_dns_names().collect();
            return Err((
                RefusalReason::Identity,
                format!(
                    "hello claims node {} but the certificate names {}",
                    peer.node.0,
                    if names.is_empty() {
                        "no node".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        if peer.node == self.me {
            return Err((
                RefusalReason::SelfDial,
                format!("connected to ourselves (node {})", self.me.0),
            ));
        }
        if let Some(e) = expected.filter(|e| *e != peer.node) {
            return Err((
                RefusalReason::UnexpectedNode,
                format!(
                    "dialed node {} at {}, node {} answered",
                    e.0,
                    conn.remote_address(),
                    peer.node.0
                ),
            ));
        }
        if let Some(d) = self.hello.world_difference(peer) {
            return Err((RefusalReason::WorldMismatch, d.to_string()));
        }
        let view = *lock(&self.view);
        let st = lock(&self.state);
        if let Some(p) = st.peers.get(&peer.node) {
            stale(p, peer, outbound, view)?;
        }
        Ok(())
    }

    /// Adds a verified connection to its member, reports `PeerUp` if it is the member's
    /// first, flushes what was queued for it, and starts its tasks.
    async fn register(
        self: &Arc<Self>,
        conn: quinn::Connection,
        hello: PeerHello,
        outbound: bool,
    ) -> Result<PeerHello, Failure> {
        let node = hello.hello.node;
        let generation = hello.hello.generation;
        let id = self.next_link.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(self.limits.stream_queue);
        let mut events = Vec::new();
        {
            let view = *lock(&self.view);
            let mut st = lock(&self.state);
            let p = st.peers.entry(node).or_default();
            if let Err((reason, detail)) = stale(p, &hello.hello, outbound, view) {
                drop(st);
                return Err(refuse(&conn, reason, detail, Some(node)));
            }
            if let Some(old) = p.generation.filter(|g| *g < generation)
                && !p.links.is_empty()
            {
                for l in p.links.drain(..) {
                    l.conn.close(
                        VarInt::from_u32(CLOSE_SUPERSEDED),
                        b"superseded by a newer generation",
                    );
                }
                events.push(TransportEvent::PeerLost {
                    node,
                    generation: old,
                    reason: format!("restarted (generation {old} -> {generation})"),
                });
            }
            if outbound && p.links.iter().any(|l| l.outbound) {
                // We dialed this member twice (e.g. a seed we were already connected
                // to): keep the older connection.
                conn.close(VarInt::from_u32(CLOSE_DUPLICATE), b"duplicate connection");
                return Ok(hello);
            }
            let first = p.links.is_empty();
            p.generation = Some(generation);
            // A member we dialed though we hold it dead (see `stale`) stays refused at
            // that generation.
            if p.dead.is_some_and(|d| generation > d) {
                p.dead = None;
            }
            if p.addr.is_none() {
                p.addr = Some(if outbound {
                    conn.remote_address()
                } else {
                    hello.hello.advertise
                });
            }
            p.backoff = Duration::ZERO;
            p.next_dial = None;
            p.links.push(Link {
                id,
                conn: conn.clone(),
                outbound,
                streams: tx,
            });
            if first {
                events.push(TransportEvent::PeerUp(hello.clone()));
            }
            let queued: Vec<_> = p.queue.drain(..).collect();
            if let Some(link) = p.best(self.me, node) {
                let mut stats = lock(&self.stats);
                for (class, bytes) in queued {
                    transmit(link, class, bytes, &mut stats);
                }
            }
        }
        // PeerUp before any datagram of this connection.
        for e in events {
            let _ = self.events.send(e).await;
        }
        self.rt
            .spawn(Arc::clone(self).read_datagrams(node, id, conn.clone()));
        self.rt.spawn(Arc::clone(self).accept_streams(node, conn.clone()));
        self.rt.spawn(Arc::clone(self).write_stream(conn, rx));
        Ok(hello)
    }

    async fn read_datagrams(self: Arc<Self>, node: NodeId, id: u64, conn: quinn::Connection) {
        let err = loop {
            match conn.read_datagram().await {
                Ok(bytes) => {
                    let len = bytes.len();
                    let class = crate::transport::class_of(&bytes);
                    match self
                        .events
                        .try_send(TransportEvent::Datagram { from: node, bytes })
                    {
                        Ok(()) => {
                            let mut s = lock(&self.stats);
                            match class {
                                Some(c) => s.classes[c as usize].received.add_datagram(len),
                                None => s.received_unclassified.add_datagram(len),
                            }
                        }
                        Err(_) => lock(&self.stats).recv_queue_drops += 1,
                    }
                }
                Err(e) => break e,
            }
        };
        let lost = {
            let mut st = lock(&self.state);
            match st.peers.get_mut(&node) {
                Some(p) => {
                    let before = p.links.len();
                    p.links.retain(|l| l.id != id);
                    (before != p.links.len() && p.links.is_empty()).then(|| p.generation.unwrap_or(0))
                }
                None => None,
            }
        };
        if let Some(generation) = lost {
            let _ = self
                .events
                .send(TransportEvent::PeerLost {
                    node,
                    generation,
                    reason: describe_close(&err),
                })
                .await;
        }
    }

    async fn accept_streams(self: Arc<Self>, node: NodeId, conn: quinn::Connection) {
        while let Ok(recv) = conn.accept_uni().await {
            self.rt.spawn(Arc::clone(&self).read_stream(node, recv));
        }
    }

    async fn read_stream(self: Arc<Self>, node: NodeId, mut recv: quinn::RecvStream) {
        loop {
            let mut len = [0u8; 4];
            if recv.read_exact(&mut len).await.is_err() {
                return;
            }
            let n = u32::from_le_bytes(len) as usize;
            if n == 0 || n > self.limits.max_message {
                let _ = recv.stop(VarInt::from_u32(STOP_OVERSIZE));
                lock(&self.stats).oversize += 1;
                return;
            }
            let mut buf = vec![0u8; n];
            if recv.read_exact(&mut buf).await.is_err() {
                return;
            }
            lock(&self.stats).on_received(&buf);
            // Reliable messages wait for the driver (flow control pushes back on the peer).
            if self
                .events
                .send(TransportEvent::Datagram {
                    from: node,
                    bytes: Bytes::from(buf),
                })
                .await
                .is_err()
            {
                return;
            }
        }
    }

    async fn write_stream(self: Arc<Self>, conn: quinn::Connection, mut rx: mpsc::Receiver<Bytes>) {
        let mut stream: Option<quinn::SendStream> = None;
        while let Some(bytes) = rx.recv().await {
            let s = match &mut stream {
                Some(s) => s,
                None => match conn.open_uni().await {
                    Ok(s) => stream.insert(s),
                    Err(_) => break,
                },
            };
            let len = (bytes.len() as u32).to_le_bytes();
            if s.write_all(&len).await.is_err() || s.write_all(&bytes).await.is_err() {
                lock(&self.stats).undeliverable += 1;
                break;
            }
        }
        let left = rx.len() as u64;
        if left > 0 {
            lock(&self.stats).undeliverable += left;
        }
        if let Some(mut s) = stream {
            let _ = s.finish();
        }
    }
}

/// Refuses a stale generation: older than the live one, or (on the accepting end,
/// `!outbound`) declared dead, saying `view` first.
fn stale(p: &Peer, hello: &Hello, outbound: bool, view: Option<View>) -> Result<(), (RefusalReason, String)> {
    if let Some(dead) = p.dead.filter(|d| hello.generation <= *d && !outbound) {
        return Err((
            RefusalReason::DeclaredDown,
            with_view(
                view,
                &format!(
                    "node {} generation {} is no longer a member (declared down, having left or failed, at generation {dead})",
                    hello.node.0, hello.generation
                ),
            ),
        ));
    }
    if let Some(live) = p
        .generation
        .filter(|g| hello.generation < *g && !p.links.is_empty())
    {
        return Err((
            RefusalReason::StaleGeneration,
            format!(
                "node {} generation {} is older than its live generation {live}",
                hello.node.0, hello.generation
            ),
        ));
    }
    Ok(())
}

/// Closes `conn` with the refusal's code and reason and returns the failure.
/// The prefix of a declared-down refusal's reason that carries the refuser's view.
const VIEW_PREFIX: &str = "view ";

/// A refusal's reason with the refuser's view in front: `view <members> <lowest id>: `.
fn with_view(view: Option<View>, detail: &str) -> String {
    match view {
        Some(v) => format!("{VIEW_PREFIX}{} {}: {detail}", v.members, v.lowest.0),
        None => detail.to_string(),
    }
}

/// The view at the front of a refusal's reason ([`with_view`]), if it is there and well
/// formed: a count of at least 1 and a node id, each at most 10 decimal digits.
fn parse_view(reason: &[u8]) -> Option<View> {
    let rest = reason.strip_prefix(VIEW_PREFIX.as_bytes())?;
    let head = rest.get(..rest.iter().take(24).position(|b| *b == b':')?)?;
    let head = std::str::from_utf8(head).ok()?;
    let (members, lowest) = head.split_once(' ')?;
    // Digits only (`parse` would take a sign); `parse` refuses an empty or too long one.
    let number = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u32>().ok())?
    };
    Some(View {
        members: number(members).filter(|m| *m >= 1)?,
        lowest: NodeId(number(lowest)?),
    })
}

fn refuse(conn: &quinn::Connection, reason: RefusalReason, detail: String, node: Option<NodeId>) -> Failure {
    let mut end = detail.len().min(MAX_REASON);
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    conn.close(VarInt::from_u32(reason.close_code()), &detail.as_bytes()[..end]);
    refused(reason, detail, node)
}

/// Hands one message to a link: a DATAGRAM frame if it fits, else the stream.
fn transmit(link: &Link, class: MessageClass, bytes: Bytes, stats: &mut TransportStats) {
    let len = bytes.len();
    // quinn checks the size against the current limit itself (one lock instead of two);
    // `Bytes` clones are reference counts.
    match link.conn.send_datagram(bytes.clone()) {
        Ok(()) => {
            let c = &mut stats.classes[class as usize];
            c.sent.add_datagram(len);
            c.via_datagram += 1;
            return;
        }
        Err(quinn::SendDatagramError::TooLarge) => {}
        Err(_) => {
            stats.undeliverable += 1;
            return;
        }
    }
    match link.streams.try_send(bytes) {
        Ok(()) => {
            let c = &mut stats.classes[class as usize];
            c.sent.add_datagram(len);
            c.via_stream += 1;
        }
        Err(mpsc::error::TrySendError::Full(_)) => stats.classes[class as usize].queue_drops += 1,
        Err(mpsc::error::TrySendError::Closed(_)) => stats.undeliverable += 1,
    }
}

fn tls_configs(
    identity: &NodeIdentity,
) -> Result<(Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>), TransportError> {
    let err = |e: rustls::Error| TransportError::Config(format!("TLS: {e}"));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(identity.ca().clone()).map_err(err)?;
    let roots = Arc::new(roots);

    let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::clone(&roots),
        Arc::clone(&provider),
    )
    .build()
    .map_err(|e| TransportError::Config(format!("TLS client verifier: {e}")))?;
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(err)?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(identity.chain().to_vec(), identity.key().clone_key())
        .map_err(err)?;
    server.alpn_protocols = vec![ALPN.to_vec()];
    // No 0-RTT (replayable) and no resumption: every connection presents certificates.
    server.max_early_data_size = 0;
    server.send_tls13_tickets = 0;
    server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});

    let verifier = Arc::new(ClusterCaVerifier {
        roots,
        provider: Arc::clone(&provider),
    });
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(err)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(identity.chain().to_vec(), identity.key().clone_key())
        .map_err(err)?;
    client.alpn_protocols = vec![ALPN.to_vec()];
    client.enable_early_data = false;
    client.resumption = rustls::client::Resumption::disabled();
    Ok((Arc::new(client), Arc::new(server)))
}

fn transport_config(c: &QuicConfig) -> Result<TransportConfig, TransportError> {
    let mut t = TransportConfig::default();
    let idle = IdleTimeout::try_from(c.idle_timeout)
        .map_err(|e| TransportError::Config(format!("idle_timeout: {e}")))?;
    t.max_idle_timeout(Some(idle))
        .keep_alive_interval(Some(c.keep_alive))
        // One bidirectional stream (the hello), a few unidirectional ones (the message
        // stream, and a fresh one after a writer restarts).
        .max_concurrent_bidi_streams(1u32.into())
        .max_concurrent_uni_streams(4u32.into())
        .datagram_receive_buffer_size(Some(c.datagram_receive_buffer))
        .datagram_send_buffer_size(c.datagram_send_buffer)
        .initial_mtu(c.initial_mtu)
        .mtu_discovery_config(c.mtu_discovery.then(quinn::MtuDiscoveryConfig::default));
    if let Some(n) = c.ack_eliciting_threshold {
        let mut a = quinn::AckFrequencyConfig::default();
        a.ack_eliciting_threshold(VarInt::from_u32(n))
            .max_ack_delay(Some(c.max_ack_delay));
        t.ack_frequency_config(Some(a));
    }
    Ok(t)
}

/// Verifies a server's chain to the cluster CA, without a name check: identity is bound
/// to the node id by the hello ([`Shared::check_peer`]).
#[derive(Debug)]
struct ClusterCaVerifier {
    roots: Arc<RootCertStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for ClusterCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Random connection ids that never validate an unknown id: a packet for a connection
/// we do not have is dropped silently instead of answered with a stateless reset (no
/// reply to forged sources; a restarted process could not make a valid reset anyway,
/// its reset key being new).
struct NoResetCids {
    len: usize,
}

impl ConnectionIdGenerator for NoResetCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut b = [0u8; 20];
        let n = self.len.min(20);
        // ring's system RNG; if it ever failed, a counter-free zero id would still be
        // unique-checked by quinn (it regenerates on collision) — but it does not fail
        // on Linux.
        let _ = rustls::crypto::ring::default_provider()
            .secure_random
            .fill(&mut b[..n]);
        ConnectionId::new(&b[..n])
    }

    fn validate(&self, _cid: &ConnectionId) -> Result<(), quinn_proto::InvalidCid> {
        Err(quinn_proto::InvalidCid)
    }

    fn cid_len(&self) -> usize {
        self.len
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// Counts every UDP datagram the socket sends and receives.
#[derive(Debug, Default)]
struct WireCounters {
    sent_bytes: AtomicU64,
    sent_packets: AtomicU64,
    received_bytes: AtomicU64,
    received_packets: AtomicU64,
    withheld: AtomicU64,
}

impl WireCounters {
    fn add_to(&self, s: &mut TransportStats) {
        s.wire_sent.bytes += self.sent_bytes.load(Ordering::Relaxed);
        s.wire_sent.packets += self.sent_packets.load(Ordering::Relaxed);
        s.wire_received.bytes += self.received_bytes.load(Ordering::Relaxed);
        s.wire_received.packets += self.received_packets.load(Ordering::Relaxed);
        s.withheld_replies += self.withheld.load(Ordering::Relaxed);
    }
}

/// The endpoint's UDP socket, counting bytes as they go on and come off the wire, and
/// withholding version-negotiation packets (the only reply QUIC would send to a packet
/// from an unknown, possibly spoofed, source; every member speaks QUIC v1).
#[derive(Debug)]
struct CountingSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    wire: Arc<WireCounters>,
}

/// A QUIC long-header packet with version 0 is a version negotiation packet.
fn is_version_negotiation(packet: &[u8]) -> bool {
    packet.len() >= 5 && packet[0] & 0x80 != 0 && packet[1..5] == [0, 0, 0, 0]
}

impl AsyncUdpSocket for CountingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Arc::clone(&self.inner).create_io_poller()
    }

    fn try_send(&self, t: &Transmit<'_>) -> std::io::Result<()> {
        if is_version_negotiation(t.contents) {
            self.wire.withheld.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.inner.try_send(t)?;
        let seg = t.segment_size.unwrap_or(t.contents.len()).max(1);
        let n = t.contents.len().div_ceil(seg).max(1) as u64;
        self.wire
            .sent_bytes
            .fetch_add(t.contents.len() as u64 + n * UDP_IPV4_OVERHEAD, Ordering::Relaxed);
        self.wire.sent_packets.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<std::io::Result<usize>> {
        let r = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = &r {
            for m in meta.iter().take(*n) {
                let k = m.len.div_ceil(m.stride.max(1)).max(1) as u64;
                self.wire
                    .received_bytes
                    .fetch_add(m.len as u64 + k * UDP_IPV4_OVERHEAD, Ordering::Relaxed);
                self.wire.received_packets.fetch_add(k, Ordering::Relaxed);
            }
        }
        r
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_negotiation_is_recognised() {
        assert!(is_version_negotiation(&[0xc3, 0, 0, 0, 0, 8]));
        assert!(
            !is_version_negotiation(&[0xc3, 0, 0, 0, 1, 8]),
            "QUIC v1 long header"
        );
        assert!(!is_version_negotiation(&[0x43, 0, 0, 0, 0, 8]), "short header");
        assert!(!is_version_negotiation(b"WM\x01\x00\x00\x00"));
    }

    #[test]
    fn unknown_connection_ids_never_validate() {
        let mut g = NoResetCids { len: 8 };
        let a = g.generate_cid();
        assert_eq!(a.len(), 8);
        assert_ne!(a, g.generate_cid());
        assert!(g.validate(&a).is_err());
    }

    #[test]
    fn a_refusal_reason_carries_the_view_it_leads_with() {
        let v = View {
            members: 12,
            lowest: NodeId(4_000_000_000),
        };
        let reason = with_view(Some(v), "node 2 generation 7 is no longer a member");
        assert_eq!(
            reason,
            "view 12 4000000000: node 2 generation 7 is no longer a member"
        );
        assert_eq!(parse_view(reason.as_bytes()), Some(v));
        assert_eq!(with_view(None, "x"), "x");
        for bad in [
            &b"node 2 generation 7"[..],
            b"view 0 3: no members",
            b"view 3: one number",
            b"view  3 4: empty count",
            b"view 3 4 5: three numbers",
            b"view -3 4: sign",
            b"view 3 99999999999: past u32",
            b"view 3 4",
            b"view 3 4\xff: not text",
            b"view 12345678901234567890 1: too long",
        ] {
            assert_eq!(parse_view(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_reason_parses_without_panicking_and_views_round_trip(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            members in 1u32..,
            lowest in proptest::prelude::any::<u32>(),
        ) {
            let _ = parse_view(&bytes);
            let v = View { members, lowest: NodeId(lowest) };
            let reason = with_view(Some(v), &String::from_utf8_lossy(&bytes));
            proptest::prop_assert_eq!(parse_view(reason.as_bytes()), Some(v));
        }
    }
}

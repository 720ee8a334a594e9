//! **INSECURE — benchmark baseline only, not for production.** Plain UDP that trusts
//! source addresses.
//!
//! This is the path the real runtime used before issue 13: a datagram is believed to come
//! from whichever member the address book maps its source address to. Anyone who can send
//! a UDP packet with a member's source address (on the path, or by spoofing) can forge or
//! replay any message, and spoofed requests can be reflected at a victim. It exists only
//! so that [`crate::quic::QuicTransport`]'s cost can be measured against it on the same
//! traffic (`examples/transport_cost.rs`, `worldmesh cluster --transport udp-insecure`);
//! nothing in a production path may use it.
//!
//! So that a node runs the very same protocol over it (seeds, SWIM, adoption), a transport
//! bound with a [`Hello`] ([`UdpTransport::bind_with_hello`]) answers and sends the same
//! hello as QUIC does — in the clear, unauthenticated: one datagram `0xF1` + hello frame
//! asks, `0xF2` + hello frame answers. A hello from another protocol version or with other
//! world settings is refused and counted like QUIC's; nothing proves who sent it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use worldmesh_core::NodeId;
use worldmesh_core::traffic::MessageClass;
use worldmesh_node::membership::View;

use crate::hello::{Hello, PeerHello};
use crate::quic::lock;
use crate::transport::{Dialer, RefusalReason, Transport, TransportError, TransportEvent, TransportStats};

/// Largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// First byte of a hello request datagram.
const HELLO_ASK: u8 = 0xF1;
/// First byte of a hello answer datagram.
const HELLO_ANSWER: u8 = 0xF2;
/// A dial re-sends its hello this often until answered.
const DIAL_RESEND: Duration = Duration::from_millis(500);
/// A dial gives up after this long.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Book {
    by_id: HashMap<NodeId, SocketAddr>,
    by_addr: HashMap<SocketAddr, NodeId>,
    /// Generation last seen per member, and the one declared dead by `forget`.
    generation: HashMap<NodeId, u64>,
    dead: HashMap<NodeId, u64>,
}

impl Book {
    fn set(&mut self, node: NodeId, addr: SocketAddr) {
        if let Some(old) = self.by_id.insert(node, addr) {
            self.by_addr.remove(&old);
        }
        self.by_addr.insert(addr, node);
    }
}

struct Inner {
    socket: UdpSocket,
    local: SocketAddr,
    /// Our hello, and its encoded form; `None`: hellos are neither sent nor answered.
    hello: Option<Mutex<(Hello, Vec<u8>)>>,
    book: Mutex<Book>,
    stats: Mutex<TransportStats>,
    /// Dials waiting for a hello from an address.
    waiters: Mutex<HashMap<SocketAddr, Vec<oneshot::Sender<PeerHello>>>>,
}

/// **Insecure** plain-UDP transport (see the module documentation): the benchmark
/// baseline for [`crate::quic::QuicTransport`].
pub struct UdpTransport {
    inner: Arc<Inner>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("local", &self.inner.local)
            .finish_non_exhaustive()
    }
}

impl UdpTransport {
    /// Binds `listen`, without hellos (peers come only from [`Transport::set_addr`]).
    /// **Insecure**: trusts source addresses.
    pub async fn bind(listen: SocketAddr) -> Result<Self, TransportError> {
        Self::bind_inner(listen, None).await
    }

    /// Binds `listen` and exchanges `hello` (in the clear) with members that dial it or
    /// that it dials, so that seeds can be joined as over QUIC. An advertise address with
    /// port 0 takes the bound port. **Insecure**: trusts source addresses and hellos.
    pub async fn bind_with_hello(listen: SocketAddr, hello: Hello) -> Result<Self, TransportError> {
        Self::bind_inner(listen, Some(hello)).await
    }

    async fn bind_inner(listen: SocketAddr, hello: Option<Hello>) -> Result<Self, TransportError> {
        let bind = |io| TransportError::Bind { addr: listen, io };
        let socket = UdpSocket::bind(listen).await.map_err(bind)?;
        let local = socket.local_addr().map_err(bind)?;
        let hello = match hello {
            Some(mut h) => {
                if h.advertise.port() == 0 {
                    h.advertise.set_port(local.port());
                }
                if h.advertise.ip().is_unspecified() {
                    h.advertise.set_ip(local.ip());
                }
                let frame = h.encode().map_err(|e| TransportError::Config(e.to_string()))?;
                Some(Mutex::new((h, frame)))
            }
            None => None,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                socket,
                local,
                hello,
                book: Mutex::new(Book::default()),
                stats: Mutex::new(TransportStats::default()),
                waiters: Mutex::new(HashMap::new()),
            }),
            buf: vec![0; MAX_UDP_PAYLOAD + 1],
        })
    }
}

impl Inner {
    fn send_raw(&self, bytes: &[u8], addr: SocketAddr) -> bool {
        match self.socket.try_send_to(bytes, addr) {
            Ok(_) => {
                lock(&self.stats).wire_sent.add_datagram(bytes.len());
                true
            }
            Err(_) => false,
        }
    }

    fn send_hello(&self, kind: u8, addr: SocketAddr) {
        let Some(h) = &self.hello else { return };
        let mut d = vec![kind];
        d.extend_from_slice(&lock(h).1);
        self.send_raw(&d, addr);
    }

    /// Handles a hello datagram from `from`; returns the event to report, if any.
    fn on_hello(&self, kind: u8, frame: &[u8], from: SocketAddr) -> Option<TransportEvent> {
        let Some(ours) = &self.hello else {
            lock(&self.stats).unknown_sender += 1;
            return None;
        };
        let refuse = |reason: RefusalReason, detail: String, node: Option<NodeId>| {
            lock(&self.stats).refusals[reason as usize] += 1;
            Some(TransportEvent::Refused {
                addr: from,
                node,
                reason,
                detail,
            })
        };
        let peer = match Hello::decode(frame) {
            Ok(h) => h,
            Err(e) => {
                let reason = if e.is_version() {
                    RefusalReason::Version
                } else {
                    RefusalReason::MalformedHello
                };
                return refuse(reason, e.to_string(), None);
            }
        };
        let (me, protocol, diff) = {
            let o = lock(ours);
            (o.0.node, o.0.protocol, o.0.world_difference(&peer))
        };
        if peer.protocol != protocol {
            let detail = format!("protocol version {} (this node speaks {protocol})", peer.protocol);
            return refuse(RefusalReason::Version, detail, Some(peer.node));
        }
        if peer.node == me {
            return refuse(
                RefusalReason::SelfDial,
                format!("hello from ourselves (node {})", me.0),
                Some(me),
            );
        }
        if let Some(d) = diff {
            return refuse(RefusalReason::WorldMismatch, d.to_string(), Some(peer.node));
        }
        let up = {
            let mut b = lock(&self.book);
            if let Some(dead) = b.dead.get(&peer.node).copied()
                && peer.generation <= dead
            {
                drop(b);
                let detail = format!(
                    "node {} generation {} is no longer a member (declared down, having left or failed, at generation {dead})",
                    peer.node.0, peer.generation
                );
                return refuse(RefusalReason::DeclaredDown, detail, Some(peer.node));
            }
            let seen = b.generation.get(&peer.node).copied();
            if seen.is_some_and(|g| peer.generation < g) {
                drop(b);
                let detail = format!(
                    "node {} generation {} is older than its live generation",
                    peer.node.0, peer.generation
                );
                return refuse(RefusalReason::StaleGeneration, detail, Some(peer.node));
            }
            b.set(peer.node, from);
            b.generation.insert(peer.node, peer.generation);
            b.dead.remove(&peer.node);
            seen != Some(peer.generation)
        };
        if kind == HELLO_ASK {
            self.send_hello(HELLO_ANSWER, from);
        }
        let ph = PeerHello {
            hello: peer,
            remote: from,
        };
        if let Some(ws) = lock(&self.waiters).remove(&from) {
            for w in ws {
                let _ = w.send(ph.clone());
            }
        }
        up.then_some(TransportEvent::PeerUp(ph))
    }

    async fn dial(self: Arc<Self>, addr: SocketAddr) -> Result<PeerHello, TransportError> {
        if self.hello.is_none() {
            return Err(TransportError::Unsupported("dialing without a hello"));
        }
        let (tx, mut rx) = oneshot::channel();
        lock(&self.waiters).entry(addr).or_default().push(tx);
        let deadline = tokio::time::Instant::now() + DIAL_TIMEOUT;
        loop {
            self.send_hello(HELLO_ASK, addr);
            let wake = (tokio::time::Instant::now() + DIAL_RESEND).min(deadline);
            tokio::select! {
                r = &mut rx => {
                    return r.map_err(|_| TransportError::Connect { addr, reason: "the transport closed".into() });
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                lock(&self.stats).dial_failures += 1;
                return Err(TransportError::Unreachable {
                    addr,
                    reason: format!("no hello answered within {DIAL_TIMEOUT:?}"),
                });
            }
        }
    }
}

impl Transport for UdpTransport {
    fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        let mut b = lock(&self.inner.book);
        b.set(node, addr);
        b.dead.remove(&node);
    }

    fn forget(&self, node: NodeId, generation: u64) {
        let mut b = lock(&self.inner.book);
        let dead = b.dead.get(&node).copied().unwrap_or(0).max(generation);
        b.dead.insert(node, dead);
        if b.generation.get(&node).is_some_and(|g| *g > generation) {
            return; // a newer incarnation already said hello
        }
        if let Some(old) = b.by_id.remove(&node) {
            b.by_addr.remove(&old);
        }
    }

    fn send(&self, dst: NodeId, class: MessageClass, datagram: Vec<u8>) {
        let addr = lock(&self.inner.book).by_id.get(&dst).copied();
        let mut s = lock(&self.inner.stats);
        let Some(addr) = addr else {
            s.undeliverable += 1;
            return;
        };
        if datagram.len() > MAX_UDP_PAYLOAD {
            s.oversize += 1;
            return;
        }
        match self.inner.socket.try_send_to(&datagram, addr) {
            Ok(_) => {
                let c = &mut s.classes[class as usize];
                c.sent.add_datagram(datagram.len());
                c.via_datagram += 1;
                s.wire_sent.add_datagram(datagram.len());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                s.classes[class as usize].queue_drops += 1
            }
            Err(_) => s.undeliverable += 1,
        }
    }

    async fn recv(&mut self) -> TransportEvent {
        loop {
            match self.inner.socket.recv_from(&mut self.buf).await {
                Ok((n, from)) => {
                    lock(&self.inner.stats).wire_received.add_datagram(n);
                    if n > MAX_UDP_PAYLOAD {
                        lock(&self.inner.stats).oversize += 1;
                        continue;
                    }
                    let d = &self.buf[..n];
                    if n > 1 && (d[0] == HELLO_ASK || d[0] == HELLO_ANSWER) {
                        if let Some(e) = self.inner.on_hello(d[0], &d[1..], from) {
                            return e;
                        }
                        continue;
                    }
                    let node = lock(&self.inner.book).by_addr.get(&from).copied();
                    let mut s = lock(&self.inner.stats);
                    match node {
                        Some(node) => {
                            let bytes = Bytes::copy_from_slice(d);
                            s.on_received(&bytes);
                            return TransportEvent::Datagram { from: node, bytes };
                        }
                        None => s.unknown_sender += 1,
                    }
                }
                // ICMP errors for datagrams sent to a peer that is not up (yet, or any
                // more) surface here on some systems: not fatal for a datagram protocol.
                Err(_) => lock(&self.inner.stats).undeliverable += 1,
            }
        }
    }

    fn stats(&self) -> TransportStats {
        lock(&self.inner.stats).clone()
    }

    fn dialer(&self) -> Dialer {
        let inner = Arc::clone(&self.inner);
        Dialer::new(move |addr| Box::pin(Arc::clone(&inner).dial(addr)))
    }

    /// The UDP baseline sends no refusal back, so it has no view to say.
    fn set_view(&self, _view: View) {}

    fn set_generation(&self, generation: u64) {
        lock(&self.inner.book).dead.clear();
        if let Some(h) = &self.inner.hello {
            let mut g = lock(h);
            g.0.generation = generation;
            if let Ok(f) = g.0.encode() {
                g.1 = f;
            }
        }
    }

    async fn close(self) {}
}

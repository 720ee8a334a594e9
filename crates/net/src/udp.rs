//! **INSECURE — benchmark baseline only, not for production.** Plain UDP that trusts
//! source addresses.
//!
//! This is the path the real runtime used before issue 13: a datagram is believed to come
//! from whichever member the address book maps its source address to. Anyone who can send
//! a UDP packet with a member's source address (on the path, or by spoofing) can forge or
//! replay any message, and spoofed requests can be reflected at a victim. It exists only
//! so that [`crate::quic::QuicTransport`]'s cost can be measured against it on the same
//! traffic (`examples/transport_cost.rs`); nothing in a production path may use it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use tokio::net::UdpSocket;
use worldmesh_core::NodeId;
use worldmesh_core::traffic::MessageClass;

use crate::quic::lock;
use crate::transport::{Transport, TransportError, TransportEvent, TransportStats};

/// Largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

#[derive(Default)]
struct Book {
    by_id: HashMap<NodeId, SocketAddr>,
    by_addr: HashMap<SocketAddr, NodeId>,
}

/// **Insecure** plain-UDP transport (see the module documentation): the benchmark
/// baseline for [`crate::quic::QuicTransport`].
pub struct UdpTransport {
    socket: UdpSocket,
    local: SocketAddr,
    book: Mutex<Book>,
    stats: Mutex<TransportStats>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl UdpTransport {
    /// Binds `listen`. **Insecure**: trusts source addresses.
    pub async fn bind(listen: SocketAddr) -> Result<Self, TransportError> {
        let bind = |io| TransportError::Bind { addr: listen, io };
        let socket = UdpSocket::bind(listen).await.map_err(bind)?;
        let local = socket.local_addr().map_err(bind)?;
        Ok(Self {
            socket,
            local,
            book: Mutex::new(Book::default()),
            stats: Mutex::new(TransportStats::default()),
            buf: vec![0; MAX_UDP_PAYLOAD + 1],
        })
    }
}

impl Transport for UdpTransport {
    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        let mut b = lock(&self.book);
        if let Some(old) = b.by_id.insert(node, addr) {
            b.by_addr.remove(&old);
        }
        b.by_addr.insert(addr, node);
    }

    fn forget(&self, node: NodeId) {
        let mut b = lock(&self.book);
        if let Some(old) = b.by_id.remove(&node) {
            b.by_addr.remove(&old);
        }
    }

    fn send(&self, dst: NodeId, class: MessageClass, datagram: Vec<u8>) {
        let addr = lock(&self.book).by_id.get(&dst).copied();
        let mut s = lock(&self.stats);
        let Some(addr) = addr else {
            s.undeliverable += 1;
            return;
        };
        if datagram.len() > MAX_UDP_PAYLOAD {
            s.oversize += 1;
            return;
        }
        match self.socket.try_send_to(&datagram, addr) {
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
            match self.socket.recv_from(&mut self.buf).await {
                Ok((n, from)) => {
                    let mut s = lock(&self.stats);
                    s.wire_received.add_datagram(n);
                    if n > MAX_UDP_PAYLOAD {
                        s.oversize += 1;
                        continue;
                    }
                    match lock(&self.book).by_addr.get(&from).copied() {
                        Some(node) => {
                            let bytes = bytes::Bytes::copy_from_slice(&self.buf[..n]);
                            s.on_received(&bytes);
                            return TransportEvent::Datagram { from: node, bytes };
                        }
                        None => s.unknown_sender += 1,
                    }
                }
                // ICMP errors for datagrams sent to a peer that is not up (yet, or any
                // more) surface here on some systems: not fatal for a datagram protocol.
                Err(_) => lock(&self.stats).undeliverable += 1,
            }
        }
    }

    fn stats(&self) -> TransportStats {
        lock(&self.stats).clone()
    }
}

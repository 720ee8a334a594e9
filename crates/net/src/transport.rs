//! What a node-to-node transport looks like to a driver: events, counters, errors, and
//! the [`Transport`] trait both [`crate::quic::QuicTransport`] and the insecure baseline
//! [`crate::udp::UdpTransport`] implement.
//!
//! A transport carries a node's datagrams (worldmesh frames, `core::wire`) unchanged,
//! addressed by [`NodeId`]; the address book behind those ids is fed by membership
//! ([`Transport::set_addr`], [`Transport::forget`]). Sending never blocks: what cannot be
//! sent is dropped and counted.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use worldmesh_core::NodeId;
use worldmesh_core::traffic::{Count, MessageClass};
use worldmesh_core::wire::{HEADER_LEN, MAGIC};
use worldmesh_node::membership::View;

use crate::hello::PeerHello;

/// Something a transport reports to its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportEvent {
    /// A datagram from an authenticated member (QUIC) or from a known address (UDP).
    Datagram {
        /// The member it comes from.
        from: NodeId,
        /// Its bytes, unchanged.
        bytes: Bytes,
    },
    /// A member's first connection is up (its hello verified).
    PeerUp(PeerHello),
    /// A member's last connection is gone (not reported after [`Transport::forget`]).
    PeerLost {
        /// The member.
        node: NodeId,
        /// Its generation.
        generation: u64,
        /// Why, for the log (idle timeout, closed by peer, restarted…).
        reason: String,
    },
    /// A member refused our hello because it holds `generation` of this node declared down
    /// (QUIC only: the refusal's close code says so). The driver tells the node, which
    /// renews its generation if it still runs as that one, unless its own side of a split
    /// wins (`worldmesh_node::Node::handle_declared_down`).
    DeclaredDown {
        /// The member that refused us, as its certificate names it (`None` if it named
        /// no single node).
        by: Option<NodeId>,
        /// Where it was dialed.
        addr: SocketAddr,
        /// The generation our hello carried.
        generation: u64,
        /// How the refuser saw the cluster, if its refusal said ([`Transport::set_view`]).
        view: Option<View>,
    },
    /// A connection was refused (counted in [`TransportStats::refusals`]).
    Refused {
        /// Where it came from (or was dialed to).
        addr: SocketAddr,
        /// The node it claimed, if it got that far.
        node: Option<NodeId>,
        /// The class of refusal.
        reason: RefusalReason,
        /// What exactly, for the log.
        detail: String,
    },
}

/// Why a connection was refused. Counted per reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RefusalReason {
    /// The TLS handshake failed: unknown CA, no certificate, expired, bad signature,
    /// wrong ALPN, or the peer rejected ours.
    Tls,
    /// A valid certificate whose hello claims another node id.
    Identity,
    /// World settings differ.
    WorldMismatch,
    /// Another protocol or hello version.
    Version,
    /// The hello did not decode.
    MalformedHello,
    /// No hello within the handshake timeout.
    HelloTimeout,
    /// The hello's generation is older than one already seen (a stale incarnation).
    StaleGeneration,
    /// Dialed for one node, another answered.
    UnexpectedNode,
    /// We dialed ourselves.
    SelfDial,
    /// The peer refused us (its reason is in the event's detail).
    RefusedByPeer,
    /// The peer refused our hello because it holds our generation declared down: the
    /// cluster forgot this incarnation (it stalled past the suspicion timeout, say) and no
    /// SWIM message reaches it any more to say so. Reported as
    /// [`TransportEvent::DeclaredDown`] too, so that the node renews its generation.
    DeclaredDown,
}

impl RefusalReason {
    /// Number of reasons.
    pub const COUNT: usize = 11;
    /// Every reason, in counter order.
    pub const ALL: [RefusalReason; Self::COUNT] = [
        RefusalReason::Tls,
        RefusalReason::Identity,
        RefusalReason::WorldMismatch,
        RefusalReason::Version,
        RefusalReason::MalformedHello,
        RefusalReason::HelloTimeout,
        RefusalReason::StaleGeneration,
        RefusalReason::UnexpectedNode,
        RefusalReason::SelfDial,
        RefusalReason::RefusedByPeer,
        RefusalReason::DeclaredDown,
    ];

    /// Snake-case label for logs and reports.
    pub fn name(self) -> &'static str {
        match self {
            RefusalReason::Tls => "tls",
            RefusalReason::Identity => "identity",
            RefusalReason::WorldMismatch => "world_mismatch",
            RefusalReason::Version => "version",
            RefusalReason::MalformedHello => "malformed_hello",
            RefusalReason::HelloTimeout => "hello_timeout",
            RefusalReason::StaleGeneration => "stale_generation",
            RefusalReason::UnexpectedNode => "unexpected_node",
            RefusalReason::SelfDial => "self_dial",
            RefusalReason::RefusedByPeer => "refused_by_peer",
            RefusalReason::DeclaredDown => "declared_down",
        }
    }

    /// The application close code a refusal sends to the peer.
    pub(crate) fn close_code(self) -> u32 {
        0x100 + self as u32
    }
}

impl std::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of one message class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStats {
    /// Application datagrams handed to the network, counted as `core::traffic` counts
    /// them: payload + 28 bytes per datagram.
    pub sent: Count,
    /// Application datagrams delivered to the driver, same accounting.
    pub received: Count,
    /// Of `sent`: carried in a QUIC DATAGRAM frame (or a UDP datagram for the baseline).
    pub via_datagram: u64,
    /// Of `sent`: too large for a datagram, carried on a reliable stream.
    pub via_stream: u64,
    /// Dropped before sending: the peer's queue was full while its connection was being
    /// set up, or its stream queue was full.
    pub queue_drops: u64,
}

/// A transport's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportStats {
    /// Per class, indexed by `MessageClass as usize`.
    pub classes: [ClassStats; 6],
    /// Received datagrams that are not worldmesh frames (delivered, class unknown).
    pub received_unclassified: Count,
    /// What went on the wire: UDP payload bytes + 28 per UDP datagram, every packet the
    /// socket sent (handshakes, acks, keep-alives, retransmissions, refused connections).
    pub wire_sent: Count,
    /// What came off the wire, same accounting, every packet the socket received
    /// (including forged or refused ones).
    pub wire_received: Count,
    /// Refusals, indexed by `RefusalReason as usize`.
    pub refusals: [u64; RefusalReason::COUNT],
    /// Datagrams from an address outside the address book (UDP baseline only).
    pub unknown_sender: u64,
    /// Messages for a member with no address, whose dial failed, or whose connection was
    /// lost before they went out.
    pub undeliverable: u64,
    /// Messages larger than the transport's limit, dropped.
    pub oversize: u64,
    /// Received datagrams dropped because the driver did not keep up.
    pub recv_queue_drops: u64,
    /// Dials that did not reach a member (timeout, unreachable).
    pub dial_failures: u64,
    /// Reply packets the socket withheld because they would go to an unauthenticated
    /// source (QUIC version negotiation).
    pub withheld_replies: u64,
}

impl TransportStats {
    /// Application datagrams sent, all classes.
    pub fn app_sent(&self) -> Count {
        let mut c = Count::default();
        self.classes.iter().for_each(|x| c.merge(x.sent));
        c
    }

    /// Application datagrams received, all classes (and unclassified).
    pub fn app_received(&self) -> Count {
        let mut c = self.received_unclassified;
        self.classes.iter().for_each(|x| c.merge(x.received));
        c
    }

    /// Bytes the transport itself added on the sending side: wire − application (QUIC
    /// headers, acks, handshakes, keep-alives; negative if QUIC packed several datagrams
    /// into one UDP packet and saved more headers than it spent).
    pub fn overhead_sent_bytes(&self) -> i64 {
        self.wire_sent.bytes as i64 - self.app_sent().bytes as i64
    }

    /// The count of one refusal reason.
    pub fn refusals_of(&self, reason: RefusalReason) -> u64 {
        self.refusals[reason as usize]
    }

    /// Every refusal.
    pub fn refusals_total(&self) -> u64 {
        self.refusals.iter().sum()
    }

    /// Refusal counts labelled by reason name.
    pub fn refusals_named(&self) -> Vec<(&'static str, u64)> {
        RefusalReason::ALL
            .iter()
            .map(|r| (r.name(), self.refusals[*r as usize]))
            .collect()
    }

    /// Adds another transport's counters (for cluster totals).
    pub fn merge(&mut self, o: &TransportStats) {
        for (a, b) in self.classes.iter_mut().zip(&o.classes) {
            a.sent.merge(b.sent);
            a.received.merge(b.received);
            a.via_datagram += b.via_datagram;
            a.via_stream += b.via_stream;
            a.queue_drops += b.queue_drops;
        }
        self.received_unclassified.merge(o.received_unclassified);
        self.wire_sent.merge(o.wire_sent);
        self.wire_received.merge(o.wire_received);
        for (a, b) in self.refusals.iter_mut().zip(&o.refusals) {
            *a += b;
        }
        self.unknown_sender += o.unknown_sender;
        self.undeliverable += o.undeliverable;
        self.oversize += o.oversize;
        self.recv_queue_drops += o.recv_queue_drops;
        self.dial_failures += o.dial_failures;
        self.withheld_replies += o.withheld_replies;
    }

    pub(crate) fn on_received(&mut self, bytes: &[u8]) {
        match class_of(bytes) {
            Some(c) => self.classes[c as usize].received.add_datagram(bytes.len()),
            None => self.received_unclassified.add_datagram(bytes.len()),
        }
    }
}

/// The message class in a worldmesh frame header, if `bytes` starts with one.
pub fn class_of(bytes: &[u8]) -> Option<MessageClass> {
    if bytes.len() >= HEADER_LEN && bytes[..2] == MAGIC {
        MessageClass::from_u8(bytes[3])
    } else {
        None
    }
}

/// Why a transport operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {io}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        io: std::io::Error,
    },
    /// The configuration is unusable (TLS setup, our own hello…).
    #[error("bad transport configuration: {0}")]
    Config(String),
    /// The address could not be dialed at all (e.g. an unspecified address).
    #[error("cannot dial {addr}: {reason}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// Nobody answered at the address (timeout, unreachable).
    #[error("no member reachable at {addr}: {reason}")]
    Unreachable {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// The connection was refused (by us or by the peer).
    #[error("connection to {addr} refused ({reason}): {detail}")]
    Refused {
        /// The address.
        addr: SocketAddr,
        /// The class of refusal.
        reason: RefusalReason,
        /// What exactly.
        detail: String,
    },
    /// The operation is not available on this transport.
    #[error("{0} is not supported by this transport")]
    Unsupported(&'static str),
}

/// A dial in progress: resolves to the verified hello of whoever answered at the address.
pub type DialFuture = Pin<Box<dyn Future<Output = Result<PeerHello, TransportError>> + Send>>;

/// A handle that dials addresses on behalf of a transport, usable while the transport
/// itself is busy receiving (a driver joins through seeds concurrently with its loop).
#[derive(Clone)]
pub struct Dialer(Arc<dyn Fn(SocketAddr) -> DialFuture + Send + Sync>);

impl Dialer {
    /// A dialer calling `f` for every address.
    pub fn new(f: impl Fn(SocketAddr) -> DialFuture + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// A dialer for a transport that cannot dial addresses: every dial fails with
    /// [`TransportError::Unsupported`].
    pub fn unsupported() -> Self {
        Self::new(|_| Box::pin(async { Err(TransportError::Unsupported("dialing an address")) }))
    }

    /// Dials `addr`: a connection (or its insecure equivalent) to whoever listens there,
    /// and that member's hello.
    pub fn dial(&self, addr: SocketAddr) -> DialFuture {
        (self.0)(addr)
    }
}

impl fmt::Debug for Dialer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Dialer")
    }
}

/// A node-to-node transport, as a driver uses it.
pub trait Transport: Send {
    /// The UDP address it listens on.
    fn local_addr(&self) -> SocketAddr;
    /// Records where `node` can be reached (fed by membership).
    fn set_addr(&self, node: NodeId, addr: SocketAddr);
    /// Member `node`'s incarnation `generation` is dead: close its connections, drop what
    /// is queued for it, stop dialing it (unless a newer generation is already connected).
    fn forget(&self, node: NodeId, generation: u64);
    /// Sends one datagram to `dst`; never blocks (what cannot be sent is dropped and
    /// counted). `class` is the frame's class, for the counters.
    fn send(&self, dst: NodeId, class: MessageClass, datagram: Vec<u8>);
    /// The next event.
    fn recv(&mut self) -> impl Future<Output = TransportEvent> + Send;
    /// The counters so far.
    fn stats(&self) -> TransportStats;
    /// A handle that dials addresses (seeds whose node id is not known yet).
    fn dialer(&self) -> Dialer;
    /// This node came back as a new generation (membership declared it dead while it was
    /// alive): later handshakes announce `generation`, and the generations of others
    /// declared dead are no longer refused (the new generation's membership decides anew).
    fn set_generation(&self, generation: u64);
    /// What this node's membership sees of the cluster now: sent with a refusal of a
    /// member declared down, so that after a partition only the losing side yields.
    fn set_view(&self, view: View);
    /// Closes every connection, giving the peers a moment to learn it.
    fn close(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_indexed_in_order_and_named_uniquely() {
        for (i, r) in RefusalReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut names: Vec<_> = RefusalReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RefusalReason::COUNT);
    }

    #[test]
    fn frames_are_classified_by_their_header() {
        let f = worldmesh_core::wire::frame(MessageClass::Migration, &[1, 2, 3]).unwrap();
        assert_eq!(class_of(&f), Some(MessageClass::Migration));
        assert_eq!(class_of(b"WM"), None);
        assert_eq!(class_of(b"xxxxxxxx"), None);
        let mut s = TransportStats::default();
        s.on_received(&f);
        s.on_received(b"junk");
        assert_eq!(s.classes[MessageClass::Migration as usize].received.bytes, 9 + 28);
        assert_eq!(s.received_unclassified.packets, 1);
        assert_eq!(s.app_received().packets, 2);
    }
}

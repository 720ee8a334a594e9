//! The driving loop.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use worldmesh_core::NodeId;
use worldmesh_node::{Node, NodeSummary};
use worldmesh_replica::GameObject;

use crate::clock::Clock;
use crate::peers::PeerTable;
use crate::shim::DelayShim;

/// Why the driver stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The socket failed.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// How long to run and with which emulation.
pub struct RunOptions {
    /// Stop after this long (None: until shutdown).
    pub duration: Option<Duration>,
    /// The shared clock.
    pub clock: Clock,
    /// WAN emulation for outgoing datagrams.
    pub shim: Option<DelayShim>,
}

/// Counters the driver itself keeps (beyond the node's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Datagrams from addresses outside the peer table.
    pub unknown_sender: u64,
    /// Datagrams the OS refused to send.
    pub send_errors: u64,
}

/// Runs `node` on `socket` until `duration` elapses or `shutdown` resolves, and returns
/// the node's summary and the driver's counters.
pub async fn run_node<O: GameObject>(
    mut node: Node<O>,
    socket: UdpSocket,
    peers: PeerTable,
    mut opts: RunOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(NodeSummary, DriverStats, Node<O>), NetError> {
    let clock = opts.clock;
    let started = Instant::now();
    let start_time = clock.now();
    let deadline = opts.duration.map(|d| started + d);
    let mut buf = vec![0u8; 65_536];
    let mut stats = DriverStats::default();
    tokio::pin!(shutdown);
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if node.poll_timeout().is_some_and(|t| clock.instant(t) <= now) {
            node.handle_timeout(clock.at(now));
        }
        while let Some(t) = node.poll_transmit() {
            match &mut opts.shim {
                Some(shim) => shim.push(now, t.dst, t.datagram),
                None => send(&socket, &peers, t.dst, &t.datagram, &mut stats).await,
            }
        }
        while node.poll_event().is_some() {}
        if let Some(shim) = &mut opts.shim {
            while let Some((dst, d)) = shim.pop_due(Instant::now()) {
                send(&socket, &peers, dst, &d, &mut stats).await;
            }
        }
        let mut wake = node
            .poll_timeout()
            .map(|t| clock.instant(t))
            .unwrap_or(now + Duration::from_secs(1));
        if let Some(due) = opts.shim.as_ref().and_then(DelayShim::next_due) {
            wake = wake.min(due);
        }
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok((n, from)) => match peers.id(from) {
                    Some(id) => node.handle_datagram(clock.now(), id, &buf[..n]),
                    None => stats.unknown_sender += 1,
                },
                // ICMP errors for datagrams sent to a peer that is not up yet (or any
                // more) surface here on some systems: not fatal for a datagram protocol.
                Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset) => {
                    stats.send_errors += 1;
                }
                Err(e) => return Err(e.into()),
            },
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = &mut shutdown => break,
        }
    }
    let end = clock.now();
    let secs = (end - start_time).as_secs_f64();
    Ok((node.summary(end, secs), stats, node))
}

async fn send(socket: &UdpSocket, peers: &PeerTable, dst: NodeId, datagram: &[u8], stats: &mut DriverStats) {
    match peers.addr(dst) {
        Some(addr) => {
            if socket.send_to(datagram, addr).await.is_err() {
                stats.send_errors += 1;
            }
        }
        None => stats.send_errors += 1,
    }
}

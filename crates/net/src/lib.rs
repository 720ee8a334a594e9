//! # worldmesh-net
//!
//! The real runtime: a thin tokio driver ([`driver`]) that runs the same sans-IO
//! [`worldmesh_node::Node`] the simulator runs, over a node-to-node [`transport`] — QUIC
//! with mutual TLS in production (BRIEF §2.3). The driver owns the transport, the clock and
//! the timers; it makes no protocol decision. An application embeds a node through the
//! driver's [`driver::NodeHandle`]: commands in (spawn objects, inject writes, drain,
//! stop, snapshots), every node event out on a bounded channel. [`join`] reaches the
//! seed members at start-up, with retries and backoff.
//!
//! The kernel here has no netem, so [`shim::DelayShim`] emulates wide-area delay and loss
//! inside the process: each outgoing datagram waits RTT/2 of a latency matrix (rows mapped
//! exactly as the simulator maps them) and may be dropped.
//!
//! Node-to-node transports (issue 13):
//! - [`quic`]: QUIC (quinn) with mutual TLS against the cluster CA ([`pki`]); the peer's
//!   node id is bound to its certificate by a [`hello`] exchange. The production path.
//! - [`udp`]: plain UDP that trusts source addresses — the benchmark baseline only,
//!   **insecure**.
//!
//! Both implement [`transport::Transport`] and report [`transport::TransportStats`].
//!
//! Metrics (issue 17): the driver publishes a [`metrics::MetricsSnapshot`] once a second
//! into a [`metrics::SnapshotCell`]; [`metrics_server`] serves it in the Prometheus text
//! format at `GET /metrics` on a thread of its own, off the frame loop.
#![forbid(unsafe_code)]

pub mod clock;
pub mod driver;
pub mod exposition;
pub mod hello;
pub mod join;
pub mod metrics;
pub mod metrics_server;
pub mod persister;
pub mod pki;
pub mod players;
pub mod quic;
pub mod shim;
pub mod transport;
pub mod udp;
pub mod view;

pub use clock::Clock;
pub use driver::{
    Command, Control, DriverOptions, DriverStats, EventKind, NetError, NodeEvent, NodeHandle, Players,
    RunOutcome, Snapshot, StopReason, run_node, start, start_with_players,
};
pub use join::{JoinError, JoinPolicy};
pub use persister::PersistTimes;
pub use shim::DelayShim;

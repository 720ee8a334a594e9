//! # worldmesh-net
//!
//! The real runtime: a thin tokio driver that runs the same sans-IO
//! [`worldmesh_node::Node`] the simulator runs, over UDP (BRIEF §2.3). The driver owns
//! the socket, the clock and the timers; it makes no protocol decision. Each loop turn it
//!
//! 1. feeds `now` to `handle_timeout` when the node's timer is due,
//! 2. sends what `poll_transmit` returns (through the [`shim`] when WAN emulation is on),
//! 3. waits for a datagram, the node's next timeout, the shim's next release, or shutdown.
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
#![forbid(unsafe_code)]

pub mod clock;
pub mod driver;
pub mod hello;
pub mod peers;
pub mod pki;
pub mod quic;
pub mod shim;
pub mod transport;
pub mod udp;

pub use clock::Clock;
pub use driver::{NetError, RunOptions, run_node};
pub use peers::{PeerError, PeerTable};
pub use shim::DelayShim;

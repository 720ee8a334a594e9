//! # worldmesh-sim
//!
//! A discrete-event simulator that drives real [`worldmesh_node::Node`] state machines on
//! a virtual clock (BRIEF §4). Nothing here makes protocol decisions: the one engine
//! (`worldmesh_engine`) delivers datagrams and wakes nodes exactly as the real runtime
//! would, through the node's sans-IO interface, so what is measured here is what runs in
//! production.
//!
//! - [`network`]: the link model — one-way delay = RTT/2 from a latency matrix, jitter,
//!   loss, duplication and partitions;
//! - [`refusal`]: what the real transport adds to it in worlds with dynamic membership —
//!   a generation held declared down is refused, and told so;
//! - [`engine`]: [`Simulation`], the nodes on the one engine plus the world's own events
//!   (the oracle's ticks and discoveries, metrics samples, store batches);
//! - [`oracle`]: the ideal locator (a global index behind the node's locator port);
//! - [`metrics`]: missing replicas, staleness, discovered share, and the client-server and
//!   broadcast baselines computed on the same trace;
//! - [`config`] and [`scenario`]: the `worldmesh simulate` scenario (wandering bots on
//!   N nodes), loaded from TOML with clear errors;
//! - [`churn`]: members crashing in a running world with dynamic membership, and what
//!   becomes of their objects (adoption time, objects lost or duplicated);
//! - [`report`]: what a run produces (per-node and aggregate figures, network counters).
//!
//! Same seed ⇒ same run: all randomness comes from `worldmesh_core::DetRng`, the engine's
//! queue breaks ties by insertion order, and no clock or hash-map order is consulted.
#![forbid(unsafe_code)]

pub mod churn;
pub mod config;
pub mod engine;
pub mod failover;
mod grid;
pub mod metrics;
pub mod network;
pub mod oracle;
pub mod refusal;
pub mod report;
pub mod scenario;
pub mod swarm;

pub use config::{ConfigError, SimConfig};
pub use engine::{PersistSimStats, Simulation};
pub use network::{NetworkConfig, NetworkModel, NetworkStats};
pub use report::{MembershipTiming, SimReport};

//! # worldmesh-engine
//!
//! The one deterministic discrete-event engine of worldmesh (issue 14). Every simulation
//! drives its sans-IO machines ([`worldmesh_core::Machine`]) through it: the world
//! simulator (`worldmesh-sim`, and through it the fault swarm and the experiments), the
//! locator harness (`worldmesh-locator`), the instance failover harness
//! (`worldmesh-instances`), the migration experiment and the tests that run several
//! machines. The real runtime (`worldmesh-net`) drives the node with sockets and a clock;
//! besides it, only unit tests of one machine's interface and the benchmarks that time a
//! single call (`experiment player-capacity`, `persist-cost`) call a machine by hand.
//!
//! - [`queue`]: the timed event queue (ties in time broken by insertion order, so every
//!   run is reproducible from its seed);
//! - [`links`]: what a network model decides for each datagram ([`Links`], [`Fate`]) and
//!   what the network did ([`NetworkStats`]);
//! - [`engine`]: the [`Engine`] itself: datagram delivery, one timer per machine, crashes,
//!   restarts and joins, and events of the caller's own kind between them;
//! - [`parallel`]: machines split into groups far apart on the network, and rounds that
//!   run each group on a thread of its own with exactly the serial engine's results;
//! - `pool` (private): the threads of those rounds, and how they wait for one another
//!   (awake, yielding their cores, for a bounded time).
#![forbid(unsafe_code)]

pub mod engine;
pub mod links;
pub mod parallel;
mod pool;
pub mod queue;

pub use engine::{Dropped, Engine, Step};
pub use links::{Fate, Links, NetworkStats, ParallelLinks};
pub use queue::EventQueue;

//! # worldmesh-node
//!
//! The one state machine a driver runs (BRIEF §2.5). A [`Node`] is sans-IO, in the style
//! of `quinn-proto`:
//!
//! - inputs: [`Node::handle_datagram`] (bytes from a peer) and [`Node::handle_timeout`]
//!   (the driver's clock reached [`Node::poll_timeout`]), each with `now`;
//! - outputs: [`Node::poll_transmit`] (datagrams to send), [`Node::poll_event`] (what
//!   happened, for the application and metrics) and [`Node::poll_timeout`] (when to wake
//!   it next).
//!
//! The node never reads a clock, opens a socket or sleeps: the simulator (`worldmesh-sim`)
//! and the real runtime (`worldmesh-net`) drive exactly this code.
//!
//! Replication is done by the replica manager of `worldmesh-replica` in one of two modes:
//! **interest** (Colyseus, paper `000` §5: replicas of what local primaries are interested
//! in, found through the object locator) or **broadcast** (every node replicates every
//! object: the baseline architecture of §7). Discovery goes through a locator port: each
//! frame the node queues [`LocatorOp`]s (publications and subscriptions) and the driver or
//! an in-node locator answers with [`Node::handle_discovery`].
//!
//! Membership is static (a fixed member list, as in the papers' experiments) or dynamic:
//! [`membership`] runs SWIM inside the node, so members join through seeds, fail and
//! leave, and the objects of a failed member are adopted by live ones ([`adoption`]).
//!
//! Game instances with failover (paper `003` §3.2.1, Algorithms 3/4) are the node's
//! [`instance::InstanceHost`]: the instances this node hosts, replicates or plays in, their
//! messages carried as Control datagrams ([`instance_wire`]), their ticks folded into
//! [`Node::poll_timeout`].
//!
//! Primaries can move between nodes: [`Node::migrate`] moves a region of primaries through
//! the name service and migration protocol of paper `001` §3 ([`migration`]); a node accepts
//! state for an object only from the node its name service binds the object to. The
//! [`placement`] loop (paper `001` §7.4) decides when a node's region should move, by core
//! selection over its players' latencies to the other nodes.
#![forbid(unsafe_code)]

pub mod adoption;
pub mod assignment;
mod control;
pub mod drain;
pub mod instance;
pub mod instance_wire;
pub mod membership;
pub mod migration;
mod node;
pub mod persist;
pub mod placement;
pub mod sessions;
pub mod stats;

pub use migration::{
    MigrationConfig, MigrationEvent, MigrationMsg, MigrationStats, RefuseReason, StartError,
};
pub use node::{Event, LocatorOp, Node, NodeConfig, Transmit};
pub use persist::{PersistConfig, PersistRequest, PersistStats, RecoverError, RecoveryReport};
pub use placement::{
    LatencyOracle, Located, Placement, PlacementConfig, PlacementDecision, PlacementOutcome,
};
pub use stats::{ClusterSummary, FrameFault, NodeStats, NodeSummary, Rejection, Rejections, RunSummary};
pub use worldmesh_replica::{Mode, Packet, ReplicaMsg, UpdateItem};

//! # worldmesh
//!
//! Run a game on worldmesh. This crate is what a game depends on: the object API to write
//! the game against (re-exported from the layers below) and the embeddable [`Server`], one
//! real node of a distributed world — QUIC with mutual TLS between nodes, SWIM membership
//! and adoption of a failed node's objects, the area-of-interest locator, the player port,
//! persistence, metrics and a graceful drain — around the game's objects.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn demo<O: worldmesh::GameObject>(world: Arc<O::World>, founders: Vec<O>) -> Result<(), worldmesh::ServerError> {
//! use worldmesh::Server;
//!
//! let finished = Server::builder()
//!     .game::<O>(world)
//!     .config("node.toml")?              // the node's settings (see [`config`])
//!     .initial_objects(move |_node| founders) // spawned by a founder whose store is empty
//!     .run()?; // until SIGTERM/SIGINT (a graceful drain) or SIGQUIT (stop, keep the store)
//! println!("{} primaries at the end", finished.report.node.primaries);
//! # Ok(()) }
//! ```
//!
//! `worldmesh node` (the CLI) is one use of this builder, with the Colyseus model game.
//! The layers it stands on are documented in `ARCHITECTURE.md`: `worldmesh-replica`
//! (objects, replicas, writes; paper `000` §3–§5), `worldmesh-node` (the sans-IO node:
//! membership, adoption, migration, persistence as effects), `worldmesh-net` (the real
//! driver and transports).
#![forbid(unsafe_code)]

pub mod config;
pub mod player;
pub mod report;
pub mod server;
pub mod sim;

pub use config::{FileConfig, NodeConfigError, NodeSettings, Overrides};
pub use report::NodeReport;
pub use server::{Finished, Running, ServeOptions, Server, ServerBuilder, ServerError, Space};

pub use worldmesh_client::Playable;
pub use worldmesh_core::{Aabb, Durability, NodeId, ObjectId, Point3, Time};
pub use worldmesh_net::{Control, EventKind, NodeEvent};
pub use worldmesh_node::Event;
pub use worldmesh_replica::{
    GameObject, OrphanPolicy, Replicate, Role, StateError, ThinkContext, replicate_codec,
};

/// The object layer (`worldmesh-replica`): replicas, writes, the codecs' runtime. The code
/// `#[derive(Replicate)]` writes names it here when a game depends on `worldmesh` only.
pub use worldmesh_replica as replica;

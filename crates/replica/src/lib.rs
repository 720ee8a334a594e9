//! # worldmesh-replica
//!
//! The object layer of worldmesh, after Colyseus (paper `000` §3, Figure 5):
//!
//! - [`GameObject`]: what a game implements. A node runs `think` only for the objects it
//!   holds as **primaries**; every other node holds at most a read-only **replica**.
//! - [`ThinkContext`]: what `think` may see and do — the clock, a deterministic RNG, the
//!   static world, read access to every object in the local store, and spawning new
//!   objects.
//! - [`ObjectStore`]: the local store of primaries and replicas with the bookkeeping
//!   replication needs (who owns an object, which version a replica holds, how old it is).
//!
//! - [`ReplicaManager`]: the replica manager of paper `000` §5 — interest registration,
//!   delta updates against acknowledged baselines, tentative writes, proactive replication
//!   of attached objects, interest prediction (§6.2: areas of interest swept along
//!   [`GameObject::velocity`] or the observed motion, predictive publications from
//!   [`GameObject::position_ahead`]) — and the broadcast baseline as a mode of it.
//!
//! - [`NameService`]: the per-node name service of paper `001` §3 (bindings, forwarding
//!   entries with leases); with the migration hooks of [`ReplicaManager`] (freeze, transfer,
//!   bind, forward, delete) it lets a region of primaries move between nodes.
//!
//! - [`Replicate`] (`#[derive(Replicate)]` and the trait of the same name in [`replicate`]):
//!   full-state and delta codecs with per-field change masks, generated from a game's
//!   types; [`replicate_codec!`] makes them an object's `GameObject` codec in one line.
//!
//! - [`ReplicaHost`]: a manager on its own as a `worldmesh_core::Machine`, driven by
//!   frames (test networks and models run it on the engine).
//!
//! The store is sans-IO: it never reads a clock or touches the network. The node (crate
//! `worldmesh-node`) decides what to send; this crate holds state.
#![forbid(unsafe_code)]

// Derived code names `::worldmesh_replica`, also inside this crate.
extern crate self as worldmesh_replica;

mod codec;
mod history;
mod host;
mod indexed;
mod manager;
mod message;
mod naming;
mod nodemap;
mod object;
pub mod replicate;
mod store;
mod vecmap;

pub use codec::PacketError;
pub use host::ReplicaHost;
pub use manager::{
    AdoptError, AppliedWrite, DurableWrite, FrameReport, MAX_TRACED_WRITES, MigrateError, MigratedObject,
    Mode, MovedOutcome, OrphanOffer, ReplicaConfig, ReplicaManager, ReplicaStats, VOID_LIFETIMES, WriterLog,
};
pub use message::{ForwardedWrite, InterestItem, LogItem, Packet, ReplicaMsg, UpdateItem, WriteItem};
pub use naming::{Binding, NameService, Resolution, follow_chain};
pub use object::{GameObject, OrphanPolicy, StateError, ThinkContext};
pub use replicate::Replicate;
pub use store::{Entry, ObjectStore, Role, StoreError};
/// `#[derive(Replicate)]`: see [`replicate`] and the crate `worldmesh-derive`.
pub use worldmesh_derive::Replicate;

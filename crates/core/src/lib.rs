//! # worldmesh-core
//!
//! The bottom layer of worldmesh: the vocabulary every other crate speaks.
//!
//! - [`id`]: node, object and client identifiers;
//! - [`time`]: virtual time. Protocol code never reads a clock; drivers pass `now` in
//!   (BRIEF §2.2), so the simulator and the real runtime drive the same code;
//! - [`durability`]: the durability class an object declares (ephemeral, checkpointed,
//!   durable): what of it the node's store keeps across a crash;
//! - [`hash`]: a fast hasher for maps keyed by ids the program makes itself;
//! - [`geom`]: 3-D points, axis-aligned boxes and multi-attribute range predicates, the
//!   language of naming attributes and areas of interest (Colyseus, paper `000` §3);
//! - [`machine`]: the sans-IO state-machine trait every protocol core implements, and
//!   the one [`Transmit`] type its drivers send;
//! - [`latency`]: round-trip-time matrices loaded from whitespace or CSV files with
//!   validation and errors that name the file and line;
//! - [`rendezvous`]: highest-random-weight hashing, the member set's agreed choice of
//!   backups and adopters for an object;
//! - [`rng`]: a small, fully specified deterministic random generator, so the same seed
//!   gives the same run byte for byte on every platform and dependency version;
//! - [`traffic`]: message classes and byte/packet counters (BRIEF §2.6);
//! - [`wire`]: datagram framing with an explicit protocol version and a bounded codec.
#![forbid(unsafe_code)]

pub mod deadline;
pub mod durability;
pub mod geom;
pub mod hash;
pub mod id;
pub mod latency;
pub mod machine;
pub mod rendezvous;
pub mod rng;
pub mod time;
pub mod traffic;
pub mod wire;

pub use deadline::DeadlineQueue;
pub use durability::Durability;
pub use geom::{Aabb, Interval, Point3, RangePredicate, floor_i32};
pub use id::{ClientId, NodeId, ObjectId};
pub use latency::{LatencyError, LatencyMatrix};
pub use machine::{Machine, Transmit};
pub use rng::DetRng;
pub use time::Time;
pub use traffic::{MessageClass, TrafficCounters};
pub use wire::{Frame, WireError};

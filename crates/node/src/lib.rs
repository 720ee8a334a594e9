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
//! Replication mode today is **broadcast**: every frame, each node sends the full state of
//! its primaries to every peer. It is the simplest correct architecture, and it stays as
//! the broadcast baseline of the Colyseus comparison (paper `000` §7) once interest-driven
//! replication arrives. Membership is static, from configuration.
#![forbid(unsafe_code)]

mod message;
mod node;
pub mod stats;

pub use message::{Message, ObjectState};
pub use node::{Event, Node, NodeConfig, Transmit};
pub use stats::{NodeStats, NodeSummary, RunSummary};

//! # worldmesh-game
//!
//! The model game, written against worldmesh's public object API
//! ([`worldmesh_replica::GameObject`]) exactly as a game developer would. It is the
//! reference example of how a game uses worldmesh.
//!
//! - [`config`]: the parameters of the Colyseus model workload (paper `000` §4.1), each
//!   with its source;
//! - [`map`]: synthetic `sqr`/`rect` maps with obstacles, Zipf-popular waypoints and a
//!   navigation graph;
//! - [`model`]: players that walk between waypoints and fight, missiles attached to their
//!   shooters, static items, with field-wise delta encoding;
//! - [`workload`]: placing the players and items of a scenario (`p2p`, `fed`) on nodes;
//! - [`wander`]: the smallest possible game (bots walking to random points), kept as the
//!   first example of the API.
#![forbid(unsafe_code)]

pub mod config;
pub mod map;
pub mod model;
pub mod wander;
pub mod workload;

pub use config::{MapKind, ModelConfig};
pub use map::GameMap;
pub use model::{Control, GameWrite, ModelObject, PlayerInput, step_avatar};

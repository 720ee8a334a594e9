//! # worldmesh-game
//!
//! The model game, written against worldmesh's public object API
//! ([`worldmesh_replica::GameObject`]) exactly as a game developer would. It is the
//! reference example of how a game uses worldmesh.
//!
//! Today it holds [`wander`]: bots wandering a rectangular map, the smallest game that
//! exercises think functions, naming attributes, areas of interest and state encoding.
//! The full model workload of Colyseus (paper `000` §4.1: obstacles, waypoints, fights,
//! missiles, items) builds on it.
#![forbid(unsafe_code)]

pub mod wander;

//! worldmesh-instances (under construction).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]
pub mod balance;
pub mod cost;
pub mod failover;
pub mod failover_sim;
pub mod gamma;
pub mod model;
pub mod select;
pub mod sim;
pub mod uptime;

//! worldmesh-instances (under construction).
#![forbid(unsafe_code)]
pub mod gamma;
pub mod uptime;

//! worldmesh-game (under construction).
#![forbid(unsafe_code)]

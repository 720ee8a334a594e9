//! worldmesh-net (under construction).
#![forbid(unsafe_code)]

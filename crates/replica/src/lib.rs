//! worldmesh-replica (under construction).
#![forbid(unsafe_code)]

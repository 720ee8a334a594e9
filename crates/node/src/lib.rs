//! worldmesh-node (under construction).
#![forbid(unsafe_code)]

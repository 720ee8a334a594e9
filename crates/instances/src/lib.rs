//! worldmesh-instances (under construction).
#![forbid(unsafe_code)]

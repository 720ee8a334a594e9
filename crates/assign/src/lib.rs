//! worldmesh-assign (under construction).
#![forbid(unsafe_code)]

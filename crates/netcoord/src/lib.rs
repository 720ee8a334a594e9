//! worldmesh-netcoord (under construction).
#![forbid(unsafe_code)]

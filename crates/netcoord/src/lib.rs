//! # worldmesh-netcoord
//!
//! Latency estimation and core selection for placing game regions near their players
//! (paper `001`, §4–§6). A pure library: no I/O, no clocks, deterministic.
//!
//! - [`coord`]: Vivaldi coordinates with height and adjustment, and their fixed-size wire
//!   form (`4 · (D + 3)` bytes: 44 bytes for 8 dimensions);
//! - [`filter`]: the per-peer moving-median latency filter;
//! - [`vivaldi`]: the sans-IO Vivaldi node (adaptive timestep, error EWMA, height vector,
//!   gravity, adjustment, rejection of impossible samples, NaN defence);
//! - [`landmark`]: landmark-based (GNP/Netvigator-like) estimation, §2.4 and §5;
//! - [`accuracy`]: directed relative error, CDFs and quantiles against a full matrix (§6.3.1);
//! - [`probe_sim`]: a deterministic probing simulation that drives Vivaldi over a static or
//!   drifting RTT matrix (§6.3, Table 3);
//! - [`core_select`]: k-median and k-center core selection, exact and heuristic, group
//!   center and topology center, group diameter through a core (§4.1);
//! - [`core_eval`]: hit ratio, core-node error and eccentricity error of cores chosen
//!   with estimated latencies (§6.3.2, Fig. 7 and 8);
//! - [`topology`]: Waxman topologies with all-pairs shortest paths (§6.2, Fig. 5a).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod accuracy;
pub mod coord;
pub mod core_eval;
pub mod core_select;
pub mod filter;
pub mod landmark;
pub mod probe_sim;
pub mod topology;
pub mod vivaldi;

pub use coord::{CoordError, Coordinate};
pub use vivaldi::{VivaldiConfig, VivaldiError, VivaldiNode};

//! # worldmesh-loadmodel
//!
//! Load characterization and capacity planning (paper `004`, Singh & Gračanin, "Load
//! Characterization for Distributed Virtual Environments"): before launch, predict how
//! many relationships, updates, bytes and CPU cycles a map and a player count will cost,
//! and hold the predictions against measurements. A pure library: no clocks, and I/O
//! only in the `load` helpers that read a file and hand its text to a parser.
//!
//! - [`map`]: the map (size, obstacle boxes, optional height map), its TOML file format
//!   and generated maps (`random:WxH:K:SEED`);
//! - [`grid`]: cells over the map, one avatar's bounding box by default (§3);
//! - [`density`]: density maps from position samples, uniform and hotspot models, and
//!   interpolation between user counts (§3.2, §4);
//! - [`trace`]: recorded position traces (`time_s,object_kind,x,y` CSV) sampled at an
//!   interval per object kind (§4);
//! - [`visibility`]: line of sight between cell centres and the bit half-matrix
//!   visibility map, built in parallel (§3.1, §4, §5.1);
//! - [`aoi`]: area-of-interest rules `A(i, j)`;
//! - [`packet`]: `Pack(b)` and the CPU cost of sending (§5.3), with UDP and QUIC presets;
//! - [`load_state`]: steady states, daily curves and peaks (§2.3);
//! - [`mixed`]: the same predictions for a workload of several object classes
//!   (players, missiles, items) with their own densities and update behaviour;
//! - [`predict`]: `Rel(N)`, updates, bandwidth and CPU for client-server and for
//!   worldmesh (§5.2, §5.3);
//! - [`validate`]: predicted-vs-measured tables and relationship counting, the hook for
//!   simulator runs.
#![forbid(unsafe_code)]

pub mod aoi;
pub mod density;
mod error;
pub mod grid;
pub mod load_state;
pub mod map;
pub mod mixed;
pub mod packet;
pub mod predict;
pub mod trace;
pub mod validate;
pub mod visibility;

pub use aoi::AoiRule;
pub use density::{DensityMap, DensitySeries, HotspotConfig};
pub use error::LoadModelError;
pub use grid::{AVATAR_CELL_SIZE, Grid};
pub use load_state::{LoadKind, LoadPlan, LoadState};
pub use map::{Map, MapSpec};
pub use mixed::{ClassLoad, MixedCost, MixedPrediction, ObjectClass, predict_mixed};
pub use packet::{CpuModel, PacketModel};
pub use predict::{CostModel, PairSums, Planner, Prediction};
pub use trace::{Sampling, Trace};
pub use validate::{ComparisonRow, Measured, compare};
pub use visibility::{Sight, SightRule, VisibilityMap};

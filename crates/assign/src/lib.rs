//! # worldmesh-assign
//!
//! Client-to-mirror assignment under capacity (paper `002`, Webb & Soh, "Adaptive Client to
//! Mirrored-Server Assignment for Massively Multiplayer Online Games", MMCN 2008).
//!
//! Players connect to one of `m` mirrors (servers that each simulate the whole world); each
//! mirror `j` accepts at most `C_j` players ([`capacity`], §2.1). The goal (§2.2) is the
//! minimum total (equivalently mean) player-to-mirror delay, kept after every join and
//! leave. [`Assigner`] applies the paper's algorithms (§3): the optimal J-SA and L-SA, with
//! the `MC`/`MP` arrays maintained incrementally as the paper suggests in §5, and the
//! greedy/ignore baselines. [`mod@reference`] is an independent from-scratch min-cost-flow
//! solver used as the oracle. [`topology`] builds the BRITE-like Internet topologies of §4.
//! [`stream`] parses a JSON-lines stream of join/leave events, for the `worldmesh assign`
//! command and for an admission service.
//!
//! The library does no I/O and reads no clock.
#![forbid(unsafe_code)]

pub mod assigner;
mod chain;
mod error;
mod index;
mod model;
pub mod reference;
pub mod stream;
pub mod topology;

pub use assigner::{Algorithm, Assigner, JoinOutcome, LeaveOutcome, MAX_MIRRORS};
pub use error::AssignError;
pub use model::{
    MAX_DELAY_MS, Micros, MirrorResources, Move, PlayerDemand, PlayerId, Stats, capacity, micros_to_ms,
    ms_to_micros,
};

//! The client SDK's smoothing: interpolation between server snapshots for remote objects and
//! local prediction of the player's own avatar with reconciliation.

pub mod interpolation;
pub mod prediction;

pub use interpolation::{Interpolate, SnapshotBuffer};
pub use prediction::Predictor;

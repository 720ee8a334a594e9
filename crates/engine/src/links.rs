//! What a network model decides for each datagram.
//!
//! The engine asks its [`Links`] when a machine sends ([`Links::route`], which sees the
//! whole [`Transmit`]: a model may treat traffic classes differently, a test may drop one
//! message it picks) and again when the datagram would arrive ([`Links::deliverable`]: a
//! partition that began meanwhile drops it). Each model owns its randomness, so the same
//! seed draws the same fates.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use worldmesh_core::{NodeId, Time, Transmit};

/// What the network decided for one datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Delivered after the first delay, and again after the second for a duplicate.
    Deliver(Duration, Option<Duration>),
    /// Lost.
    Lost,
    /// Dropped by a partition.
    Partitioned,
}

/// A network model for datagrams of type `D`.
pub trait Links<D> {
    /// The fate of datagram `t` that `src` sends at `now`.
    fn route(&mut self, now: Time, src: NodeId, t: &Transmit<D>) -> Fate;

    /// Whether a datagram from `src` may still reach `dst` when it arrives at `now`
    /// (default: always).
    fn deliverable(&self, _now: Time, _src: NodeId, _dst: NodeId) -> bool {
        true
    }
}

/// Counts of what the network did to datagrams.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkStats {
    /// Datagrams handed to the links by machines (addressed to a machine).
    pub sent: u64,
    /// Datagrams delivered (duplicates included).
    pub delivered: u64,
    /// Datagrams lost at random.
    pub lost: u64,
    /// Extra copies the links made (counted when sent; a copy may still be dropped on
    /// arrival).
    pub duplicated: u64,
    /// Datagrams dropped by a partition.
    pub partitioned: u64,
}

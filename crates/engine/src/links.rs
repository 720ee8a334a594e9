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

/// Links that can route from several threads at once, for the engine's parallel rounds
/// ([`crate::Engine::round`]).
///
/// Everything random about a datagram must be drawn from its sender's own stream
/// ([`ParallelLinks::Sender`]), so that a datagram's fate depends only on what its sender
/// sent before it, never on what other machines did meanwhile; everything else the links
/// read while routing must not change during a round.
pub trait ParallelLinks<D>: Links<D> + Sync {
    /// A sender's own state (its random stream).
    type Sender: Send;

    /// A lower bound of the delay of any datagram from `src` to `dst` (duplicates and
    /// jitter included): the lookahead that lets machines far apart run in parallel.
    fn min_delay(&self, src: NodeId, dst: NodeId) -> Duration;

    /// Takes `src`'s state out of the links for a round.
    fn take_sender(&mut self, src: NodeId) -> Self::Sender;

    /// Puts `src`'s state back after a round.
    fn put_sender(&mut self, src: NodeId, sender: Self::Sender);

    /// [`Links::route`] with the sender's state held apart: the same fate `route` would
    /// give with that state.
    fn route_with(&self, sender: &mut Self::Sender, now: Time, src: NodeId, t: &Transmit<D>) -> Fate;
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

impl NetworkStats {
    /// Counts a datagram a machine sent and the links decided `fate` for, and hands each
    /// copy to deliver — the datagram after its delay, then its duplicate, if any.
    pub(crate) fn count_sent<D: Clone>(
        &mut self,
        fate: Fate,
        datagram: D,
        mut deliver: impl FnMut(Duration, D),
    ) {
        self.sent += 1;
        match fate {
            Fate::Lost => self.lost += 1,
            Fate::Partitioned => self.partitioned += 1,
            Fate::Deliver(first, dup) => {
                let copy = dup.map(|d| (d, datagram.clone()));
                deliver(first, datagram);
                if let Some((d, datagram)) = copy {
                    self.duplicated += 1;
                    deliver(d, datagram);
                }
            }
        }
    }

    /// Adds another count's figures (a parallel round's group) to these.
    pub(crate) fn add(&mut self, other: &NetworkStats) {
        self.sent += other.sent;
        self.delivered += other.delivered;
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.partitioned += other.partitioned;
    }
}
